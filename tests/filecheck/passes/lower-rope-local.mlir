// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.0e+06 : f64, rope_type = "linear", factor = 8.0 : f64, local_theta = 1.0e+04 : f64, local_pattern = 2 : i64}/' %inputs/tiny_llama.mlir | ckir-opt | filecheck %s --check-prefix=IR
// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.0e+06 : f64, rope_type = "linear", factor = 8.0 : f64, local_theta = 1.0e+04 : f64, local_pattern = 2 : i64}/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --lower-backward{max-context=16} | filecheck %s

// graph.rope with local layers: local_pattern 2 makes layer 0 ((0 + 1) % 2 != 0) a
// local layer, rotated by local_theta with no frequency scaling (factor 1), and
// layer 1 a global one, rotated by theta with its linear scaling (factor 8).
// Prefill, decode, the backward's forward copy and rope_bwd all pass the same numbers.
// IR: graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.000000e+06 : f64, rope_type = "linear", factor = 8.000000e+00 : f64, local_theta = 1.000000e+04 : f64, local_pattern = 2 : i64}

// CHECK: lowered.call @rope_f32() -> (@prefill.layers.0.q, @prefill.layers.0.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+04 : f64, R = 16 : i64, factor = 1.000000e+00 : f64,
// CHECK: lowered.call @rope_f32() -> (@prefill.layers.1.q, @prefill.layers.1.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+06 : f64, R = 16 : i64, factor = 8.000000e+00 : f64,
// CHECK: lowered.call @rope_f32() -> (@decode.layers.0.q, @decode.layers.0.k) {{.*}} theta = 1.000000e+04 : f64, R = 16 : i64, factor = 1.000000e+00 : f64,
// CHECK: lowered.call @rope_f32() -> (@decode.layers.1.q, @decode.layers.1.k) {{.*}} theta = 1.000000e+06 : f64, R = 16 : i64, factor = 8.000000e+00 : f64,
// CHECK-DAG: lowered.call @rope_f32() -> (@backward.layers.0.q, @backward.layers.0.k) {{.*}} theta = 1.000000e+04 : f64, R = 16 : i64, factor = 1.000000e+00 : f64,
// CHECK-DAG: lowered.call @rope_f32() -> (@backward.layers.1.q, @backward.layers.1.k) {{.*}} theta = 1.000000e+06 : f64, R = 16 : i64, factor = 8.000000e+00 : f64,
// CHECK-DAG: lowered.call @rope_bwd_f32() -> (@backward.layers.0.dqr, @backward.layers.0.dkr) {{.*}} theta = 1.000000e+04 : f64, R = 16 : i64, factor = 1.000000e+00 : f64,
// CHECK-DAG: lowered.call @rope_bwd_f32() -> (@backward.layers.1.dqr, @backward.layers.1.dkr) {{.*}} theta = 1.000000e+06 : f64, R = 16 : i64, factor = 8.000000e+00 : f64,
