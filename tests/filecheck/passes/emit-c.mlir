// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout --emit-c | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout -t c | filecheck %s --check-prefix=DECODE
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --emit-c 2>&1 | filecheck %s --check-prefix=NOPLAN
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-qkv --plan-layout --emit-c{profile=true} | filecheck %s --check-prefix=PROF
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout -t "c{profile=true}" | filecheck %s --check-prefix=PROF2
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout -t c | filecheck %s --check-prefix=NOPROF
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout | sed -e 's/y: write f32 extent "N") params (N: i64, K: i64)/y: readwrite f32 extent "N") params (N: i64, K: i64)/' > %t.mlir
// RUN: not ckir-opt %t.mlir --emit-c 2>&1 | filecheck %s --check-prefix=ABI

// model.h: one offset constant per slot, from the layout plan (bump, canaries on).
// CHECK:      // ----- model.h
// CHECK:      #define CKIR_FINGERPRINT 0x{{[0-9a-f]+}}ULL
// CHECK-NEXT: #define CKIR_WEIGHTS_BYTES 496192LL
// CHECK:      #define CKIR_OFF_W_EMBED 0LL /* weights: w.embed */
// CHECK-NEXT: #define CKIR_OFF_W_FINAL_NORM 65600LL /* weights: w.final_norm */
// CHECK:      #define CKIR_OFF_KV_LAYERS_0_K 0LL /* state: kv.layers.0.k */
// CHECK:      // ----- model.c
// The slot table for canary checks: name, arena, offset, size, canary.
// CHECK:      {"w.embed", 0, 0LL, 65536LL, 65536LL},
// CHECK:      {"kv.layers.0.k", 1, 0LL, 2048LL, 2048LL},
// One function per phase of each mode (prologue, each layer, epilogue), then
// the mode's function calling them in order; every call preceded by its
// lowered.call and its origin as a comment; arguments in the order of the
// kernel's declaration: buffers (const for read operands), then scalars.
// CHECK:      static int ckir_ph_prefill_prologue(ckir_model *m, int64_t T) {
// CHECK:        /* lowered.call @embed_f32(@prefill.header.tokens, @w.embed) -> (@prefill.header.x) {T = #lowered.rt<T>, E = 64 : i64} -- header: graph.embed */
// CHECK-NEXT:   ckir_embed_f32((const int32_t *)(S + CKIR_OFF_PREFILL_HEADER_TOKENS), (const float *)(W + CKIR_OFF_W_EMBED), (float *)(S + CKIR_OFF_PREFILL_HEADER_X), T, 64);
// CHECK-NEXT:   CKIR_SCOPE_END(m); /* end of header */
// CHECK:      static int ckir_ph_prefill_layer_0(ckir_model *m, int64_t T) {
// CHECK:        ckir_gemm_f32((const float *)(S + CKIR_OFF_PREFILL_LAYERS_0_H), (const float *)(W + CKIR_OFF_W_LAYERS_0_ATTN_WQ), (float *)(S + CKIR_OFF_PREFILL_LAYERS_0_Q), T, 64, 64);
// In-place rope: q and k are written; P is the run-time start position.
// CHECK:        ckir_rope_f32((float *)(S + CKIR_OFF_PREFILL_LAYERS_0_Q), (float *)(S + CKIR_OFF_PREFILL_LAYERS_0_K), T, 4, 2, 16, P, 10000.0f, 16, 1.0f, 0.0f, 0.0f, 0.0f, 1.0f);
// Run-time element counts: T * cols.
// CHECK:        ckir_swiglu_f32({{.*}}, (T * 172));
// CHECK:        CKIR_SCOPE_END(m); /* end of layers.0 */
// CHECK:      static int ckir_ph_prefill_layer_1(ckir_model *m, int64_t T) {
// CHECK:      static int ckir_ph_prefill_epilogue(ckir_model *m, int64_t T) {
// CHECK:        CKIR_SCOPE_END(m); /* end of footer */
// CHECK-NEXT:   return CKIR_OK;
// CHECK:      static int ckir_run_prefill(ckir_model *m, int64_t T) {
// CHECK-NEXT:   int rc;
// CHECK-NEXT:   if ((rc = ckir_ph_prefill_prologue(m, T)) != CKIR_OK) return rc;
// CHECK-NEXT:   if ((rc = ckir_ph_prefill_layer_0(m, T)) != CKIR_OK) return rc;
// CHECK-NEXT:   if ((rc = ckir_ph_prefill_layer_1(m, T)) != CKIR_OK) return rc;
// CHECK-NEXT:   if ((rc = ckir_ph_prefill_epilogue(m, T)) != CKIR_OK) return rc;
// CHECK-NEXT:   return CKIR_OK;
// CHECK:      static int ckir_ph_decode_layer_0(ckir_model *m, int64_t T) {
// CHECK:        ckir_gemv_f32((const float *)(S + CKIR_OFF_DECODE_LAYERS_0_H), (const float *)(W + CKIR_OFF_W_LAYERS_0_ATTN_WQ), (float *)(S + CKIR_OFF_DECODE_LAYERS_0_Q), 64, 64);
// The descriptor: io buffers and the token bound (rows of the embedding table).
// CHECK:      .max_context = 16,
// CHECK-NEXT: .vocab = 256,
// CHECK:      .prefill = {"prefill", ckir_run_prefill, CKIR_OFF_PREFILL_HEADER_TOKENS, 16, CKIR_OFF_PREFILL_FOOTER_LOGITS, 16, 256},
// CHECK-NEXT: .decode = {"decode", ckir_run_decode, CKIR_OFF_DECODE_HEADER_TOKENS, 1, CKIR_OFF_DECODE_FOOTER_LOGITS, 1, 256},

