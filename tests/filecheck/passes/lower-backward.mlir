// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-backward{max-context=16} | filecheck %s --check-prefix=LLAMA
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-backward{max-context=16} | filecheck %s --check-prefix=GPT2
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-backward{max-context=16 weight-decay=0.0 max-grad-norm=0.0} | filecheck %s --check-prefix=OPTS
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-backward{max-context=16} --plan-layout | filecheck %s --check-prefix=PLAN
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-backward{max-context=16} --plan-layout --emit-c | filecheck %s --check-prefix=EMITC
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-backward{beta1=1.5} 2>&1 | filecheck %s --check-prefix=BAD-OPT
// RUN: not ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q8_0} --lower-backward 2>&1 | filecheck %s --check-prefix=BAD-DTYPE

// Gradients are global buffers next to the weights (one per weight), the AdamW
// moments too; the program's io: tokens, targets, the loss.
// LLAMA:      lowered.buffer @grad.embed grad : !lowered.buf<[256, 64], f32> {source = "w.embed"}
// LLAMA-NEXT: lowered.buffer @grad.final_norm grad
// LLAMA-NEXT: lowered.buffer @grad.lm_head grad
// LLAMA:      lowered.buffer @adam.m.embed optimizer_state : !lowered.buf<[256, 64], f32> {source = "w.embed"}
// LLAMA-NEXT: lowered.buffer @adam.v.embed optimizer_state
// LLAMA:      lowered.program @backward mode "backward" max_context 16 {
// LLAMA:      lowered.buffer @backward.header.tokens io : !lowered.buf<[16], i32> {source = "input"}
// The logits are an activation here: the loss is the output.
// LLAMA:      lowered.buffer @backward.footer.logits activation : !lowered.buf<[16, 256], f32>
// LLAMA-NEXT: lowered.buffer @backward.targets io : !lowered.buf<[16], i32> {source = "targets"}
// LLAMA-NEXT: lowered.buffer @backward.loss io : !lowered.buf<[1], f32> {source = "output"}
// The forward: from position 0 (P = 0), no KV cache (attention reads k and v).
// LLAMA:      lowered.call @rope_f32() -> (@backward.layers.0.q, @backward.layers.0.k) {{.*}}P = 0 : i64
// LLAMA-NEXT: lowered.call @attention_f32(@backward.layers.0.q, @backward.layers.0.k, @backward.layers.0.v) -> (@backward.layers.0.a) {T = #lowered.rt<T>, P = 0 : i64
// LLAMA-NOT:  kv_store
// Then the loss: dlogits overwrite the logits.
// LLAMA:      lowered.call @gemm_f32(@backward.footer.h, @w.lm_head) -> (@backward.footer.logits)
// LLAMA-NEXT: lowered.call @cross_entropy_fwd_bwd_f32(@backward.footer.logits, @backward.targets) -> (@backward.loss, @backward.footer.logits) {T = #lowered.rt<T>, V = 256 : i64, origin = #lowered.origin<scope "loss", op "cross_entropy">}
// lm_head: the weight gradient is written whole, then the input gradient.
// LLAMA-NEXT: lowered.call @linear_bwd_weight_f32(@backward.footer.logits, @backward.footer.h) -> (@grad.lm_head) {M = #lowered.rt<T>, N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "grad(graph.lm_head)">}
// LLAMA-NEXT: lowered.call @linear_bwd_input_f32(@backward.footer.logits, @w.lm_head) -> (@backward.footer.dh)
// rmsnorm_bwd adds into dgamma: the gradient is zeroed first.
// LLAMA-NEXT: lowered.call @zero_f32() -> (@grad.final_norm) {n = 64 : i64
// LLAMA-NEXT: lowered.call @rmsnorm_bwd_f32(@backward.layers.1.x2, @w.final_norm, @backward.footer.dh) -> (@backward.footer.dx2, @grad.final_norm)
// A second contribution to a gradient goes to a fresh buffer and is summed.
// LLAMA:      lowered.call @linear_bwd_input_f32(@backward.layers.1.dgate, @w.layers.1.mlp.gate) -> (@backward.layers.1.dh2_1)
// LLAMA-NEXT: lowered.call @add_f32(@backward.layers.1.dh2, @backward.layers.1.dh2_1) -> (@backward.layers.1.dh2_2)
// The residual: add passes dx2 on to both inputs unchanged (no call).
// LLAMA:      lowered.call @add_f32(@backward.footer.dx2, @backward.layers.1.dx1) -> (@backward.layers.1.dx1_1)
// Attention recomputes its probabilities; RoPE's backward rotates dq, dk back in place.
// LLAMA:      lowered.call @attention_bwd_f32(@backward.layers.1.q, @backward.layers.1.k, @backward.layers.1.v, @backward.layers.1.a, @backward.layers.1.da) -> (@backward.layers.1.dqr, @backward.layers.1.dkr, @backward.layers.1.dv) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64
// LLAMA-NEXT: lowered.call @rope_bwd_f32() -> (@backward.layers.1.dqr, @backward.layers.1.dkr) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = 0 : i64, theta = 1.000000e+04 : f64
// LLAMA-NEXT: lowered.call @linear_bwd_weight_f32(@backward.layers.1.dv, @backward.layers.1.h) -> (@grad.layers.1.attn.wv)
// The embedding last: a scatter-add into a zeroed gradient.
// LLAMA:      lowered.call @zero_f32() -> (@grad.embed) {n = 16384 : i64
// LLAMA-NEXT: lowered.call @embed_bwd_f32(@backward.header.tokens, @backward.layers.0.dx_1) -> (@grad.embed) {T = #lowered.rt<T>, E = 64 : i64
// LLAMA-NEXT: }
// The optimizer step: the global norm, the clipping coefficient, one AdamW call per weight.
// LLAMA-NEXT: lowered.program @optimize mode "optimize" max_context 16 {
// LLAMA-NEXT: lowered.buffer @optimize.sumsq scratch : !lowered.buf<[1], f32>
// LLAMA-NEXT: lowered.buffer @optimize.coef scratch : !lowered.buf<[1], f32>
// LLAMA-NEXT: lowered.call @zero_f32() -> (@optimize.sumsq) {n = 1 : i64
// LLAMA-NEXT: lowered.call @grad_sumsq_f32(@grad.embed) -> (@optimize.sumsq) {n = 16384 : i64
// LLAMA:      lowered.call @clip_coef_f32(@optimize.sumsq) -> (@optimize.coef) {max_norm = 1.000000e+00 : f64
// LLAMA-NEXT: lowered.call @adamw_f32(@grad.embed, @optimize.coef) -> (@w.embed, @adam.m.embed, @adam.v.embed) {n = 16384 : i64, lr = #lowered.rt<lr>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64, step = #lowered.rt<step>

