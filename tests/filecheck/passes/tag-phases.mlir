// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-add-rmsnorm --tag-phases | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-add-rmsnorm --tag-phases | ckir-opt | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-add-rmsnorm --tag-phases --print-op-generic | ckir-opt | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --tag-phases --emit-json | ckir-opt | filecheck %s --check-prefix=JSON
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-backward{max-context=16} --tag-phases | filecheck %s --check-prefix=BWD
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --tag-phases | sed -e 's/scope "header", op "graph.embed"/scope "footer", op "graph.embed"/' | not ckir-opt --tag-phases 2>&1 | filecheck %s --check-prefix=ORDER
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --tag-phases | sed -e '/op "graph.attention"/s/scope "layers.0"/scope "layers.1"/' | not ckir-opt --tag-phases 2>&1 | filecheck %s --check-prefix=SPLIT
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --tag-phases | sed -e 's/scope "layers.1"/scope "layers.2"/g' | not ckir-opt --tag-phases 2>&1 | filecheck %s --check-prefix=GAP
// RUN: not ckir-opt %s --tag-phases 2>&1 | filecheck %s --check-prefix=NOMODEL

// Decode, fused: the header's embedding is the prologue, each layer a steady
// phase, the lm_head the epilogue.  An add + RMSNorm fused across the layer
// boundary runs in the earlier layer (its first part's scope).
// CHECK:      lowered.call @embed_f32({{.*}} attributes {phase = #lowered.phase<prologue>}
// CHECK-NEXT: lowered.call @rmsnorm_f32({{.*}} attributes {phase = #lowered.phase<steady 0>}
// CHECK:      lowered.call @add_rmsnorm_f32(@decode.layers.0.x1, @decode.layers.0.d, @w.layers.1.attn_norm) -> (@decode.layers.0.x2, @decode.layers.1.h) {{.*}} attributes {phase = #lowered.phase<steady 0>}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.layers.1.h, @w.layers.1.attn.wq) {{.*}} attributes {phase = #lowered.phase<steady 1>}
// CHECK:      lowered.call @add_rmsnorm_f32(@decode.layers.1.x1, @decode.layers.1.d, @w.final_norm) {{.*}} attributes {phase = #lowered.phase<steady 1>}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) {{.*}} attributes {phase = #lowered.phase<epilogue>}

// The IR JSON keeps the attribute (JSON -> text).
// JSON: lowered.call @embed_f32({{.*}} attributes {phase = #lowered.phase<prologue>}
// JSON: lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) {{.*}} attributes {phase = #lowered.phase<epilogue>}

// Backward: forward phases, the loss in the epilogue, then the gradients in
// reverse: the footer's, layer 1's, layer 0's, the embedding's.  The optimize
// program is all epilogue.
// BWD:      lowered.call @embed_f32({{.*}} attributes {phase = #lowered.phase<prologue>}
// BWD:      phase = #lowered.phase<steady 0>}
// BWD:      phase = #lowered.phase<steady 1>}
// BWD:      lowered.call @cross_entropy_fwd_bwd_f32({{.*}} attributes {phase = #lowered.phase<epilogue>}
// BWD-NEXT: lowered.call @linear_bwd_weight_f32({{.*}} -> (@grad.lm_head) {{.*}} attributes {phase = #lowered.phase<epilogue grad>}
// BWD:      phase = #lowered.phase<steady 1 grad>}
// BWD-NOT:  phase = #lowered.phase<steady 1>}
// BWD:      phase = #lowered.phase<steady 0 grad>}
// BWD:      lowered.call @embed_bwd_f32({{.*}} attributes {phase = #lowered.phase<prologue grad>}
// BWD:      lowered.program @optimize
// BWD-NOT:  phase = #lowered.phase<steady
// BWD:      lowered.call @adamw_f32({{.*}} attributes {phase = #lowered.phase<epilogue>}

// ORDER: error: tag-phases: lowered.program @decode: lowered.call @rmsnorm_f32 (layers.0: graph.rmsnorm) in phase 'layer 0' comes after phase 'epilogue' (expected prologue, layers 0..1, epilogue, then the gradient phases in reverse)
// SPLIT: error: tag-phases: lowered.program @decode: lowered.call @gemv_f32 (layers.0: graph.linear) is in phase 'layer 0', which ended earlier: the calls of a phase must be contiguous
// GAP: error: tag-phases: lowered.program @decode: no call in layer 1 although layer 2 has calls
// NOMODEL: error: tag-phases: no lowered.model (run --lower-prefill/--lower-decode first)

builtin.module {
}
