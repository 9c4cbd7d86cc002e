// tiny llama with head_dim 32 (H = 2, KV = 1): Q8_0 blocks along head_dim fit.
// RUN: sed -e 's/D = 16, E = 64, H = 4, I = 172, KV = 2/D = 32, E = 64, H = 2, I = 172, KV = 1/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --kv-cache-dtype{dtype=q8_0} --plan-layout | filecheck %s
// RUN: sed -e 's/D = 16, E = 64, H = 4, I = 172, KV = 2/D = 32, E = 64, H = 2, I = 172, KV = 1/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --plan-layout | filecheck %s --check-prefix=F32
// RUN: sed -e 's/D = 16, E = 64, H = 4, I = 172, KV = 2/D = 32, E = 64, H = 2, I = 172, KV = 1/' %inputs/tiny_llama.mlir | ckir-opt --lower-decode{max-context=16} --kv-cache-dtype{dtype=f32} | filecheck %s --check-prefix=NOOP
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --kv-cache-dtype{dtype=q8_0} 2>&1 | filecheck %s --check-prefix=HEADDIM
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --plan-layout --kv-cache-dtype 2>&1 | filecheck %s --check-prefix=PLANNED
// RUN: not ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --kv-cache-dtype{dtype=q4_0} 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: sed -e 's/E = 8, H = 2, KV = 1, D = 4,/E = 64, H = 2, KV = 1, D = 32,/' %S/lower-attention-ext.mlir | not ckir-opt --lower-decode{max-context=8} --kv-cache-dtype 2>&1 | filecheck %s --check-prefix=EXT

// The q8_0 kernels replace the f32 ones (the f32 declarations go), sorted by name.
// CHECK:     lowered.kernel @attention_q8_0 op "attention" c "ckir_attention_q8_0" modes ["prefill", "decode"] (q: read f32 extent "T*H*D", kcache: read q8_0 extent "(P+T)*KV*D", vcache: read q8_0 extent "(P+T)*KV*D", out: write f32 extent "T*H*D")
// CHECK-NOT: lowered.kernel @attention_f32
// CHECK:     lowered.kernel @kv_store_q8_0 op "kv_store" c "ckir_kv_store_q8_0" modes ["prefill", "decode"] (k: read f32 extent "T*KVD", v: read f32 extent "T*KVD", kcache: readwrite q8_0 extent "(P+T)*KVD", vcache: readwrite q8_0 extent "(P+T)*KVD")
// CHECK-NOT: lowered.kernel @kv_store_f32
// The caches: [max-context, KV*D] in q8_0, one row = 1 block of 34 bytes.
// CHECK:      lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 32], q8_0>
// CHECK-NEXT: lowered.buffer @kv.layers.0.v kv_cache : !lowered.buf<[16, 32], q8_0>
// CHECK-NEXT: lowered.buffer @kv.layers.1.k kv_cache : !lowered.buf<[16, 32], q8_0>
// CHECK-NEXT: lowered.buffer @kv.layers.1.v kv_cache : !lowered.buf<[16, 32], q8_0>
// Prefill and decode both store and attend through the quantized caches.
// CHECK:      lowered.program @prefill
// CHECK:      lowered.call @kv_store_q8_0(@prefill.layers.0.k, @prefill.layers.0.v) -> (@kv.layers.0.k, @kv.layers.0.v) {T = #lowered.rt<T>, P = #lowered.rt<P>, KVD = 32 : i64, origin = #lowered.origin<scope "layers.0", op "graph.attention">}
// CHECK-NEXT: lowered.call @attention_q8_0(@prefill.layers.0.q, @kv.layers.0.k, @kv.layers.0.v) -> (@prefill.layers.0.a) {T = #lowered.rt<T>, P = #lowered.rt<P>, H = 2 : i64, KV = 1 : i64, D = 32 : i64, origin = #lowered.origin<scope "layers.0", op "graph.attention">}
// CHECK:      lowered.program @decode
// CHECK:      lowered.call @kv_store_q8_0(@decode.layers.1.k, @decode.layers.1.v) -> (@kv.layers.1.k, @kv.layers.1.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 32 : i64
// CHECK-NEXT: lowered.call @attention_q8_0(@decode.layers.1.q, @kv.layers.1.k, @kv.layers.1.v) -> (@decode.layers.1.a) {T = 1 : i64, P = #lowered.rt<P>, H = 2 : i64, KV = 1 : i64, D = 32 : i64
// CHECK-NOT:  @attention_f32
// KV bytes: 4 caches x 16 rows x 34 bytes = 2176, against 4 x 16 x 32 x 4 = 8192 in f32.
// CHECK:      layout.slot @kv.layers.0.k offset 0 size 544 role kv_cache
// CHECK:      layout.totals {{{.*}}kv_cache = 2176 : i64
// F32:        layout.totals {{{.*}}kv_cache = 8192 : i64

// NOOP:     lowered.buffer @kv.layers.0.k kv_cache : !lowered.buf<[16, 32], f32>
// NOOP:     lowered.call @attention_f32

// HEADDIM: error: --kv-dtype q8_0: decode layers.0: graph.attention: head_dim D = 16 is not a multiple of 32 (q8_0 blocks of 32 run along head_dim); use --kv-dtype f32
// PLANNED: error: kv-cache-dtype: the module already has a layout.plan; run --kv-cache-dtype before --plan-layout
// UNKNOWN: error: kv-cache-dtype: unknown dtype 'q4_0'; use f32 or q8_0
// EXT: error: --kv-dtype q8_0: decode layers.0: graph.attention: no kernel runs attention_ext over a q8_0 KV cache (only plain attention does: no scale_dim, softcap or window); use --kv-dtype f32
