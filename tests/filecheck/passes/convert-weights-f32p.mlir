// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=f32p} | filecheck %s
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --convert-weights{dtype=f32p} | filecheck %s --check-prefix=TIED

// f32p: fp32 matrices pre-packed in 32-row GEMM panels. Every matrix of a linear /
// lm_head / embed op changes dtype, whatever its K; norms stay f32.
// CHECK:      graph.weight @embed : [V, E] f32p hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] f32p hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wk" : [KV*D, E] f32p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wv" : [KV*D, E] f32p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wo" : [E, H*D] f32p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.gate" : [I, E] f32p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] f32p
// K = I = 172 is no multiple of 32: panels do not care, down_proj is packed too.
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] f32p

// GPT-2: the tied head takes the dtype of its target (wte); positions, norms and biases stay f32.
// TIED:      graph.weight @embed : [V, E] f32p hf "transformer.wte.weight"
// TIED-NEXT: graph.weight @pos : [C, E] f32
// TIED:      graph.weight @lm_head : [V, E] f32p tied_to @embed
// TIED:      graph.weight @"layers.{i}.attn.wq" : [E, E] f32p
// TIED:      graph.weight @"layers.{i}.attn.bq" : [E] f32
// TIED:      graph.weight @"layers.{i}.mlp.fc" : [I, E] f32p
// TIED:      graph.weight @"layers.{i}.mlp.bfc" : [I] f32
