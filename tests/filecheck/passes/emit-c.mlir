// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout --emit-c | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout -t c | filecheck %s --check-prefix=DECODE
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --emit-c 2>&1 | filecheck %s --check-prefix=NOPLAN

// model.h: one offset constant per slot, from the layout plan (bump, canaries on).
// CHECK:      // ----- model.h
// CHECK:      #define CKIR_LAYOUT_HASH 0x{{[0-9a-f]+}}ULL
// CHECK-NEXT: #define CKIR_WEIGHTS_BYTES 496192LL
// CHECK:      #define CKIR_OFF_W_EMBED 0LL /* weights: w.embed */
// CHECK-NEXT: #define CKIR_OFF_W_FINAL_NORM 65600LL /* weights: w.final_norm */
// CHECK:      #define CKIR_OFF_KV_LAYERS_0_K 0LL /* state: kv.layers.0.k */
// CHECK:      // ----- model.c
// The slot table for canary checks: name, arena, offset, size, canary.
// CHECK:      {"w.embed", 0, 0LL, 65536LL, 65536LL},
// CHECK:      {"kv.layers.0.k", 1, 0LL, 2048LL, 2048LL},
// One function per mode; every call preceded by its lowered.call as a comment;
// arguments in registry order: buffers (const for read operands), then scalars.
// CHECK:      static int ckir_run_prefill(ckir_model *m, int64_t T) {
// CHECK:        /* lowered.call @embed_f32(@prefill.header.tokens, @w.embed) -> (@prefill.header.x)
// CHECK-NEXT:   ckir_embed_f32((const int32_t *)(S + CKIR_OFF_PREFILL_HEADER_TOKENS), (const float *)(W + CKIR_OFF_W_EMBED), (float *)(S + CKIR_OFF_PREFILL_HEADER_X), T, 64);
// CHECK-NEXT:   CKIR_SCOPE_END(m); /* end of header */
// CHECK:        ckir_gemm_f32((const float *)(S + CKIR_OFF_PREFILL_LAYERS_0_H), (const float *)(W + CKIR_OFF_W_LAYERS_0_ATTN_WQ), (float *)(S + CKIR_OFF_PREFILL_LAYERS_0_Q), T, 64, 64);
// In-place rope: q and k are written; P is the run-time start position.
// CHECK:        ckir_rope_f32((float *)(S + CKIR_OFF_PREFILL_LAYERS_0_Q), (float *)(S + CKIR_OFF_PREFILL_LAYERS_0_K), T, 4, 2, 16, P, 10000.0f);
// Run-time element counts: T * cols.
// CHECK:        ckir_swiglu_f32({{.*}}, (T * 172));
// CHECK:        CKIR_SCOPE_END(m); /* end of layers.0 */
// CHECK:        CKIR_SCOPE_END(m); /* end of footer */
// CHECK-NEXT:   return CKIR_OK;
// CHECK:      static int ckir_run_decode(ckir_model *m, int64_t T) {
// CHECK:        ckir_gemv_f32((const float *)(S + CKIR_OFF_DECODE_LAYERS_0_H), (const float *)(W + CKIR_OFF_W_LAYERS_0_ATTN_WQ), (float *)(S + CKIR_OFF_DECODE_LAYERS_0_Q), 64, 64);
// The descriptor: io buffers and the token bound (rows of the embedding table).
// CHECK:      .max_context = 16,
// CHECK-NEXT: .vocab = 256,
// CHECK:      .prefill = {"prefill", ckir_run_prefill, CKIR_OFF_PREFILL_HEADER_TOKENS, 16, CKIR_OFF_PREFILL_FOOTER_LOGITS, 256},
// CHECK-NEXT: .decode = {"decode", ckir_run_decode, CKIR_OFF_DECODE_HEADER_TOKENS, 1, CKIR_OFF_DECODE_FOOTER_LOGITS, 256},

// A decode-only build has no prefill function and marks the mode absent.
// DECODE-NOT: ckir_run_prefill(ckir_model
// DECODE:     .prefill = {"prefill", 0, 0, 0, 0, 0},

// NOPLAN: error: emit-c: needs one lowered.model and one layout.plan (run --lower-prefill/--lower-decode and --plan-layout first)
