// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// Every lowered op, type and attribute (kernel declarations, plain and fused
// origins, quoted strings in them): a one-layer model lowered for prefill and
// decode (E = 64, H = 4, KV = 2, D = 16, V = 256, max_context 8).

lowered.model @tiny {
  lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
  lowered.kernel @attention_f32 op "attention" c "ckir_attention_f32" modes ["prefill", "decode", "backward"] (q: read f32, kcache: read f32, vcache: read f32, out: write f32) params (T: i64, P: i64, H: i64, KV: i64, D: i64) constraints ["T >= 1", "P >= 0", "H >= 1", "KV >= 1", "H % KV == 0", "D >= 1", "D <= 256"]
  lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32, table: read f32, out: write f32) params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
  lowered.kernel @gemm_bias_f32 op "linear" c "ckir_gemm_bias_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, b: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
  lowered.kernel @gemm_f32 op "linear" c "ckir_gemm_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32, v: read f32, kcache: readwrite f32, vcache: readwrite f32) params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
  lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
  lowered.kernel @rope_f32 op "rope" c "ckir_rope_f32" modes ["prefill", "decode", "backward"] (q: readwrite f32, k: readwrite f32) params (T: i64, H: i64, KV: i64, D: i64, P: i64, theta: f32) constraints ["T >= 1", "H >= 1", "KV >= 1", "D >= 2", "D % 2 == 0", "P >= 0", "theta > 0"]
  lowered.kernel @softmax_f32 op "softmax" c "ckir_softmax_f32" modes ["prefill", "decode"] (x: read f32, out: write f32) params (rows: i64, cols: i64) constraints ["rows >= 1", "cols >= 1"]
  lowered.kernel @"my.scale" op "scale" c "my_scale" modes ["decode"] (x: readwrite f32) params (n: i64, s: f32)
  lowered.buffer @"w.embed" weight : !lowered.buf<[256, 64], f32> {source = "embed"}
  lowered.buffer @"w.layers.0.attn_norm" weight : !lowered.buf<[64], f32> {source = "layers.0.attn_norm"}
  lowered.buffer @"w.layers.0.wq" weight : !lowered.buf<[64, 64], f32> {source = "layers.0.wq"}
  lowered.buffer @"w.layers.0.bq" weight : !lowered.buf<[64], f32> {source = "layers.0.bq"}
  lowered.buffer @"w.layers.0.wk" weight : !lowered.buf<[32, 64], q8_0> {source = "layers.0.wk"}
  lowered.buffer @"w.layers.0.wv" weight : !lowered.buf<[32, 64], q4_0> {source = "layers.0.wv"}
  lowered.buffer @"w.layers.0.wo" weight : !lowered.buf<[64, 64], q4_1> {source = "layers.0.wo"}
  lowered.buffer @"w.layers.0.w_up" weight : !lowered.buf<[128, 256], q4_k> {source = "layers.0.w_up"}
  lowered.buffer @"w.layers.0.w_gate" weight : !lowered.buf<[128, 64], bf16> {source = "layers.0.w_gate"}
  lowered.buffer @"w.layers.0.w_down" weight : !lowered.buf<[64, 128], f16> {source = "layers.0.w_down"}
  lowered.buffer @"kv.0.k" kv_cache : !lowered.buf<[8, 32], f32>
  lowered.buffer @"kv.0.v" kv_cache : !lowered.buf<[8, 32], f32>
  lowered.buffer @"grad.embed" grad : !lowered.buf<[256, 64], f32>
  lowered.buffer @"adam.m.embed" optimizer_state : !lowered.buf<[256, 64], f32>
  lowered.buffer @"adam.step" optimizer_state : !lowered.buf<[1], i64>
  lowered.program @prefill mode "prefill" max_context 8 {
    lowered.buffer @"prefill.tokens" io : !lowered.buf<[8], i32> {source = "input"}
    lowered.buffer @"prefill.x" activation : !lowered.buf<[8, 64], f32>
    lowered.buffer @"prefill.0.h" activation : !lowered.buf<[8, 64], f32>
    lowered.buffer @"prefill.0.qkv" activation : !lowered.buf<[8, 128], f32>
    lowered.view @"prefill.0.q" of @"prefill.0.qkv" offset 0 : !lowered.buf<[8, 64], f32>
    lowered.view @"prefill.0.k" of @"prefill.0.qkv" offset 2048 : !lowered.buf<[8, 32], f32>
    lowered.view @"prefill.0.v" of @"prefill.0.qkv" offset 3072 : !lowered.buf<[8, 32], f32>
    lowered.buffer @"prefill.0.o" activation : !lowered.buf<[8, 64], f32>
    lowered.buffer @"prefill.scratch" scratch : !lowered.buf<[512], f32>
    lowered.buffer @"prefill.logits" io : !lowered.buf<[8, 256], f32> {source = "output"}
    lowered.call @embed_f32(@"prefill.tokens", @"w.embed") -> (@"prefill.x") {T = #lowered.rt<T>, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
    lowered.call @rmsnorm_f32(@"prefill.x", @"w.layers.0.attn_norm") -> (@"prefill.0.h") {T = #lowered.rt<T>, E = 64 : i64, eps = 1.0e-05 : f64}
    lowered.call @gemm_bias_f32(@"prefill.0.h", @"w.layers.0.wq", @"w.layers.0.bq") -> (@"prefill.0.q") {M = #lowered.rt<T>, N = 64 : i64, K = 64 : i64, origin = #lowered.origin<scope "layers.0", op "graph.linear">}
    lowered.call @rope_f32() -> (@"prefill.0.q", @"prefill.0.k") {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.0e+04 : f64}
    lowered.call @kv_store_f32(@"prefill.0.k", @"prefill.0.v") -> (@"kv.0.k", @"kv.0.v") {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 32 : i64}
    lowered.call @attention_f32(@"prefill.0.q", @"kv.0.k", @"kv.0.v") -> (@"prefill.0.o") {T = #lowered.rt<T>, P = #lowered.rt<P>, H = 4 : i64, KV = 2 : i64, D = 16 : i64}
    lowered.call @add_f32(@"prefill.x", @"prefill.0.o") -> (@"prefill.x") {n = #lowered.rt<T*64>, origin = #lowered.origin<scope "layers.0", fusion "fuse-\"x\"", of [#lowered.origin<scope "layers.0", op "graph.add">, #lowered.origin<scope "layers.1", op "graph.add">]>}
    lowered.call @softmax_f32(@"prefill.x") -> (@"prefill.scratch") {rows = #lowered.rt<PT>, cols = 64 : i64}
    lowered.call @gemm_f32(@"prefill.x", @"w.embed") -> (@"prefill.logits") {M = #lowered.rt<T>, N = 256 : i64, K = 64 : i64}
  }
  lowered.program @decode mode "decode" max_context 8 {
    lowered.buffer @"decode.tokens" io : !lowered.buf<[1], i32> {source = "input"}
    lowered.buffer @"decode.x" activation : !lowered.buf<[1, 64], f32>
    lowered.buffer @"decode.logits" io : !lowered.buf<[1, 256], f32> {source = "output"}
    lowered.call @embed_f32(@"decode.tokens", @"w.embed") -> (@"decode.x") {T = 1 : i64, E = 64 : i64}
    lowered.call @gemv_f32(@"decode.x", @"w.embed") -> (@"decode.logits") {N = 256 : i64, K = 64 : i64} attributes {hint = "tied lm_head"}
  }
}

// An empty lowered model.
lowered.model @empty {
}

// The printed form (identical for both RUN lines):
// CHECK: builtin.module {
// CHECK-NEXT: lowered.model @tiny {
// CHECK-NEXT: lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
// CHECK-NEXT: lowered.kernel @attention_f32 op "attention" c "ckir_attention_f32" modes ["prefill", "decode", "backward"] (q: read f32, kcache: read f32, vcache: read f32, out: write f32) params (T: i64, P: i64, H: i64, KV: i64, D: i64) constraints ["T >= 1", "P >= 0", "H >= 1", "KV >= 1", "H % KV == 0", "D >= 1", "D <= 256"]
// CHECK-NEXT: lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode", "backward"] (tokens: read i32, table: read f32, out: write f32) params (T: i64, E: i64) constraints ["T >= 1", "E >= 1"]
// CHECK-NEXT: lowered.kernel @gemm_bias_f32 op "linear" c "ckir_gemm_bias_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, b: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
// CHECK-NEXT: lowered.kernel @gemm_f32 op "linear" c "ckir_gemm_f32" modes ["prefill", "backward"] (x: read f32, w: read f32, y: write f32) params (M: i64, N: i64, K: i64) constraints ["M >= 1", "N >= 1", "K >= 1"]
// CHECK-NEXT: lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
// CHECK-NEXT: lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32, v: read f32, kcache: readwrite f32, vcache: readwrite f32) params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
// CHECK-NEXT: lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
// CHECK-NEXT: lowered.kernel @rope_f32 op "rope" c "ckir_rope_f32" modes ["prefill", "decode", "backward"] (q: readwrite f32, k: readwrite f32) params (T: i64, H: i64, KV: i64, D: i64, P: i64, theta: f32) constraints ["T >= 1", "H >= 1", "KV >= 1", "D >= 2", "D % 2 == 0", "P >= 0", "theta > 0"]
// CHECK-NEXT: lowered.kernel @softmax_f32 op "softmax" c "ckir_softmax_f32" modes ["prefill", "decode"] (x: read f32, out: write f32) params (rows: i64, cols: i64) constraints ["rows >= 1", "cols >= 1"]
// CHECK-NEXT: lowered.kernel @my.scale op "scale" c "my_scale" modes ["decode"] (x: readwrite f32) params (n: i64, s: f32)
// CHECK-NEXT: lowered.buffer @w.embed weight : !lowered.buf<[256, 64], f32> {source = "embed"}
// CHECK-NEXT: lowered.buffer @w.layers.0.attn_norm weight : !lowered.buf<[64], f32> {source = "layers.0.attn_norm"}
// CHECK-NEXT: lowered.buffer @w.layers.0.wq weight : !lowered.buf<[64, 64], f32> {source = "layers.0.wq"}
// CHECK-NEXT: lowered.buffer @w.layers.0.bq weight : !lowered.buf<[64], f32> {source = "layers.0.bq"}
// CHECK-NEXT: lowered.buffer @w.layers.0.wk weight : !lowered.buf<[32, 64], q8_0> {source = "layers.0.wk"}
// CHECK-NEXT: lowered.buffer @w.layers.0.wv weight : !lowered.buf<[32, 64], q4_0> {source = "layers.0.wv"}
// CHECK-NEXT: lowered.buffer @w.layers.0.wo weight : !lowered.buf<[64, 64], q4_1> {source = "layers.0.wo"}
// CHECK-NEXT: lowered.buffer @w.layers.0.w_up weight : !lowered.buf<[128, 256], q4_k> {source = "layers.0.w_up"}
// CHECK-NEXT: lowered.buffer @w.layers.0.w_gate weight : !lowered.buf<[128, 64], bf16> {source = "layers.0.w_gate"}
// CHECK-NEXT: lowered.buffer @w.layers.0.w_down weight : !lowered.buf<[64, 128], f16> {source = "layers.0.w_down"}
// CHECK-NEXT: lowered.buffer @kv.0.k kv_cache : !lowered.buf<[8, 32], f32>
// CHECK-NEXT: lowered.buffer @kv.0.v kv_cache : !lowered.buf<[8, 32], f32>
// CHECK-NEXT: lowered.buffer @grad.embed grad : !lowered.buf<[256, 64], f32>
// CHECK-NEXT: lowered.buffer @adam.m.embed optimizer_state : !lowered.buf<[256, 64], f32>
// CHECK-NEXT: lowered.buffer @adam.step optimizer_state : !lowered.buf<[1], i64>
// CHECK-NEXT: lowered.program @prefill mode "prefill" max_context 8 {
// CHECK-NEXT: lowered.buffer @prefill.tokens io : !lowered.buf<[8], i32> {source = "input"}
// CHECK-NEXT: lowered.buffer @prefill.x activation : !lowered.buf<[8, 64], f32>
// CHECK-NEXT: lowered.buffer @prefill.0.h activation : !lowered.buf<[8, 64], f32>
// CHECK-NEXT: lowered.buffer @prefill.0.qkv activation : !lowered.buf<[8, 128], f32>
// CHECK-NEXT: lowered.view @prefill.0.q of @prefill.0.qkv offset 0 : !lowered.buf<[8, 64], f32>
// CHECK-NEXT: lowered.view @prefill.0.k of @prefill.0.qkv offset 2048 : !lowered.buf<[8, 32], f32>
// CHECK-NEXT: lowered.view @prefill.0.v of @prefill.0.qkv offset 3072 : !lowered.buf<[8, 32], f32>
// CHECK-NEXT: lowered.buffer @prefill.0.o activation : !lowered.buf<[8, 64], f32>
// CHECK-NEXT: lowered.buffer @prefill.scratch scratch : !lowered.buf<[512], f32>
// CHECK-NEXT: lowered.buffer @prefill.logits io : !lowered.buf<[8, 256], f32> {source = "output"}
// CHECK-NEXT: lowered.call @embed_f32(@prefill.tokens, @w.embed) -> (@prefill.x) {T = #lowered.rt<T>, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
// CHECK-NEXT: lowered.call @rmsnorm_f32(@prefill.x, @w.layers.0.attn_norm) -> (@prefill.0.h) {T = #lowered.rt<T>, E = 64 : i64, eps = 1.000000e-05 : f64}
// CHECK-NEXT: lowered.call @gemm_bias_f32(@prefill.0.h, @w.layers.0.wq, @w.layers.0.bq) -> (@prefill.0.q) {M = #lowered.rt<T>, N = 64 : i64, K = 64 : i64, origin = #lowered.origin<scope "layers.0", op "graph.linear">}
// CHECK-NEXT: lowered.call @rope_f32() -> (@prefill.0.q, @prefill.0.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+04 : f64}
// CHECK-NEXT: lowered.call @kv_store_f32(@prefill.0.k, @prefill.0.v) -> (@kv.0.k, @kv.0.v) {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 32 : i64}
// CHECK-NEXT: lowered.call @attention_f32(@prefill.0.q, @kv.0.k, @kv.0.v) -> (@prefill.0.o) {T = #lowered.rt<T>, P = #lowered.rt<P>, H = 4 : i64, KV = 2 : i64, D = 16 : i64}
// CHECK-NEXT: lowered.call @add_f32(@prefill.x, @prefill.0.o) -> (@prefill.x) {n = #lowered.rt<T*64>, origin = #lowered.origin<scope "layers.0", fusion "fuse-\22x\22", of [#lowered.origin<scope "layers.0", op "graph.add">, #lowered.origin<scope "layers.1", op "graph.add">]>}
// CHECK-NEXT: lowered.call @softmax_f32(@prefill.x) -> (@prefill.scratch) {rows = #lowered.rt<PT>, cols = 64 : i64}
// CHECK-NEXT: lowered.call @gemm_f32(@prefill.x, @w.embed) -> (@prefill.logits) {M = #lowered.rt<T>, N = 256 : i64, K = 64 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: lowered.program @decode mode "decode" max_context 8 {
// CHECK-NEXT: lowered.buffer @decode.tokens io : !lowered.buf<[1], i32> {source = "input"}
// CHECK-NEXT: lowered.buffer @decode.x activation : !lowered.buf<[1, 64], f32>
// CHECK-NEXT: lowered.buffer @decode.logits io : !lowered.buf<[1, 256], f32> {source = "output"}
// CHECK-NEXT: lowered.call @embed_f32(@decode.tokens, @w.embed) -> (@decode.x) {T = 1 : i64, E = 64 : i64}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.x, @w.embed) -> (@decode.logits) {N = 256 : i64, K = 64 : i64} attributes {hint = "tied lm_head"}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: lowered.model @empty {
// CHECK-NEXT: }
// CHECK-NEXT: }
