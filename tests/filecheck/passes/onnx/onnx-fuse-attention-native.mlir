// RUN: ckir-opt %s --onnx-fuse-attention | filecheck %s

// The native Attention op (opset 23).  First: 4-D head views (Reshape [1, -1, N, 8] +
// Transpose), GQA (4 query heads, 2 kv heads), is_causal = 1, scale 0.5 (not 1/sqrt(8):
// scale_dim = 1/0.5^2 = 4), softcap 30, heads merged after it.  Second: 3-D token-major
// q/k/v from ckir.Linear (width 24) with q_num_heads = kv_num_heads = 3 and a causal mask
// as attn_mask: head_dim 8 and the default scale.  Third: is_causal = 0 and no mask,
// a miss naming the check.
// CHECK: onnx.matched = {attention = 2 : i64}
// CHECK-SAME: onnx.missed = ["attention: full (Attention): is_causal = 0 and no mask: not a causal decoder's attention"]
// CHECK: %[[A:.*]] = "onnx.node"(%q, %k, %v) <{op_type = "Attention", domain = "ckir", node = "merge", attrs = {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 8 : i64, scale_dim = 4.000000e+00 : f64, softcap = 3.000000e+01 : f64}}>
// CHECK: %[[B:.*]] = "onnx.node"(%lq, %lk, %lv) <{op_type = "Attention", domain = "ckir", node = "att3", attrs = {heads = 3 : i64, kv_heads = 3 : i64, head_dim = 8 : i64}}>
// CHECK: "onnx.output"(%[[A]], %[[B]], %{{.*}})
builtin.module {
  %q = "onnx.input"() <{name = "q", shape = ["1", "T", "32"], elem = "float32"}> : () -> !onnx.value
  %k = "onnx.input"() <{name = "k", shape = ["1", "T", "16"], elem = "float32"}> : () -> !onnx.value
  %v = "onnx.input"() <{name = "v", shape = ["1", "T", "16"], elem = "float32"}> : () -> !onnx.value
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %w = "onnx.init"() <{name = "w", shape = ["24", "72"], elem = "float32"}> : () -> !onnx.value
  %qs = "onnx.const"() <{name = "qs", shape = ["4"], elem = "int64", value = [1.0, -1.0, 4.0, 8.0]}> : () -> !onnx.value
  %ks = "onnx.const"() <{name = "ks", shape = ["4"], elem = "int64", value = [1.0, -1.0, 2.0, 8.0]}> : () -> !onnx.value
  %ms = "onnx.const"() <{name = "ms", shape = ["2"], elem = "int64", value = [-1.0, 32.0]}> : () -> !onnx.value
  %q3 = "onnx.node"(%q, %qs) <{op_type = "Reshape", domain = "", node = "q3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %k3 = "onnx.node"(%k, %ks) <{op_type = "Reshape", domain = "", node = "k3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %v3 = "onnx.node"(%v, %ks) <{op_type = "Reshape", domain = "", node = "v3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %q4 = "onnx.node"(%q3) <{op_type = "Transpose", domain = "", node = "q4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %k4 = "onnx.node"(%k3) <{op_type = "Transpose", domain = "", node = "k4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %v4 = "onnx.node"(%v3) <{op_type = "Transpose", domain = "", node = "v4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %o = "onnx.node"(%q4, %k4, %v4) <{op_type = "Attention", domain = "", node = "att", attrs = {is_causal = 1 : i64, scale = 0.5 : f64, softcap = 30.0 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %ot = "onnx.node"(%o) <{op_type = "Transpose", domain = "", node = "ot", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %out = "onnx.node"(%ot, %ms) <{op_type = "Reshape", domain = "", node = "merge", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %lq = "onnx.node"(%x, %w) <{op_type = "Linear", domain = "ckir", node = "lq", attrs = {w_layout = "kn", slice = [0 : i64, 24 : i64]}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %lk = "onnx.node"(%x, %w) <{op_type = "Linear", domain = "ckir", node = "lk", attrs = {w_layout = "kn", slice = [24 : i64, 48 : i64]}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %lv = "onnx.node"(%x, %w) <{op_type = "Linear", domain = "ckir", node = "lv", attrs = {w_layout = "kn", slice = [48 : i64, 72 : i64]}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %mask = "onnx.node"(%x) <{op_type = "CausalMask", domain = "ckir", node = "mask", attrs = {boolean = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %b3, %pk, %pv = "onnx.node"(%lq, %lk, %lv, %mask) <{op_type = "Attention", domain = "", node = "att3", attrs = {q_num_heads = 3 : i64, kv_num_heads = 3 : i64}}> : (!onnx.value, !onnx.value, !onnx.value, !onnx.value) -> (!onnx.value, !onnx.value, !onnx.value)
  %full = "onnx.node"(%lq, %lk, %lv) <{op_type = "Attention", domain = "", node = "full", attrs = {q_num_heads = 3 : i64, kv_num_heads = 3 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%out, %b3, %full) <{names = ["a", "b", "c"]}> : (!onnx.value, !onnx.value, !onnx.value) -> ()
}
