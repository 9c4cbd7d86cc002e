// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// graph.head_rmsnorm's verifier: one case per message.

// the row is not a whole number of heads
// CHECK: graph.head_rmsnorm: the operand's last dim E (10) is not a multiple of head_dim = D (4)
graph.model @m arch "test" symbols {E = 10, D = 4, L = 1, V = 8} {
  graph.weight @g : [D] f32 hf "g"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.head_rmsnorm %x head_dim D {weights = [@g], eps = 1.0e-06 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// gamma spans the row, not one head
// CHECK: graph.head_rmsnorm: gamma @g has shape [E], expected [D]
graph.model @m arch "test" symbols {E = 8, D = 4, L = 1, V = 8} {
  graph.weight @g : [E] f32 hf "g"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.head_rmsnorm %x head_dim D {weights = [@g], eps = 1.0e-06 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// eps must be positive
// CHECK: graph.head_rmsnorm: eps = 0.0 must be positive
graph.model @m arch "test" symbols {E = 8, D = 4, L = 1, V = 8} {
  graph.weight @g : [D] f32 hf "g"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.head_rmsnorm %x head_dim D {weights = [@g], eps = 0.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// head_dim is a dim expression, written bare (parse error otherwise)
// CHECK: Expected 'head_dim'
graph.model @m arch "test" symbols {E = 8, D = 4, L = 1, V = 8} {
  graph.weight @g : [D] f32 hf "g"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.head_rmsnorm %x {weights = [@g], eps = 1.0e-06 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// a gamma offset must be finite
// CHECK: graph.head_rmsnorm: offset = inf must be finite
graph.model @m arch "test" symbols {E = 8, D = 4, L = 1, V = 8} {
  graph.weight @g : [D] f32 hf "g"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.head_rmsnorm %x head_dim D {weights = [@g], eps = 1.0e-06 : f64, offset = 0x7FF0000000000000 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}
