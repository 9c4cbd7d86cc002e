// tiny llama with head_dim 32 (H = 2, KV = 1): Q8_0 blocks along head_dim fit; then
// head_dim 16 (padded heads) and an attention_ext (scale_dim, softcap, window).
// RUN: sed -e 's/D = 16, E = 64, H = 4, I = 172, KV = 2/D = 32, E = 64, H = 2, I = 172, KV = 1/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --kv-cache-dtype{dtype=q8_0} --plan-layout | filecheck %s
// RUN: sed -e 's/D = 16, E = 64, H = 4, I = 172, KV = 2/D = 32, E = 64, H = 2, I = 172, KV = 1/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout | filecheck %s --check-prefix=F32
// RUN: sed -e 's/D = 16, E = 64, H = 4, I = 172, KV = 2/D = 32, E = 64, H = 2, I = 172, KV = 1/' %inputs/tiny_llama.mlir | ckir-opt --lower-decode{max-context=16} --kv-cache-dtype{dtype=f32} | filecheck %s --check-prefix=NOOP
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --lower-decode{max-context=16} --kv-cache-dtype{dtype=q8_0} --plan-layout | filecheck %s --check-prefix=HEADDIM
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout --kv-cache-dtype 2>&1 | filecheck %s --check-prefix=PLANNED
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --kv-cache-dtype{dtype=q4_0} 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: ckir-opt %S/lower-attention-ext.mlir --lower-prefill{max-context=8} --lower-decode{max-context=8} --kv-cache-dtype --plan-layout | filecheck %s --check-prefix=EXT

// The q8_0 kernels replace the f32 ones (the f32 declarations go), sorted by name.
// CHECK:     lowered.kernel @attention_q8_0 op "attention" c "ckir_attention_q8_0" modes ["prefill", "decode"] (q: read f32 extent "T*H*D", kcache: read q8_0 extent "(P+T)*KV*DB*32", vcache: read q8_0 extent "(P+T)*KV*DB*32", out: write f32 extent "T*H*D") params (T: i64, P: i64, H: i64, KV: i64, D: i64, DB: i64)
// CHECK-NOT: lowered.kernel @attention_f32
// CHECK:     lowered.kernel @kv_store_q8_0 op "kv_store" c "ckir_kv_store_q8_0" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite q8_0 extent "(P+T)*(KVD/D)*DB*32", vcache: readwrite q8_0 extent "(P+T)*(KVD/D)*DB*32") params (T: i64, P: i64, KVD: i64, D: i64, DB: i64)
// CHECK-NOT: lowered.kernel @kv_store_f32
// The caches: [max-context, KV*D] in q8_0, one row = 1 block of 34 bytes.
// CHECK:      lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 32], q8_0>
// CHECK-NEXT: lowered.buffer @kv.layers.0.v kv_cache : !lowered.buf<[16, 32], q8_0>
// CHECK-NEXT: lowered.buffer @kv.layers.1.k kv_cache : !lowered.buf<[16, 32], q8_0>
// CHECK-NEXT: lowered.buffer @kv.layers.1.v kv_cache : !lowered.buf<[16, 32], q8_0>
// Prefill and decode both store and attend through the quantized caches.
// CHECK:      lowered.program @prefill
// CHECK:      lowered.call @kv_store_q8_0(@prefill.layers.0.k, @prefill.layers.0.v) -> (@kv.layers.0.k, @kv.layers.0.v) {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 32 : i64, D = 32 : i64, DB = 1 : i64, origin = #lowered.origin<scope "layers.0", op "graph.attention">}
// CHECK-NEXT: lowered.call @attention_q8_0(@prefill.layers.0.q, @kv.layers.0.k, @kv.layers.0.v) -> (@prefill.layers.0.a) {T = #lowered.rt<T>, P = #lowered.rt<P>, H = 2 : i64, KV = 1 : i64, D = 32 : i64, DB = 1 : i64, origin = #lowered.origin<scope "layers.0", op "graph.attention">}
// CHECK:      lowered.program @decode
// CHECK:      lowered.call @kv_store_q8_0(@decode.layers.1.k, @decode.layers.1.v) -> (@kv.layers.1.k, @kv.layers.1.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 32 : i64, D = 32 : i64, DB = 1 : i64
// CHECK-NEXT: lowered.call @attention_q8_0(@decode.layers.1.q, @kv.layers.1.k, @kv.layers.1.v) -> (@decode.layers.1.a) {T = 1 : i64, P = #lowered.rt<P>, H = 2 : i64, KV = 1 : i64, D = 32 : i64, DB = 1 : i64
// CHECK-NOT:  @attention_f32
// KV bytes: 4 caches x 16 rows x 34 bytes = 2176, against 4 x 16 x 32 x 4 = 8192 in f32.
// CHECK:      layout.slot @kv.layers.0.k offset 0 size 544 role kv_cache
// CHECK:      layout.totals {{{.*}}kv_cache = 2176 : i64
// F32:        layout.totals {{{.*}}kv_cache = 8192 : i64

