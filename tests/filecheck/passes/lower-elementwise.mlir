// RUN: ckir-opt %s --lower-decode{max-context=8} | filecheck %s
// RUN: ckir-opt %s --lower-prefill{max-context=8} | filecheck %s --check-prefix=PRE

// Elementwise kinds (ckir.vocab: elementwise=True) share one lowering pattern:
// one call over n = rows x cols, with the kernel the registry has for the dtypes.
graph.model @ew arch "test" symbols {E = 8, L = 1, V = 16} {
  graph.weight @embed : [V, E] f32 hf "embed"
  graph.weight @head : [V, E] f32 hf "head"
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %sq = graph.mul %x, %x : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %y = graph.add %x, %sq : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %logits = graph.lm_head %x {weights = [@head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.output %logits : !graph.tensor<[T, V], f32>
  }
}

// CHECK: lowered.kernel @mul_f32 op "mul" c "ckir_mul_f32"
// CHECK: lowered.call @mul_f32(@decode.header.x, @decode.header.x) -> (@decode.layers.0.sq) {n = 8 : i64
// CHECK: lowered.call @add_f32(@decode.header.x, @decode.layers.0.sq) -> (@decode.layers.0.y) {n = 8 : i64
// PRE: lowered.call @mul_f32(@prefill.header.x, @prefill.header.x) -> (@prefill.layers.0.sq) {n = #lowered.rt<T*8>