// A decode-only build has no prefill function and marks the mode absent.
// DECODE-NOT: ckir_run_prefill(ckir_model
// DECODE:     .prefill = {"prefill", 0, 0, 0, 0, 0, 0},

// NOPLAN: error: emit-c: needs one lowered.model and one layout.plan (run --lower-prefill/--lower-decode and --plan-layout first)

// Profiling: one timer per call, labelled with the call's origin, read through
// exported functions; the calls themselves are unchanged.
// PROF:      #define CKIR_PROF_NCALLS 29
// PROF:      static const char *const ckir_prof_labels[CKIR_PROF_NCALLS] = {
// PROF-NEXT:   "header: graph.embed",
// PROF-NEXT:   "layers.0: graph.rmsnorm",
// PROF-NEXT:   "layers.0: graph.linear + graph.linear + graph.linear [fuse-qkv]",
// PROF-NEXT:   "layers.0: graph.rope",
// PROF:        "footer: graph.lm_head"
// PROF-NEXT: };
// PROF:      long long ckir_profile_n(void) { return CKIR_PROF_NCALLS; }
// PROF:      const char *ckir_profile_label(long long i) {
// PROF:      void ckir_profile_reset(void) {
// PROF:      static int ckir_ph_decode_prologue(ckir_model *m, int64_t T) {
// PROF:        /* lowered.call @embed_f32({{.*}} -- header: graph.embed */
// PROF-NEXT:   { double ckir_prof_t0 = ckir_prof_now();
// PROF-NEXT:   ckir_embed_f32((const int32_t *)(S + CKIR_OFF_DECODE_HEADER_TOKENS), (const float *)(W + CKIR_OFF_W_EMBED), (float *)(S + CKIR_OFF_DECODE_HEADER_X), 1, 64);
// PROF-NEXT:   ckir_prof_time[0] += ckir_prof_now() - ckir_prof_t0; ckir_prof_count[0]++; }
// PROF-NEXT:   CKIR_SCOPE_END(m); /* end of header */
// PROF:        ckir_gemv_qkv_f32(
// PROF-NEXT:   ckir_prof_time[2] += ckir_prof_now() - ckir_prof_t0; ckir_prof_count[2]++; }
// PROF:        ckir_prof_time[28] += ckir_prof_now() - ckir_prof_t0; ckir_prof_count[28]++; }
// PROF-NEXT:   CKIR_SCOPE_END(m); /* end of footer */
// PROF2:     #define CKIR_PROF_NCALLS 33
// NOPROF-NOT: ckir_prof

// The runtime ABI check: a declaration that differs from the runtime's kernel
// (here gemv_f32's output declared readwrite) is refused at emission.
// ABI: error: emit-c: kernel @gemv_f32: declared as void ckir_gemv_f32(const float *x, const float *w, float *y, int64_t N, int64_t K) [read read readwrite], the runtime has void ckir_gemv_f32(const float *x, const float *w, float *y, int64_t N, int64_t K) [read read write]

