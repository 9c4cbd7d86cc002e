/* ckir runtime: rotary position embedding, HF "rotate_half" convention.
 *
 * The angles and the rotation are ckir_rope.h's, shared with the backward
 * (rope_bwd_f32 in backward_attention.c, the rotation by the opposite angle):
 * inv_freq, the angle and cos/sin in float32 exactly as written there
 * (matching HF's float32 computation), cos/sin from libm.  R (the rotated
 * dims of each head), factor, ramp_w, ramp_i, ramp_0 and mscale are the
 * RoPE-scaling coefficients of ckir_rope.h; R = D, factor = mscale = 1 is
 * plain RoPE.  rope_ext_f32 takes a table of per-pair divisors instead
 * (LongRoPE): inv_freq(i) = 1 / (ext[i] theta^(2i/R)). */
#include "ckir_internal.h"
#include "ckir_rope.h"

void ckir_ref_rope_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D,
                       int64_t P, float theta, int64_t R, float factor, float ramp_w,
                       float ramp_i, float ramp_0, float mscale) {
  const ckir_rope_cfg cfg =
      ckir_rope_make_cfg(D, theta, R, factor, ramp_w, ramp_i, ramp_0, mscale, 1.0f);
  ckir_rope_rotate_ref(q, k, T, H, KV, P, &cfg);
}

void ckir_rope_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D, int64_t P,
                   float theta, int64_t R, float factor, float ramp_w, float ramp_i,
                   float ramp_0, float mscale) {
  CKIR_ROPE_REQUIRE(D, R, P, theta, factor, mscale, "rope_f32");
  const ckir_rope_cfg cfg =
      ckir_rope_make_cfg(D, theta, R, factor, ramp_w, ramp_i, ramp_0, mscale, 1.0f);
  ckir_rope_rotate(q, k, T, H, KV, P, &cfg);
}

void ckir_ref_rope_ext_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D,
                           int64_t P, float theta, int64_t R, float mscale, const float *ext) {
  const ckir_rope_cfg cfg = ckir_rope_make_ext_cfg(D, theta, R, mscale, ext, 1.0f);
  ckir_rope_rotate_ref(q, k, T, H, KV, P, &cfg);
}

void ckir_rope_ext_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D,
                       int64_t P, float theta, int64_t R, float mscale, const float *ext) {
  ckir_rope_require_ext(D, R, P, theta, mscale, ext, "rope_ext_f32");
  const ckir_rope_cfg cfg = ckir_rope_make_ext_cfg(D, theta, R, mscale, ext, 1.0f);
  ckir_rope_rotate(q, k, T, H, KV, P, &cfg);
}
