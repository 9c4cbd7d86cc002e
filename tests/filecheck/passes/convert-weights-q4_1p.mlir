// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q4_1p} | filecheck %s
// RUN: sed -e 's/\(attn.wo" : \[E, H\*D\]\) f32/\1 q4_1/' -e 's/\(mlp.gate" : \[I, E\]\) f32/\1 q8_0/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q4_1p} | filecheck %s --check-prefix=BLOCKS
// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q4_1p} --lower-decode{max-context=16} | filecheck %s --check-prefix=LOWER
// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q4_1p} --lower-prefill{max-context=16} | filecheck %s --check-prefix=PREFILL
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --convert-weights{dtype=q4_1p} | filecheck %s --check-prefix=TIED

// q4_1p: Q4_1 blocks pre-packed in 32-row GEMM panels. Every matrix of a linear /
// lm_head / embed op whose K is a multiple of 32 changes dtype; norms stay f32.
// CHECK:      graph.weight @embed : [V, E] q4_1p hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] q4_1p hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] q4_1p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wk" : [KV*D, E] q4_1p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wv" : [KV*D, E] q4_1p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wo" : [E, H*D] q4_1p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp_norm" : [E] f32
// N = I = 172 rows is no multiple of 32: the last panel is padded, the matrix is packed.
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.gate" : [I, E] q4_1p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] q4_1p
// K = I = 172 is no multiple of 32: down_proj stays f32 (as with --convert-weights{dtype=q4_1}).
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] f32 hf

// Declared q4_1 (a GGUF file's Q4_1 blocks): packed too (repacked exactly); another
// block format (q8_0, whose own panel dtype is q8_0p) keeps its dtype.
// BLOCKS:      graph.weight @"layers.{i}.attn.wo" : [E, H*D] q4_1p
// BLOCKS:      graph.weight @"layers.{i}.mlp.gate" : [I, E] q8_0 hf
// BLOCKS-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] q4_1p

// Lowering follows the dtype: q4_1p matrices get the q4_1p kernels, sized in whole
// panels (172 rows -> 6 panels: 192 * 2 blocks * 20 bytes); f32 down_proj keeps gemv_f32.
// LOWER:      lowered.kernel @embed_q4_1p op "embed" c "ckir_embed_q4_1p"
// LOWER-SAME: table: read q4_1p,
// LOWER-SAME: constraints ["T >= 1", "E >= 1", "E % 32 == 0"]
// LOWER:      lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32"
// LOWER:      lowered.kernel @gemv_q4_1p op "linear" c "ckir_gemv_q4_1p"
// LOWER-SAME: w: read q4_1p extent "N*K"
// LOWER-SAME: constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768"]
// LOWER:      lowered.buffer @w.layers.0.mlp.gate weight : !lowered.buf<[172, 64], q4_1p>
// LOWER:      lowered.buffer @w.layers.0.mlp.down weight : !lowered.buf<[64, 172], f32>
// LOWER:      lowered.call @gemv_q4_1p({{.*}}@w.layers.0.mlp.gate)
// LOWER:      lowered.call @gemv_f32({{.*}}@w.layers.0.mlp.down)
// PREFILL:      lowered.kernel @gemm_q4_1p op "linear" c "ckir_gemm_q4_1p"
// PREFILL-SAME: constraints ["M >= 1", "N >= 1", "K >= 1", "K % 32 == 0"]
// PREFILL:      lowered.call @gemm_q4_1p({{.*}}@w.layers.0.mlp.up)

// GPT-2: the tied head takes the dtype of its target (wte); positions, norms and biases stay f32.
// TIED:      graph.weight @embed : [V, E] q4_1p hf "transformer.wte.weight"
// TIED-NEXT: graph.weight @pos : [C, E] f32
// TIED:      graph.weight @lm_head : [V, E] q4_1p tied_to @embed
// TIED:      graph.weight @"layers.{i}.attn.wq" : [E, E] q4_1p
// TIED:      graph.weight @"layers.{i}.attn.bq" : [E] f32
// TIED:      graph.weight @"layers.{i}.mlp.fc" : [I, E] q4_1p
// TIED:      graph.weight @"layers.{i}.mlp.bfc" : [I] f32