// The I/O manifest (--io-manifest): one index constant per handle in model.h, the
// handle table and the query API in model.c.
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --plan-layout{strategy=bump} --io-manifest --emit-c | filecheck %s --check-prefix=IO
// IO:      #define CKIR_IO_COUNT 27
// IO-NEXT: #define CKIR_IO_PREFILL_TOKENS 0 /* input prefill.tokens: state + 8448, [T] i32 */
// IO-NEXT: #define CKIR_IO_PREFILL_LOGITS 1 /* output prefill.logits: state + 8576, [T, 256] f32 */
// IO-NEXT: #define CKIR_IO_EMBED 2 /* param embed: weights + 0, [256, 64] f32 */
// IO:      #define CKIR_IO_KV_LAYERS_0_K 23 /* state kv.layers.0.k: state + 0, [PT, 32] f32 */
// IO:      static const ckir_handle_desc ckir_handles[] = {
// IO-NEXT:   {"prefill.tokens", "input", "prefill", "i32", 1, {16LL, 0, 0, 0}, {"T", "", "", ""}, 1, 8448LL, 64LL},
// IO:        {"kv.layers.0.k", "state", "", "f32", 2, {16LL, 32LL, 0, 0}, {"PT", "", "", ""}, 1, 0LL, 2048LL},
// IO:      int64_t ckir_io_count(void) { return 27; }
// IO:      int ckir_io_desc(int64_t i, ckir_handle_desc *out) {
// IO:      uint64_t ckir_fingerprint(void) { return CKIR_FINGERPRINT; }
// Without a manifest the query API is there and counts 0 handles.
// NOPROF:  int64_t ckir_io_count(void) { return 0; }
// ckir debug --compare's hook: told after every call of a mode function, by index
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout -t "c{trace=true}" | filecheck %s --check-prefix=TRACE
// TRACE:      static ckir_trace_fn ckir_trace_hook;
// TRACE-NEXT: void ckir_set_trace_hook(ckir_trace_fn fn) { ckir_trace_hook = fn; }
// TRACE:      static int ckir_ph_decode_prologue(ckir_model *m, int64_t T) {
// TRACE:      ckir_embed_f32({{.*}}, 1, 64); if (ckir_trace_hook) { int rc = ckir_trace_hook(0); if (rc) return rc; }
// TRACE:      static int ckir_ph_decode_layer_0(ckir_model *m, int64_t T) {
// TRACE:      ckir_rmsnorm_f32({{.*}}); if (ckir_trace_hook) { int rc = ckir_trace_hook(1); if (rc) return rc; }
// NOPROF-NOT: ckir_trace

// The phase entry points (docs/runtime.md, "Running one layer at a time"): the
// layer count and the width of the state a layer hands on in model.h; per
// inference mode a table of its layer functions and of the offsets of each
// layer's output (the residual sum x2; the last layer's too, though only the
// fused final norm's output is read after it); a mode not compiled still has
// the entry points, which refuse (no table).
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --fuse-add-rmsnorm --tag-phases --plan-layout --emit-c | filecheck %s --check-prefix=PHASES
// PHASES:      #define CKIR_N_LAYERS 2
// PHASES-NEXT: #define CKIR_HIDDEN_SIZE 64
// PHASES:      .n_layers = 2,
// PHASES:      static const ckir_mode_fn ckir_prefill_layer_fns[] = {ckir_ph_prefill_layer_0, ckir_ph_prefill_layer_1};
// PHASES-NEXT: static const int64_t ckir_prefill_hidden_off[] = {CKIR_OFF_PREFILL_LAYERS_0_X2, CKIR_OFF_PREFILL_LAYERS_1_X2};
// PHASES-NEXT: int ckir_prefill_prologue(ckir_model *m, const int32_t *tokens, int64_t n) {
// PHASES-NEXT:   return ckir_model_phase_begin(m, &ckir_desc.prefill, tokens, n, ckir_ph_prefill_prologue);
// PHASES:      int ckir_prefill_layer(ckir_model *m, int64_t i) {
// PHASES-NEXT:   return ckir_model_phase_layer(m, &ckir_desc.prefill, i, ckir_prefill_layer_fns);
// PHASES:      int ckir_prefill_epilogue(ckir_model *m) {
// PHASES-NEXT:   return ckir_model_phase_end(m, &ckir_desc.prefill, ckir_ph_prefill_epilogue);
// PHASES:      const float *ckir_prefill_hidden(const ckir_model *m, int64_t i) {
// PHASES-NEXT:   if (i < 0 || i >= 2 || ckir_prefill_hidden_off[i] < 0) return NULL;
// PHASES:      int ckir_decode_layer(ckir_model *m, int64_t i) {
// PHASES-NEXT:   return ckir_model_phase_layer(m, &ckir_desc.decode, i, NULL);
// Without a backward program the training step's entry points have no table: the
// runtime refuses them as ckir_backward does (not compiled for training).
// PHASES:      int ckir_backward_prologue(ckir_model *m, const int32_t *tokens, const int32_t *targets,
// PHASES-NEXT:                            int64_t n) {
// PHASES-NEXT:   return ckir_model_train_phase_begin(m, tokens, targets, n, NULL);
// PHASES:      int ckir_backward_grad_layer(ckir_model *m, int64_t i) {
// PHASES-NEXT:   return ckir_model_train_phase(m, CKIR_PHASE_GRAD_LAYER, i, NULL, NULL);
