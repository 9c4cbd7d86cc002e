// RUN: ckir-opt %s --onnx-fuse-rope | filecheck %s

// TorchScript's cos / sin tables: Unsqueeze(Cos(Concat(f, f)) · 1) (transformers'
// attention_scaling, 1 for the default rope): the factor 1 is looked through, one
// ckir.Rope (theta 10000).  The second rotation's tables are scaled by 2 (a scaled rope's
// attention factor): a miss that names the check.
// CHECK: onnx.matched = {rope = 1 : i64}
// CHECK-SAME: onnx.missed = ["rope: neg_b (Neg): Sin table scaled by 2 (a scaled rope's attention factor)"]
// CHECK: %[[R:.*]] = "onnx.node"(%[[X:.*]]) <{op_type = "Rope", domain = "ckir", node = "rot", attrs = {heads = 2 : i64, head_dim = 4 : i64, theta = 1.000000e+04 : f64}}>
// CHECK: %[[V:.*]] = "onnx.node"(%[[R]], %{{.*}}) <{op_type = "Reshape", domain = "", node = "rot.view"
// CHECK: %[[H:.*]] = "onnx.node"(%[[V]]) <{op_type = "Transpose", domain = "", node = "rot.heads", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}>
// CHECK: "onnx.output"(%[[H]], %{{.*}})
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "8"], elem = "float32"}> : () -> !onnx.value
  %inv = "onnx.init"() <{name = "inv_freq", shape = ["2"], elem = "float32", value = [1.0, 0.01]}> : () -> !onnx.value
  %one = "onnx.const"() <{name = "one", shape = [], elem = "float32", value = [1.0]}> : () -> !onnx.value
  %two = "onnx.const"() <{name = "two", shape = [], elem = "float32", value = [2.0]}> : () -> !onnx.value
  %c1u = "onnx.const"() <{name = "c1u", shape = ["1"], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %hs = "onnx.const"() <{name = "hs", shape = ["4"], elem = "int64", value = [1.0, -1.0, 2.0, 4.0]}> : () -> !onnx.value
  %c0 = "onnx.const"() <{name = "c0", shape = ["1"], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %c2 = "onnx.const"() <{name = "c2", shape = ["1"], elem = "int64", value = [2.0]}> : () -> !onnx.value
  %cbig = "onnx.const"() <{name = "cbig", shape = ["1"], elem = "int64", value = [1000000.0]}> : () -> !onnx.value
  %c3 = "onnx.const"() <{name = "c3", shape = ["1"], elem = "int64", value = [3.0]}> : () -> !onnx.value
  %c1 = "onnx.const"() <{name = "c1", shape = ["1"], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %pos = "onnx.node"(%x) <{op_type = "Positions", domain = "ckir", node = "pos", attrs = {}}> : (!onnx.value) -> !onnx.value
  %f = "onnx.node"(%pos, %inv) <{op_type = "Mul", domain = "", node = "f", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ff = "onnx.node"(%f, %f) <{op_type = "Concat", domain = "", node = "ff", attrs = {axis = -1 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cos0 = "onnx.node"(%ff) <{op_type = "Cos", domain = "", node = "cos0", attrs = {}}> : (!onnx.value) -> !onnx.value
  %sin0 = "onnx.node"(%ff) <{op_type = "Sin", domain = "", node = "sin0", attrs = {}}> : (!onnx.value) -> !onnx.value
  %cos1 = "onnx.node"(%cos0, %one) <{op_type = "Mul", domain = "", node = "cos1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sin1 = "onnx.node"(%one, %sin0) <{op_type = "Mul", domain = "", node = "sin1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cos = "onnx.node"(%cos1, %c1u) <{op_type = "Unsqueeze", domain = "", node = "cos", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sin = "onnx.node"(%sin1, %c1u) <{op_type = "Unsqueeze", domain = "", node = "sin", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %x3 = "onnx.node"(%x, %hs) <{op_type = "Reshape", domain = "", node = "x3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %x4 = "onnx.node"(%x3) <{op_type = "Transpose", domain = "", node = "x4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %xc = "onnx.node"(%x4, %cos) <{op_type = "Mul", domain = "", node = "xc", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %lo = "onnx.node"(%x4, %c0, %c2, %c3, %c1) <{op_type = "Slice", domain = "", node = "lo", attrs = {}}> : (!onnx.value, !onnx.value, !onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %hi = "onnx.node"(%x4, %c2, %cbig, %c3, %c1) <{op_type = "Slice", domain = "", node = "hi", attrs = {}}> : (!onnx.value, !onnx.value, !onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %nh = "onnx.node"(%hi) <{op_type = "Neg", domain = "", node = "neg", attrs = {}}> : (!onnx.value) -> !onnx.value
  %rh = "onnx.node"(%nh, %lo) <{op_type = "Concat", domain = "", node = "rh", attrs = {axis = -1 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %xs = "onnx.node"(%rh, %sin) <{op_type = "Mul", domain = "", node = "xs", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %y = "onnx.node"(%xc, %xs) <{op_type = "Add", domain = "", node = "rot", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cosb = "onnx.node"(%cos0, %two) <{op_type = "Mul", domain = "", node = "cosb", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sinb = "onnx.node"(%sin0, %two) <{op_type = "Mul", domain = "", node = "sinb", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %xcb = "onnx.node"(%x4, %cosb) <{op_type = "Mul", domain = "", node = "xcb", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %hib = "onnx.node"(%x4, %c2, %cbig, %c3, %c1) <{op_type = "Slice", domain = "", node = "hib", attrs = {}}> : (!onnx.value, !onnx.value, !onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %nhb = "onnx.node"(%hib) <{op_type = "Neg", domain = "", node = "neg_b", attrs = {}}> : (!onnx.value) -> !onnx.value
  %rhb = "onnx.node"(%nhb, %lo) <{op_type = "Concat", domain = "", node = "rhb", attrs = {axis = -1 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %xsb = "onnx.node"(%rhb, %sinb) <{op_type = "Mul", domain = "", node = "xsb", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %yb = "onnx.node"(%xcb, %xsb) <{op_type = "Add", domain = "", node = "rotb", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%y, %yb) <{names = ["y", "yb"]}> : (!onnx.value, !onnx.value) -> ()
}
