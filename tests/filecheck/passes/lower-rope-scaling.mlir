// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.000000e+04 : f64, rope_type = "yarn", factor = 4.0 : f64, original_context = 32 : i64, partial_rotary_factor = 0.5 : f64, truncate}/' %inputs/tiny_llama.mlir | ckir-opt --lower-prefill{max-context=16} --lower-decode{max-context=16} --lower-backward{max-context=16} | filecheck %s --check-prefix=YARN
// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 5.0e+05 : f64, rope_type = "wavelength", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_context = 64 : i64}/' %inputs/tiny_llama.mlir | ckir-opt --lower-decode{max-context=16} | filecheck %s --check-prefix=WAVE
// RUN: sed 's/{theta = 1.000000e+04 : f64}/{theta = 1.000000e+04 : f64, rope_type = "linear", factor = 2.5 : f64}/' %inputs/tiny_llama.mlir | ckir-opt --lower-decode{max-context=16} --plan-layout --emit-c | filecheck %s --check-prefix=LINEAR

// graph.rope's scaling becomes the coefficients of the one rope kernel
// (passes/lowering/rope_scaling.py): prefill, decode and the backward's forward
// copy and rope_bwd all pass the same numbers.  YaRN over half of each 16-dim
// head (R = 8): a ramp over the pair index and the attention scale
// 0.1 ln(4) + 1 = 1.1386...
// YARN:      lowered.call @rope_f32() -> (@prefill.layers.0.q, @prefill.layers.0.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+04 : f64, R = 8 : i64, factor = 4.000000e+00 : f64, ramp_w = 0.000000e+00 : f64, ramp_i = -1.000000e+00 : f64, ramp_0 = 1.000000e+00 : f64, mscale = 1.1386294361119891 : f64,
// YARN:      lowered.call @rope_f32() -> (@decode.layers.0.q, @decode.layers.0.k) {T = 1 : i64, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 1.000000e+04 : f64, R = 8 : i64, factor = 4.000000e+00 : f64, ramp_w = 0.000000e+00 : f64, ramp_i = -1.000000e+00 : f64, ramp_0 = 1.000000e+00 : f64, mscale = 1.1386294361119891 : f64,
// YARN:      lowered.call @rope_f32() -> (@backward.layers.0.q, @backward.layers.0.k) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = 0 : i64, theta = 1.000000e+04 : f64, R = 8 : i64, factor = 4.000000e+00 : f64, ramp_w = 0.000000e+00 : f64, ramp_i = -1.000000e+00 : f64, ramp_0 = 1.000000e+00 : f64, mscale = 1.1386294361119891 : f64,
// YARN:      lowered.call @rope_bwd_f32() -> (@backward.layers.0.dqr, @backward.layers.0.dkr) {T = #lowered.rt<T>, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = 0 : i64, theta = 1.000000e+04 : f64, R = 8 : i64, factor = 4.000000e+00 : f64, ramp_w = 0.000000e+00 : f64, ramp_i = -1.000000e+00 : f64, ramp_0 = 1.000000e+00 : f64, mscale = 1.1386294361119891 : f64,

// The wavelength band (transformers' llama3): a ramp over the unscaled inverse
// frequency b, ramp_w = 64 / (2 pi (4 - 1)), ramp_0 = -1 / (4 - 1).
// WAVE: lowered.call @rope_f32() -> (@decode.layers.0.q, @decode.layers.0.k) {T = 1 : i64, H = 4 : i64, KV = 2 : i64, D = 16 : i64, P = #lowered.rt<P>, theta = 5.000000e+05 : f64, R = 16 : i64, factor = 8.000000e+00 : f64, ramp_w = 3.3953054526271007 : f64, ramp_i = 0.000000e+00 : f64, ramp_0 = -0.33333333333333331 : f64, mscale = 1.000000e+00 : f64,

// Linear: every frequency divided by factor (no ramp); the C call passes them as floats.
// LINEAR: ckir_rope_f32({{.*}}, 1, 4, 2, 16, P, 10000.0f, 16, 2.5f, 0.0f, 0.0f, 0.0f, 1.0f);
