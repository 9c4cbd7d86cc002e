// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q8_0} | filecheck %s
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --convert-weights{dtype=bf16} | filecheck %s --check-prefix=TIED
// RUN: not ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q3} 2>&1 | filecheck %s --check-prefix=BAD

// Matrices of linear / lm_head / embed ops change dtype; norms stay f32.
// CHECK:      graph.weight @embed : [V, E] q8_0 hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] q8_0 hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] q8_0
// CHECK:      graph.weight @"layers.{i}.mlp.gate" : [I, E] q8_0
// K = I = 172 is not a multiple of the 32-element block: down_proj stays f32.
// CHECK:      graph.weight @"layers.{i}.mlp.down" : [E, I] f32

// GPT-2: the tied head takes the dtype of its target (wte); positions, norms and biases stay f32.
// TIED:      graph.weight @embed : [V, E] bf16 hf "transformer.wte.weight"
// TIED-NEXT: graph.weight @pos : [C, E] f32
// TIED:      graph.weight @lm_head : [V, E] bf16 tied_to @embed
// TIED:      graph.weight @"layers.{i}.attn.wq" : [E, E] bf16
// TIED:      graph.weight @"layers.{i}.attn.bq" : [E] f32

// BAD: error: convert-weights: unknown dtype 'q3' (choose from f32, f32p, bf16, bf16p, q8_0, q8_0p, q4_0, q4_0p, q4_1, q4_1p, q4_k, q5_k, q6_k, q4_kp, q5_kp, q6_kp, q5_0, q5_1, q5_0p, q5_1p)
