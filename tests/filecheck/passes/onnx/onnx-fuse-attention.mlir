// RUN: ckir-opt %s --onnx-fuse-attention | filecheck %s

// Heads split by Reshape [1, -1, 3, 8] + Transpose, Q·Kᵀ scaled by 1/√8,
// a causal mask added, Softmax, ·V, heads merged: one ckir.Attention.  The
// second copy scales by 1/8 (not 1/√D): a miss that names the check.
// CHECK: onnx.matched = {attention = 1 : i64}
// CHECK-SAME: onnx.missed = ["attention: sm_bad (Softmax): scale 0.125 is not 1/sqrt(8)"]
// CHECK: %[[A:.*]] = "onnx.node"(%[[Q:.*]], %[[K:.*]], %[[V:.*]]) <{op_type = "Attention", domain = "ckir", node = "merge", attrs = {heads = 3 : i64, kv_heads = 3 : i64, head_dim = 8 : i64}}>
// CHECK: "onnx.output"(%[[A]], %{{.*}})
builtin.module {
  %q = "onnx.input"() <{name = "q", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %k = "onnx.input"() <{name = "k", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %v = "onnx.input"() <{name = "v", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %hs = "onnx.const"() <{name = "hs", shape = ["4"], elem = "int64", value = [1.0, -1.0, 3.0, 8.0]}> : () -> !onnx.value
  %ms = "onnx.const"() <{name = "ms", shape = ["2"], elem = "int64", value = [-1.0, 24.0]}> : () -> !onnx.value
  %sc = "onnx.const"() <{name = "sc", shape = [], elem = "float32", value = [0.35355339]}> : () -> !onnx.value
  %bad = "onnx.const"() <{name = "bad", shape = [], elem = "float32", value = [0.125]}> : () -> !onnx.value
  %mask = "onnx.node"(%q) <{op_type = "CausalMask", domain = "ckir", node = "mask", attrs = {boolean = 0 : i64}}> : (!onnx.value) -> !onnx.value
  %q3 = "onnx.node"(%q, %hs) <{op_type = "Reshape", domain = "", node = "q3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %k3 = "onnx.node"(%k, %hs) <{op_type = "Reshape", domain = "", node = "k3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %v3 = "onnx.node"(%v, %hs) <{op_type = "Reshape", domain = "", node = "v3", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %q4 = "onnx.node"(%q3) <{op_type = "Transpose", domain = "", node = "q4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %k4 = "onnx.node"(%k3) <{op_type = "Transpose", domain = "", node = "k4", attrs = {perm = [0 : i64, 2 : i64, 3 : i64, 1 : i64]}}> : (!onnx.value) -> !onnx.value
  %v4 = "onnx.node"(%v3) <{op_type = "Transpose", domain = "", node = "v4", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %s = "onnx.node"(%q4, %k4) <{op_type = "MatMul", domain = "", node = "qk", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ss = "onnx.node"(%s, %sc) <{op_type = "Mul", domain = "", node = "scale", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sm_in = "onnx.node"(%ss, %mask) <{op_type = "Add", domain = "", node = "masked", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p = "onnx.node"(%sm_in) <{op_type = "Softmax", domain = "", node = "sm", attrs = {axis = -1 : i64}}> : (!onnx.value) -> !onnx.value
  %o = "onnx.node"(%p, %v4) <{op_type = "MatMul", domain = "", node = "pv", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ot = "onnx.node"(%o) <{op_type = "Transpose", domain = "", node = "ot", attrs = {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]}}> : (!onnx.value) -> !onnx.value
  %out = "onnx.node"(%ot, %ms) <{op_type = "Reshape", domain = "", node = "merge", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s2 = "onnx.node"(%q4, %k4) <{op_type = "MatMul", domain = "", node = "qk2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ss2 = "onnx.node"(%s2, %bad) <{op_type = "Mul", domain = "", node = "scale2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sm_in2 = "onnx.node"(%ss2, %mask) <{op_type = "Add", domain = "", node = "masked2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p2 = "onnx.node"(%sm_in2) <{op_type = "Softmax", domain = "", node = "sm_bad", attrs = {axis = -1 : i64}}> : (!onnx.value) -> !onnx.value
  %o2 = "onnx.node"(%p2, %v4) <{op_type = "MatMul", domain = "", node = "pv2", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%out, %o2) <{names = ["a", "b"]}> : (!onnx.value, !onnx.value) -> ()
}
