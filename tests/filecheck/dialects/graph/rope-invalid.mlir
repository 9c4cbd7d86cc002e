// RUN: ckir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// graph.rope's scaling and partial-rotation attributes: one case per verifier message.

// unknown rope_type
// CHECK: graph.rope: rope_type = "dynamic" is not one of default, linear, wavelength, yarn, longrope
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "dynamic", factor = 2.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// linear without its factor
// CHECK: graph.rope: rope_type = "linear" needs factor
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "linear"} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// a scaling attribute without a rope_type
// CHECK: graph.rope: factor does not apply to rope_type = "default"
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, factor = 2.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// a yarn attribute on the wavelength type
// CHECK: graph.rope: beta_fast does not apply to rope_type = "wavelength"
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "wavelength", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_context = 64 : i64, beta_fast = 32.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// wavelength without original_context
// CHECK: graph.rope: rope_type = "wavelength" needs original_context
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "wavelength", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// factor not positive
// CHECK: graph.rope: factor = 0.0 must be positive
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "linear", factor = 0.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// high_freq_factor not above low_freq_factor
// CHECK: graph.rope: high_freq_factor = 1.0 must be greater than low_freq_factor = 4.0
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "wavelength", factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 1.0 : f64, original_context = 64 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// original_context not positive
// CHECK: graph.rope: original_context = 0 must be positive
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "yarn", factor = 2.0 : f64, original_context = 0 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// beta_fast below beta_slow
// CHECK: graph.rope: beta_fast = 1.0 must not be smaller than beta_slow = 2.0
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "yarn", factor = 2.0 : f64, original_context = 64 : i64, beta_fast = 1.0 : f64, beta_slow = 2.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// negative mscale
// CHECK: graph.rope: mscale = -1.0 must not be negative
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "yarn", factor = 2.0 : f64, original_context = 64 : i64, mscale = -1.0 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// partial_rotary_factor out of range
// CHECK: graph.rope: partial_rotary_factor = 1.5 must be in (0, 1]
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, partial_rotary_factor = 1.5 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// partial rotation of an odd number of dims
// CHECK: graph.rope: rotates 3 dims of head_dim = D (6); that must be even and at least 2
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, partial_rotary_factor = 0.5 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// longrope with a divisor table of the wrong length (6 rotated dims: 3 pairs)
// CHECK: graph.rope: ext_factors has 2 values; the 6 rotated dims of head_dim = D (6) need 3
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 2.0>, original_context = 32 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// longrope with a divisor that is not positive
// CHECK: graph.rope: ext_factors has 0.0; each must be positive
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 0.0, 2.0>, original_context = 32 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// longrope without its divisor table
// CHECK: graph.rope: rope_type = "longrope" needs ext_factors
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "longrope", original_context = 32 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// a divisor table on another type
// CHECK: graph.rope: ext_factors does not apply to rope_type = "linear"
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "linear", factor = 2.0 : f64, ext_factors = array<f64: 1.0, 1.0, 1.0>} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}

// -----

// a divisor table of f32
// CHECK: graph.rope: ext_factors must be an array<f64: ...>
graph.model @m arch "test" symbols {D = 6, H = 2, KV = 1} {
  graph.header {
    %q = graph.input "q" : !graph.tensor<[T, H*D], f32>
    %k = graph.input "k" : !graph.tensor<[T, KV*D], f32>
    %q1, %k1 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64, rope_type = "longrope", ext_factors = array<f32: 1.0, 1.0, 1.0>, original_context = 32 : i64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    graph.yield %q1 : !graph.tensor<[T, H*D], f32>
  }
}
