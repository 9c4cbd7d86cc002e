// RUN: ckir-opt %s --onnx-fold-constants | filecheck %s

// Constant arithmetic folds; Shape -> Gather -> Range becomes positions; a
// Trilu-built -inf mask becomes a causal mask; the Shape subgraph goes.
// CHECK: onnx.matched = {"fold-constants" = 3 : i64}
// CHECK: %[[IDS:.*]] = "onnx.input"()
// CHECK-NOT: op_type = "Shape"
// CHECK-NOT: op_type = "Trilu"
// CHECK-DAG: "onnx.const"() <{name = "mul.0", shape = [], elem = "int64", value = [6.000000e+00 : f64]}>
// CHECK-DAG: "onnx.node"(%[[IDS]]) <{op_type = "Positions", domain = "ckir", node = "range"
// CHECK-DAG: "onnx.node"(%[[IDS]]) <{op_type = "CausalMask", domain = "ckir", node = "mask", attrs = {boolean = 0 : i64}}>
builtin.module attributes {onnx.opset = 18 : i64} {
  %ids = "onnx.input"() <{name = "ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %c0 = "onnx.const"() <{name = "c0", shape = [], elem = "int64", value = [0.0]}> : () -> !onnx.value
  %c1 = "onnx.const"() <{name = "c1", shape = [], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %c2 = "onnx.const"() <{name = "c2", shape = [], elem = "int64", value = [2.0]}> : () -> !onnx.value
  %c3 = "onnx.const"() <{name = "c3", shape = [], elem = "int64", value = [3.0]}> : () -> !onnx.value
  %ninf = "onnx.const"() <{name = "ninf", shape = [], elem = "float32", value = [-1.0e+30]}> : () -> !onnx.value
  %six = "onnx.node"(%c2, %c3) <{op_type = "Mul", domain = "", node = "mul", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %s = "onnx.node"(%ids) <{op_type = "Shape", domain = "", node = "shape", attrs = {}}> : (!onnx.value) -> !onnx.value
  %i1 = "onnx.const"() <{name = "i1", shape = ["1"], elem = "int64", value = [1.0]}> : () -> !onnx.value
  %t1 = "onnx.node"(%s, %i1) <{op_type = "Gather", domain = "", node = "t1", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %t = "onnx.node"(%t1) <{op_type = "Squeeze", domain = "", node = "t", attrs = {}}> : (!onnx.value) -> !onnx.value
  %r = "onnx.node"(%c0, %t, %c1) <{op_type = "Range", domain = "", node = "range", attrs = {}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %tt = "onnx.node"(%t1, %t1) <{op_type = "Concat", domain = "", node = "tt", attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %one = "onnx.node"(%tt) <{op_type = "ConstantOfShape", domain = "", node = "full", attrs = {value = {elem = "float32", shape = [1 : i64], value = [-1.0e+30 : f64]}}}> : (!onnx.value) -> !onnx.value
  %m = "onnx.node"(%one, %c1) <{op_type = "Trilu", domain = "", node = "mask", attrs = {upper = 1 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %tc = "onnx.node"(%ids, %six) <{op_type = "Add", domain = "", node = "use_six", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%r, %m, %tc) <{names = ["r", "m", "tc"]}> : (!onnx.value, !onnx.value, !onnx.value) -> ()
}

