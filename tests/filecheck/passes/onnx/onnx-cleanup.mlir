// RUN: ckir-opt %s --onnx-cleanup | filecheck %s

// Identity, Dropout and a Cast to the input's own type go; a real Cast stays.
// CHECK: onnx.matched = {cleanup = 3 : i64}
// CHECK: %[[X:.*]] = "onnx.input"() <{name = "x"
// CHECK-NOT: Identity
// CHECK-NOT: Dropout
// CHECK: "onnx.node"(%[[X]]) <{op_type = "Cast", domain = "", node = "c2", attrs = {to = 7 : i64}}>
// CHECK-NOT: op_type = "Cast"
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T"], elem = "float32"}> : () -> !onnx.value
  %a = "onnx.node"(%x) <{op_type = "Identity", domain = "", node = "i", attrs = {}}> : (!onnx.value) -> !onnx.value
  %b = "onnx.node"(%a) <{op_type = "Dropout", domain = "", node = "d", attrs = {}}> : (!onnx.value) -> !onnx.value
  %c = "onnx.node"(%b) <{op_type = "Cast", domain = "", node = "c1", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %e = "onnx.node"(%c) <{op_type = "Cast", domain = "", node = "c2", attrs = {to = 7 : i64}}> : (!onnx.value) -> !onnx.value
  "onnx.output"(%e) <{names = ["y"]}> : (!onnx.value) -> ()
}
