// RUN: ckir-opt %s --onnx-fold-constants | filecheck %s

// A rotary table computed from the sequence length (TorchScript: x.size() -> Range ->
// Unsqueeze -> Cast -> · inv_freq -> Concat(f, f) -> Cos / Sin): no value of it is a
// constant, positions or a mask, but it is computed from arange(T): the Cast (the last
// value equal to arange(T)) becomes ckir.Positions and the table stays a computation on
// it (the Sin table reads the same Positions).  A table from arange(1, T + 1) is a miss.
// CHECK: onnx.matched = {"fold-constants" = 2 : i64}
// CHECK-SAME: onnx.missed = ["fold-constants: cos1 (Cos): shape-only value not recognised (classified None; no arange(T) inside it)"]
// CHECK: %[[IDS:.*]] = "onnx.input"()
// CHECK: %[[P:.*]] = "onnx.node"(%[[IDS]]) <{op_type = "Positions", domain = "ckir", node = "pos_f"
// CHECK: %[[F:.*]] = "onnx.node"(%[[P]], %inv) <{op_type = "Mul", domain = "", node = "f"
// CHECK: %[[FF:.*]] = "onnx.node"(%[[F]], %[[F]]) <{op_type = "Concat"
// CHECK: "onnx.node"(%[[FF]]) <{op_type = "Cos", domain = "", node = "cos"
// CHECK: "onnx.node"(%[[FF]]) <{op_type = "Sin", domain = "", node = "sin"
// CHECK: op_type = "Range", domain = "", node = "range1"
// CHECK: op_type = "Cos", domain = "", node = "cos1"
builtin.module attributes {onnx.opset = 18 : i64} {
  %ids = "onnx.input"() <{name = "ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %w = "onnx.init"() <{name = "w", shape = ["11", "12"], elem = "float32"}> : () -> !onnx.value
  %i0 = "onnx.const"() <{name = "i0", shape = [], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %i1 = "onnx.const"() <{name = "i1", shape = [], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %ax0 = "onnx.const"() <{name = "ax0", shape = ["1"], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %ax1 = "onnx.const"() <{name = "ax1", shape = ["1"], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %ax2 = "onnx.const"() <{name = "ax2", shape = ["1"], elem = "int64", value = [2.0]}> : () -> !onnx.value
  %inv = "onnx.const"() <{name = "inv", shape = ["3"], elem = "float32", value = [1.0, 0.1, 0.01]}> : () -> !onnx.value
  %e = "onnx.node"(%w, %ids) <{op_type = "Gather", domain = "", node = "emb", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%e) <{op_type = "Shape", domain = "", node = "shape", attrs = {}}> : (!onnx.value) -> !onnx.value
  %t = "onnx.node"(%s, %i1) <{op_type = "Gather", domain = "", node = "t", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %r = "onnx.node"(%i0, %t, %i1) <{op_type = "Range", domain = "", node = "range", attrs = {}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %u = "onnx.node"(%r, %ax0) <{op_type = "Unsqueeze", domain = "", node = "pos_ids", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %u2 = "onnx.node"(%u, %ax2) <{op_type = "Unsqueeze", domain = "", node = "pos_col", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %pf = "onnx.node"(%u2) <{op_type = "Cast", domain = "", node = "pos_f", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %f = "onnx.node"(%pf, %inv) <{op_type = "Mul", domain = "", node = "f", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %ff = "onnx.node"(%f, %f) <{op_type = "Concat", domain = "", node = "ff", attrs = {axis = -1 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cos = "onnx.node"(%ff) <{op_type = "Cos", domain = "", node = "cos", attrs = {}}> : (!onnx.value) -> !onnx.value
  %sin = "onnx.node"(%ff) <{op_type = "Sin", domain = "", node = "sin", attrs = {}}> : (!onnx.value) -> !onnx.value
  %t1 = "onnx.node"(%t, %i1) <{op_type = "Add", domain = "", node = "t1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %r1 = "onnx.node"(%i1, %t1, %i1) <{op_type = "Range", domain = "", node = "range1", attrs = {}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %r1f = "onnx.node"(%r1) <{op_type = "Cast", domain = "", node = "r1f", attrs = {to = 1 : i64}}> : (!onnx.value) -> !onnx.value
  %r1c = "onnx.node"(%r1f, %ax1) <{op_type = "Unsqueeze", domain = "", node = "r1c", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %f1 = "onnx.node"(%r1c, %inv) <{op_type = "Mul", domain = "", node = "f1", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %cos1 = "onnx.node"(%f1) <{op_type = "Cos", domain = "", node = "cos1", attrs = {}}> : (!onnx.value) -> !onnx.value
  "onnx.output"(%cos, %sin, %cos1) <{names = ["cos", "sin", "cos1"]}> : (!onnx.value, !onnx.value, !onnx.value) -> ()
}