// NOOP:     lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 32], f32>
// NOOP:     lowered.call @attention_f32

// head_dim 16 (H = 4, KV = 2): each head's 16 values pad to one block of 32, so a cache
// row is 2 blocks ([16, 64] in q8_0), and the calls take D = 16, DB = 1.
// HEADDIM:      lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 64], q8_0>
// HEADDIM:      lowered.call @kv_store_q8_0(@prefill.layers.0.k, @prefill.layers.0.v) -> (@kv.layers.0.k, @kv.layers.0.v) {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 32 : i64, D = 16 : i64, DB = 1 : i64
// HEADDIM-NEXT: lowered.call @attention_q8_0(@prefill.layers.0.q, @kv.layers.0.k, @kv.layers.0.v) -> (@prefill.layers.0.a) {T = #lowered.rt<T>, P = #lowered.rt<P>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, DB = 1 : i64
// The padding is counted: 4 caches x 16 rows x 2 blocks x 34 bytes = 4352 (f32: 8192).
// HEADDIM:      layout.slot @kv.layers.0.k offset 0 size 1088 role kv_cache
// HEADDIM:      layout.totals {{{.*}}kv_cache = 4352 : i64
// PLANNED: error: kv-cache-dtype: the module already has a layout.plan; run --kv-cache-dtype before --plan-layout
// UNKNOWN: error: kv-cache-dtype: unknown dtype 'q4_0'; use f32 or q8_0
// scale_dim, softcap and a window: attention_ext_q8_0 with the f32 kernel's params
// (layer 1 sees every key: window 0), head_dim 4 padded to a block.
// EXT:      lowered.kernel @attention_ext_q8_0 op "attention_ext" c "ckir_attention_ext_q8_0" modes ["prefill", "decode"]
// EXT-NOT:  lowered.kernel @attention_ext_f32
// EXT:      lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[8, 64], q8_0>
// EXT:      lowered.program @prefill
// EXT:      lowered.call @attention_ext_q8_0(@prefill.header.x, @kv.layers.0.k, @kv.layers.0.v) -> (@prefill.layers.0.a) {T = #lowered.rt<T>, P = #lowered.rt<P>, H = 2 : i64, KV = 2 : i64, D = 4 : i64, DB = 1 : i64, scale = 0.22360679774997896 : f64, softcap = 5.000000e+00 : f64, window = 3 : i64
// EXT:      lowered.program @decode
// EXT:      lowered.call @kv_store_q8_0(@decode.header.x, @decode.header.x) -> (@kv.layers.0.k, @kv.layers.0.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 8 : i64, D = 4 : i64, DB = 1 : i64
// EXT-NEXT: lowered.call @attention_ext_q8_0(@decode.header.x, @kv.layers.0.k, @kv.layers.0.v) -> (@decode.layers.0.a) {T = 1 : i64, P = #lowered.rt<P>, H = 2 : i64, KV = 2 : i64, D = 4 : i64, DB = 1 : i64, scale = 0.22360679774997896 : f64, softcap = 5.000000e+00 : f64, window = 3 : i64
// EXT:      lowered.call @attention_ext_q8_0(@decode.layers.0.y, @kv.layers.1.k, @kv.layers.1.v) -> (@decode.layers.1.a) {{{.*}}window = 0 : i64
// EXT-NOT:  @attention_ext_f32
