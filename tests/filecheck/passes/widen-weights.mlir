// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q8_0} --widen-weights -o %t.wide.mlir
// RUN: filecheck %s < %t.wide.mlir
// RUN: filecheck %s --check-prefix=NARROW < %t.wide.mlir
// RUN: sed -e 's/@final_norm : \[E\] f32/@final_norm : [E] bf16/' %inputs/tiny_llama.mlir | ckir-opt --widen-weights | filecheck %s --check-prefix=NORM
// RUN: sed -e 's/@final_norm : \[E\] f32/@final_norm : [E] bf16/' %inputs/tiny_llama.mlir | ckir-opt --convert-weights{dtype=q8_0} --convert-weights{dtype=f32} | filecheck %s --check-prefix=CONVERT
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --convert-weights{dtype=q8_0p} --widen-weights --lower-decode{max-context=16} | filecheck %s --check-prefix=TIED
// RUN: ckir-opt %inputs/tiny_llama.mlir -o %t.plain.mlir
// RUN: ckir-opt %inputs/tiny_llama.mlir --widen-weights | diff - %t.plain.mlir

// Every weight is declared f32 again: the q8_0 matrices and the one left f32 (down_proj,
// K = 172); the checkpoint names and shapes stay.
// CHECK:      graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"
// CHECK-NEXT: graph.weight @final_norm : [E] f32
// CHECK-NEXT: graph.weight @lm_head : [V, E] f32 hf "lm_head.weight"
// CHECK-NEXT: graph.weight @"layers.{i}.attn_norm" : [E] f32
// CHECK-NEXT: graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32
// CHECK:      graph.weight @"layers.{i}.mlp.gate" : [I, E] f32
// CHECK:      graph.weight @"layers.{i}.mlp.down" : [E, I] f32
// No weight anywhere is declared in another dtype.
// NARROW-NOT: graph.weight @{{.*}} : [{{.*}}] {{bf16|q8_0|q4}}

// Not only matrices: a bf16 norm gamma becomes f32 too ...
// NORM: graph.weight @final_norm : [E] f32 hf "model.norm.weight"
// ... which --convert-weights{dtype=f32} does not do (it converts f32 matrices only).
// CONVERT:      graph.weight @embed : [V, E] q8_0
// CONVERT-NEXT: graph.weight @final_norm : [E] bf16

// GPT-2 stored in q8_0 panels: the tied head follows its (widened) target, biases and
// positions were f32 already; decode lowers onto the f32 kernels.
// TIED:     graph.weight @embed : [V, E] f32 hf "transformer.wte.weight"
// TIED:     graph.weight @lm_head : [V, E] f32 tied_to @embed
// TIED:     graph.weight @"layers.{i}.attn.wq" : [E, E] f32
// TIED-NOT: q8_0
// TIED:     lowered.call @embed_f32(@decode.header.tokens, @w.embed)
// TIED:     lowered.call @gemv_bias_f32(@decode.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.bq)
// TIED-NOT: q8_0

// An all-f32 model prints unchanged (the last RUN line diffs it).