// GPT-2: tied head, layernorm with bias, gelu, learned positions, biases.
// GPT2-NOT:   @grad.lm_head
// GPT2:       lowered.call @cross_entropy_fwd_bwd_f32
// The tied head writes the embedding's gradient whole...
// GPT2-NEXT:  lowered.call @linear_bwd_weight_f32(@backward.footer.logits, @backward.footer.h) -> (@grad.embed)
// GPT2:       lowered.call @zero_f32() -> (@grad.final_norm.bias)
// GPT2-NEXT:  lowered.call @layernorm_bwd_f32(@backward.layers.1.x2, @w.final_norm, @backward.footer.dh) -> (@backward.footer.dx2, @grad.final_norm, @grad.final_norm.bias)
// GPT2-NEXT:  lowered.call @linear_bwd_weight_f32(@backward.footer.dx2, @backward.layers.1.g) -> (@grad.layers.1.mlp.proj)
// GPT2-NEXT:  lowered.call @bias_bwd_f32(@backward.footer.dx2) -> (@grad.layers.1.mlp.bproj) {M = #lowered.rt<T>, N = 64 : i64
// GPT2-NEXT:  lowered.call @linear_bwd_input_f32(@backward.footer.dx2, @w.layers.1.mlp.proj) -> (@backward.layers.1.dg)
// GPT2-NEXT:  lowered.call @gelu_tanh_bwd_f32(@backward.layers.1.f, @backward.layers.1.dg) -> (@backward.layers.1.df) {n = #lowered.rt<T*256>
// GPT2:       lowered.call @zero_f32() -> (@grad.pos) {n = 8192 : i64
// GPT2-NEXT:  lowered.call @pos_embed_bwd_f32(@backward.layers.0.dx_1) -> (@grad.pos) {T = #lowered.rt<T>, E = 64 : i64, P = 0 : i64
// ... so the embedding's scatter-add adds into it: no zeroing.
// GPT2-NEXT:  lowered.call @embed_bwd_f32(@backward.header.tokens, @backward.layers.0.dx_1) -> (@grad.embed)
// GPT2-NEXT:  }

