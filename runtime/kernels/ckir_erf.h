/* ckir runtime: the erf GELU of gelu_erf_f32 (elementwise.c) and of its backward
 * gelu_erf_bwd_f32 (backward.c), defined once over the vector layer (private).
 *
 *   gelu(x) = x Phi(x),  Phi(x) = 0.5 (1 + erf(x / sqrt 2))  (the normal CDF)
 *   gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * Phi is computed without 1 + erf (which cancels for x < 0): with a = |x|,
 *
 *   h = Phi(-a) = exp(-a^2 / 2) * t * R(t),   t = 1 / (1 + 0.4 a)
 *   Phi(x) = h for x < 0,  1 - h for x >= 0   (h <= 0.5: no cancellation)
 *
 * R is a degree-10 polynomial fitted to Phi(-a) exp(a^2 / 2) / t over
 * a in [0, 14] (iteratively reweighted least squares on the relative error,
 * float64 erfc as the target; fit error < 1e-8, float32 evaluation about 3e-7).
 * exp(-a^2 / 2) is taken as exp(-s / 2) (1 - e / 2) with s = x*x rounded and
 * e = fma(x, x, -s) its exact rounding error, so large |x| loses nothing to
 * the rounding of x^2.  |x| is clamped to 14 inside Phi, and Phi(-|x|) is 0
 * beyond it (Phi(-14) ~ 8e-45: 0 or 1 in float32); the final product uses x
 * itself, so NaN stays NaN. */
#ifndef CKIR_ERF_H
#define CKIR_ERF_H

#include "ckir_internal.h"

#define CKIR_GELU_ERF_K 0.4f
#define CKIR_GELU_ERF_CLAMP 14.0f
#define CKIR_INV_SQRT_2PI 0.3989422804014327f
#define CKIR_GELU_ERF_R0 1.595691890e-01f
#define CKIR_GELU_ERF_R1 1.598024964e-01f
#define CKIR_GELU_ERF_R2 1.311939359e-01f
#define CKIR_GELU_ERF_R3 1.034796834e-01f
#define CKIR_GELU_ERF_R4 -7.408729196e-02f
#define CKIR_GELU_ERF_R5 2.395908684e-01f
#define CKIR_GELU_ERF_R6 -5.768001080e-01f
#define CKIR_GELU_ERF_R7 6.076338887e-01f
#define CKIR_GELU_ERF_R8 -3.351058364e-01f
#define CKIR_GELU_ERF_R9 9.590010345e-02f
#define CKIR_GELU_ERF_R10 -1.117692050e-02f

/* the three per-ISA pieces: |v|, a*b - c with one rounding (the scalar build's
 * ckv_fms rounds twice, fmaf does not), and (v < 0 ? neg : pos) per lane */
#if defined(CKIR_AVX512)
CKIR_INLINE ckv ckerf_abs_(ckv v) { return _mm512_abs_ps(v); }
CKIR_INLINE ckv ckerf_fms_exact_(ckv a, ckv b, ckv c) { return _mm512_fmsub_ps(a, b, c); }
CKIR_INLINE ckv ckerf_sign_select_(ckv v, ckv neg, ckv pos) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), pos, neg);
}
#elif defined(CKIR_AVX2)
CKIR_INLINE ckv ckerf_abs_(ckv v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
CKIR_INLINE ckv ckerf_fms_exact_(ckv a, ckv b, ckv c) { return _mm256_fmsub_ps(a, b, c); }
CKIR_INLINE ckv ckerf_sign_select_(ckv v, ckv neg, ckv pos) {
  return _mm256_blendv_ps(pos, neg, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
}
#else
CKIR_INLINE ckv ckerf_abs_(ckv v) {
  for (int j = 0; j < CKV_W; j++) v.l[j] = fabsf(v.l[j]);
  return v;
}
CKIR_INLINE ckv ckerf_fms_exact_(ckv a, ckv b, ckv c) {
  for (int j = 0; j < CKV_W; j++) a.l[j] = fmaf(a.l[j], b.l[j], -c.l[j]);
  return a;
}
CKIR_INLINE ckv ckerf_sign_select_(ckv v, ckv neg, ckv pos) {
  for (int j = 0; j < CKV_W; j++) pos.l[j] = v.l[j] < 0.0f ? neg.l[j] : pos.l[j];
  return pos;
}
#endif

/* Phi(x) per lane; *gauss = exp(-x^2 / 2) (of x clamped to +-14) for the backward */
CKIR_INLINE ckv ckv_normal_cdf(ckv x, ckv *gauss) {
  const ckv one = ckv_set1(1.0f), lim = ckv_set1(CKIR_GELU_ERF_CLAMP);
  const ckv xc = ckv_min(ckv_max(x, ckv_sub(ckv_zero(), lim)), lim);
  const ckv a = ckerf_abs_(xc);
  const ckv s = ckv_mul(xc, xc);
  const ckv e = ckerf_fms_exact_(xc, xc, s); /* xc^2 = s + e exactly */
  const ckv mhalf = ckv_set1(-0.5f);
  const ckv ex = ckv_exp(ckv_mul(mhalf, s));
  const ckv g = ckv_fma(mhalf, ckv_mul(e, ex), ex); /* exp(-s/2) (1 - e/2) */
  const ckv t = ckv_div(one, ckv_fma(ckv_set1(CKIR_GELU_ERF_K), a, one));
  ckv r = ckv_set1(CKIR_GELU_ERF_R10);
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R9));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R8));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R7));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R6));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R5));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R4));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R3));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R2));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R1));
  r = ckv_fma(r, t, ckv_set1(CKIR_GELU_ERF_R0));
  /* Phi(-|x|), 0 beyond the clamp (where exp's own clamp would leave a denormal) */
  const ckv h = ckerf_sign_select_(ckv_sub(lim, ckerf_abs_(x)), ckv_zero(),
                                   ckv_mul(g, ckv_mul(t, r)));
  *gauss = g;
  return ckerf_sign_select_(xc, h, ckv_sub(one, h));
}

/* gelu_erf(x) = x Phi(x) */
CKIR_INLINE ckv ckv_gelu_erf(ckv x) {
  ckv g;
  return ckv_mul(x, ckv_normal_cdf(x, &g));
}

/* gelu_erf'(x) = Phi(x) + x exp(-x^2/2) / sqrt(2 pi) */
CKIR_INLINE ckv ckv_gelu_erf_grad(ckv x) {
  ckv g;
  const ckv p = ckv_normal_cdf(x, &g);
  return ckv_fma(ckv_mul(x, ckv_set1(CKIR_INV_SQRT_2PI)), g, p);
}

#endif /* CKIR_ERF_H */
