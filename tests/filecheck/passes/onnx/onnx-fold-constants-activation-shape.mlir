// RUN: ckir-opt %s --onnx-fold-constants | filecheck %s

// TorchScript's view(x.size(0), x.size(1), 3, -1) of an activation: the Shape of the
// embedding (a Gather of a weight) is probed by running the graph up to it on zero
// weights at two sequence lengths; the Reshape's target becomes a constant with -1 for T
// (its own -1 resolved: [1, -1, 3, 4]).  The Shape subgraph goes.
// CHECK: onnx.matched = {"fold-constants" = 1 : i64}
// CHECK-NOT: op_type = "Shape"
// CHECK: %[[T:.*]] = "onnx.const"() <{name = "target.folded", shape = ["4"], elem = "int64", value = [1.000000e+00 : f64, -1.000000e+00 : f64, 3.000000e+00 : f64, 4.000000e+00 : f64]}>
// CHECK: "onnx.node"(%e, %[[T]]) <{op_type = "Reshape", domain = "", node = "view"
builtin.module attributes {onnx.opset = 18 : i64} {
  %ids = "onnx.input"() <{name = "ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %w = "onnx.init"() <{name = "w", shape = ["11", "12"], elem = "float32"}> : () -> !onnx.value
  %i0 = "onnx.const"() <{name = "i0", shape = [], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %i1 = "onnx.const"() <{name = "i1", shape = [], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %ax = "onnx.const"() <{name = "ax", shape = ["1"], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %tail = "onnx.const"() <{name = "tail", shape = ["2"], elem = "int64", value = [3.0, -1.0]}> : () -> !onnx.value
  %e = "onnx.node"(%w, %ids) <{op_type = "Gather", domain = "", node = "emb", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%e) <{op_type = "Shape", domain = "", node = "shape", attrs = {}}> : (!onnx.value) -> !onnx.value
  %b = "onnx.node"(%s, %i0) <{op_type = "Gather", domain = "", node = "b", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %t = "onnx.node"(%s, %i1) <{op_type = "Gather", domain = "", node = "t", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %b1 = "onnx.node"(%b, %ax) <{op_type = "Unsqueeze", domain = "", node = "b1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %t1 = "onnx.node"(%t, %ax) <{op_type = "Unsqueeze", domain = "", node = "t1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %target = "onnx.node"(%b1, %t1, %tail) <{op_type = "Concat", domain = "", node = "target", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %v = "onnx.node"(%e, %target) <{op_type = "Reshape", domain = "", node = "view", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%v) <{names = ["v"]}> : (!onnx.value) -> ()
}
