// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-views --plan-layout | filecheck %s
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-decode{max-context=16} --fuse-qkv --plan-views --plan-layout | filecheck %s --check-prefix=GPT2
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-views{kv=false} --plan-layout | filecheck %s --check-prefix=OFF
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-views --plan-layout | sed -e 's/ offset 0 + P \* 128 size 128$/ offset 0 size 128/' | ckir-opt --verify-diagnostics | filecheck %s --check-prefix=LIE
// RUN: ckir-opt %s --split-input-file --plan-views | filecheck %s --check-prefix=HAND

// The KV append as views: the k (after RoPE, in place) and v of every layer become
// views of the layer's caches at row P, the kv_store copy goes, in prefill and decode.
// CHECK:      lowered.program @prefill mode "prefill" max_context 16 attributes {views = {copies = 4 : i64, inplace = 6 : i64}} {
// CHECK:      lowered.view @prefill.layers.0.k of @kv.layers.0.k offset 0 + P * 128 : !lowered.buf<[16, 32], f32>
// CHECK-NEXT: lowered.view @prefill.layers.0.v of @kv.layers.0.v offset 0 + P * 128 : !lowered.buf<[16, 32], f32>
// CHECK-NOT:  kv_store
// CHECK:      lowered.call @gemm_f32(@prefill.layers.0.h, @w.layers.0.attn.wk) -> (@prefill.layers.0.k)
// CHECK-NEXT: lowered.call @gemm_f32(@prefill.layers.0.h, @w.layers.0.attn.wv) -> (@prefill.layers.0.v)
// CHECK-NEXT: lowered.call @rope_f32() -> (@prefill.layers.0.q, @prefill.layers.0.k)
// CHECK-NEXT: lowered.call @attention_f32(@prefill.layers.0.q, @kv.layers.0.k, @kv.layers.0.v) -> (@prefill.layers.0.a)
// CHECK:      lowered.program @decode mode "decode" max_context 16 attributes {views = {copies = 4 : i64, inplace = 6 : i64}} {
// CHECK:      lowered.view @decode.layers.1.v of @kv.layers.1.v offset 0 + P * 128 : !lowered.buf<[1, 32], f32>
// CHECK-NOT:  kv_store
// CHECK:      layout.view @prefill.layers.0.k of @kv.layers.0.k offset 0 + P * 128 size 2048
// CHECK:      layout.view @decode.layers.0.k of @kv.layers.0.k offset 0 + P * 128 size 128
// CHECK:      layout.totals {{{.*}}copies_removed = 8 : i64{{.*}}saved.views = 8704 : i64

// GPT-2 with --fuse-qkv: the fused projection writes k and v (row-compatible: each
// its own [T, KVD] rows) straight into the caches.
// GPT2:      attributes {fused = {qkv = 2 : i64}, views = {copies = 4 : i64, inplace = {{[0-9]+}} : i64}} {
// GPT2:      lowered.view @decode.layers.0.k of @kv.layers.0.k offset 0 + P * 256 : !lowered.buf<[1, 64], f32>
// GPT2:      lowered.call @gemv_qkv_bias_f32(@decode.layers.0.h, {{.*}}) -> (@decode.layers.0.q, @decode.layers.0.k, @decode.layers.0.v)
// GPT2-NOT:  kv_store

// kv=false: the copies stay.
// OFF:      attributes {views = {copies = 0 : i64, inplace = 6 : i64}}
// OFF:      lowered.call @kv_store_f32
// OFF:      copies_removed = 0 : i64

// A plan that drops the run-time row of a view the program has is rejected.
// LIE: layout.view @decode.layers.0.k has run-time row offset none but view @decode.layers.0.k of lowered.program @decode has + P * 128

// Hand-written: each store whose copy is not exact keeps its copy.
// HAND-LABEL: lowered.model @exact
// HAND:       attributes {views = {copies = 2 : i64, inplace = 0 : i64}}
// HAND:       lowered.view @p.k of @kv.k offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
// HAND-NEXT:  lowered.view @p.v of @kv.v offset 0 + P * 16 : !lowered.buf<[1, 4], f32>
// HAND-NOT:   kv_store
lowered.model @exact {
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
  lowered.buffer @w weight : !lowered.buf<[4, 4], f32> {source = "w"}
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.buffer @kv.v kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @p mode "decode" max_context 8 {
    lowered.buffer @p.x activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.k activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.v activation : !lowered.buf<[1, 4], f32>
    lowered.call @gemv_f32(@p.x, @w) -> (@p.k) {N = 4 : i64, K = 4 : i64}
    lowered.call @gemv_f32(@p.x, @w) -> (@p.v) {N = 4 : i64, K = 4 : i64}
    lowered.call @kv_store_f32(@p.k, @p.v) -> (@kv.k, @kv.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 4 : i64}
  }
}

// -----

