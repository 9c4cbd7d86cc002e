// RUN: ckir-opt %s | ckir-opt | filecheck %s --check-prefix=IR
// RUN: ckir-opt %s --lower-decode{max-context=8} | filecheck %s --check-prefix=DEC
// RUN: ckir-opt %s --lower-prefill{max-context=8} | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %s --lower-backward{max-context=8} | filecheck %s --check-prefix=BWD

// graph.head_rmsnorm with a gamma offset (norms over (offset + w)): the
// rmsnorm_offset kernels over T*heads rows of head_dim, forward and backward, with
// the offset as a param; without an offset (or offset 0) the plain rmsnorm ones.
graph.model @hn arch "test" symbols {D = 6, E = 18, H = 3, KV = 1, L = 1, V = 16} {
  graph.weight @embed : [V, E] f32 hf "embed"
  graph.weight @"layers.{i}.wk" : [KV*D, E] f32 hf "layers.{i}.wk"
  graph.weight @"layers.{i}.q_norm" : [D] f32 hf "layers.{i}.q_norm"
  graph.weight @"layers.{i}.k_norm" : [D] f32 hf "layers.{i}.k_norm"
  graph.weight @head : [V, E] f32 hf "head"
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %qn = graph.head_rmsnorm %x head_dim D {weights = [@"layers.{i}.q_norm"], eps = 1.0e-06 : f64, offset = 1.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %k = graph.linear %x {weights = [@"layers.{i}.wk"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
    %kn = graph.head_rmsnorm %k head_dim D {weights = [@"layers.{i}.k_norm"], eps = 1.0e-06 : f64, offset = 0.0 : f64} : (!graph.tensor<[T, KV*D], f32>) -> !graph.tensor<[T, KV*D], f32>
    %s = graph.add %qn, %x : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %s : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %logits = graph.lm_head %x {weights = [@head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.output %logits : !graph.tensor<[T, V], f32>
  }
}

// IR: %qn = graph.head_rmsnorm %x head_dim D {weights = [@"layers.{i}.q_norm"], eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// IR: %kn = graph.head_rmsnorm %k head_dim D {weights = [@"layers.{i}.k_norm"], eps = 1.000000e-06 : f64, offset = 0.000000e+00 : f64}

// DEC: lowered.call @rmsnorm_offset_f32(@decode.header.x, @w.layers.0.q_norm) -> (@decode.layers.0.qn) {T = 3 : i64, E = 6 : i64, eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64, origin = #lowered.origin<scope "layers.0", op "graph.head_rmsnorm">}
// DEC: lowered.call @rmsnorm_f32(@decode.layers.0.k, @w.layers.0.k_norm) -> (@decode.layers.0.kn) {T = 1 : i64, E = 6 : i64

// PRE: lowered.call @rmsnorm_offset_f32(@prefill.header.x, @w.layers.0.q_norm) -> (@prefill.layers.0.qn) {T = #lowered.rt<T*3>, E = 6 : i64, eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64

// BWD: lowered.call @rmsnorm_offset_bwd_f32(@backward.header.x, @w.layers.0.q_norm, {{.*}}) -> ({{.*}}, @grad.layers.0.q_norm) {T = #lowered.rt<T*3>, E = 6 : i64, eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64, origin = #lowered.origin<scope "layers.0", op "grad(graph.head_rmsnorm)">}
