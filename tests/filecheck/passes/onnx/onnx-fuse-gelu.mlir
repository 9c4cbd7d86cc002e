// RUN: ckir-opt %s --onnx-fuse-gelu | filecheck %s

// tanh form (0.5·x first, as torch exports it), erf form (x/√2), native Gelu;
// a tanh form with a wrong cubic coefficient is a miss that names the check.
// CHECK: onnx.matched = {gelu = 3 : i64}, onnx.missed = ["gelu: bad_tanh (Tanh): cubic coefficient is not 0.044715"]
// CHECK: %[[X:.*]] = "onnx.input"()
// CHECK: %[[G1:.*]] = "onnx.node"(%[[X]]) <{op_type = "Gelu", domain = "ckir", node = "native", attrs = {approximate = "none"}}>
// CHECK: %[[G2:.*]] = "onnx.node"(%[[G1]]) <{op_type = "Gelu", domain = "ckir", node = "t_out", attrs = {approximate = "tanh"}}>
// CHECK: %[[G3:.*]] = "onnx.node"(%[[G2]]) <{op_type = "Gelu", domain = "ckir", node = "e_out", attrs = {approximate = "none"}}>
// CHECK: op_type = "Tanh", domain = "", node = "bad_tanh"
builtin.module {
  %x = "onnx.input"() <{name = "x", shape = ["1", "T", "24"], elem = "float32"}> : () -> !onnx.value
  %half = "onnx.const"() <{name = "half", shape = [], elem = "float32", value = [0.5]}> : () -> !onnx.value
  %one = "onnx.const"() <{name = "one", shape = [], elem = "float32", value = [1.0]}> : () -> !onnx.value
  %three = "onnx.const"() <{name = "three", shape = [], elem = "float32", value = [3.0]}> : () -> !onnx.value
  %c = "onnx.const"() <{name = "c", shape = [], elem = "float32", value = [0.044715]}> : () -> !onnx.value
  %bad = "onnx.const"() <{name = "bad", shape = [], elem = "float32", value = [0.05]}> : () -> !onnx.value
  %k = "onnx.const"() <{name = "k", shape = [], elem = "float32", value = [0.7978845608]}> : () -> !onnx.value
  %r2 = "onnx.const"() <{name = "r2", shape = [], elem = "float32", value = [1.4142135623]}> : () -> !onnx.value
  %g0 = "onnx.node"(%x) <{op_type = "Gelu", domain = "", node = "native", attrs = {}}> : (!onnx.value) -> !onnx.value
  %h = "onnx.node"(%g0, %half) <{op_type = "Mul", domain = "", node = "t_half", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %p = "onnx.node"(%g0, %three) <{op_type = "Pow", domain = "", node = "t_pow", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %pc = "onnx.node"(%p, %c) <{op_type = "Mul", domain = "", node = "t_pc", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%g0, %pc) <{op_type = "Add", domain = "", node = "t_sum", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %sk = "onnx.node"(%s, %k) <{op_type = "Mul", domain = "", node = "t_sk", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %t = "onnx.node"(%sk) <{op_type = "Tanh", domain = "", node = "t_tanh", attrs = {}}> : (!onnx.value) -> !onnx.value
  %t1 = "onnx.node"(%t, %one) <{op_type = "Add", domain = "", node = "t_one", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %g1 = "onnx.node"(%h, %t1) <{op_type = "Mul", domain = "", node = "t_out", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %d = "onnx.node"(%g1, %r2) <{op_type = "Div", domain = "", node = "e_div", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %e = "onnx.node"(%d) <{op_type = "Erf", domain = "", node = "e_erf", attrs = {}}> : (!onnx.value) -> !onnx.value
  %e1 = "onnx.node"(%e, %one) <{op_type = "Add", domain = "", node = "e_one", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %xe = "onnx.node"(%g1, %e1) <{op_type = "Mul", domain = "", node = "e_mul", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %g2 = "onnx.node"(%xe, %half) <{op_type = "Mul", domain = "", node = "e_out", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %bh = "onnx.node"(%g2, %half) <{op_type = "Mul", domain = "", node = "b_half", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %bp = "onnx.node"(%g2, %three) <{op_type = "Pow", domain = "", node = "b_pow", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %bpc = "onnx.node"(%bp, %bad) <{op_type = "Mul", domain = "", node = "b_pc", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %bs = "onnx.node"(%g2, %bpc) <{op_type = "Add", domain = "", node = "b_sum", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %bsk = "onnx.node"(%bs, %k) <{op_type = "Mul", domain = "", node = "b_sk", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %bt = "onnx.node"(%bsk) <{op_type = "Tanh", domain = "", node = "bad_tanh", attrs = {}}> : (!onnx.value) -> !onnx.value
  %bt1 = "onnx.node"(%bt, %one) <{op_type = "Add", domain = "", node = "b_one", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %g3 = "onnx.node"(%bh, %bt1) <{op_type = "Mul", domain = "", node = "b_out", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%g3) <{names = ["y"]}> : (!onnx.value) -> ()
}
