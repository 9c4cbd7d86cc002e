// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-decode{max-context=16} --fuse-add-rmsnorm | filecheck %s
// RUN: ckir-opt %inputs/tiny_llama.mlir --lower-prefill{max-context=16} --fuse-add-rmsnorm | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %inputs/tiny_gpt2.mlir --lower-decode{max-context=16} --fuse-add-rmsnorm | filecheck %s --check-prefix=GPT2
// RUN: ckir-opt %s --split-input-file --fuse-add-rmsnorm | filecheck %s --check-prefix=HAND

// Decode: every residual add is followed by an rmsnorm of its sum (the MLP
// norm, the next layer's attention norm, the final norm): 2 per layer.  The
// fused call writes the sum too (the residual the next add reads).  The first
// rmsnorm reads the embedding, not an add: it stays.
// CHECK:      lowered.program @decode mode "decode" max_context 16 attributes {fused = {add_rmsnorm = 4 : i64}} {
// CHECK:      lowered.call @embed_f32
// CHECK-NEXT: lowered.call @rmsnorm_f32(@decode.header.x, @w.layers.0.attn_norm) -> (@decode.layers.0.h)
// CHECK:      lowered.call @gemv_f32(@decode.layers.0.a, @w.layers.0.attn.wo) -> (@decode.layers.0.o)
// CHECK-NEXT: lowered.call @add_rmsnorm_f32(@decode.header.x, @decode.layers.0.o, @w.layers.0.mlp_norm) -> (@decode.layers.0.x1, @decode.layers.0.h2) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "layers.0", fusion "fuse-add-rmsnorm", of [#lowered.origin<scope "layers.0", op "graph.add">, #lowered.origin<scope "layers.0", op "graph.rmsnorm">]>}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.layers.0.h2, @w.layers.0.mlp.gate) -> (@decode.layers.0.gate)
// Across the layer boundary: the comment starts with the add's scope.
// CHECK:      lowered.call @gemv_f32(@decode.layers.0.m, @w.layers.0.mlp.down) -> (@decode.layers.0.d)
// CHECK-NEXT: lowered.call @add_rmsnorm_f32(@decode.layers.0.x1, @decode.layers.0.d, @w.layers.1.attn_norm) -> (@decode.layers.0.x2, @decode.layers.1.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "layers.0", fusion "fuse-add-rmsnorm", of [#lowered.origin<scope "layers.0", op "graph.add">, #lowered.origin<scope "layers.1", op "graph.rmsnorm">]>}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.layers.1.h, @w.layers.1.attn.wq)
// CHECK:      lowered.call @add_rmsnorm_f32(@decode.layers.0.x2, @decode.layers.1.o, @w.layers.1.mlp_norm) -> (@decode.layers.1.x1, @decode.layers.1.h2)
// CHECK:      lowered.call @add_rmsnorm_f32(@decode.layers.1.x1, @decode.layers.1.d, @w.final_norm) -> (@decode.layers.1.x2, @decode.footer.h) {T = 1 : i64, E = 64 : i64, eps = 1.000000e-05 : f64, origin = #lowered.origin<scope "layers.1", fusion "fuse-add-rmsnorm", of [#lowered.origin<scope "layers.1", op "graph.add">, #lowered.origin<scope "footer", op "graph.rmsnorm">]>}
// CHECK-NEXT: lowered.call @gemv_f32(@decode.footer.h, @w.lm_head) -> (@decode.footer.logits)
// CHECK-NOT:  @add_f32
// CHECK-NOT:  @rmsnorm_f32

// PRE:      lowered.program @prefill mode "prefill" max_context 16 attributes {fused = {add_rmsnorm = 4 : i64}} {
// PRE:      lowered.call @add_rmsnorm_f32(@prefill.header.x, @prefill.layers.0.o, @w.layers.0.mlp_norm) -> (@prefill.layers.0.x1, @prefill.layers.0.h2) {T = #lowered.rt<T>, E = 64 : i64, eps = 1.000000e-05 : f64
// PRE-NOT:  @add_f32

// GPT-2 normalizes with layernorm: nothing to fuse.
// GPT2:     lowered.program @decode mode "decode" max_context 16 {
// GPT2-NOT: add_rmsnorm
// GPT2:     lowered.call @add_f32(@decode.header.e, @decode.layers.0.o) -> (@decode.layers.0.x1)
// GPT2-NEXT: lowered.call @layernorm_f32(@decode.layers.0.x1

builtin.module {
  lowered.model @norm_moves_up {
    lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.buffer @w.p weight : !lowered.buf<[8, 16], f32> {source = "p"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @a activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @b activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @s activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @h activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @y activation : !lowered.buf<[1, 8], f32>
      // an independent call between: the rmsnorm moves up to the add
      lowered.call @add_f32(@a, @b) -> (@s) {n = 16 : i64}
      lowered.call @gemv_f32(@a, @w.p) -> (@y) {N = 8 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@s, @w.n) -> (@h) {T = 1 : i64, E = 16 : i64, eps = 1.0e-06 : f64}
    }
  }
}
// HAND-LABEL: lowered.model @norm_moves_up
// HAND:       attributes {fused = {add_rmsnorm = 1 : i64}}
// HAND:       lowered.call @add_rmsnorm_f32(@a, @b, @w.n) -> (@s, @h) {T = 1 : i64, E = 16 : i64, eps = 1.000000e-06 : f64}
// HAND-NEXT:  lowered.call @gemv_f32(@a, @w.p) -> (@y)
// HAND-NEXT:  }

