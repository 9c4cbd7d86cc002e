/* ckir runtime: residual add fused with the RMSNorm that follows it (target of
 * --fuse-add-rmsnorm).
 *
 *   add_rmsnorm_f32:  s = a + b;  h = s * rsqrt(mean(s^2) + eps) * gamma  (per row)
 *
 * One pass adds and accumulates the squares while s is written, a second
 * pass (s is then in L1) scales.  The sums of squares are accumulated in the
 * same lanes and order as rmsnorm_f32 (norm.c), so h is bit-identical to
 * add_f32 followed by rmsnorm_f32 on the same build. */
#include "ckir_internal.h"
#include "ckir_fused.h"

/* s = a + b over one row; returns sum(s^2) */
static float add_sumsq(const float *a, const float *b, float *s, int64_t E) {
#if defined(CKIR_AVX512)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + 32 <= E; e += 32) {
    const __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(a + e), _mm512_loadu_ps(b + e));
    const __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(a + e + 16), _mm512_loadu_ps(b + e + 16));
    _mm512_storeu_ps(s + e, v0);
    _mm512_storeu_ps(s + e + 16, v1);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; e < E; e += 16) {
    const __mmask16 m = ckir_mask16(E - e);
    const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + e), _mm512_maskz_loadu_ps(m, b + e));
    _mm512_mask_storeu_ps(s + e, m, v);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#elif defined(CKIR_AVX2)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 16 <= E; e += 16) {
    const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(a + e), _mm256_loadu_ps(b + e));
    const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(a + e + 8), _mm256_loadu_ps(b + e + 8));
    _mm256_storeu_ps(s + e, v0);
    _mm256_storeu_ps(s + e + 8, v1);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  float acc = ckir_hsum_ps256(_mm256_add_ps(a0, a1));
  for (; e < E; e++) {
    const float v = a[e] + b[e];
    s[e] = v;
    acc += v * v;
  }
  return acc;
#else
  float acc[4] = {0, 0, 0, 0};
  int64_t e = 0;
  for (; e + 4 <= E; e += 4)
    for (int j = 0; j < 4; j++) {
      const float v = a[e + j] + b[e + j];
      s[e + j] = v;
      acc[j] += v * v;
    }
  for (; e < E; e++) {
    const float v = a[e] + b[e];
    s[e] = v;
    acc[0] += v * v;
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
#endif
}

/* h = (s * r) * gamma over one row */
static void scale(const float *s, const float *gamma, float *h, int64_t E, float r) {
  int64_t e = 0;
#if defined(CKIR_AVX512)
  const __m512 vr = _mm512_set1_ps(r);
  for (; e < E; e += 16) {
    const __mmask16 m = ckir_mask16(E - e);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + e), vr);
    _mm512_mask_storeu_ps(h + e, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, gamma + e)));
  }
#elif defined(CKIR_AVX2)
  const __m256 vr = _mm256_set1_ps(r);
  for (; e + 8 <= E; e += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + e), vr);
    _mm256_storeu_ps(h + e, _mm256_mul_ps(v, _mm256_loadu_ps(gamma + e)));
  }
#endif
  for (; e < E; e++) h[e] = (s[e] * r) * gamma[e];
}

void ckir_add_rmsnorm_f32(const float *a, const float *b, const float *gamma, float *s, float *h,
                          int64_t T, int64_t E, float eps) {
  CKIR_REQUIRE(T >= 1 && E >= 1 && eps >= 0.0f, "add_rmsnorm_f32");
#pragma omp parallel for schedule(static) if (T * E >= CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    const float ms = add_sumsq(a + t * E, b + t * E, s + t * E, E) / (float)E;
    scale(s + t * E, gamma, h + t * E, E, 1.0f / sqrtf(ms + eps));
  }
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
