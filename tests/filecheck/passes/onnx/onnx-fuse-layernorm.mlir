// RUN: ckir-opt %s --onnx-fuse-layernorm | filecheck %s

// The native op and the decomposed form both fuse; a LayerNormalization over
// axis 1 does not, and says why.
// CHECK: onnx.matched = {layernorm = 2 : i64}, onnx.missed = ["layernorm: ln_axis1 (LayerNormalization): axis is not -1"]
// CHECK: "onnx.node"(%[[X:.*]], %[[G:.*]], %[[B:.*]]) <{op_type = "LayerNorm", domain = "ckir", node = "ln", attrs = {eps = 1.000000e-05 : f64}}>
// CHECK: "onnx.node"(%{{.*}}, %[[G]], %[[B]]) <{op_type = "LayerNorm", domain = "ckir", node = "affine", attrs = {eps = 1.000000e-06 : f64}}>
// CHECK-NOT: ReduceMean
// CHECK-NOT: Sqrt
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %g = "onnx.init"() <{name = "g", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %b = "onnx.init"() <{name = "b", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %two = "onnx.const"() <{name = "two", shape = [], elem = "float32", value = [2.0]}> : () -> !onnx.value
  %eps = "onnx.const"() <{name = "eps", shape = [], elem = "float32", value = [1.0e-06]}> : () -> !onnx.value
  %ax = "onnx.const"() <{name = "ax", shape = ["1"], elem = "int64", value = [-1.0]}> : () -> !onnx.value
  %y = "onnx.node"(%x, %g, %b) <{op_type = "LayerNormalization", domain = "", node = "ln", attrs = {axis = -1 : i64, epsilon = 1.0e-05 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %n1 = "onnx.node"(%y, %g, %b) <{op_type = "LayerNormalization", domain = "", node = "ln_axis1", attrs = {axis = 1 : i64, epsilon = 1.0e-05 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %m = "onnx.node"(%n1, %ax) <{op_type = "ReduceMean", domain = "", node = "mean", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %d = "onnx.node"(%n1, %m) <{op_type = "Sub", domain = "", node = "sub", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sq = "onnx.node"(%d, %two) <{op_type = "Pow", domain = "", node = "pow", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %v = "onnx.node"(%sq, %ax) <{op_type = "ReduceMean", domain = "", node = "var", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ve = "onnx.node"(%v, %eps) <{op_type = "Add", domain = "", node = "add_eps", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %r = "onnx.node"(%ve) <{op_type = "Sqrt", domain = "", node = "sqrt", attrs = {}}> : (!onnx.value) -> !onnx.value
  %nn = "onnx.node"(%d, %r) <{op_type = "Div", domain = "", node = "div", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%nn, %g) <{op_type = "Mul", domain = "", node = "scale", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %o = "onnx.node"(%s, %b) <{op_type = "Add", domain = "", node = "affine", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%o) <{names = ["y"]}> : (!onnx.value) -> ()
}
