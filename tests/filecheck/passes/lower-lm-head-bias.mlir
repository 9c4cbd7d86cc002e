// RUN: ckir-opt %s | ckir-opt | filecheck %s --check-prefix=IR
// RUN: ckir-opt %s --lower-decode{max-context=8} | filecheck %s --check-prefix=DEC
// RUN: ckir-opt %s --lower-prefill{max-context=8} | filecheck %s --check-prefix=PRE
// RUN: ckir-opt %s --lower-backward{max-context=8} | filecheck %s --check-prefix=BWD

// graph.lm_head with a bias (phi's head): the linear kernels serve it (its
// signature's kernel = "linear"), bias included; the backward gives the bias its
// gradient.
graph.model @lmb arch "test" symbols {E = 6, L = 1, V = 16} {
  graph.weight @embed : [V, E] f32 hf "embed"
  graph.weight @head : [V, E] f32 hf "head"
  graph.weight @"head.bias" : [V] f32 hf "head.bias"
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %logits = graph.lm_head %x {weights = [@head, @"head.bias"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.output %logits : !graph.tensor<[T, V], f32>
  }
}

// IR: %logits = graph.lm_head %x {weights = [@head, @head.bias]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>

// DEC: lowered.call @gemv_bias_f32(@decode.header.x, @w.head, @w.head.bias) -> (@decode.footer.logits) {N = 16 : i64, K = 6 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
// PRE: lowered.call @gemm_bias_f32(@prefill.header.x, @w.head, @w.head.bias) -> (@prefill.footer.logits) {M = #lowered.rt<T>, N = 16 : i64, K = 6 : i64, origin = #lowered.origin<scope "footer", op "graph.lm_head">}
// BWD: lowered.call @gemm_bias_f32(@backward.header.x, @w.head, @w.head.bias) -> (@backward.footer.logits)
// BWD: lowered.call @linear_bwd_weight_f32(@backward.footer.logits, @backward.header.x) -> (@grad.head)
// BWD-NEXT: lowered.call @bias_bwd_f32(@backward.footer.logits) -> (@grad.head.bias) {M = #lowered.rt<T>, N = 16 : i64, origin = #lowered.origin<scope "footer", op "grad(graph.lm_head)">}
// BWD: lowered.call @adamw_f32(@grad.head.bias, @optimize.coef) -> (@w.head.bias, @adam.m.head.bias, @adam.v.head.bias)
