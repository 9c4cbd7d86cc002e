// RUN: ckir-opt %s --onnx-to-graph | filecheck %s
// RUN: sed -e 's/op_type = "Gelu", domain = "ckir"/op_type = "Gelu", domain = "com.example"/' %s | not ckir-opt --onnx-to-graph 2>&1 | filecheck %s --check-prefix=REFUSED

// The fused two-layer GPT-2-shaped export (the pipeline's state before this pass):
// header, a body of 2 repeats found by its period, the footer, tied head,
// per-layer initializer names as {i} patterns, c_attn slices transposed.
// CHECK: graph.model @gpt2r arch "onnx" symbols {C = 32, D = 8, E = 24, H = 3, I = 96, KV = 3, L = 2, V = 101}
// CHECK: graph.weight @embed : [V, E] f32 hf "m.lm_head.weight"
// CHECK: graph.weight @"layers.{i}.linear1" : [E, E] f32 hf "m.transformer.h.{i}.attn.c_attn.weight" [24, 72] slice(1, 24, 48) transpose
// CHECK: graph.weight @"layers.{i}.linear1.bias" : [E] f32 hf "m.transformer.h.{i}.attn.c_attn.bias" [72] slice(0, 24, 48)
// CHECK: graph.weight @lm_head : [V, E] f32 tied_to @embed
// CHECK: graph.pos_embed
// CHECK: graph.body repeat L
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} heads H kv_heads KV head_dim D {causal}
// CHECK: graph.gelu %{{.*}} {approximate = "tanh"} : (!graph.tensor<[T, I], f32>)
// CHECK: graph.footer
// CHECK: graph.lm_head
// CHECK-NOT: onnx.

