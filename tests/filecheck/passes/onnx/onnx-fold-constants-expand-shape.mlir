// RUN: ckir-opt %s --onnx-fold-constants | filecheck %s

// repeat_kv's Expand target built from the sequence length ([1, 2, 2, T, 8], a Concat of
// Shape values): a shape vector holding T becomes ckir.Shape with its dims, -1 for T,
// and the Shape subgraph goes.  A vector holding 2·T is no shape of the sequence: a miss.
// CHECK: onnx.matched = {"fold-constants" = 1 : i64}
// CHECK-SAME: onnx.missed = ["fold-constants: tgt2 (Concat): shape-only value not recognised (classified None; no arange(T) inside it)"]
// CHECK: %[[IDS:.*]] = "onnx.input"()
// CHECK: %[[T:.*]] = "onnx.node"(%[[IDS]]) <{op_type = "Shape", domain = "ckir", node = "tgt", attrs = {dims = [1 : i64, 2 : i64, 2 : i64, -1 : i64, 8 : i64]}}>
// CHECK: "onnx.node"(%x5, %[[T]]) <{op_type = "Expand", domain = "", node = "rep"
// CHECK: op_type = "Concat", domain = "", node = "tgt2"
builtin.module attributes {onnx.opset = 18 : i64} {
  %ids = "onnx.input"() <{name = "ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %x5 = "onnx.init"() <{name = "x5", shape = ["1", "2", "1", "1", "8"], elem = "float32"}> : () -> !onnx.value
  %i1 = "onnx.const"() <{name = "i1", shape = [], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %i2 = "onnx.const"() <{name = "i2", shape = [], elem = "int64", value = [2.0]}> : () -> !onnx.value
  %ax0 = "onnx.const"() <{name = "ax0", shape = ["1"], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %head = "onnx.const"() <{name = "head", shape = ["3"], elem = "int64", value = [1.0, 2.0, 2.0]}> : () -> !onnx.value
  %tail = "onnx.const"() <{name = "tail", shape = ["1"], elem = "int64", value = [8.0]}> : () -> !onnx.value
  %s = "onnx.node"(%ids) <{op_type = "Shape", domain = "", node = "shape", attrs = {}}> : (!onnx.value) -> !onnx.value
  %t = "onnx.node"(%s, %i1) <{op_type = "Gather", domain = "", node = "t", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %t1 = "onnx.node"(%t, %ax0) <{op_type = "Unsqueeze", domain = "", node = "t1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %tgt = "onnx.node"(%head, %t1, %tail) <{op_type = "Concat", domain = "", node = "tgt", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %e = "onnx.node"(%x5, %tgt) <{op_type = "Expand", domain = "", node = "rep", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %tt = "onnx.node"(%t1, %i2) <{op_type = "Mul", domain = "", node = "tt", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %tgt2 = "onnx.node"(%head, %tt, %tail) <{op_type = "Concat", domain = "", node = "tgt2", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %e2 = "onnx.node"(%x5, %tgt2) <{op_type = "Expand", domain = "", node = "rep2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%e, %e2) <{names = ["e", "e2"]}> : (!onnx.value, !onnx.value) -> ()
}
