// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// Round trip of mul_scalar (value, optional exponent), rmsnorm's optional offset and geglu.
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

// CHECK: %x = graph.mul_scalar %e {value = 8.000000e+00 : f64, exponent = 5.000000e-01 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK: %h = graph.rmsnorm %x {weights = [@"layers.{i}.norm"], eps = 1.000000e-06 : f64, offset = 1.000000e+00 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
// CHECK: %m = graph.geglu %g, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
// CHECK: %h = graph.mul_scalar %n {value = -5.000000e-01 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