// A node of a domain ckir does not know stops the import, naming it.
// REFUSED: ONNX node 'node_mul_220': op_type Gelu (domain com.example) (opset 18) is not supported by ckir
builtin.module attributes {onnx.opset = 18 : i64, onnx.file = "gpt2r.onnx"} {
  %0 = "onnx.input"() <{name = "input_ids", shape = ["1", "T"], elem = "int64"}> : () -> !onnx.value
  %1 = "onnx.init"() <{name = "m.transformer.wpe.weight", shape = ["32", "24"], elem = "float32"}> : () -> !onnx.value
  %2 = "onnx.init"() <{name = "m.transformer.h.0.ln_1.weight", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %3 = "onnx.init"() <{name = "m.transformer.h.0.ln_1.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %4 = "onnx.init"() <{name = "m.transformer.h.0.attn.c_attn.weight", shape = ["24", "72"], elem = "float32"}> : () -> !onnx.value
  %5 = "onnx.init"() <{name = "m.transformer.h.0.attn.c_attn.bias", shape = ["72"], elem = "float32"}> : () -> !onnx.value
  %6 = "onnx.init"() <{name = "m.transformer.h.0.attn.c_proj.weight", shape = ["24", "24"], elem = "float32"}> : () -> !onnx.value
  %7 = "onnx.init"() <{name = "m.transformer.h.0.attn.c_proj.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %8 = "onnx.init"() <{name = "m.transformer.h.0.ln_2.weight", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %9 = "onnx.init"() <{name = "m.transformer.h.0.ln_2.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %10 = "onnx.init"() <{name = "m.transformer.h.0.mlp.c_fc.weight", shape = ["24", "96"], elem = "float32"}> : () -> !onnx.value
  %11 = "onnx.init"() <{name = "m.transformer.h.0.mlp.c_fc.bias", shape = ["96"], elem = "float32"}> : () -> !onnx.value
  %12 = "onnx.init"() <{name = "m.transformer.h.0.mlp.c_proj.weight", shape = ["96", "24"], elem = "float32"}> : () -> !onnx.value
  %13 = "onnx.init"() <{name = "m.transformer.h.0.mlp.c_proj.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %14 = "onnx.init"() <{name = "m.transformer.h.1.ln_1.weight", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %15 = "onnx.init"() <{name = "m.transformer.h.1.ln_1.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %16 = "onnx.init"() <{name = "m.transformer.h.1.attn.c_attn.weight", shape = ["24", "72"], elem = "float32"}> : () -> !onnx.value
  %17 = "onnx.init"() <{name = "m.transformer.h.1.attn.c_attn.bias", shape = ["72"], elem = "float32"}> : () -> !onnx.value
  %18 = "onnx.init"() <{name = "m.transformer.h.1.attn.c_proj.weight", shape = ["24", "24"], elem = "float32"}> : () -> !onnx.value
  %19 = "onnx.init"() <{name = "m.transformer.h.1.attn.c_proj.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %20 = "onnx.init"() <{name = "m.transformer.h.1.ln_2.weight", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %21 = "onnx.init"() <{name = "m.transformer.h.1.ln_2.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %22 = "onnx.init"() <{name = "m.transformer.h.1.mlp.c_fc.weight", shape = ["24", "96"], elem = "float32"}> : () -> !onnx.value
  %23 = "onnx.init"() <{name = "m.transformer.h.1.mlp.c_fc.bias", shape = ["96"], elem = "float32"}> : () -> !onnx.value
  %24 = "onnx.init"() <{name = "m.transformer.h.1.mlp.c_proj.weight", shape = ["96", "24"], elem = "float32"}> : () -> !onnx.value
  %25 = "onnx.init"() <{name = "m.transformer.h.1.mlp.c_proj.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %26 = "onnx.init"() <{name = "m.transformer.ln_f.weight", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %27 = "onnx.init"() <{name = "m.transformer.ln_f.bias", shape = ["24"], elem = "float32"}> : () -> !onnx.value
  %28 = "onnx.init"() <{name = "m.lm_head.weight", shape = ["101", "24"], elem = "float32", same_as = "val_247", transposed = 1 : i64}> : () -> !onnx.value
  %29 = "onnx.init"() <{name = "val_247", shape = ["24", "101"], elem = "float32", same_as = "m.lm_head.weight", transposed = 1 : i64}> : () -> !onnx.value
  %30 = "onnx.node"(%28, %0) <{op_type = "Embed", domain = "ckir", node = "node_embedding", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %31 = "onnx.node"(%30, %1) <{op_type = "PosEmbed", domain = "ckir", node = "node_add_15", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %32 = "onnx.node"(%31, %2, %3) <{op_type = "LayerNorm", domain = "ckir", node = "node_layer_norm", attrs = {eps = 9.9999997473787516e-06 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %33 = "onnx.node"(%32, %4, %5) <{op_type = "Linear", domain = "ckir", node = "node_addmm", attrs = {w_layout = "kn", slice = [0 : i64, 24 : i64]}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %34 = "onnx.node"(%32, %4, %5) <{op_type = "Linear", domain = "ckir", node = "node_addmm", attrs = {w_layout = "kn", slice = [24 : i64, 48 : i64]}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %35 = "onnx.node"(%32, %4, %5) <{op_type = "Linear", domain = "ckir", node = "node_addmm", attrs = {w_layout = "kn", slice = [48 : i64, 72 : i64]}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %36 = "onnx.node"(%33, %34, %35) <{op_type = "Attention", domain = "ckir", node = "node_softmax", attrs = {heads = 3 : i64, kv_heads = 3 : i64, head_dim = 8 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %37 = "onnx.node"(%36, %6, %7) <{op_type = "Linear", domain = "ckir", node = "node_addmm_1", attrs = {w_layout = "kn"}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %38 = "onnx.node"(%37, %31) <{op_type = "Add", domain = "", node = "node_add_181", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %39 = "onnx.node"(%38, %8, %9) <{op_type = "LayerNorm", domain = "ckir", node = "node_layer_norm_1", attrs = {eps = 9.9999997473787516e-06 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %40 = "onnx.node"(%39, %10, %11) <{op_type = "Linear", domain = "ckir", node = "node_addmm_2", attrs = {w_layout = "kn"}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %41 = "onnx.node"(%40) <{op_type = "Gelu", domain = "ckir", node = "node_mul_220", attrs = {approximate = "tanh"}}> : (!onnx.value) -> !onnx.value
  %42 = "onnx.node"(%41, %12, %13) <{op_type = "Linear", domain = "ckir", node = "node_addmm_3", attrs = {w_layout = "kn"}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %43 = "onnx.node"(%38, %42) <{op_type = "Add", domain = "", node = "node_add_235", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %44 = "onnx.node"(%43, %14, %15) <{op_type = "LayerNorm", domain = "ckir", node = "node_layer_norm_2", attrs = {eps = 9.9999997473787516e-06 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %45 = "onnx.node"(%44, %16, %17) <{op_type = "Linear", domain = "ckir", node = "node_addmm_4", attrs = {w_layout = "kn", slice = [0 : i64, 24 : i64]}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %46 = "onnx.node"(%44, %16, %17) <{op_type = "Linear", domain = "ckir", node = "node_addmm_4", attrs = {w_layout = "kn", slice = [24 : i64, 48 : i64]}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %47 = "onnx.node"(%44, %16, %17) <{op_type = "Linear", domain = "ckir", node = "node_addmm_4", attrs = {w_layout = "kn", slice = [48 : i64, 72 : i64]}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %48 = "onnx.node"(%45, %46, %47) <{op_type = "Attention", domain = "ckir", node = "node_softmax_1", attrs = {heads = 3 : i64, kv_heads = 3 : i64, head_dim = 8 : i64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %49 = "onnx.node"(%48, %18, %19) <{op_type = "Linear", domain = "ckir", node = "node_addmm_5", attrs = {w_layout = "kn"}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %50 = "onnx.node"(%49, %43) <{op_type = "Add", domain = "", node = "node_add_331", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %51 = "onnx.node"(%50, %20, %21) <{op_type = "LayerNorm", domain = "ckir", node = "node_layer_norm_3", attrs = {eps = 9.9999997473787516e-06 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %52 = "onnx.node"(%51, %22, %23) <{op_type = "Linear", domain = "ckir", node = "node_addmm_6", attrs = {w_layout = "kn"}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %53 = "onnx.node"(%52) <{op_type = "Gelu", domain = "ckir", node = "node_mul_371", attrs = {approximate = "tanh"}}> : (!onnx.value) -> !onnx.value
  %54 = "onnx.node"(%53, %24, %25) <{op_type = "Linear", domain = "ckir", node = "node_addmm_7", attrs = {w_layout = "kn"}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %55 = "onnx.node"(%50, %54) <{op_type = "Add", domain = "", node = "node_add_385", attrs = {}}> : (!onnx.value, !onnx.value) -> !onnx.value
  %56 = "onnx.node"(%55, %26, %27) <{op_type = "LayerNorm", domain = "ckir", node = "node_layer_norm_4", attrs = {eps = 9.9999997473787516e-06 : f64}}> : (!onnx.value, !onnx.value, !onnx.value) -> !onnx.value
  %57 = "onnx.node"(%56, %29) <{op_type = "Linear", domain = "ckir", node = "node_linear", attrs = {w_layout = "kn", tied_to = "m.lm_head.weight"}}> : (!onnx.value, !onnx.value) -> !onnx.value
  "onnx.output"(%57) <{names = ["logits"]}> : (!onnx.value) -> ()
}


