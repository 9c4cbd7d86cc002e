// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// mul_scalar: a negative value to a fractional power is not a real number
// CHECK: graph.mul_scalar: value = -4.0 ** 0.5 is not a finite number
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.mul_scalar %x {value = -4.0 : f64, exponent = 0.5 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// mul_scalar: overflow
// CHECK: graph.mul_scalar: value = 1e+300 ** 2.0 is not a finite number
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.mul_scalar %x {value = 1.0e+300 : f64, exponent = 2.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// mul_scalar: the value is required
// CHECK: property 'value' expected in operation 'graph.mul_scalar'
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.mul_scalar %x {exponent = 2.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// mul_scalar: result type
// CHECK: graph.mul_scalar: operand and result have different types
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.mul_scalar %x {value = 2.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
}

// -----

// geglu: gate and up differ
// CHECK: graph.geglu: operands have different types
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %u = graph.input "u" : !graph.tensor<[T, V], f32>
    %y = graph.geglu %x, %u : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, V], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// rmsnorm: offset must be a float
// CHECK: "one" should be of base attribute float
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @g : [E] f32 hf "g"
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.rmsnorm %x {weights = [@g], eps = 1.0e-06 : f64, offset = "one"} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}
