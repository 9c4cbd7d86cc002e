/* ckir runtime: rotary position embedding, HF "rotate_half" convention.
 *
 * The angles and the rotation are ckir_rope.h's, shared with the backward
 * (rope_bwd_f32 in backward_attention.c, the rotation by the opposite angle):
 * inv_freq, the angle and cos/sin in float32 exactly as written there
 * (matching HF's float32 computation), cos/sin from libm. */
#include "ckir_internal.h"
#include "ckir_rope.h"

void ckir_ref_rope_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D,
                       int64_t P, float theta) {
  ckir_rope_rotate_ref(q, k, T, H, KV, D, P, theta, 1.0f);
}

void ckir_rope_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D, int64_t P,
                   float theta) {
  CKIR_REQUIRE(D >= 2 && D % 2 == 0 && P >= 0, "rope_f32");
  ckir_rope_rotate(q, k, T, H, KV, D, P, theta, 1.0f);
}
