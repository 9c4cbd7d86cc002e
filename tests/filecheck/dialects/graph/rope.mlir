// RUN: ckir-opt %s | ckir-opt | filecheck %s
// RUN: ckir-opt %s --print-op-generic | ckir-opt | filecheck %s

// graph.rope's frequency scaling and partial rotation: each rope_type with its
// attributes round-trips (custom -> custom and generic -> custom alike).

graph.model @m arch "test" symbols {D = 12, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "default"} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q2, %k2 = graph.rope %q1, %k1 heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "linear", factor = 4.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q3, %k3 = graph.rope %q2, %k2 heads H kv_heads KV head_dim D {theta = 5.0e+05 : f64, rope_type = "wavelength", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_context = 8192 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q4, %k4 = graph.rope %q3, %k3 heads H kv_heads KV head_dim D {theta = 1.0e+06 : f64, rope_type = "yarn", factor = 4.0 : f64, original_context = 32768 : i64, beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, mscale = 1.0 : f64, mscale_all_dim = 0.5 : f64, truncate} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q5, %k5 = graph.rope %q4, %k4 heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "yarn", factor = 2.0 : f64, original_context = 64 : i64, attention_factor = 1.5 : f64, partial_rotary_factor = 0.4 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q6, %k6 = graph.rope %q5, %k5 heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, partial_rotary_factor = 0.5 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q7, %k7 = graph.rope %q6, %k6 heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 1.25, 2.0, 3.5, 7.0, 11.0>, original_context = 32 : i64, scaled_context = 64 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %q8, %k8 = graph.rope %q7, %k7 heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 3.0>, original_context = 32 : i64, factor = 2.0 : f64, attention_factor = 1.25 : f64, partial_rotary_factor = 0.4 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q8 : !graph.tensor<[T, H*D], f32>
  }
}

// CHECK:      %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64, rope_type = "default"} :
// CHECK-NEXT: %q2, %k2 = graph.rope %q1, %k1 heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64, rope_type = "linear", factor = 4.000000e+00 : f64} :
// CHECK-NEXT: %q3, %k3 = graph.rope %q2, %k2 heads H kv_heads KV head_dim D {theta = 5.000000e+05 : f64, rope_type = "wavelength", factor = 8.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, high_freq_factor = 4.000000e+00 : f64, original_context = 8192 : i64} :
// CHECK-NEXT: %q4, %k4 = graph.rope %q3, %k3 heads H kv_heads KV head_dim D {theta = 1.000000e+06 : f64, rope_type = "yarn", factor = 4.000000e+00 : f64, original_context = 32768 : i64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, mscale = 1.000000e+00 : f64, mscale_all_dim = 5.000000e-01 : f64, truncate} :
// CHECK-NEXT: %q5, %k5 = graph.rope %q4, %k4 heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64, rope_type = "yarn", factor = 2.000000e+00 : f64, original_context = 64 : i64, attention_factor = 1.500000e+00 : f64, partial_rotary_factor = 4.000000e-01 : f64} :
// CHECK-NEXT: %q6, %k6 = graph.rope %q5, %k5 heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64, partial_rotary_factor = 5.000000e-01 : f64} :
// CHECK-NEXT: %q7, %k7 = graph.rope %q6, %k6 heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.000000e+00, 1.250000e+00, 2.000000e+00, 3.500000e+00, 7.000000e+00, 1.100000e+01>, original_context = 32 : i64, scaled_context = 64 : i64} :
// CHECK-NEXT: %q8, %k8 = graph.rope %q7, %k7 heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.000000e+00, 3.000000e+00>, original_context = 32 : i64, factor = 2.000000e+00 : f64, attention_factor = 1.250000e+00 : f64, partial_rotary_factor = 4.000000e-01 : f64} :
