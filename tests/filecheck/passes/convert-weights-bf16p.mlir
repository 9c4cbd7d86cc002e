// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=bf16p} | filecheck %s
// RUN: sed -e 's/I = 172/I = 171/' -e 's/\(mlp.gate" : \[I, E\]\) f32/\1 bf16/' -e 's/\(attn.wo" : \[E, H\*D\]\) f32/\1 bf16/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=bf16p} | filecheck %s --check-prefix=ODD
// RUN: sed -e 's/I = 172/I = 171/' -e 's/\(mlp.down" : \[E, I\]\) f32/\1 bf16/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=bf16p} | filecheck %s --check-prefix=ODDBF16
// RUN: sed -e 's/I = 172/I = 171/' -e 's/\(mlp.down" : \[E, I\]\) f32/\1 bf16/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=bf16p} --lower-decode{max-context=16} | filecheck %s --check-prefix=LOWER
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --convert-weights{dtype=bf16p} | filecheck %s --check-prefix=TIED

// bf16p: bf16 matrices pre-packed in 32-row GEMM panels of k pairs. Every matrix of a
// linear / lm_head / embed op whose K is even changes dtype; norms stay f32.
// CHECK:      graph.weight @embed : [V, E] bf16p hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] bf16p hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] bf16p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wk" : [KV*D, E] bf16p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wv" : [KV*D, E] bf16p
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wo" : [E, H*D] bf16p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.gate" : [I, E] bf16p
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] bf16p
// K = I = 172 is even (no multiple of 32: panels do not care): down_proj is packed too.
// CHECK-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] bf16p

// I = 171 and wo, gate declared bf16: bf16 matrices are packed like f32 ones (wo,
// gate: bf16 -> bf16p); down_proj ([E, I], K = 171 odd) stays f32.
// ODD:      graph.weight @"layers.{i}.attn.wq" : [H*D, E] bf16p
// ODD:      graph.weight @"layers.{i}.attn.wo" : [E, H*D] bf16p
// ODD:      graph.weight @"layers.{i}.mlp.gate" : [I, E] bf16p
// ODD-NEXT: graph.weight @"layers.{i}.mlp.up" : [I, E] bf16p
// ODD-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] f32 hf

// down_proj declared bf16 with an odd K stays bf16 (row-major: gemv_bf16 / gemm_bf16).
// ODDBF16:      graph.weight @"layers.{i}.mlp.up" : [I, E] bf16p
// ODDBF16-NEXT: graph.weight @"layers.{i}.mlp.down" : [E, I] bf16 hf

// Lowering follows the dtype: bf16p matrices get the bf16p kernels, sized in whole
// panels of values; the odd-K bf16 one keeps the row-major bf16 kernel.
// LOWER:     lowered.kernel @embed_bf16p op "embed" c "ckir_embed_bf16p"
// LOWER-SAME: constraints ["T >= 1", "E >= 1", "E % 2 == 0"]
// LOWER:     lowered.kernel @gemv_bf16 op "linear" c "ckir_gemv_bf16"
// LOWER:     lowered.kernel @gemv_bf16p op "linear" c "ckir_gemv_bf16p"
// LOWER-SAME: w: read bf16p extent "N*K"
// LOWER-SAME: constraints ["N >= 1", "K >= 1", "K % 2 == 0"]
// LOWER:     lowered.buffer @w.layers.0.mlp.gate weight : !lowered.buf<[171, 64], bf16p>
// LOWER:     lowered.buffer @w.layers.0.mlp.down weight : !lowered.buf<[64, 171], bf16>
// LOWER:     lowered.call @gemv_bf16p({{.*}}@w.layers.0.mlp.gate)
// LOWER:     lowered.call @gemv_bf16({{.*}}@w.layers.0.mlp.down)

// GPT-2: the tied head takes the dtype of its target (wte); positions, norms and biases stay f32.
// TIED:      graph.weight @embed : [V, E] bf16p hf "transformer.wte.weight"
// TIED-NEXT: graph.weight @pos : [C, E] f32
// TIED:      graph.weight @lm_head : [V, E] bf16p tied_to @embed
// TIED:      graph.weight @"layers.{i}.attn.wq" : [E, E] bf16p
// TIED:      graph.weight @"layers.{i}.attn.bq" : [E] f32
// TIED:      graph.weight @"layers.{i}.mlp.fc" : [I, E] bf16p
// TIED:      graph.weight @"layers.{i}.mlp.bfc" : [I] f32
