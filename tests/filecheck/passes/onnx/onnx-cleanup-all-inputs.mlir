// RUN: ckir-opt %s --onnx-cleanup | filecheck %s

// The type of an op whose inputs all share it (Mul, Add, Concat ...) is read off any
// input whose type is known (here the float constant beside ckir.Positions), and Cos /
// Sin keep their input's type: the Cast(to=float) after a rotary table goes.  A Pow's
// exponent may have another type than its base: a Cast after Pow(ckir.Positions, 2.0)
// stays (the base's type is unknown).
// CHECK: onnx.matched = {cleanup = 1 : i64}
// CHECK-NOT: node = "noop"
// CHECK: %[[C:.*]] = "onnx.node"(%{{.*}}) <{op_type = "Cos", domain = "", node = "cos"
// CHECK: %[[K:.*]] = "onnx.node"(%{{.*}}) <{op_type = "Cast", domain = "", node = "kept"
// CHECK: "onnx.output"(%[[C]], %[[K]])
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %inv = "onnx.const"() <{name = "inv", shape = ["2"], elem = "float32", value = [1.0, 0.01]}> : () -> !onnx.value
  %two = "onnx.const"() <{name = "two", shape = [], elem = "float32", value = [2.0]}> : () -> !onnx.value
  %pos = "onnx.node"(%x) <{op_type = "Positions", domain = "ckir", node = "pos", attrs = {}}> : (!onnx.value) -> !onnx.value
  %f = "onnx.node"(%pos, %inv) <{op_type = "Mul", domain = "", node = "f", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ff = "onnx.node"(%f, %f) <{op_type = "Concat", domain = "", node = "ff", attrs = {axis = -1 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cos = "onnx.node"(%ff) <{op_type = "Cos", domain = "", node = "cos", attrs = {}}> : (!onnx.value) -> !onnx.value
  %c = "onnx.node"(%cos) <{op_type = "Cast", domain = "", node = "noop", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %p = "onnx.node"(%pos, %two) <{op_type = "Pow", domain = "", node = "p", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %k = "onnx.node"(%p) <{op_type = "Cast", domain = "", node = "kept", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  "onnx.output"(%c, %k) <{names = ["c", "k"]}> : (!onnx.value, !onnx.value) -> ()
}
