/* ckir runtime: residual add fused with the RMSNorm that follows it (target of
 * --fuse-add-rmsnorm).
 *
 *   add_rmsnorm_f32:  s = a + b;  h = s * rsqrt(mean(s^2) + eps) * gamma  (per row)
 *
 * One pass adds and accumulates the squares while s is written, a second
 * pass (s is then in L1) scales.  Both passes are the row microkernels that
 * rmsnorm_f32 (norm.c) runs (ckir_rows.h), so h is bit-identical to add_f32
 * followed by rmsnorm_f32 on the same build. */
#include "ckir_internal.h"
#include "ckir_fused.h"
#include "ckir_rows.h"

void ckir_add_rmsnorm_f32(const float *a, const float *b, const float *gamma, float *s, float *h,
                          int64_t T, int64_t E, float eps) {
  CKIR_REQUIRE(T >= 1 && E >= 1 && eps >= 0.0f, "add_rmsnorm_f32");
  CKIR_FOR_STATIC(T * E >= CKIR_PAR_MIN_WORK && T > 1, t, T, {
    const float ms = ckir_row_sumsq(a + t * E, b + t * E, s + t * E, E) / (float)E;
    ckir_row_scale(s + t * E, gamma, NULL, h + t * E, E, 0.0f, 1.0f / sqrtf(ms + eps));
  });
}

void ckir_ref_add_rmsnorm_f32(const float *a, const float *b, const float *gamma, float *s,
                              float *h, int64_t T, int64_t E, float eps) {
  for (int64_t t = 0; t < T; t++) {
    double ss = 0.0;
    for (int64_t e = 0; e < E; e++) {
      const float v = a[t * E + e] + b[t * E + e];
      s[t * E + e] = v;
      ss += (double)v * v;
    }
    const float r = 1.0f / sqrtf((float)(ss / (double)E) + eps);
    for (int64_t e = 0; e < E; e++) h[t * E + e] = (s[t * E + e] * r) * gamma[e];
  }
}
