// RUN: sed -e 's/E = 64/E = 256/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q4_kp} | filecheck %s
// RUN: sed -e 's/E = 64/E = 256/' -e 's/\(attn.wq" : \[H\*D, E\]\) f32/\1 q4_k/' -e 's/\(mlp.gate" : \[I, E\]\) f32/\1 q6_k/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q4_kp} | filecheck %s --check-prefix=BLOCKS
// RUN: sed -e 's/E = 64/E = 256/' -e 's/\(mlp.gate" : \[I, E\]\) f32/\1 q6_k/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q6_kp} | filecheck %s --check-prefix=Q6
// RUN: sed -e 's/E = 64/E = 256/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q4_kp} --lower-decode{max-context=16} | filecheck %s --check-prefix=LOWER
// RUN: sed -e 's/E = 64/E = 256/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q4_kp} --lower-prefill{max-context=16} | filecheck %s --check-prefix=PREFILL

// q4_kp: Q4_K super-blocks pre-packed in 32-row panels. Every matrix of a linear /
// lm_head / embed op whose K is a multiple of 256 changes dtype; norms stay f32.
// CHECK:      graph.weight @embed : [V, E] q4_kp hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] q4_kp hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] q4_kp
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wk" : [KV*D, E] q4_kp
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wv" : [KV*D, E] q4_kp
// K = H*D = 64 is no multiple of 256: o_proj stays f32.
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wo" : [E, H*D] f32
// CHECK-NEXT: graph.weight @"layers.{i}.mlp_norm" : [E] f32
// N = I = 172 rows is no multiple of 32: the last panel is padded, the matrix is packed.
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.gate" : [I, E] q4_kp
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] q4_kp
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] f32 hf

// Declared q4_k (a GGUF file's Q4_K blocks): packed as they are; q6_k (whose own panel
// dtype is q6_kp) keeps its dtype, and q6_kp packs it.
// BLOCKS:      graph.weight @"layers.{i}.attn.wq" : [H*D, E] q4_kp
// BLOCKS:      graph.weight @"layers.{i}.mlp.gate" : [I, E] q6_k hf
// BLOCKS-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] q4_kp
// Q6:          graph.weight @"layers.{i}.attn.wq" : [H*D, E] q6_kp
// Q6:          graph.weight @"layers.{i}.mlp.gate" : [I, E] q6_kp hf

// Lowering follows the dtype: the q4_kp kernels, sized in whole panels (172 rows -> 6
// panels: 192 rows * 1 super-block * 144 bytes).
// LOWER:      lowered.kernel @embed_q4_kp op "embed" c "ckir_embed_q4_kp"
// LOWER-SAME: constraints ["T >= 1", "E >= 1", "E % 32 == 0", "E % 256 == 0"]
// LOWER:      lowered.kernel @gemv_q4_kp op "linear" c "ckir_gemv_q4_kp"
// LOWER-SAME: w: read q4_kp extent "N*K"
// LOWER-SAME: constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768", "K % 256 == 0"]
// LOWER:      lowered.buffer @w.layers.0.mlp.gate weight : !lowered.buf<[172, 256], q4_kp>
// LOWER:      lowered.call @gemv_q4_kp({{.*}}@w.layers.0.mlp.gate)
// PREFILL:      lowered.kernel @gemm_q4_kp op "linear" c "ckir_gemm_q4_kp"
// PREFILL-SAME: constraints ["M >= 1", "N >= 1", "K >= 1", "K % 32 == 0", "K % 256 == 0"]
// PREFILL:      lowered.call @gemm_q4_kp({{.*}}@w.layers.0.mlp.up)
