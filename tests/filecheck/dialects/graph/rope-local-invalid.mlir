// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// graph.rope's local layers (local_theta, local_pattern): one case per verifier message.

// CHECK: graph.rope: local_theta and local_pattern go together
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, local_theta = 1.0e+04 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// CHECK: graph.rope: local_theta = 0.0 must be positive
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, local_theta = 0.0 : f64, local_pattern = 2 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// CHECK: graph.rope: local_pattern = 0 must be at least 1
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, local_theta = 1.0e+04 : f64, local_pattern = 0 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}
