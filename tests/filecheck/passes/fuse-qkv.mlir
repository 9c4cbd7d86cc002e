// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-qkv | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --fuse-qkv | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-decode{max-context=16} --lower-prefill{max-context=16} --fuse-qkv | filecheck %s --check-prefix=BIAS
// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q4_1} --lower-decode{max-context=16} --lower-prefill{max-context=16} --fuse-qkv | filecheck %s --check-prefix=Q41
// RUN: ckir-opt %s --split-input-file --fuse-qkv | filecheck %s --check-prefix=HAND
// RUN: not ckir-opt %inputs/tiny_llama.mlir --fuse-qkv 2>&1 | filecheck %s --check-prefix=NOLOWER

// Decode: the three gemv_f32 of each layer become one gemv_qkv_f32 at the place
// of the first; q/k/v keep their (separate) buffers and their dims.
// CHECK:      lowered.program @decode mode "decode" max_context 16 attributes {fused = {qkv = 2 : i64}} {
// CHECK:      lowered.buffer @decode.layers.0.q activation : !lowered.buf<[1, 64], f32>
// CHECK-NEXT: lowered.buffer @decode.layers.0.k activation : !lowered.buf<[1, 32], f32>
// CHECK-NEXT: lowered.buffer @decode.layers.0.v activation : !lowered.buf<[1, 32], f32>
// CHECK:      lowered.call @rmsnorm_f32(@decode.header.x, @w.layers.0.attn_norm) -> (@decode.layers.0.h)
// CHECK-NEXT: lowered.call @gemv_qkv_f32(@decode.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.wk, @w.layers.0.attn.wv) -> (@decode.layers.0.q, @decode.layers.0.k, @decode.layers.0.v) {Nq = 64 : i64, Nk = 32 : i64, Nv = 32 : i64, K = 64 : i64, origin = #lowered.origin<scope "layers.0", fusion "fuse-qkv", of [#lowered.origin<scope "layers.0", op "graph.linear">, #lowered.origin<scope "layers.0", op "graph.linear">, #lowered.origin<scope "layers.0", op "graph.linear">]>}
// CHECK-NEXT: lowered.call @rope_f32() -> (@decode.layers.0.q, @decode.layers.0.k)
// The output projection and the MLP linears are not q/k/v triples: untouched.
// CHECK:      lowered.call @gemv_f32(@decode.layers.0.a, @w.layers.0.attn.wo) -> (@decode.layers.0.o)
// CHECK:      lowered.call @gemv_f32(@decode.layers.0.h2, @w.layers.0.mlp.gate) -> (@decode.layers.0.gate)
// CHECK-NEXT: lowered.call @gemv_f32(@decode.layers.0.h2, @w.layers.0.mlp.up) -> (@decode.layers.0.up)
// CHECK:      lowered.call @gemv_qkv_f32(@decode.layers.1.h, @w.layers.1.attn.wq, @w.layers.1.attn.wk, @w.layers.1.attn.wv) -> (@decode.layers.1.q, @decode.layers.1.k, @decode.layers.1.v) {Nq = 64 : i64, Nk = 32 : i64, Nv = 32 : i64, K = 64 : i64
// CHECK-NOT:  @gemv_f32(@decode.layers.{{[01]}}.h,
// CHECK:      lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits)

// Prefill: gemm_qkv_f32 with the run-time row count.
// PRE:      lowered.program @prefill mode "prefill" max_context 16 attributes {fused = {qkv = 2 : i64}} {
// PRE:      lowered.call @gemm_qkv_f32(@prefill.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.wk, @w.layers.0.attn.wv) -> (@prefill.layers.0.q, @prefill.layers.0.k, @prefill.layers.0.v) {M = #lowered.rt<T>, Nq = 64 : i64, Nk = 32 : i64, Nv = 32 : i64, K = 64 : i64
// PRE-NEXT: lowered.call @rope_f32()
// PRE-NOT:  @gemm_f32(@prefill.layers.{{[01]}}.h,

