// RUN: ckir-opt %s --onnx-fuse-embedding | filecheck %s

// CHECK: onnx.matched = {embed = 1 : i64, "pos-embed" = 1 : i64}
// CHECK: %[[E:.*]] = "onnx.node"(%[[T:.*]], %[[IDS:.*]]) <{op_type = "Embed", domain = "ckir", node = "tok"
// CHECK: "onnx.node"(%[[E]], %[[P:.*]]) <{op_type = "PosEmbed", domain = "ckir", node = "sum"
// CHECK-NOT: Gather
builtin.module {
  %ids = "onnx.input"() <{name = "ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %table = "onnx.init"() <{name = "table", shape = ["50", "24"], elem = "float32"}> : () -> !onnx.value
  %pos = "onnx.init"() <{name = "pos", shape = ["16", "24"], elem = "float32"}> : () -> !onnx.value
  %r = "onnx.node"(%ids) <{op_type = "Positions", domain = "ckir", node = "range", attrs = {}}> : (!onnx.value) -> !onnx.value
  %e = "onnx.node"(%table, %ids) <{op_type = "Gather", domain = "", node = "tok", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p = "onnx.node"(%pos, %r) <{op_type = "Gather", domain = "", node = "posg", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %x = "onnx.node"(%e, %p) <{op_type = "Add", domain = "", node = "sum", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%x) <{names = ["x"]}> : (!onnx.value) -> ()
}
