// RUN: ckir-opt --convert-weights{dtype=q5_0p} %inputs/tiny_llama.mlir | filecheck %s
// RUN: sed -e 's/\(attn.wq" : \[H\*D, E\]\) f32/\1 q5_0/' -e 's/\(mlp.gate" : \[I, E\]\) f32/\1 q5_1/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q5_0p} | filecheck %s --check-prefix=BLOCKS
// RUN: sed -e 's/\(mlp.gate" : \[I, E\]\) f32/\1 q5_1/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q5_1p} | filecheck %s --check-prefix=Q51
// RUN: ckir-opt --convert-weights{dtype=q5_0p} --lower-decode{max-context=16} %inputs/tiny_llama.mlir | filecheck %s --check-prefix=LOWER
// RUN: ckir-opt --convert-weights{dtype=q5_1p} --lower-prefill{max-context=16} %inputs/tiny_llama.mlir | filecheck %s --check-prefix=PREFILL
// RUN: not ckir-opt --convert-weights{dtype=q5_2p} %inputs/tiny_llama.mlir 2>&1 | filecheck %s --check-prefix=BAD

// q5_0p: Q5_0 blocks pre-packed in 32-row panels. Every matrix of a linear / lm_head /
// embed op whose K is a multiple of 32 changes dtype; norms stay f32.
// CHECK:      graph.weight @embed : [V, E] q5_0p hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] q5_0p hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] q5_0p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wk" : [KV*D, E] q5_0p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wv" : [KV*D, E] q5_0p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wo" : [E, H*D] q5_0p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp_norm" : [E] f32
// N = I = 172 rows is no multiple of 32: the last panel is padded, the matrix is packed.
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.gate" : [I, E] q5_0p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] q5_0p
// K = I = 172 is no multiple of 32: down_proj stays f32.
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] f32 hf

// Declared q5_0 (a GGUF file's Q5_0 blocks): packed as they are; q5_1 (whose own panel
// dtype is q5_1p) keeps its dtype, and q5_1p packs it.
// BLOCKS:      graph.weight @"layers.{i}.attn.wq" : [H*D, E] q5_0p
// BLOCKS:      graph.weight @"layers.{i}.mlp.gate" : [I, E] q5_1 hf
// BLOCKS-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] q5_0p
// Q51:         graph.weight @"layers.{i}.attn.wq" : [H*D, E] q5_1p
// Q51:         graph.weight @"layers.{i}.mlp.gate" : [I, E] q5_1p hf

// Lowering follows the dtype: the q5_0p / q5_1p kernels.
// LOWER:      lowered.kernel @embed_q5_0p op "embed" c "ckir_embed_q5_0p"
// LOWER-SAME: constraints ["T >= 1", "E >= 1", "E % 32 == 0"]
// LOWER:      lowered.kernel @gemv_q5_0p op "linear" c "ckir_gemv_q5_0p"
// LOWER-SAME: w: read q5_0p extent "N*K"
// LOWER-SAME: constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768"]
// LOWER:      lowered.buffer @w.layers.0.mlp.gate weight : !lowered.buf<[172, 64], q5_0p>
// LOWER:      lowered.call @gemv_q5_0p({{.*}}@w.layers.0.mlp.gate)
// PREFILL:      lowered.kernel @gemm_q5_1p op "linear" c "ckir_gemm_q5_1p"
// PREFILL-SAME: constraints ["M >= 1", "N >= 1", "K >= 1", "K % 32 == 0"]
// PREFILL:      lowered.call @gemm_q5_1p({{.*}}@w.layers.0.mlp.up)

// BAD: error: convert-weights: unknown dtype 'q5_2p' (choose from {{.*}}, q5_0p, q5_1p)
