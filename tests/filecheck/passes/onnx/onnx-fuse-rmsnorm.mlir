// RUN: ckir-opt %s --onnx-fuse-rmsnorm | filecheck %s

// x · Reciprocal(Sqrt(mean(x^2) + eps)) · g, then x / Sqrt(mean(x·x) + eps) · g,
// then the native op; a mean of squares divided the wrong way is a miss.
// CHECK: onnx.matched = {rmsnorm = 3 : i64}
// CHECK-SAME: onnx.missed = ["rmsnorm: bad_mean (ReduceMean): x is not divided by the rms"]
// CHECK: %[[R1:.*]] = "onnx.node"(%[[X:.*]], %[[G:.*]]) <{op_type = "RMSNorm", domain = "ckir", node = "scale1", attrs = {eps = 1.000000e-05 : f64}}>
// CHECK: %[[R2:.*]] = "onnx.node"(%[[R1]], %[[G]]) <{op_type = "RMSNorm", domain = "ckir", node = "scale2", attrs = {eps = 1.000000e-06 : f64}}>
// CHECK: %[[R3:.*]] = "onnx.node"(%[[R2]], %[[G]]) <{op_type = "RMSNorm", domain = "ckir", node = "native", attrs = {eps = 1.000000e-05 : f64}}>
// CHECK: op_type = "ReduceMean", domain = "", node = "bad_mean"
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "8"], elem = "float32"}> : () -> !onnx.value
  %g = "onnx.init"() <{name = "g", shape = ["8"], elem = "float32"}> : () -> !onnx.value
  %two = "onnx.const"() <{name = "two", shape = [], elem = "float32", value = [2.0]}> : () -> !onnx.value
  %eps = "onnx.const"() <{name = "eps", shape = [], elem = "float32", value = [1.0e-05]}> : () -> !onnx.value
  %eps6 = "onnx.const"() <{name = "eps6", shape = [], elem = "float32", value = [1.0e-06]}> : () -> !onnx.value
  %ax = "onnx.const"() <{name = "ax", shape = ["1"], elem = "int64", value = [-1.0]}> : () -> !onnx.value
  %p = "onnx.node"(%x, %two) <{op_type = "Pow", domain = "", node = "pow", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %m = "onnx.node"(%p, %ax) <{op_type = "ReduceMean", domain = "", node = "mean", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %a = "onnx.node"(%m, %eps) <{op_type = "Add", domain = "", node = "add", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%a) <{op_type = "Sqrt", domain = "", node = "sqrt", attrs = {}}> : (!onnx.value) -> !onnx.value
  %r = "onnx.node"(%s) <{op_type = "Reciprocal", domain = "", node = "rec", attrs = {}}> : (!onnx.value) -> !onnx.value
  %n = "onnx.node"(%x, %r) <{op_type = "Mul", domain = "", node = "norm", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %y1 = "onnx.node"(%g, %n) <{op_type = "Mul", domain = "", node = "scale1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %q = "onnx.node"(%y1, %y1) <{op_type = "Mul", domain = "", node = "sq2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %m2 = "onnx.node"(%q, %ax) <{op_type = "ReduceMean", domain = "", node = "mean2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %a2 = "onnx.node"(%m2, %eps6) <{op_type = "Add", domain = "", node = "add2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s2 = "onnx.node"(%a2) <{op_type = "Sqrt", domain = "", node = "sqrt2", attrs = {}}> : (!onnx.value) -> !onnx.value
  %n2 = "onnx.node"(%y1, %s2) <{op_type = "Div", domain = "", node = "div2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %y2 = "onnx.node"(%n2, %g) <{op_type = "Mul", domain = "", node = "scale2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %y3 = "onnx.node"(%y2, %g) <{op_type = "RMSNormalization", domain = "", node = "native", attrs = {epsilon = 1.0e-05 : f64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p4 = "onnx.node"(%y3, %two) <{op_type = "Pow", domain = "", node = "pow4", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %m4 = "onnx.node"(%p4, %ax) <{op_type = "ReduceMean", domain = "", node = "bad_mean", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %a4 = "onnx.node"(%m4, %eps) <{op_type = "Add", domain = "", node = "add4", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s4 = "onnx.node"(%a4) <{op_type = "Sqrt", domain = "", node = "sqrt4", attrs = {}}> : (!onnx.value) -> !onnx.value
  %n4 = "onnx.node"(%s4, %y3) <{op_type = "Div", domain = "", node = "div4", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%n4) <{names = ["y"]}> : (!onnx.value) -> ()
}
