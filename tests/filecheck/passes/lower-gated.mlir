// RUN: ckir-opt %s --lower-decode{max-context=8} --fuse-add-rmsnorm | filecheck %s
// RUN: ckir-opt %s --lower-decode{max-context=8} --fuse-add-rmsnorm | ckir-opt | filecheck %s
// RUN: ckir-opt %s --lower-prefill{max-context=8} --fuse-add-rmsnorm | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %s --lower-backward{max-context=8} | filecheck %s --check-prefix=BWD

// mul_scalar (x * value ** exponent), rmsnorm with a gamma offset and geglu, in
// every mode.  An rmsnorm with an offset calls the rmsnorm_offset kernels, which
// --fuse-add-rmsnorm leaves alone (its fused kernel has no offset); the gradient of
// mul_scalar is the same kernel on dy.
graph.model @gated arch "test" symbols {E = 8, I = 12, L = 1, V = 16} {
  graph.weight @embed : [V, E] f32 hf "embed"
  graph.weight @"layers.{i}.norm" : [E] f32 hf "layers.{i}.norm"
  graph.weight @"layers.{i}.gate" : [I, E] f32 hf "layers.{i}.gate"
  graph.weight @"layers.{i}.up" : [I, E] f32 hf "layers.{i}.up"
  graph.weight @"layers.{i}.down" : [E, I] f32 hf "layers.{i}.down"
  graph.weight @final_norm : [E] f32 hf "final_norm"
  graph.weight @head : [V, E] f32 hf "head"
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %e = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    %x = graph.mul_scalar %e {value = 8.0 : f64, exponent = 0.5 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %h = graph.rmsnorm %x {weights = [@"layers.{i}.norm"], eps = 1.0e-06 : f64, offset = 1.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %g = graph.linear %h {weights = [@"layers.{i}.gate"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
    %u = graph.linear %h {weights = [@"layers.{i}.up"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
    %m = graph.geglu %g, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
    %d = graph.linear %m {weights = [@"layers.{i}.down"]} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, E], f32>
    %y = graph.add %x, %d : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %n = graph.rmsnorm %x {weights = [@final_norm], eps = 1.0e-06 : f64, offset = 1.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %h = graph.mul_scalar %n {value = -0.5 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %logits = graph.lm_head %h {weights = [@head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.output %logits : !graph.tensor<[T, V], f32>
  }
}

// CHECK:      lowered.call @embed_f32(
// CHECK-NEXT: lowered.call @mul_scalar_f32(@decode.header.e) -> (@decode.header.x) {n = 8 : i64, s = 2.8284271247461903 : f64
// CHECK-NEXT: lowered.call @rmsnorm_offset_f32(@decode.header.x, @w.layers.0.norm) -> (@decode.layers.0.h) {T = 1 : i64, E = 8 : i64, eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64
// CHECK:      lowered.call @geglu_f32(@decode.layers.0.g, @decode.layers.0.u) -> (@decode.layers.0.m) {n = 12 : i64
// CHECK:      lowered.call @add_f32(@decode.header.x, @decode.layers.0.d) -> (@decode.layers.0.y)
// CHECK-NEXT: lowered.call @rmsnorm_offset_f32(@decode.layers.0.y, @w.final_norm) -> (@decode.footer.n)
// CHECK-NEXT: lowered.call @mul_scalar_f32(@decode.footer.n) -> (@decode.footer.h) {n = 8 : i64, s = -5.000000e-01 : f64
// CHECK-NOT:  add_rmsnorm

// PRE:      lowered.call @mul_scalar_f32(@prefill.header.e) -> (@prefill.header.x) {n = #lowered.rt<T*8>, s = 2.8284271247461903 : f64
// PRE:      lowered.call @rmsnorm_offset_f32(@prefill.header.x, @w.layers.0.norm) -> (@prefill.layers.0.h) {T = #lowered.rt<T>, E = 8 : i64, eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64
// PRE:      lowered.call @geglu_f32(@prefill.layers.0.g, @prefill.layers.0.u) -> (@prefill.layers.0.m) {n = #lowered.rt<T*12>
// PRE:      lowered.call @add_f32(
// PRE-NEXT: lowered.call @rmsnorm_offset_f32(@prefill.layers.0.y, @w.final_norm)
// PRE-NOT:  add_rmsnorm

// BWD: lowered.call @mul_scalar_f32(@backward.footer.dh) -> (@backward.footer.dn) {n = #lowered.rt<T*8>, s = -5.000000e-01 : f64, origin = #lowered.origin<scope "footer", op "grad(graph.mul_scalar)">}
// BWD-NEXT: lowered.call @zero_f32() -> (@grad.final_norm)
// BWD-NEXT: lowered.call @rmsnorm_offset_bwd_f32(@backward.layers.0.y, @w.final_norm, @backward.footer.dn) -> (@backward.footer.dy, @grad.final_norm) {T = #lowered.rt<T>, E = 8 : i64, eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64
// BWD: lowered.call @geglu_bwd_f32(@backward.layers.0.g, @backward.layers.0.u, @backward.layers.0.dm) -> (@backward.layers.0.dg, @backward.layers.0.du) {n = #lowered.rt<T*12>
// BWD: lowered.call @rmsnorm_offset_bwd_f32(@backward.header.x, @w.layers.0.norm, @backward.layers.0.dh_2) -> (@backward.layers.0.dx, @grad.layers.0.norm)
// BWD: lowered.call @mul_scalar_f32(@backward.layers.0.dx_1) -> (@backward.header.de) {n = #lowered.rt<T*8>, s = 2.8284271247461903 : f64, origin = #lowered.origin<scope "header", op "grad(graph.mul_scalar)">}
