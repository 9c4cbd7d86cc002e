// RUN: ckir-opt %s --onnx-fuse-linear | filecheck %s

// MatMul + Add bias, Gemm(transB) with C, a Split of a linear into three
// sliced linears, a tied head (the transposed copy of the embedding table),
// and a MatMul of two activations that stays (a miss naming the check).
// CHECK: onnx.matched = {linear = 4 : i64, "split-linear" = 1 : i64, "tied-lm-head" = 1 : i64}
// CHECK-SAME: onnx.missed = ["linear: qk (MatMul): the weight is not an initializer"]
// CHECK: %[[L1:.*]] = "onnx.node"(%{{.*}}, %[[W:.*]], %[[B:.*]]) <{op_type = "Linear", domain = "ckir", node = "mm", attrs = {w_layout = "kn"}}>
// CHECK: %[[L2:.*]] = "onnx.node"(%[[L1]], %{{.*}}, %{{.*}}) <{op_type = "Linear", domain = "ckir", node = "gemm", attrs = {w_layout = "nk"}}>
// CHECK: "onnx.node"(%[[L2]], %[[WQ:.*]]) <{op_type = "Linear", domain = "ckir", node = "qkv", attrs = {w_layout = "kn", slice = [0 : i64, 8 : i64]}}>
// CHECK: "onnx.node"(%[[L2]], %[[WQ]]) <{op_type = "Linear", domain = "ckir", node = "qkv", attrs = {w_layout = "kn", slice = [8 : i64, 16 : i64]}}>
// CHECK: "onnx.node"(%[[L2]], %[[WQ]]) <{op_type = "Linear", domain = "ckir", node = "qkv", attrs = {w_layout = "kn", slice = [16 : i64, 24 : i64]}}>
// CHECK: op_type = "MatMul", domain = "", node = "qk"
// CHECK: op_type = "Linear", domain = "ckir", node = "head", attrs = {w_layout = "kn", tied_to = "table"}
builtin.module {
  %ids = "onnx.input"() <{name = "ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %table = "onnx.init"() <{name = "table", shape = ["50", "24"], elem = "float32", same_as = "table_t", transposed = 1 : i64}> : () -> !onnx.value
  %table_t = "onnx.init"() <{name = "table_t", shape = ["24", "50"], elem = "float32", same_as = "table", transposed = 1 : i64}> : () -> !onnx.value
  %w = "onnx.init"() <{name = "w", shape = ["24", "24"], elem = "float32"}> : () -> !onnx.value
  %b = "onnx.init"() <{name = "b", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %w2 = "onnx.init"() <{name = "w2", shape = ["24", "24"], elem = "float32"}> : () -> !onnx.value
  %wq = "onnx.init"() <{name = "wq", shape = ["24", "24"], elem = "float32"}> : () -> !onnx.value
  %x = "onnx.node"(%table, %ids) <{op_type = "Embed", domain = "ckir", node = "emb", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %m = "onnx.node"(%x, %w) <{op_type = "MatMul", domain = "", node = "mm", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %mb = "onnx.node"(%m, %b) <{op_type = "Add", domain = "", node = "bias", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %g = "onnx.node"(%mb, %w2, %b) <{op_type = "Gemm", domain = "", node = "gemm", attrs = {transB = 1 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %q = "onnx.node"(%g, %wq) <{op_type = "MatMul", domain = "", node = "qkv", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s0, %s1, %s2 = "onnx.node"(%q) <{op_type = "Split", domain = "", node = "split", attrs = {axis = 2 : i64, num_outputs = 3 : i64}}> : (!onnx.value) -> (!onnx.value, !onnx.value, !onnx.value)
  %qk = "onnx.node"(%s0, %s1) <{op_type = "MatMul", domain = "", node = "qk", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %a = "onnx.node"(%qk, %s2) <{op_type = "Add", domain = "", node = "sum", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %lg = "onnx.node"(%a, %table_t) <{op_type = "MatMul", domain = "", node = "head", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%lg) <{names = ["logits"]}> : (!onnx.value) -> ()
}
