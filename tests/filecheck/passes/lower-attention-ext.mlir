// RUN: ckir-opt %s | ckir-opt | filecheck %s --check-prefix=RT
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s --check-prefix=RT
// RUN: ckir-opt %s --lower-decode{max-context=8} | filecheck %s
// RUN: ckir-opt %s --lower-prefill{max-context=8} | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %s --lower-backward{max-context=8} | filecheck %s --check-prefix=BWD

// graph.attention with scale_dim, softcap, window and window_pattern calls the
// attention_ext kernels with scale = scale_dim^-1/2 and each layer's window (layer 0
// slides, layer 1 = (1 + 1) % 2 == 0 sees every key); graph.softcap and its gradient.
graph.model @capped arch "test" symbols {E = 8, H = 2, KV = 1, D = 4, L = 2, V = 16} {
  graph.weight @embed : [V, E] f32 hf "embed"
  graph.weight @head : [V, E] f32 hf "head"
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %a = graph.attention %x, %x, %x heads H kv_heads H head_dim D {causal, scale_dim = 2.0e+01 : f64, softcap = 5.0 : f64, window = 3 : i64, window_pattern = 2 : i64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %y = graph.add %x, %a : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %raw = graph.lm_head %x {weights = [@head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    %logits = graph.softcap %raw {cap = 3.0e+01 : f64} : (!graph.tensor<[T, V], f32>) -> !graph.tensor<[T, V], f32>
    graph.output %logits : !graph.tensor<[T, V], f32>
  }
}

// RT: graph.attention %x, %x, %x heads H kv_heads H head_dim D {causal, scale_dim = 2.000000e+01 : f64, softcap = 5.000000e+00 : f64, window = 3 : i64, window_pattern = 2 : i64}
// RT: %logits = graph.softcap %raw {cap = 3.000000e+01 : f64} : (!graph.tensor<[T, V], f32>) -> !graph.tensor<[T, V], f32>

// CHECK:      lowered.call @kv_store_f32(@decode.header.x, @decode.header.x) -> (@kv.layers.0.k, @kv.layers.0.v)
// CHECK-NEXT: lowered.call @attention_ext_f32(@decode.header.x, @kv.layers.0.k, @kv.layers.0.v) -> (@decode.layers.0.a) {T = 1 : i64, P = #lowered.rt<P>, H = 2 : i64, KV = 2 : i64, D = 4 : i64, scale = 0.22360679774997896 : f64, softcap = 5.000000e+00 : f64, window = 3 : i64
// CHECK:      lowered.call @attention_ext_f32(@decode.layers.0.y, @kv.layers.1.k, @kv.layers.1.v) -> (@decode.layers.1.a) {{.*}} window = 0 : i64
// CHECK:      lowered.call @softcap_f32(@decode.footer.raw) -> (@decode.footer.logits) {n = 16 : i64, cap = 3.000000e+01 : f64

// PRE: lowered.call @attention_ext_f32(@prefill.header.x, @kv.layers.0.k, @kv.layers.0.v) -> (@prefill.layers.0.a) {T = #lowered.rt<T>, P = #lowered.rt<P>, {{.*}} window = 3 : i64
// PRE: lowered.call @attention_ext_f32({{.*}} window = 0 : i64
// PRE: lowered.call @softcap_f32(@prefill.footer.raw) -> (@prefill.footer.logits)

// BWD: lowered.call @softcap_bwd_f32(@backward.footer.raw, @backward.footer.logits) -> (@backward.footer.draw) {n = #lowered.rt<T*16>, cap = 3.000000e+01 : f64
// BWD: lowered.call @attention_ext_bwd_f32({{.*}} -> (@backward.layers.1.dy, @backward.layers.1.dy_1, @backward.layers.1.dy_2) {T = #lowered.rt<T>, H = 2 : i64, KV = 2 : i64, D = 4 : i64, scale = 0.22360679774997896 : f64, softcap = 5.000000e+00 : f64, window = 0 : i64
// BWD: lowered.call @attention_ext_bwd_f32({{.*}} window = 3 : i64
