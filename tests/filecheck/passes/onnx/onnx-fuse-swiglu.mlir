// RUN: ckir-opt %s --onnx-fuse-swiglu | filecheck %s

// silu(a) · b fuses (either order); a Sigmoid used as a gate on another value does not.
// CHECK: onnx.matched = {swiglu = 1 : i64}
// CHECK-SAME: onnx.missed = ["swiglu: sig2 (Sigmoid): not a * Sigmoid(a)"]
// CHECK: %[[Y:.*]] = "onnx.node"(%[[A:.*]], %[[B:.*]]) <{op_type = "SwiGLU", domain = "ckir", node = "gated", attrs = {}}>
// CHECK-NOT: op_type = "Sigmoid", domain = "", node = "sig"}
builtin.module {
  %a = "onnx.input"() <{name = "a", shape = ["1", "T", "8"], elem = "float32"}> : () -> !onnx.value
  %b = "onnx.input"() <{name = "b", shape = ["1", "T", "8"], elem = "float32"}> : () -> !onnx.value
  %s = "onnx.node"(%a) <{op_type = "Sigmoid", domain = "", node = "sig", attrs = {}}> : (!onnx.value) -> !onnx.value
  %silu = "onnx.node"(%s, %a) <{op_type = "Mul", domain = "", node = "silu", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %y = "onnx.node"(%b, %silu) <{op_type = "Mul", domain = "", node = "gated", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s2 = "onnx.node"(%y) <{op_type = "Sigmoid", domain = "", node = "sig2", attrs = {}}> : (!onnx.value) -> !onnx.value
  %z = "onnx.node"(%b, %s2) <{op_type = "Mul", domain = "", node = "other", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%z) <{names = ["y"]}> : (!onnx.value) -> ()
}
