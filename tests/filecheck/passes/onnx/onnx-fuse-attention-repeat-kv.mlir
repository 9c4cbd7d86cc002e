// RUN: ckir-opt %s --onnx-fuse-attention | filecheck %s

// GQA (4 heads, 2 kv heads, D = 8): K and V head views repeated by
// Reshape(Expand(Unsqueeze(view, 2), [1, 2, 2, T, 8]), [1, 4, -1, 8]), the Expand target a
// ckir.Shape (T as -1): one ckir.Attention with kv_heads 2.  The second copy's K is
// expanded 3 times (not H/KV = 2): a miss that names the check.
// CHECK: onnx.matched = {attention = 1 : i64}
// CHECK-SAME: onnx.missed = ["attention: sm_bad (Softmax): repeat_kv expands to [1, 2, 3, -1, 8], not [1, 2, 2, T, 8]"]
// CHECK: %[[A:.*]] = "onnx.node"(%q, %k, %v) <{op_type = "Attention", domain = "ckir", node = "merge", attrs = {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 8 : i64}}>
// CHECK: "onnx.output"(%[[A]], %{{.*}})
builtin.module {
  %q = "onnx.input"() <{name = "q", shape = ["1", "T", "32"], elem = "float32"}> : () -> !onnx.value
  %k = "onnx.input"() <{name = "k", shape = ["1", "T", "16"], elem = "float32"}> : () -> !onnx.value
  %v = "onnx.input"() <{name = "v", shape = ["1", "T", "16"], elem = "float32"}> : () -> !onnx.value
  %qs = "onnx.const"() <{name = "qs", shape = ["4"], elem = "int64", value = [1.0, -1.0, 4.0, 8.0]}> : () -> !onnx.value
  %kvs = "onnx.const"() <{name = "kvs", shape = ["4"], elem = "int64", value = [1.0, -1.0, 2.0, 8.0]}> : () -> !onnx.value
  %rs = "onnx.const"() <{name = "rs", shape = ["4"], elem = "int64", value = [1.0, 4.0, -1.0, 8.0]}> : () -> !onnx.value
  %ax2 = "onnx.const"() <{name = "ax2", shape = ["1"], elem = "int64", value = [2.0]}> : () -> !onnx.value
  %ms = "onnx.const"() <{name = "ms", shape = ["3"], elem = "int64", value = [1.0, -1.0, 32.0]}> : () -> !onnx.value
  %sc = "onnx.const"() <{name = "sc", shape = [], elem = "float32", value = [0.35355339]}> : () -> !onnx.value
  %mask = "onnx.node"(%q) <{op_type = "CausalMask", domain = "ckir", node = "mask", attrs = {boolean = 0 : i64}}> : (!onnx.value) -> !onnx.value
  %tgt = "onnx.node"(%q) <{op_type = "Shape", domain = "ckir", node = "tgt", attrs = {dims = [1 : i64, 2 : i64, 2 : i64, -1 : i64, 8 : i64]}}> : (!onnx.value) -> !onnx.value
  %bad = "onnx.node"(%q) <{op_type = "Shape", domain = "ckir", node = "bad", attrs = {dims = [1 : i64, 2 : i64, 3 : i64, -1 : i64, 8 : i64]}}> : (!onnx.value) -> !onnx.value
  %q3 = "onnx.node"(%q, %qs) <{op_type = "Reshape", domain = "", node = "q3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %q4 = "onnx.node"(%q3) <{op_type = "Transpose", domain = "", node = "q4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %k3 = "onnx.node"(%k, %kvs) <{op_type = "Reshape", domain = "", node = "k3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %k4 = "onnx.node"(%k3) <{op_type = "Transpose", domain = "", node = "k4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %k5 = "onnx.node"(%k4, %ax2) <{op_type = "Unsqueeze", domain = "", node = "k5", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ke = "onnx.node"(%k5, %tgt) <{op_type = "Expand", domain = "", node = "ke", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %kr = "onnx.node"(%ke, %rs) <{op_type = "Reshape", domain = "", node = "kr", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %kt = "onnx.node"(%kr) <{op_type = "Transpose", domain = "", node = "kt", attrs = {perm = [0 : i64, 1 : i64, 3 : i64, 2 : i64]}}> : (!onnx.value) -> !onnx.value
  %v3 = "onnx.node"(%v, %kvs) <{op_type = "Reshape", domain = "", node = "v3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %v4 = "onnx.node"(%v3) <{op_type = "Transpose", domain = "", node = "v4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %v5 = "onnx.node"(%v4, %ax2) <{op_type = "Unsqueeze", domain = "", node = "v5", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ve = "onnx.node"(%v5, %tgt) <{op_type = "Expand", domain = "", node = "ve", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %vr = "onnx.node"(%ve, %rs) <{op_type = "Reshape", domain = "", node = "vr", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%q4, %kt) <{op_type = "MatMul", domain = "", node = "qk", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ss = "onnx.node"(%s, %sc) <{op_type = "Mul", domain = "", node = "scale", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sm_in = "onnx.node"(%ss, %mask) <{op_type = "Add", domain = "", node = "masked", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p = "onnx.node"(%sm_in) <{op_type = "Softmax", domain = "", node = "sm", attrs = {axis = -1 : i64}}> : (!onnx.value) -> !onnx.value
  %o = "onnx.node"(%p, %vr) <{op_type = "MatMul", domain = "", node = "pv", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ot = "onnx.node"(%o) <{op_type = "Transpose", domain = "", node = "ot", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %out = "onnx.node"(%ot, %ms) <{op_type = "Reshape", domain = "", node = "merge", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ke2 = "onnx.node"(%k5, %bad) <{op_type = "Expand", domain = "", node = "ke2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %kr2 = "onnx.node"(%ke2, %rs) <{op_type = "Reshape", domain = "", node = "kr2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %kt2 = "onnx.node"(%kr2) <{op_type = "Transpose", domain = "", node = "kt2", attrs = {perm = [0 : i64, 1 : i64, 3 : i64, 2 : i64]}}> : (!onnx.value) -> !onnx.value
  %s2 = "onnx.node"(%q4, %kt2) <{op_type = "MatMul", domain = "", node = "qk2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ss2 = "onnx.node"(%s2, %sc) <{op_type = "Mul", domain = "", node = "scale2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sm_in2 = "onnx.node"(%ss2, %mask) <{op_type = "Add", domain = "", node = "masked2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p2 = "onnx.node"(%sm_in2) <{op_type = "Softmax", domain = "", node = "sm_bad", attrs = {axis = -1 : i64}}> : (!onnx.value) -> !onnx.value
  %o2 = "onnx.node"(%p2, %vr) <{op_type = "MatMul", domain = "", node = "pv2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%out, %o2) <{names = ["a", "b"]}> : (!onnx.value, !onnx.value) -> ()
}
