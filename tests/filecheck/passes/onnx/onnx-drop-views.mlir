// RUN: ckir-opt %s --onnx-drop-views | filecheck %s

// [1, -1, 24] and [-1, 24] are views of a token-major tensor; [1, -1, 3, 8] splits heads.
// CHECK: onnx.matched = {"drop-views" = 2 : i64}
// CHECK: %[[X:.*]] = "onnx.input"()
// CHECK: "onnx.node"(%[[X]], %{{.*}}) <{op_type = "Reshape", domain = "", node = "heads"
// CHECK: "onnx.output"(%[[X]], %{{.*}})
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %s1 = "onnx.const"() <{name = "s1", shape = ["2"], elem = "int64", value = [-1.0, 24.0]}> : () -> !onnx.value
  %s2 = "onnx.const"() <{name = "s2", shape = ["3"], elem = "int64", value = [1.0, -1.0, 24.0]}> : () -> !onnx.value
  %s3 = "onnx.const"() <{name = "s3", shape = ["4"], elem = "int64", value = [1.0, -1.0, 3.0, 8.0]}> : () -> !onnx.value
  %a = "onnx.node"(%x, %s1) <{op_type = "Reshape", domain = "", node = "v1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %b = "onnx.node"(%a, %s2) <{op_type = "Reshape", domain = "", node = "v2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %h = "onnx.node"(%x, %s3) <{op_type = "Reshape", domain = "", node = "heads", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%b, %h) <{names = ["y", "h"]}> : (!onnx.value, !onnx.value) -> ()
}
