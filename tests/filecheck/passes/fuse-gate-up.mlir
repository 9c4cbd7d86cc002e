// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-gate-up | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --fuse-gate-up --plan-layout | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %inputs/tiny_llama.mlir --convert-weights{dtype=q4_1} --lower-decode{max-context=16} --fuse-gate-up | filecheck %s --check-prefix=Q41
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-decode{max-context=16} --fuse-gate-up | filecheck %s --check-prefix=GPT2
// RUN: ckir-opt %s --split-input-file --fuse-gate-up | filecheck %s --check-prefix=HAND

// Decode: gate gemv + up gemv + swiglu -> one gemv_gate_up_f32 writing the
// swiglu's output; the gate and up buffers are gone, the output buffer stays.
// The fused kernel is declared; swiglu_f32, which no call names any more, is not.
// CHECK:      lowered.model @llama {
// CHECK-NOT:  lowered.kernel @swiglu_f32
// CHECK:      lowered.kernel @gemv_gate_up_f32 op "fused_gate_up" c "ckir_gemv_gate_up_f32" modes ["decode"] (x: read f32 extent "K", wg: read f32 extent "N*K", wu: read f32 extent "N*K", out: write f32 extent "N") params (N: i64, K: i64)
// CHECK-NOT:  lowered.kernel @swiglu_f32
// CHECK:      lowered.program @decode mode "decode" max_context 16 attributes {fused = {gate_up = 2 : i64}} {
// CHECK:      lowered.buffer @decode.layers.0.h2 activation : !lowered.buf<[1, 64], f32>
// CHECK-NEXT: lowered.buffer @decode.layers.0.m activation : !lowered.buf<[1, 172], f32>
// CHECK:      lowered.call @rmsnorm_f32(@decode.layers.0.x1, @w.layers.0.mlp_norm) -> (@decode.layers.0.h2)
// CHECK-NEXT: lowered.call @gemv_gate_up_f32(@decode.layers.0.h2, @w.layers.0.mlp.gate, @w.layers.0.mlp.up) -> (@decode.layers.0.m) {N = 172 : i64, K = 64 : i64, origin = #lowered.origin<scope "layers.0", fusion "fuse-gate-up", of [#lowered.origin<scope "layers.0", op "graph.linear">, #lowered.origin<scope "layers.0", op "graph.linear">, #lowered.origin<scope "layers.0", op "graph.swiglu">]>}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.layers.0.m, @w.layers.0.mlp.down) -> (@decode.layers.0.d)
// CHECK:      lowered.call @gemv_gate_up_f32(@decode.layers.1.h2, @w.layers.1.mlp.gate, @w.layers.1.mlp.up) -> (@decode.layers.1.m) {N = 172 : i64, K = 64 : i64
// CHECK-NOT:  @swiglu_f32
// CHECK-NOT:  @decode.layers.{{[01]}}.gate
// CHECK-NOT:  @decode.layers.{{[01]}}.up

// Prefill: gemm_gate_up_f32 with the run-time row count; the plan has no
// slots for the gate and up buffers.
// PRE:     lowered.program @prefill mode "prefill" max_context 16 attributes {fused = {gate_up = 2 : i64}} {
// PRE-NOT: lowered.buffer @prefill.layers.0.gate
// PRE:     lowered.call @gemm_gate_up_f32(@prefill.layers.0.h2, @w.layers.0.mlp.gate, @w.layers.0.mlp.up) -> (@prefill.layers.0.m) {M = #lowered.rt<T>, N = 172 : i64, K = 64 : i64
// PRE-NEXT: lowered.call @gemm_f32(@prefill.layers.0.m, @w.layers.0.mlp.down)
// The default (liveness) plan lists the activations largest first: m (the
// [16, 172] SwiGLU output) comes before h2.
// PRE:     layout.plan @llama strategy "liveness"
// PRE-NOT: layout.slot @prefill.layers.{{[01]}}.{{gate|up}} offset
// PRE:     layout.slot @prefill.layers.0.m offset
// PRE-NOT: layout.slot @prefill.layers.{{[01]}}.{{gate|up}} offset
// PRE:     layout.slot @prefill.layers.0.h2 offset
// PRE-NOT: layout.slot @prefill.layers.{{[01]}}.{{gate|up}} offset
// PRE:     layout.totals

