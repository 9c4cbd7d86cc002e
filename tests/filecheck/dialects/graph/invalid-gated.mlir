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

// -----

// softcap: cap must be positive
// CHECK: graph.softcap: cap = 0.0 must be positive and finite
graph.model @m arch "test" symbols {E = 4, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %y = graph.softcap %x {cap = 0.0 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %y : !graph.tensor<[T, E], f32>
  }
}

// -----

// attention: negative softcap
// CHECK: graph.attention: softcap = -1.0 must be 0 (none) or positive and finite
graph.model @m arch "test" symbols {E = 4, H = 2, D = 2, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %a = graph.attention %x, %x, %x heads H kv_heads H head_dim D {causal, softcap = -1.0 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %a : !graph.tensor<[T, E], f32>
  }
}

// -----

// attention: scale_dim must be positive
// CHECK: graph.attention: scale_dim = 0.0 must be positive and finite
graph.model @m arch "test" symbols {E = 4, H = 2, D = 2, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %a = graph.attention %x, %x, %x heads H kv_heads H head_dim D {causal, scale_dim = 0.0 : f64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %a : !graph.tensor<[T, E], f32>
  }
}

// -----

// attention: negative window
// CHECK: graph.attention: window = -2 is negative
graph.model @m arch "test" symbols {E = 4, H = 2, D = 2, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %a = graph.attention %x, %x, %x heads H kv_heads H head_dim D {causal, window = -2 : i64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %a : !graph.tensor<[T, E], f32>
  }
}

// -----

// attention: a window pattern needs a window
// CHECK: graph.attention: window_pattern without a window
graph.model @m arch "test" symbols {E = 4, H = 2, D = 2, L = 1, V = 8} {
  graph.weight @emb : [V, E] f32 hf "emb"
  graph.header {
    %x = graph.input "x" : !graph.tensor<[T, E], f32>
    %a = graph.attention %x, %x, %x heads H kv_heads H head_dim D {causal, window_pattern = 2 : i64} : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %a : !graph.tensor<[T, E], f32>
  }
}