// k is read after the store (the cache rows would be read back through the view,
// but a later write could change the cache): the copy stays.
// HAND-LABEL: lowered.model @read_after
// HAND:       attributes {views = {copies = 0 : i64, inplace = 0 : i64}}
// HAND:       lowered.call @kv_store_f32
lowered.model @read_after {
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
  lowered.buffer @w weight : !lowered.buf<[4, 4], f32> {source = "w"}
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.buffer @kv.v kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @p mode "decode" max_context 8 {
    lowered.buffer @p.x activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.k activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.v activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.y activation : !lowered.buf<[1, 4], f32>
    lowered.call @gemv_f32(@p.x, @w) -> (@p.k) {N = 4 : i64, K = 4 : i64}
    lowered.call @gemv_f32(@p.x, @w) -> (@p.v) {N = 4 : i64, K = 4 : i64}
    lowered.call @kv_store_f32(@p.k, @p.v) -> (@kv.k, @kv.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 4 : i64}
    lowered.call @gemv_f32(@p.k, @w) -> (@p.y) {N = 4 : i64, K = 4 : i64}
  }
}

// -----

// The producer writes half a row (N = 2 of KVD = 4): the view would leave cache
// values the copy overwrites; the copy stays.
// HAND-LABEL: lowered.model @half_row
// HAND:       attributes {views = {copies = 0 : i64, inplace = 0 : i64}}
// HAND:       lowered.call @kv_store_f32
lowered.model @half_row {
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
  lowered.buffer @w weight : !lowered.buf<[4, 4], f32> {source = "w"}
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.buffer @kv.v kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @p mode "decode" max_context 8 {
    lowered.buffer @p.x activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.k activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.v activation : !lowered.buf<[1, 4], f32>
    lowered.call @gemv_f32(@p.x, @w) -> (@p.k) {N = 2 : i64, K = 4 : i64}
    lowered.call @gemv_f32(@p.x, @w) -> (@p.v) {N = 4 : i64, K = 4 : i64}
    lowered.call @kv_store_f32(@p.k, @p.v) -> (@kv.k, @kv.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 4 : i64}
  }
}

// -----

// A cache is read between the producer and the store (it would see the new row
// early): the copy stays.
// HAND-LABEL: lowered.model @cache_read
// HAND:       attributes {views = {copies = 0 : i64, inplace = 0 : i64}}
// HAND:       lowered.call @kv_store_f32
lowered.model @cache_read {
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @kv_store_f32 op "kv_store" c "ckir_kv_store_f32" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite f32 extent "(P+T)*KVD", vcache: readwrite f32 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 1"]
  lowered.buffer @w weight : !lowered.buf<[4, 4], f32> {source = "w"}
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 4], f32>
  lowered.buffer @kv.v kv_cache : !lowered.buf<[8, 4], f32>
  lowered.program @p mode "decode" max_context 8 {
    lowered.buffer @p.x activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.k activation : !lowered.buf<[1, 4], f32>
    lowered.buffer @p.v activation : !lowered.buf<[1, 4], f32>
    lowered.call @gemv_f32(@p.x, @w) -> (@p.k) {N = 4 : i64, K = 4 : i64}
    lowered.call @gemv_f32(@kv.k, @w) -> (@p.v) {N = 4 : i64, K = 4 : i64}
    lowered.call @kv_store_f32(@p.k, @p.v) -> (@kv.k, @kv.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 4 : i64}
  }
}

// -----

// A Q8_0 cache: the store quantizes, it is no copy; it stays.
// HAND-LABEL: lowered.model @q8
// HAND:       attributes {views = {copies = 0 : i64, inplace = 0 : i64}}
// HAND:       lowered.call @kv_store_q8_0
lowered.model @q8 {
  lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32 extent "K", w: read f32 extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
  lowered.kernel @kv_store_q8_0 op "kv_store" c "ckir_kv_store_q8_0" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite q8_0 extent "(P+T)*KVD", vcache: readwrite q8_0 extent "(P+T)*KVD") params (T: i64, P: i64, KVD: i64) constraints ["T >= 1", "P >= 0", "KVD >= 32", "KVD % 32 == 0"]
  lowered.buffer @w weight : !lowered.buf<[32, 32], f32> {source = "w"}
  lowered.buffer @kv.k kv_cache : !lowered.buf<[8, 32], q8_0>
  lowered.buffer @kv.v kv_cache : !lowered.buf<[8, 32], q8_0>
  lowered.program @p mode "decode" max_context 8 {
    lowered.buffer @p.x activation : !lowered.buf<[1, 32], f32>
    lowered.buffer @p.k activation : !lowered.buf<[1, 32], f32>
    lowered.buffer @p.v activation : !lowered.buf<[1, 32], f32>
    lowered.call @gemv_f32(@p.x, @w) -> (@p.k) {N = 32 : i64, K = 32 : i64}
    lowered.call @gemv_f32(@p.x, @w) -> (@p.v) {N = 32 : i64, K = 32 : i64}
    lowered.call @kv_store_q8_0(@p.k, @p.v) -> (@kv.k, @kv.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 32 : i64}
  }
}