// GPT-2 (q/k/v biases): the bias variants, biases in q, k, v order after the weights.
// BIAS:      lowered.program @decode mode "decode" max_context 16 attributes {fused = {qkv = 2 : i64}} {
// BIAS:      lowered.call @gemv_qkv_bias_f32(@decode.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.wk, @w.layers.0.attn.wv, @w.layers.0.attn.bq, @w.layers.0.attn.bk, @w.layers.0.attn.bv) -> (@decode.layers.0.q, @decode.layers.0.k, @decode.layers.0.v) {Nq = 64 : i64, Nk = 64 : i64, Nv = 64 : i64, K = 64 : i64
// BIAS-NEXT: lowered.call @kv_store_f32(@decode.layers.0.k, @decode.layers.0.v)
// BIAS:      lowered.program @prefill mode "prefill" max_context 16 attributes {fused = {qkv = 2 : i64}} {
// BIAS:      lowered.call @gemm_qkv_bias_f32(@prefill.layers.1.h, @w.layers.1.attn.wq, @w.layers.1.attn.wk, @w.layers.1.attn.wv, @w.layers.1.attn.bq, @w.layers.1.attn.bk, @w.layers.1.attn.bv) -> (@prefill.layers.1.q, @prefill.layers.1.k, @prefill.layers.1.v) {M = #lowered.rt<T>, Nq = 64 : i64, Nk = 64 : i64, Nv = 64 : i64, K = 64 : i64

// Q4_1 weights: the registry's q4_1 variants (fused_wdtype.c).  The weights
// without a kernel of their own dtype are in the hand-written cases below.
// Q41:      lowered.program @decode mode "decode" max_context 16 attributes {fused = {qkv = 2 : i64}} {
// Q41:      lowered.call @gemv_qkv_q4_1(@decode.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.wk, @w.layers.0.attn.wv) -> (@decode.layers.0.q, @decode.layers.0.k, @decode.layers.0.v) {Nq = 64 : i64, Nk = 32 : i64, Nv = 32 : i64, K = 64 : i64
// Q41-NOT:  @gemv_q4_1(@decode.layers.{{[01]}}.h,
// Q41:      lowered.program @prefill mode "prefill" max_context 16 attributes {fused = {qkv = 2 : i64}} {
// Q41:      lowered.call @gemm_qkv_q4_1(@prefill.layers.0.h, @w.layers.0.attn.wq, @w.layers.0.attn.wk, @w.layers.0.attn.wv) -> (@prefill.layers.0.q, @prefill.layers.0.k, @prefill.layers.0.v) {M = #lowered.rt<T>, Nq = 64 : i64

// NOLOWER: fuse-qkv: no lowered.program (run --lower-prefill or --lower-decode first)

