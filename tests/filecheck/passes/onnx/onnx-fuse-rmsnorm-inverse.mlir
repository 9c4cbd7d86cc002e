// RUN: ckir-opt %s --onnx-fuse-rmsnorm | filecheck %s

// TorchScript's spelling of torch.rsqrt: x · Div(1, Sqrt(mean(x^2) + eps)), with a Cast
// around x and one after the product, then · g; a numerator other than 1 is a miss.
// CHECK: onnx.matched = {rmsnorm = 1 : i64}
// CHECK-SAME: onnx.missed = ["rmsnorm: mean2 (ReduceMean): the inverse rms is 2 / Sqrt, not 1 / Sqrt"]
// CHECK: %[[X:.*]] = "onnx.input"()
// CHECK: %[[G:.*]] = "onnx.init"()
// CHECK: %[[R:.*]] = "onnx.node"(%[[X]], %[[G]]) <{op_type = "RMSNorm", domain = "ckir", node = "scale", attrs = {eps = 1.000000e-05 : f64}}>
// CHECK-NOT: op_type = "Sqrt", domain = "", node = "sqrt"
// CHECK: op_type = "ReduceMean", domain = "", node = "mean2"
// CHECK: op_type = "Div", domain = "", node = "inv2"
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "8"], elem = "float32"}> : () -> !onnx.value
  %g = "onnx.init"() <{name = "g", shape = ["8"], elem = "float32"}> : () -> !onnx.value
  %one = "onnx.const"() <{name = "one", shape = [], elem = "float32", value = [1.0]}> : () -> !onnx.value
  %two = "onnx.const"() <{name = "two", shape = [], elem = "float32", value = [2.0]}> : () -> !onnx.value
  %eps = "onnx.const"() <{name = "eps", shape = [], elem = "float32", value = [1.0e-05]}> : () -> !onnx.value
  %ax = "onnx.const"() <{name = "ax", shape = ["1"], elem = "int64", value = [-1.0]}> : () -> !onnx.value
  %xc = "onnx.node"(%x) <{op_type = "Cast", domain = "", node = "cast", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %p = "onnx.node"(%xc, %two) <{op_type = "Pow", domain = "", node = "pow", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %m = "onnx.node"(%p, %ax) <{op_type = "ReduceMean", domain = "", node = "mean", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %a = "onnx.node"(%m, %eps) <{op_type = "Add", domain = "", node = "add", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%a) <{op_type = "Sqrt", domain = "", node = "sqrt", attrs = {}}> : (!onnx.value) -> !onnx.value
  %r = "onnx.node"(%one, %s) <{op_type = "Div", domain = "", node = "inv", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %n = "onnx.node"(%xc, %r) <{op_type = "Mul", domain = "", node = "norm", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %nc = "onnx.node"(%n) <{op_type = "Cast", domain = "", node = "cast1", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %y = "onnx.node"(%g, %nc) <{op_type = "Mul", domain = "", node = "scale", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p2 = "onnx.node"(%y, %two) <{op_type = "Pow", domain = "", node = "pow2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %m2 = "onnx.node"(%p2, %ax) <{op_type = "ReduceMean", domain = "", node = "mean2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %a2 = "onnx.node"(%m2, %eps) <{op_type = "Add", domain = "", node = "add2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s2 = "onnx.node"(%a2) <{op_type = "Sqrt", domain = "", node = "sqrt2", attrs = {}}> : (!onnx.value) -> !onnx.value
  %r2 = "onnx.node"(%two, %s2) <{op_type = "Div", domain = "", node = "inv2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %n2 = "onnx.node"(%y, %r2) <{op_type = "Mul", domain = "", node = "norm2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %y2 = "onnx.node"(%g, %n2) <{op_type = "Mul", domain = "", node = "scale2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%y2) <{names = ["y"]}> : (!onnx.value) -> ()
}
