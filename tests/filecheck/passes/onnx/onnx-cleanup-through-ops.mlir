// RUN: ckir-opt %s --onnx-cleanup | filecheck %s

// TorchScript's Cast(to=float) after float ops: the type is carried from the float input
// through Softmax and Add (ops that keep their first input's type), so the Cast goes; a
// Cast(to=float) of an int64 Gather of an int64 table is real and stays.
// CHECK: onnx.matched = {cleanup = 1 : i64}
// CHECK: %[[S:.*]] = "onnx.node"(%{{.*}}) <{op_type = "Softmax"
// CHECK: "onnx.node"(%[[S]], %{{.*}}) <{op_type = "MatMul"
// CHECK: "onnx.node"(%{{.*}}) <{op_type = "Cast", domain = "", node = "real", attrs = {to = 1 : i64}}>
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T"], elem = "float32"}> : () -> !onnx.value
  %ids = "onnx.init"() <{name = "ids", shape = ["100", "3"], elem = "int64"}> : () -> !onnx.value
  %i = "onnx.const"() <{name = "i", shape = [], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %a = "onnx.node"(%x, %x) <{op_type = "Add", domain = "", node = "a", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%a) <{op_type = "Softmax", domain = "", node = "s", attrs = {axis = -1 : i64}}> : (!onnx.value) -> !onnx.value
  %c = "onnx.node"(%s) <{op_type = "Cast", domain = "", node = "noop", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %m = "onnx.node"(%c, %x) <{op_type = "MatMul", domain = "", node = "m", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %g = "onnx.node"(%ids, %i) <{op_type = "Gather", domain = "", node = "g", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %r = "onnx.node"(%g) <{op_type = "Cast", domain = "", node = "real", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  "onnx.output"(%m, %r) <{names = ["m", "r"]}> : (!onnx.value, !onnx.value) -> ()
}
