/* ckir runtime: RMSNorm (HF Llama) and LayerNorm (torch.nn.LayerNorm).
 * Rows are independent; OpenMP splits rows when T*E is large.  Sums are
 * accumulated in fp32 vector lanes (several partial sums) on the SIMD paths,
 * in double in the reference twins. */
#include "ckir_internal.h"

/* ---- reference twins ----------------------------------------------------- */

void ckir_ref_rmsnorm_f32(const float *x, const float *gamma, float *out, int64_t T, int64_t E,
                          float eps) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E;
    double ss = 0.0;
    for (int64_t e = 0; e < E; e++) ss += (double)xr[e] * xr[e];
    float r = 1.0f / sqrtf((float)(ss / (double)E) + eps);
    for (int64_t e = 0; e < E; e++) out[t * E + e] = (xr[e] * r) * gamma[e];
  }
}

void ckir_ref_layernorm_f32(const float *x, const float *gamma, const float *beta, float *out,
                            int64_t T, int64_t E, float eps) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E;
    double s = 0.0, ss = 0.0;
    for (int64_t e = 0; e < E; e++) s += xr[e];
    double mean = s / (double)E;
    for (int64_t e = 0; e < E; e++) ss += (xr[e] - mean) * (xr[e] - mean);
    float r = 1.0f / sqrtf((float)(ss / (double)E) + eps);
    float mf = (float)mean;
    for (int64_t e = 0; e < E; e++) out[t * E + e] = (xr[e] - mf) * r * gamma[e] + beta[e];
  }
}

/* ---- one row ------------------------------------------------------------ */

static float sum_squares(const float *x, int64_t E) {
#if defined(CKIR_AVX512)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + 32 <= E; e += 32) {
    __m512 v0 = _mm512_loadu_ps(x + e), v1 = _mm512_loadu_ps(x + e + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; e < E; e += 16) {
    __m512 v = _mm512_maskz_loadu_ps(ckir_mask16(E - e), x + e);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#elif defined(CKIR_AVX2)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 16 <= E; e += 16) {
    __m256 v0 = _mm256_loadu_ps(x + e), v1 = _mm256_loadu_ps(x + e + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  float s = ckir_hsum_ps256(_mm256_add_ps(a0, a1));
  for (; e < E; e++) s += x[e] * x[e];
  return s;
#else
  float s[4] = {0, 0, 0, 0};
  int64_t e = 0;
  for (; e + 4 <= E; e += 4)
    for (int j = 0; j < 4; j++) s[j] += x[e + j] * x[e + j];
  for (; e < E; e++) s[0] += x[e] * x[e];
  return (s[0] + s[1]) + (s[2] + s[3]);
#endif
}

static float sum_all(const float *x, int64_t E) {
#if defined(CKIR_AVX512)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + 32 <= E; e += 32) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + e));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + e + 16));
  }
  for (; e < E; e += 16) a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(ckir_mask16(E - e), x + e));
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#elif defined(CKIR_AVX2)
  __m256 a0 = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= E; e += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + e));
  float s = ckir_hsum_ps256(a0);
  for (; e < E; e++) s += x[e];
  return s;
#else
  float s[4] = {0, 0, 0, 0};
  int64_t e = 0;
  for (; e + 4 <= E; e += 4)
    for (int j = 0; j < 4; j++) s[j] += x[e + j];
  for (; e < E; e++) s[0] += x[e];
  return (s[0] + s[1]) + (s[2] + s[3]);
#endif
}

/* sum of (x - mean)^2 */
static float sum_centered_squares(const float *x, int64_t E, float mean) {
#if defined(CKIR_AVX512)
  __m512 m = _mm512_set1_ps(mean), a0 = _mm512_setzero_ps();
  for (int64_t e = 0; e < E; e += 16) {
    __mmask16 k = ckir_mask16(E - e);
    __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + e), m);
    a0 = _mm512_fmadd_ps(d, d, a0);
  }
  return _mm512_reduce_add_ps(a0);
#elif defined(CKIR_AVX2)
  __m256 m = _mm256_set1_ps(mean), a0 = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= E; e += 8) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + e), m);
    a0 = _mm256_fmadd_ps(d, d, a0);
  }
  float s = ckir_hsum_ps256(a0);
  for (; e < E; e++) s += (x[e] - mean) * (x[e] - mean);
  return s;
#else
  float s = 0.0f;
  for (int64_t e = 0; e < E; e++) s += (x[e] - mean) * (x[e] - mean);
  return s;
#endif
}

/* out = (x - shift) * r * gamma (+ beta when beta != NULL) */
static void scale_row(const float *x, const float *gamma, const float *beta, float *out,
                      int64_t E, float shift, float r) {
#if defined(CKIR_AVX512)
  __m512 vs = _mm512_set1_ps(shift), vr = _mm512_set1_ps(r);
  for (int64_t e = 0; e < E; e += 16) {
    __mmask16 k = ckir_mask16(E - e);
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + e), vs), vr);
    v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, gamma + e));
    if (beta) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, beta + e));
    _mm512_mask_storeu_ps(out + e, k, v);
  }
#elif defined(CKIR_AVX2)
  __m256 vs = _mm256_set1_ps(shift), vr = _mm256_set1_ps(r);
  int64_t e = 0;
  for (; e + 8 <= E; e += 8) {
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + e), vs), vr);
    v = _mm256_mul_ps(v, _mm256_loadu_ps(gamma + e));
    if (beta) v = _mm256_add_ps(v, _mm256_loadu_ps(beta + e));
    _mm256_storeu_ps(out + e, v);
  }
  for (; e < E; e++) out[e] = (x[e] - shift) * r * gamma[e] + (beta ? beta[e] : 0.0f);
#else
  for (int64_t e = 0; e < E; e++) out[e] = (x[e] - shift) * r * gamma[e] + (beta ? beta[e] : 0.0f);
#endif
}

void ckir_rmsnorm_f32(const float *x, const float *gamma, float *out, int64_t T, int64_t E,
                      float eps) {
#pragma omp parallel for schedule(static) if (T * E >= CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    float ms = sum_squares(x + t * E, E) / (float)E;
    float r = 1.0f / sqrtf(ms + eps);
    scale_row(x + t * E, gamma, NULL, out + t * E, E, 0.0f, r);
  }
}

void ckir_layernorm_f32(const float *x, const float *gamma, const float *beta, float *out,
                        int64_t T, int64_t E, float eps) {
#pragma omp parallel for schedule(static) if (T * E >= CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    float mean = sum_all(x + t * E, E) / (float)E;
    float var = sum_centered_squares(x + t * E, E, mean) / (float)E;
    scale_row(x + t * E, gamma, beta, out + t * E, E, mean, 1.0f / sqrtf(var + eps));
  }
}
