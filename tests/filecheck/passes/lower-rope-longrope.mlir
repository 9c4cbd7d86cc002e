// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.000000e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0>, original_context = 32 : i64, scaled_context = 64 : i64}/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --lower-backward{max-context=16} | filecheck %s
// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.000000e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0>, original_context = 32 : i64, attention_factor = 1.5 : f64}/' %inputs/tiny_llama.mlir | ckir-opt --lower-decode{max-context=32} --plan-layout --emit-c | filecheck %s --check-prefix=EMIT
// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.000000e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0>, original_context = 32 : i64}/' %inputs/tiny_llama.mlir | not ckir-opt --lower-decode{max-context=33} 2>&1 | filecheck %s --check-prefix=LONG
// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.000000e+04 : f64, rope_type = "longrope", ext_factors = array<f64: 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0>, original_context = 32 : i64, attention_factor = 1.5 : f64}/' %inputs/tiny_llama.mlir | ckir-opt --lower-decode{max-context=32} --emit-json | ckir-opt | filecheck %s --check-prefix=JSON
// graph.rope's longrope: its short factors become the f32s table of the
// rope_ext kernels in prefill, decode, the backward's forward copy and the
// backward (rope_ext_bwd); the attention factor sqrt(1 + ln(64/32) / ln(32)) =
// 1.0954... from scaled_context / original_context.
// CHECK:      lowered.call @rope_ext_f32() -> (@prefill.layers.0.q, @prefill.layers.0.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+04 : f64, R = 16 : i64, mscale = 1.0954451150103321 : f64, ext = array<f32: 1.000000e+00, 1.500000e+00, 2.000000e+00, 3.000000e+00, 5.000000e+00, 8.000000e+00, 1.300000e+01, 2.100000e+01>,
// CHECK:      lowered.call @rope_ext_f32() -> (@decode.layers.0.q, @decode.layers.0.k) {T = 1 : i64, {{.*}} mscale = 1.0954451150103321 : f64, ext = array<f32: 1.000000e+00, 1.500000e+00,
// CHECK:      lowered.call @rope_ext_f32() -> (@backward.layers.0.q, @backward.layers.0.k) {{.*}} ext = array<f32: 1.000000e+00, 1.500000e+00,
// CHECK:      lowered.call @rope_ext_bwd_f32() -> (@backward.layers.1.dqr, @backward.layers.1.dkr) {{.*}} mscale = 1.0954451150103321 : f64, ext = array<f32: 1.000000e+00, 1.500000e+00, 2.000000e+00, 3.000000e+00, 5.000000e+00, 8.000000e+00, 1.300000e+01, 2.100000e+01>,
// CHECK-NOT:  @rope_f32
// CHECK-NOT:  @rope_bwd_f32

// The C call passes the table as a compound literal; a given attention_factor is mscale.
// EMIT: ckir_rope_ext_f32({{.*}}, 1, 4, 2, 16, P, 10000.0f, 16, 1.5f, (const float[]){1.0f, 1.5f, 2.0f, 3.0f, 5.0f, 8.0f, 13.0f, 21.0f});

// The f32s parameter (declared as tensor<*xf32>, valued array<f32: ...>) survives JSON.
// JSON: params (T: i64, H: i64, KV: i64, D: i64, P: i64, theta: f32, R: i64, mscale: f32, ext: f32s)
// JSON: lowered.call @rope_ext_f32() {{.*}} mscale = 1.500000e+00 : f64, ext = array<f32: 1.000000e+00, 1.500000e+00, 2.000000e+00, 3.000000e+00, 5.000000e+00, 8.000000e+00, 1.300000e+01, 2.100000e+01>,

// A context past original_max_position_embeddings would need the long factors: refused.
// LONG: graph.rope: LongRoPE's short factors hold up to original_max_position_embeddings = 32 tokens, but the model is compiled for 33 {{.*}}; use --max-context 32 or less