// OPTS:       lowered.call @clip_coef_f32(@optimize.sumsq) -> (@optimize.coef) {max_norm = 0.000000e+00 : f64
// OPTS-NEXT:  lowered.call @adamw_f32(@grad.embed, @optimize.coef) -> (@w.embed, @adam.m.embed, @adam.v.embed) {{.*}}weight_decay = 0.000000e+00 : f64

// Totals for every role: gradients and moments are permanent state.
// PLAN:       layout.totals {activation = {{[0-9]+}} : i64, {{.*}}grad = 494848 : i64, io = {{[0-9]+}} : i64, kv_cache = 8192 : i64, optimizer_state = 989696 : i64,
// PLAN-SAME:  weight = 494848 : i64}

// Emitted: one function per phase and one per program; the backward program
// runs the forward phases, then the gradients' in reverse; the optimizer (all
// epilogue) reads lr and step from the model handle.
// EMITC:        static int ckir_run_backward(ckir_model *m, int64_t T) {
// EMITC-NEXT:     int rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_prologue(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_layer_0(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_layer_1(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_epilogue(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_epilogue_grad(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_layer_1_grad(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_layer_0_grad(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     if ((rc = ckir_ph_backward_prologue_grad(m, T)) != CKIR_OK) return rc;
// EMITC-NEXT:     return CKIR_OK;
// EMITC:        static int ckir_ph_optimize_epilogue(ckir_model *m, int64_t T) {
// EMITC:        ckir_adamw_f32((const float *)(S + CKIR_OFF_GRAD_EMBED), (const float *)(S + CKIR_OFF_OPTIMIZE_COEF), (float *)(W + CKIR_OFF_W_EMBED), (float *)(S + CKIR_OFF_ADAM_M_EMBED), (float *)(S + CKIR_OFF_ADAM_V_EMBED), 16384, m->lr, 0.9f, 0.999f, 1e-08f, 0.01f, m->step);
// EMITC:        static int ckir_run_optimize(ckir_model *m, int64_t T) {
// EMITC:        static const ckir_param_desc ckir_params[] = {
// EMITC-NEXT:    {"w.embed", CKIR_OFF_W_EMBED, CKIR_OFF_GRAD_EMBED, CKIR_OFF_ADAM_M_EMBED, CKIR_OFF_ADAM_V_EMBED, 16384LL, 2, {256LL, 64LL}},
// EMITC:        .train = {
// EMITC-NEXT:    .backward = ckir_run_backward,
// EMITC-NEXT:    .optimize = ckir_run_optimize,
// EMITC:        .n_params = 21,
// EMITC:        float ckir_train_step(
// The training step's phase entry points (docs/runtime.md): one table of the phase
// functions in the order they run (forward, then the gradients in reverse), which
// each export indexes through the runtime.
// EMITC:        static const ckir_mode_fn ckir_backward_stage_fns[] = {ckir_ph_backward_prologue, ckir_ph_backward_layer_0, ckir_ph_backward_layer_1, ckir_ph_backward_epilogue, ckir_ph_backward_epilogue_grad, ckir_ph_backward_layer_1_grad, ckir_ph_backward_layer_0_grad, ckir_ph_backward_prologue_grad};
// EMITC-NEXT:   int ckir_backward_prologue(ckir_model *m, const int32_t *tokens, const int32_t *targets,
// EMITC-NEXT:                              int64_t n) {
// EMITC-NEXT:     return ckir_model_train_phase_begin(m, tokens, targets, n, ckir_backward_stage_fns);
// EMITC:        int ckir_backward_layer(ckir_model *m, int64_t i) {
// EMITC-NEXT:     return ckir_model_train_phase(m, CKIR_PHASE_LAYER, i, ckir_backward_stage_fns, NULL);
// EMITC:        int ckir_backward_epilogue(ckir_model *m, float *loss) {
// EMITC-NEXT:     return ckir_model_train_phase(m, CKIR_PHASE_EPILOGUE, 0, ckir_backward_stage_fns, loss);
// EMITC:        int ckir_backward_grad_layer(ckir_model *m, int64_t i) {
// EMITC-NEXT:     return ckir_model_train_phase(m, CKIR_PHASE_GRAD_LAYER, i, ckir_backward_stage_fns, NULL);
// EMITC:        int ckir_backward_grad_prologue(ckir_model *m, float *loss) {
// EMITC-NEXT:     return ckir_model_train_phase(m, CKIR_PHASE_GRAD_PROLOGUE, 0, ckir_backward_stage_fns, loss);

// BAD-OPT:    lower-backward: beta1 must be in [0, 1), got 1.5
// BAD-DTYPE:  backward footer: the gradient of graph.lm_head: weight @w.lm_head is q8_0; training needs f32 weights
