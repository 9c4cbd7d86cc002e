// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} | filecheck %s --check-prefix=BOTH

// Buffers have max-context rows; kernels see the run-time token count T.
// CHECK:      lowered.program @prefill mode "prefill" max_context 16 {
// CHECK-NEXT:   lowered.buffer @prefill.header.tokens io : !lowered.buf<[16], i32> {source = "input"}
// CHECK-NEXT:   lowered.buffer @prefill.header.x activation : !lowered.buf<[16, 64], f32>
// CHECK:        lowered.buffer @prefill.footer.logits io : !lowered.buf<[16, 256], f32> {source = "output"}
// CHECK:        lowered.call @embed_f32(@prefill.header.tokens, @w.embed) -> (@prefill.header.x) {T = #lowered.rt<T>, E = 64 : i64
// GEMM, not GEMV, in prefill.
// CHECK:        lowered.call @gemm_f32(@prefill.layers.0.h, @w.layers.0.attn.wq) -> (@prefill.layers.0.q) {M = #lowered.rt<T>, N = 64 : i64, K = 64 : i64
// CHECK:        lowered.call @rope_f32() -> (@prefill.layers.0.q, @prefill.layers.0.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>
// CHECK:        lowered.call @kv_store_f32(@prefill.layers.0.k, @prefill.layers.0.v) -> (@kv.layers.0.k, @kv.layers.0.v) {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 32 : i64
// Element counts of token-indexed tensors are run-time products.
// CHECK:        lowered.call @add_f32(@prefill.header.x, @prefill.layers.0.o) -> (@prefill.layers.0.x1) {n = #lowered.rt<T*64>
// CHECK:        lowered.call @swiglu_f32(@prefill.layers.0.gate, @prefill.layers.0.up) -> (@prefill.layers.0.m) {n = #lowered.rt<T*172>
// CHECK:        lowered.call @gemm_f32(@prefill.footer.h, @w.lm_head) -> (@prefill.footer.logits) {M = #lowered.rt<T>, N = 256 : i64, K = 64 : i64
// CHECK-NOT:    gemv

// Two lowerings share one lowered.model: kernel declarations (sorted, each once:
// gemm_f32 for prefill and gemv_f32 for decode, the rest shared), weights and
// KV cache once, two programs.
// BOTH:      lowered.model @llama {
// BOTH-NEXT:   lowered.kernel @add_f32 op "add"
// BOTH-NEXT:   lowered.kernel @attention_f32 op "attention"
// BOTH-NEXT:   lowered.kernel @embed_f32 op "embed"
// BOTH-NEXT:   lowered.kernel @gemm_f32 op "linear" c "ckir_gemm_f32" modes ["prefill", "backward"]
// BOTH-NEXT:   lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"]
// BOTH-NEXT:   lowered.kernel @kv_store_f32 op "kv_store"
// BOTH-NEXT:   lowered.kernel @rmsnorm_f32 op "rmsnorm"
// BOTH-NEXT:   lowered.kernel @rope_f32 op "rope"
// BOTH-NEXT:   lowered.kernel @swiglu_f32 op "swiglu"
// BOTH-NEXT:   lowered.buffer @w.embed weight
// BOTH-COUNT-1: lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 32], f32>
// BOTH:      lowered.program @prefill mode "prefill" max_context 16 {
// BOTH:      lowered.program @decode mode "decode" max_context 16 {
// BOTH-NOT:  lowered.buffer @w.embed
// BOTH-NOT:  lowered.kernel
