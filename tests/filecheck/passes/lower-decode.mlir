// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} | filecheck %s
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-decode{max-context=16} | filecheck %s --check-prefix=GPT2
// The default max-context is min(C, 256): tiny llama has C = 128, below 256, so the
// project's signature pipeline works on it without options.
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode --plan-layout | filecheck %s --check-prefix=DEFAULT
// DEFAULT: lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[128, 32], f32>
// DEFAULT: lowered.program @decode mode "decode" max_context 128 {
// DEFAULT: layout.plan @llama

// tiny llama: E=64, H=4, KV=2, D=16, I=172, L=2, V=256.
// The graph stays; a lowered.model follows it: first one declaration per kernel
// the program calls (copied from the registry, sorted by name), then the weights
// layer by layer.
// CHECK:      lowered.model @llama {
// CHECK-NEXT:   lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32 extent "n", b: read f32 extent "n", out: write f32 extent "n") params (n: i64) constraints ["n >= 1"]
// CHECK-NEXT:   lowered.kernel @attention_f32 op "attention" c "ckir_attention_f32" modes ["prefill", "decode", "backward"] (q: read f32 extent "T*H*D", kcache: read f32 extent "(P+T)*KV*D", vcache: read f32 extent "(P+T)*KV*D", out: write f32 extent "T*H*D") params (T: i64, P: i64, H: i64, KV: i64, D: i64) constraints ["T >= 1", "P >= 0", "H >= 1", "KV >= 1", "H % KV == 0", "D >= 1", "D <= 256"]
// CHECK-NEXT:   lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32 extent "T", table: read f32, out: write f32 extent "T*E") params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
// CHECK-NEXT:   lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
// CHECK-NEXT:   lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
// CHECK-NEXT:   lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32 extent "T*E", gamma: read f32 extent "E", out: write f32 extent "T*E") params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
// CHECK-NEXT:   lowered.kernel @rope_f32 op "rope" c "ckir_rope_f32" modes ["prefill", "decode", "backward"] (q: readwrite f32 extent "T*H*D", k: readwrite f32 extent "T*KV*D") params (T: i64, H: i64, KV: i64, D: i64, P: i64, theta: f32, R: i64, factor: f32, ramp_w: f32, ramp_i: f32, ramp_0: f32, mscale: f32) constraints ["T >= 1", "H >= 1", "KV >= 1", "D >= 2", "P >= 0", "theta > 0", "R >= 2", "R % 2 == 0", "R <= D", "factor > 0", "mscale > 0"]
// CHECK-NEXT:   lowered.kernel @swiglu_f32 op "swiglu" c "ckir_swiglu_f32" modes ["prefill", "decode", "backward"] (gate: read f32 extent "n", up: read f32 extent "n", out: write f32 extent "n") params (n: i64) constraints ["n >= 1"]
// CHECK-NEXT:   lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
// CHECK-NEXT:   lowered.buffer @w.final_norm weight : !lowered.buf<[64], f32> {source = "final_norm"}
// CHECK-NEXT:   lowered.buffer @w.lm_head weight : !lowered.buf<[256, 64], f32> {source = "lm_head"}
// CHECK-NEXT:   lowered.buffer @w.layers.0.attn_norm weight : !lowered.buf<[64], f32> {source = "layers.0.attn_norm"}
// CHECK-NEXT:   lowered.buffer @w.layers.0.attn.wq weight : !lowered.buf<[64, 64], f32>
// CHECK-NEXT:   lowered.buffer @w.layers.0.attn.wk weight : !lowered.buf<[32, 64], f32>
// CHECK:        lowered.buffer @w.layers.1.mlp.down weight : !lowered.buf<[64, 172], f32>
// KV cache: [max-context, KV*D] per layer, in layer order.
// CHECK-NEXT:   lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 32], f32>
// CHECK-NEXT:   lowered.buffer @kv.layers.0.v kv_cache : !lowered.buf<[16, 32], f32>
// CHECK-NEXT:   lowered.buffer @kv.layers.1.k kv_cache : !lowered.buf<[16, 32], f32>
// CHECK-NEXT:   lowered.buffer @kv.layers.1.v kv_cache : !lowered.buf<[16, 32], f32>
// CHECK-NEXT:   lowered.program @decode mode "decode" max_context 16 {
// One row per token-indexed buffer; io buffers for the input and the output.
// CHECK-NEXT:     lowered.buffer @decode.header.tokens io : !lowered.buf<[1], i32> {source = "input"}
// CHECK-NEXT:     lowered.buffer @decode.header.x activation : !lowered.buf<[1, 64], f32>
// CHECK:          lowered.buffer @decode.layers.0.gate activation : !lowered.buf<[1, 172], f32>
// CHECK:          lowered.buffer @decode.footer.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
// Kernels: GEMV for every linear in decode, T = 1 as an integer, P at run time.
// CHECK:          lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.x) {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
// CHECK-NEXT:     lowered.call @rmsnorm_f32(@decode.header.x, @w.layers.0.attn_norm) -> (@decode.layers.0.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64
// CHECK-NEXT:     lowered.call @gemv_f32(@decode.layers.0.h, @w.layers.0.attn.wq) -> (@decode.layers.0.q) {N = 64 : i64, K = 64 : i64
// CHECK-NEXT:     lowered.call @gemv_f32(@decode.layers.0.h, @w.layers.0.attn.wk) -> (@decode.layers.0.k) {N = 32 : i64, K = 64 : i64
// CHECK-NEXT:     lowered.call @gemv_f32(@decode.layers.0.h, @w.layers.0.attn.wv) -> (@decode.layers.0.v) {N = 32 : i64, K = 64 : i64
// rope updates q and k in place (no inputs, two outputs).
// CHECK-NEXT:     lowered.call @rope_f32() -> (@decode.layers.0.q, @decode.layers.0.k) {T = 1 : i64, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+04 : f64
// attention = append K/V to the layer's cache, then attend over it.
// CHECK-NEXT:     lowered.call @kv_store_f32(@decode.layers.0.k, @decode.layers.0.v) -> (@kv.layers.0.k, @kv.layers.0.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 32 : i64
// CHECK-NEXT:     lowered.call @attention_f32(@decode.layers.0.q, @kv.layers.0.k, @kv.layers.0.v) -> (@decode.layers.0.a) {T = 1 : i64, P = #lowered.rt<P>, H = 4 : i64, KV = 2 : i64, D = 16 : i64
// CHECK-NEXT:     lowered.call @gemv_f32(@decode.layers.0.a, @w.layers.0.attn.wo) -> (@decode.layers.0.o) {N = 64 : i64, K = 64 : i64
// Explicit residual: the layer input plus the attention output.
// CHECK-NEXT:     lowered.call @add_f32(@decode.header.x, @decode.layers.0.o) -> (@decode.layers.0.x1) {n = 64 : i64
// CHECK:          lowered.call @swiglu_f32(@decode.layers.0.gate, @decode.layers.0.up) -> (@decode.layers.0.m) {n = 172 : i64
// The second layer reads the first one's output and its own weights.
// CHECK:          lowered.call @rmsnorm_f32(@decode.layers.0.x2, @w.layers.1.attn_norm) -> (@decode.layers.1.h)
// CHECK:          lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// GPT-2: learned positions in place, LayerNorm with bias, biased GEMVs, MHA, tanh GELU, tied head.
// GPT2:      lowered.buffer @w.pos weight : !lowered.buf<[128, 64], f32>
// GPT2-NOT:  @w.lm_head
// GPT2:      lowered.call @embed_f32(@decode.header.tokens, @w.embed) -> (@decode.header.e)
// GPT2-NEXT: lowered.call @pos_embed_add_f32(@w.pos) -> (@decode.header.e) {T = 1 : i64, E = 64 : i64, P = #lowered.rt<P>
// GPT2-NEXT: lowered.call @layernorm_f32(@decode.header.e, @w.layers.0.attn_norm, @w.layers.0.attn_norm.bias) -> (@decode.layers.0.h)
// GPT2-NEXT: lowered.call @gemv_bias_f32(@decode.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.bq) -> (@decode.layers.0.q) {N = 64 : i64, K = 64 : i64
// GPT2:      lowered.call @attention_f32(@decode.layers.0.q, @kv.layers.0.k, @kv.layers.0.v) -> (@decode.layers.0.a) {T = 1 : i64, P = #lowered.rt<P>, H = 4 : i64, KV = 4 : i64, D = 16 : i64
// GPT2:      lowered.call @gelu_tanh_f32(
// GPT2:      lowered.call @gemv_f32(@decode.footer.h, @w.embed) -> (@decode.footer.logits) {N = 256 : i64, K = 64 : i64
