// RUN: ckir-opt %s --onnx-fuse-rope | filecheck %s

// The opset-23 RotaryEmbedding on a [1, -1, 2, 4] head view, cos/sin of
// positions · inv_freq (10000^(-2i/4) = [1, 0.01]): a ckir.Rope with theta
// 10000; an interleaved one is a miss.
// CHECK: onnx.matched = {rope = 1 : i64}
// CHECK-SAME: onnx.missed = ["rope: rot_i (RotaryEmbedding): interleaved (GPT-J) rotation"]
// CHECK: %[[R:.*]] = "onnx.node"(%[[X:.*]]) <{op_type = "Rope", domain = "ckir", node = "rot", attrs = {heads = 2 : i64, head_dim = 4 : i64, theta = 1.000000e+04 : f64}}>
// CHECK: op_type = "RotaryEmbedding", domain = "", node = "rot_i"
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "8"], elem = "float32"}> : () -> !onnx.value
  %inv = "onnx.init"() <{name = "inv_freq", shape = ["2"], elem = "float32", value = [1.0, 0.01]}> : () -> !onnx.value
  %hs = "onnx.const"() <{name = "hs", shape = ["4"], elem = "int64", value = [1.0, -1.0, 2.0, 4.0]}> : () -> !onnx.value
  %pos = "onnx.node"(%x) <{op_type = "Positions", domain = "ckir", node = "pos", attrs = {}}> : (!onnx.value) -> !onnx.value
  %f = "onnx.node"(%pos, %inv) <{op_type = "Mul", domain = "", node = "f", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cos = "onnx.node"(%f) <{op_type = "Cos", domain = "", node = "cos", attrs = {}}> : (!onnx.value) -> !onnx.value
  %sin = "onnx.node"(%f) <{op_type = "Sin", domain = "", node = "sin", attrs = {}}> : (!onnx.value) -> !onnx.value
  %x3 = "onnx.node"(%x, %hs) <{op_type = "Reshape", domain = "", node = "x3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %x4 = "onnx.node"(%x3) <{op_type = "Transpose", domain = "", node = "x4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %y = "onnx.node"(%x4, %cos, %sin) <{op_type = "RotaryEmbedding", domain = "", node = "rot", attrs = {interleaved = 0 : i64, num_heads = 2 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %yi = "onnx.node"(%x4, %cos, %sin) <{op_type = "RotaryEmbedding", domain = "", node = "rot_i", attrs = {interleaved = 1 : i64, num_heads = 2 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%y, %yi) <{names = ["y", "yi"]}> : (!onnx.value, !onnx.value) -> ()
}