// -----

builtin.module {
  lowered.model @add_moves_down {
    lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.buffer @w.p weight : !lowered.buf<[8, 16], f32> {source = "p"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @a activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @b activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @s activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @h activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @y activation : !lowered.buf<[1, 8], f32>
      // the call between reads the old @h: the rmsnorm cannot move up, the add
      // moves down instead
      lowered.call @add_f32(@a, @b) -> (@s) {n = 16 : i64}
      lowered.call @gemv_f32(@h, @w.p) -> (@y) {N = 8 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@s, @w.n) -> (@h) {T = 1 : i64, E = 16 : i64, eps = 1.0e-06 : f64}
    }
  }
}
// HAND-LABEL: lowered.model @add_moves_down
// HAND:       attributes {fused = {add_rmsnorm = 1 : i64}}
// HAND:       lowered.call @gemv_f32(@h, @w.p) -> (@y)
// HAND-NEXT:  lowered.call @add_rmsnorm_f32(@a, @b, @w.n) -> (@s, @h)
// HAND-NEXT:  }

// -----

builtin.module {
  lowered.model @stuck {
    lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"] (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.buffer @w.p weight : !lowered.buf<[16, 16], f32> {source = "p"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @a activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @b activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @s activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @h activation : !lowered.buf<[1, 16], f32>
      // the call between reads @s and writes @h: neither call may move
      lowered.call @add_f32(@a, @b) -> (@s) {n = 16 : i64}
      lowered.call @gemv_f32(@s, @w.p) -> (@h) {N = 16 : i64, K = 16 : i64}
      lowered.call @rmsnorm_f32(@s, @w.n) -> (@h) {T = 1 : i64, E = 16 : i64, eps = 1.0e-06 : f64}
    }
  }
}
// HAND-LABEL: lowered.model @stuck
// HAND-NOT:   fused
// HAND:       lowered.call @add_f32(@a, @b) -> (@s)
// HAND-NEXT:  lowered.call @gemv_f32(@s, @w.p) -> (@h)
// HAND-NEXT:  lowered.call @rmsnorm_f32(@s, @w.n) -> (@h)

// -----

builtin.module {
  lowered.model @not_last_writer {
    lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @relu_f32 op "relu" c "ckir_relu_f32" modes ["prefill", "decode", "backward"] (x: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @a activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @b activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @s activation : !lowered.buf<[1, 16], f32>
      lowered.buffer @h activation : !lowered.buf<[1, 16], f32>
      // @s is rewritten after the add: the rmsnorm does not normalize a sum
      lowered.call @add_f32(@a, @b) -> (@s) {n = 16 : i64}
      lowered.call @relu_f32(@a) -> (@s) {n = 16 : i64}
      lowered.call @rmsnorm_f32(@s, @w.n) -> (@h) {T = 1 : i64, E = 16 : i64, eps = 1.0e-06 : f64}
    }
  }
}
// HAND-LABEL: lowered.model @not_last_writer
// HAND-NOT:   fused
// HAND:       lowered.call @add_f32(@a, @b) -> (@s)
// HAND-NEXT:  lowered.call @relu_f32(@a) -> (@s)
// HAND-NEXT:  lowered.call @rmsnorm_f32(@s, @w.n) -> (@h)

// -----

builtin.module {
  lowered.model @partial_rows {
    lowered.kernel @add_f32 op "add" c "ckir_add_f32" modes ["prefill", "decode", "backward"] (a: read f32, b: read f32, out: write f32) params (n: i64) constraints ["n >= 1"]
    lowered.kernel @rmsnorm_f32 op "rmsnorm" c "ckir_rmsnorm_f32" modes ["prefill", "decode", "backward"] (x: read f32, gamma: read f32, out: write f32) params (T: i64, E: i64, eps: f32) constraints ["T >= 1", "E >= 1", "eps >= 0"]
    lowered.buffer @w.n weight : !lowered.buf<[16], f32> {source = "n"}
    lowered.program @decode mode "decode" max_context 4 {
      lowered.buffer @a activation : !lowered.buf<[2, 16], f32>
      lowered.buffer @b activation : !lowered.buf<[2, 16], f32>
      lowered.buffer @s activation : !lowered.buf<[2, 16], f32>
      lowered.buffer @h activation : !lowered.buf<[2, 16], f32>
      // the add covers 16 elements, the rmsnorm 2 rows of 16: not the same sum
      lowered.call @add_f32(@a, @b) -> (@s) {n = 16 : i64}
      lowered.call @rmsnorm_f32(@s, @w.n) -> (@h) {T = 2 : i64, E = 16 : i64, eps = 1.0e-06 : f64}
    }
  }
}
// HAND-LABEL: lowered.model @partial_rows
// HAND-NOT:   fused
// HAND:       lowered.call @add_f32(@a, @b) -> (@s)
// HAND-NEXT:  lowered.call @rmsnorm_f32(@s, @w.n) -> (@h)