builtin.module {
  lowered.model @independent {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.a weight : !lowered.buf<[8, 16], f32> {source = "a"}
    lowered.buffer @w.b weight : !lowered.buf<[4, 16], f32> {source = "b"}
    lowered.buffer @w.c weight : !lowered.buf<[4, 16], f32> {source = "c"}
    lowered.buffer @w.g weight : !lowered.buf<[16], f32> {source = "g"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @z activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @ya activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @yb activation : !lowered.buf<[1, 4], f32>
      lowered.buffer @yc activation : !lowered.buf<[1, 4], f32>
      // an independent call between the linears does not stop the fusion; the
      // fused call takes the place of the first linear
      lowered.call @gemv_f32(@x, @w.a) -> (@ya) {N = 8 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@x, @w.g) -> (@z) {T = 1 : i64, E = 16 : i64, eps = 1.0e-05 : f64}
      lowered.call @gemv_f32(@x, @w.b) -> (@yb) {N = 4 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.c) -> (@yc) {N = 4 : i64, K = 16 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @independent
// HAND:      attributes {fused = {qkv = 1 : i64}}
// HAND:      lowered.call @gemv_qkv_f32(@x, @w.a, @w.b, @w.c) -> (@ya, @yb, @yc) {Nq = 8 : i64, Nk = 4 : i64, Nv = 4 : i64, K = 16 : i64}
// HAND-NEXT: lowered.call @rmsnorm_f32(@x, @w.g) -> (@z)
// HAND-NEXT: }

// -----

builtin.module {
  lowered.model @two_inputs {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.buffer @w.a weight : !lowered.buf<[8, 16], f32> {source = "a"}
    lowered.buffer @w.b weight : !lowered.buf<[4, 16], f32> {source = "b"}
    lowered.buffer @w.c weight : !lowered.buf<[4, 16], f32> {source = "c"}
    lowered.buffer @w.g weight : !lowered.buf<[16], f32> {source = "g"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @x2 activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @ya activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @yb activation : !lowered.buf<[1, 4], f32>
      lowered.buffer @yc activation : !lowered.buf<[1, 4], f32>
      // different input buffers: only two linears read @x
      lowered.call @gemv_f32(@x, @w.a) -> (@ya) {N = 8 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x2, @w.b) -> (@yb) {N = 4 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.c) -> (@yc) {N = 4 : i64, K = 16 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @two_inputs
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_f32(@x, @w.a) -> (@ya)
// HAND-NEXT:  lowered.call @gemv_f32(@x2, @w.b) -> (@yb)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.c) -> (@yc)

// -----

builtin.module {
  lowered.model @x_rewritten {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.a weight : !lowered.buf<[8, 16], f32> {source = "a"}
    lowered.buffer @w.b weight : !lowered.buf<[4, 16], f32> {source = "b"}
    lowered.buffer @w.c weight : !lowered.buf<[4, 16], f32> {source = "c"}
    lowered.buffer @w.g weight : !lowered.buf<[16], f32> {source = "g"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @x2 activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @ya activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @yb activation : !lowered.buf<[1, 4], f32>
      lowered.buffer @yc activation : !lowered.buf<[1, 4], f32>
      // @x is rewritten between the first and the second linear: the later two
      // read another value of @x and cannot move up
      lowered.call @gemv_f32(@x, @w.a) -> (@ya) {N = 8 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@x2, @w.g) -> (@x) {T = 1 : i64, E = 16 : i64, eps = 1.0e-05 : f64}
      lowered.call @gemv_f32(@x, @w.b) -> (@yb) {N = 4 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.c) -> (@yc) {N = 4 : i64, K = 16 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @x_rewritten
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_f32(@x, @w.a) -> (@ya)
// HAND-NEXT:  lowered.call @rmsnorm_f32(@x2, @w.g) -> (@x)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.b) -> (@yb)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.c) -> (@yc)

// -----

builtin.module {
  lowered.model @reads_yb {
    lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.buffer @w.a weight : !lowered.buf<[8, 16], f32> {source = "a"}
    lowered.buffer @w.b weight : !lowered.buf<[4, 16], f32> {source = "b"}
    lowered.buffer @w.c weight : !lowered.buf<[4, 16], f32> {source = "c"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @ya activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @yb activation : !lowered.buf<[1, 4], f32>
      lowered.buffer @yc activation : !lowered.buf<[1, 4], f32>
      lowered.buffer @s activation : !lowered.buf<[1, 4], f32>
      // the call in between reads @yb before the second linear writes it: moving
      // that linear up would change what the call reads
      lowered.call @gemv_f32(@x, @w.a) -> (@ya) {N = 8 : i64, K = 16 : i64}
      lowered.call @add_f32(@yb, @yc) -> (@s) {n = 4 : i64}
      lowered.call @gemv_f32(@x, @w.b) -> (@yb) {N = 4 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.c) -> (@yc) {N = 4 : i64, K = 16 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @reads_yb
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_f32(@x, @w.a) -> (@ya)
// HAND-NEXT:  lowered.call @add_f32(@yb, @yc) -> (@s)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.b) -> (@yb)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.c) -> (@yc)

// -----

builtin.module {
  lowered.model @mixed_dtypes {
    lowered.kernel @gemv_bf16 op "linear" c "ckir_gemv_bf16" modes ["decode"] (x: read f32, w: read bf16, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.buffer @w.a weight : !lowered.buf<[8, 16], f32> {source = "a"}
    lowered.buffer @w.b weight : !lowered.buf<[4, 16], bf16> {source = "b"}
    lowered.buffer @w.c weight : !lowered.buf<[4, 16], f32> {source = "c"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @ya activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @yb activation : !lowered.buf<[1, 4], f32>
      lowered.buffer @yc activation : !lowered.buf<[1, 4], f32>
      // weights of different dtypes: no fused kernel takes f32, bf16, f32
      lowered.call @gemv_f32(@x, @w.a) -> (@ya) {N = 8 : i64, K = 16 : i64}
      lowered.call @gemv_bf16(@x, @w.b) -> (@yb) {N = 4 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.c) -> (@yc) {N = 4 : i64, K = 16 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @mixed_dtypes
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_f32(@x, @w.a) -> (@ya)
// HAND-NEXT:  lowered.call @gemv_bf16(@x, @w.b) -> (@yb)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.c) -> (@yc)

// -----

builtin.module {
  lowered.model @kquant_v_q6 {
    lowered.kernel @gemv_q4_kp op "linear" c "ckir_gemv_q4_kp" modes ["decode"] (x: read f32 extent "K", w: read q4_kp extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768", "K % 256 == 0"]
    lowered.kernel @gemv_q6_kp op "linear" c "ckir_gemv_q6_kp" modes ["decode"] (x: read f32 extent "K", w: read q6_kp extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768", "K % 256 == 0"]
    lowered.buffer @w.q weight : !lowered.buf<[64, 256], q4_kp> {source = "q"}
    lowered.buffer @w.k weight : !lowered.buf<[32, 256], q4_kp> {source = "k"}
    lowered.buffer @w.v weight : !lowered.buf<[32, 256], q6_kp> {source = "v"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 256], f32>
      lowered.buffer @yq activation : !lowered.buf<[1, 64], f32>
      lowered.buffer @yk activation : !lowered.buf<[1, 32], f32>
      lowered.buffer @yv activation : !lowered.buf<[1, 32], f32>
      // q and k Q4_K, v Q6_K (a Q4_K_M file's layer): the registry's mixed kernel
      lowered.call @gemv_q4_kp(@x, @w.q) -> (@yq) {N = 64 : i64, K = 256 : i64}
      lowered.call @gemv_q4_kp(@x, @w.k) -> (@yk) {N = 32 : i64, K = 256 : i64}
      lowered.call @gemv_q6_kp(@x, @w.v) -> (@yv) {N = 32 : i64, K = 256 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @kquant_v_q6
// HAND:       lowered.kernel @gemv_qkv_q4_kp_v_q6_kp op "fused_qkv" c "ckir_gemv_qkv_q4_kp_v_q6_kp" modes ["decode"] (x: read f32 extent "K", wq: read q4_kp extent "Nq*K", wk: read q4_kp extent "Nk*K", wv: read q6_kp extent "Nv*K", q: write f32 extent "Nq", k: write f32 extent "Nk", v: write f32 extent "Nv")
// HAND:       attributes {fused = {qkv = 1 : i64}}
// HAND:       lowered.call @gemv_qkv_q4_kp_v_q6_kp(@x, @w.q, @w.k, @w.v) -> (@yq, @yk, @yv) {Nq = 64 : i64, Nk = 32 : i64, Nv = 32 : i64, K = 256 : i64
// HAND-NEXT:  }

// -----

builtin.module {
  lowered.model @kquant_q_q6 {
    lowered.kernel @gemv_q4_kp op "linear" c "ckir_gemv_q4_kp" modes ["decode"] (x: read f32 extent "K", w: read q4_kp extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768", "K % 256 == 0"]
    lowered.kernel @gemv_q6_kp op "linear" c "ckir_gemv_q6_kp" modes ["decode"] (x: read f32 extent "K", w: read q6_kp extent "N*K", y: write f32 extent "N") params (N: i64, K: i64) constraints ["N >= 1", "K >= 1", "K % 32 == 0", "K <= 32768", "K % 256 == 0"]
    lowered.buffer @w.q weight : !lowered.buf<[64, 256], q6_kp> {source = "q"}
    lowered.buffer @w.k weight : !lowered.buf<[32, 256], q4_kp> {source = "k"}
    lowered.buffer @w.v weight : !lowered.buf<[32, 256], q4_kp> {source = "v"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 256], f32>
      lowered.buffer @yq activation : !lowered.buf<[1, 64], f32>
      lowered.buffer @yk activation : !lowered.buf<[1, 32], f32>
      lowered.buffer @yv activation : !lowered.buf<[1, 32], f32>
      // q in Q6_K, k and v Q4_K: the registry has no such mix, the calls stay
      lowered.call @gemv_q6_kp(@x, @w.q) -> (@yq) {N = 64 : i64, K = 256 : i64}
      lowered.call @gemv_q4_kp(@x, @w.k) -> (@yk) {N = 32 : i64, K = 256 : i64}
      lowered.call @gemv_q4_kp(@x, @w.v) -> (@yv) {N = 32 : i64, K = 256 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @kquant_q_q6
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_q6_kp(@x, @w.q) -> (@yq)
// HAND-NEXT:  lowered.call @gemv_q4_kp(@x, @w.k) -> (@yk)
// HAND-NEXT:  lowered.call @gemv_q4_kp(@x, @w.v) -> (@yv)
