/* ckir runtime: rotary position embedding, HF "rotate_half" convention.
 *
 * inv_freq, the angle and cos/sin are computed in float32 exactly as written in
 * the header (matching HF's float32 computation); cos/sin come from libm
 * (cosf/sinf: correct range reduction for large positions).  The table for one
 * token is built in chunks of ROPE_CHUNK frequencies on the stack and applied
 * to every head of q and k, so any even D works. */
#include "ckir_internal.h"

#define ROPE_CHUNK 64

static inline float rope_inv_freq(int64_t i, int64_t D, float theta) {
  return 1.0f / powf(theta, (float)(2 * i) / (float)D);
}

void ckir_ref_rope_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D,
                       int64_t P, float theta) {
  int64_t half = D / 2;
  for (int64_t t = 0; t < T; t++) {
    float pos = (float)(P + t);
    for (int64_t i = 0; i < half; i++) {
      float angle = pos * rope_inv_freq(i, D, theta);
      float c = cosf(angle), s = sinf(angle);
      for (int64_t h = 0; h < H + KV; h++) {
        float *x = h < H ? q + t * H * D + h * D : k + t * KV * D + (h - H) * D;
        float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

/* Rotate one head's pairs [i0, i0 + n) with the tables c, s (n <= ROPE_CHUNK). */
static inline void rope_apply(float *x, int64_t half, int64_t i0, int64_t n, const float *c,
                              const float *s) {
  float *a = x + i0, *b = x + half + i0;
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv x1 = ckv_load_n(a + i, ln), x2 = ckv_load_n(b + i, ln);
    const ckv vc = ckv_load_n(c + i, ln), vs = ckv_load_n(s + i, ln);
    ckv_store_n(a + i, ln, ckv_fms(x1, vc, ckv_mul(x2, vs)));
    ckv_store_n(b + i, ln, ckv_fma(x2, vc, ckv_mul(x1, vs)));
  });
}

void ckir_rope_f32(float *q, float *k, int64_t T, int64_t H, int64_t KV, int64_t D, int64_t P,
                   float theta) {
  CKIR_REQUIRE(D >= 2 && D % 2 == 0 && P >= 0, "rope_f32");
  int64_t half = D / 2;
#pragma omp parallel for schedule(static) if (T * (H + KV) * D >= CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    float c[ROPE_CHUNK], s[ROPE_CHUNK];
    float pos = (float)(P + t);
    for (int64_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
      int64_t n = CKIR_MIN(ROPE_CHUNK, half - i0);
      for (int64_t i = 0; i < n; i++) {
        float angle = pos * rope_inv_freq(i0 + i, D, theta);
        c[i] = cosf(angle);
        s[i] = sinf(angle);
      }
      for (int64_t h = 0; h < H; h++) rope_apply(q + (t * H + h) * D, half, i0, n, c, s);
      for (int64_t h = 0; h < KV; h++) rope_apply(k + (t * KV + h) * D, half, i0, n, c, s);
    }
  }
}