// Q4_1 weights: the q4_1 variant; gate and up buffers go as well.
// Q41:      lowered.program @decode mode "decode" max_context 16 attributes {fused = {gate_up = 2 : i64}} {
// Q41-NOT:  lowered.buffer @decode.layers.0.gate
// Q41:      lowered.call @gemv_gate_up_q4_1(@decode.layers.0.h2, @w.layers.0.mlp.gate, @w.layers.0.mlp.up) -> (@decode.layers.0.m) {N = 172 : i64, K = 64 : i64
// Q41-NOT:  @swiglu_f32

// GPT-2 has no SwiGLU MLP.
// GPT2:     lowered.program @decode mode "decode" max_context 16 {
// GPT2-NOT: gate_up
// GPT2:     lowered.call @gelu_tanh_f32

builtin.module {
  lowered.model @moved {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.kernel @swiglu_f32 op "swiglu" c "ckir_swiglu_f32" modes ["prefill", "decode", "backward"] (gate: read f32, up: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.buffer @w.g weight : !lowered.buf<[8, 16], f32> {source = "g"}
    lowered.buffer @w.u weight : !lowered.buf<[8, 16], f32> {source = "u"}
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @z activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @gate activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @up activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @m activation : !lowered.buf<[1, 8], f32>
      // the fused call takes the swiglu's place; the linears move down past an
      // independent call
      lowered.call @gemv_f32(@x, @w.g) -> (@gate) {N = 8 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.u) -> (@up) {N = 8 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@x, @w.n) -> (@z) {T = 1 : i64, E = 16 : i64, eps = 1.0e-05 : f64}
      lowered.call @swiglu_f32(@gate, @up) -> (@m) {n = 8 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @moved
// HAND:      lowered.buffer @z activation
// HAND-NEXT: lowered.buffer @m activation
// HAND-NEXT: lowered.call @rmsnorm_f32(@x, @w.n) -> (@z)
// HAND-NEXT: lowered.call @gemv_gate_up_f32(@x, @w.g, @w.u) -> (@m) {N = 8 : i64, K = 16 : i64}
// HAND-NEXT: }

// -----

builtin.module {
  lowered.model @gate_read_elsewhere {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @swiglu_f32 op "swiglu" c "ckir_swiglu_f32" modes ["prefill", "decode", "backward"] (gate: read f32, up: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.buffer @w.g weight : !lowered.buf<[8, 16], f32> {source = "g"}
    lowered.buffer @w.u weight : !lowered.buf<[8, 16], f32> {source = "u"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @gate activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @up activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @m activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @r activation : !lowered.buf<[1, 8], f32>
      // the gate is also read by another call: it must stay
      lowered.call @gemv_f32(@x, @w.g) -> (@gate) {N = 8 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.u) -> (@up) {N = 8 : i64, K = 16 : i64}
      lowered.call @swiglu_f32(@gate, @up) -> (@m) {n = 8 : i64}
      lowered.call @relu_f32(@gate) -> (@r) {n = 8 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @gate_read_elsewhere
// HAND-NOT:   fused
// HAND:       lowered.buffer @gate activation
// HAND:       lowered.call @gemv_f32(@x, @w.g) -> (@gate)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.u) -> (@up)
// HAND-NEXT:  lowered.call @swiglu_f32(@gate, @up) -> (@m)

// -----

builtin.module {
  lowered.model @two_inputs {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @swiglu_f32 op "swiglu" c "ckir_swiglu_f32" modes ["prefill", "decode", "backward"] (gate: read f32, up: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.buffer @w.g weight : !lowered.buf<[8, 16], f32> {source = "g"}
    lowered.buffer @w.u weight : !lowered.buf<[8, 16], f32> {source = "u"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @x2 activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @gate activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @up activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @m activation : !lowered.buf<[1, 8], f32>
      // gate and up come from different inputs
      lowered.call @gemv_f32(@x, @w.g) -> (@gate) {N = 8 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x2, @w.u) -> (@up) {N = 8 : i64, K = 16 : i64}
      lowered.call @swiglu_f32(@gate, @up) -> (@m) {n = 8 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @two_inputs
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_f32(@x, @w.g) -> (@gate)
// HAND-NEXT:  lowered.call @gemv_f32(@x2, @w.u) -> (@up)
// HAND-NEXT:  lowered.call @swiglu_f32(@gate, @up) -> (@m)

// -----

builtin.module {
  lowered.model @input_rewritten {
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.kernel @swiglu_f32 op "swiglu" c "ckir_swiglu_f32" modes ["prefill", "decode", "backward"] (gate: read f32, up: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.buffer @w.g weight : !lowered.buf<[8, 16], f32> {source = "g"}
    lowered.buffer @w.u weight : !lowered.buf<[8, 16], f32> {source = "u"}
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @gate activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @up activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @m activation : !lowered.buf<[1, 8], f32>
      // @x changes between the linears and the swiglu: they cannot move down
      lowered.call @gemv_f32(@x, @w.g) -> (@gate) {N = 8 : i64, K = 16 : i64}
      lowered.call @gemv_f32(@x, @w.u) -> (@up) {N = 8 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@x, @w.n) -> (@x) {T = 1 : i64, E = 16 : i64, eps = 1.0e-05 : f64}
      lowered.call @swiglu_f32(@gate, @up) -> (@m) {n = 8 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @input_rewritten
// HAND-NOT:   fused
// HAND:       lowered.call @gemv_f32(@x, @w.g) -> (@gate)
// HAND-NEXT:  lowered.call @gemv_f32(@x, @w.u) -> (@up)
// HAND-NEXT:  lowered.call @rmsnorm_f32(@x, @w.n) -> (@x)
// HAND-NEXT:  lowered.call @swiglu_f32(@gate, @up) -> (@m)

// -----

builtin.module {
  lowered.model @mixed_dtypes {
    lowered.kernel @gemv_bf16 op "linear" c "ckir_gemv_bf16" modes ["decode"] (x: read f32, w: read bf16, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @swiglu_f32 op "swiglu" c "ckir_swiglu_f32" modes ["prefill", "decode", "backward"] (gate: read f32, up: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.buffer @w.g weight : !lowered.buf<[8, 32], f32> {source = "g"}
    lowered.buffer @w.u weight : !lowered.buf<[8, 32], bf16> {source = "u"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @x activation : !lowered.buf<[1, 32], f32>
      lowered.buffer @gate activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @up activation : !lowered.buf<[1, 8], f32>
      lowered.buffer @m activation : !lowered.buf<[1, 8], f32>
      // f32 gate and bf16 up weights: the registry has no fused kernel for the pair
      lowered.call @gemv_f32(@x, @w.g) -> (@gate) {N = 8 : i64, K = 32 : i64}
      lowered.call @gemv_bf16(@x, @w.u) -> (@up) {N = 8 : i64, K = 32 : i64}
      lowered.call @swiglu_f32(@gate, @up) -> (@m) {n = 8 : i64}
    }
  }
}
// HAND-LABEL: lowered.model @mixed_dtypes
// HAND-NOT:   fused
// HAND:       lowered.buffer @gate activation
// HAND-NEXT:  lowered.buffer @up activation
// HAND:       lowered.call @gemv_f32(@x, @w.g) -> (@gate)
// HAND-NEXT:  lowered.call @gemv_bf16(@x, @w.u) -> (@up)
// HAND-NEXT:  lowered.call @swiglu_f32(@gate, @up) -> (@m)
