/* ckir runtime: matrix-vector products for decode (M = 1).
 *
 * Memory-bandwidth bound: every weight is read once.  Rows of w are processed
 * GEMV_R at a time (GEMV_R concurrent sequential streams, x stays in L1) and
 * the row blocks are split statically over OpenMP threads, so both cores pull
 * from memory.  The same core serves gemm when M is tiny: the w block is then
 * reused from cache for every row of x. */
#include "ckir_internal.h"

#define GEMV_R 4

/* out[r] = dot(x, w + r*K) for r < GEMV_R */
static inline void dot_block(const float *x, const float *w, int64_t K, float out[GEMV_R]) {
  const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
#if defined(CKIR_AVX512)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
         a3 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(),
         b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), x0, a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k), x0, a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k), x0, a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k), x0, a3);
    b0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k + 16), x1, b0);
    b1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k + 16), x1, b1);
    b2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k + 16), x1, b2);
    b3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k + 16), x1, b3);
  }
  for (; k < K; k += 16) {
    __mmask16 m = ckir_mask16(K - k);
    __m512 x0 = _mm512_maskz_loadu_ps(m, x + k);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + k), x0, a0);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + k), x0, a1);
    a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + k), x0, a2);
    a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + k), x0, a3);
  }
  out[0] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
  out[1] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
  out[2] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
  out[3] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
#elif defined(CKIR_AVX2)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(),
         b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), x0, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), x0, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), x0, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), x0, a3);
    b0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k + 8), x1, b0);
    b1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k + 8), x1, b1);
    b2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k + 8), x1, b2);
    b3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k + 8), x1, b3);
  }
  for (; k + 8 <= K; k += 8) {
    __m256 x0 = _mm256_loadu_ps(x + k);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), x0, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), x0, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), x0, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), x0, a3);
  }
  float s0 = ckir_hsum_ps256(_mm256_add_ps(a0, b0)), s1 = ckir_hsum_ps256(_mm256_add_ps(a1, b1)),
        s2 = ckir_hsum_ps256(_mm256_add_ps(a2, b2)), s3 = ckir_hsum_ps256(_mm256_add_ps(a3, b3));
  for (; k < K; k++) {
    s0 += w0[k] * x[k];
    s1 += w1[k] * x[k];
    s2 += w2[k] * x[k];
    s3 += w3[k] * x[k];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
#else
  /* 8 independent lanes per row: auto-vectorisable without reassociation. */
  float acc[GEMV_R][8] = {{0}};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int l = 0; l < 8; l++) {
      acc[0][l] += w0[k + l] * x[k + l];
      acc[1][l] += w1[k + l] * x[k + l];
      acc[2][l] += w2[k + l] * x[k + l];
      acc[3][l] += w3[k + l] * x[k + l];
    }
  for (int r = 0; r < GEMV_R; r++) {
    float s = 0.0f;
    for (int l = 0; l < 8; l++) s += acc[r][l];
    for (int64_t kk = k; kk < K; kk++) s += w[r * K + kk] * x[kk];
    out[r] = s;
  }
#endif
}

/* Two rows of x against the same GEMV_R rows of w: each w load feeds two FMAs
 * (used by gemm for 2 <= M <= 8). */
static inline void dot_block_x2(const float *x0, const float *x1, const float *w, int64_t K,
                                float out0[GEMV_R], float out1[GEMV_R]) {
#if defined(CKIR_AVX512)
  const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
         a3 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(),
         b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = ckir_mask16(K - k);
    const __m512 u = _mm512_maskz_loadu_ps(m, x0 + k), v = _mm512_maskz_loadu_ps(m, x1 + k);
    __m512 r = _mm512_maskz_loadu_ps(m, w0 + k);
    a0 = _mm512_fmadd_ps(r, u, a0);
    b0 = _mm512_fmadd_ps(r, v, b0);
    r = _mm512_maskz_loadu_ps(m, w1 + k);
    a1 = _mm512_fmadd_ps(r, u, a1);
    b1 = _mm512_fmadd_ps(r, v, b1);
    r = _mm512_maskz_loadu_ps(m, w2 + k);
    a2 = _mm512_fmadd_ps(r, u, a2);
    b2 = _mm512_fmadd_ps(r, v, b2);
    r = _mm512_maskz_loadu_ps(m, w3 + k);
    a3 = _mm512_fmadd_ps(r, u, a3);
    b3 = _mm512_fmadd_ps(r, v, b3);
  }
  out0[0] = _mm512_reduce_add_ps(a0), out0[1] = _mm512_reduce_add_ps(a1);
  out0[2] = _mm512_reduce_add_ps(a2), out0[3] = _mm512_reduce_add_ps(a3);
  out1[0] = _mm512_reduce_add_ps(b0), out1[1] = _mm512_reduce_add_ps(b1);
  out1[2] = _mm512_reduce_add_ps(b2), out1[3] = _mm512_reduce_add_ps(b3);
#else
  dot_block(x0, w, K, out0);
  dot_block(x1, w, K, out1);
#endif
}

/* out = dot(x, w) for a single row (the N % GEMV_R remainder). */
static inline float dot_one(const float *x, const float *w, int64_t K) {
#if defined(CKIR_AVX512)
  __m512 a = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    __mmask16 m = ckir_mask16(K - k);
    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + k), _mm512_maskz_loadu_ps(m, x + k), a);
  }
  return _mm512_reduce_add_ps(a);
#elif defined(CKIR_AVX2)
  __m256 a = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a);
  float s = ckir_hsum_ps256(a);
  for (; k < K; k++) s += w[k] * x[k];
  return s;
#else
  float acc[8] = {0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int l = 0; l < 8; l++) acc[l] += w[k + l] * x[k + l];
  float s = 0.0f;
  for (int l = 0; l < 8; l++) s += acc[l];
  for (; k < K; k++) s += w[k] * x[k];
  return s;
#endif
}

void ckir_internal_dot_rows(const float *x, int64_t M, const float *w, const float *b, float *y,
                            int64_t N, int64_t K) {
  int64_t nb = (N + GEMV_R - 1) / GEMV_R;
#pragma omp parallel for schedule(static) if (M * N * K >= 8 * CKIR_PAR_MIN_WORK && nb > 1)
  for (int64_t blk = 0; blk < nb; blk++) {
    int64_t n0 = blk * GEMV_R;
    if (n0 + GEMV_R <= N) {
      int64_t m = 0;
      for (; m + 2 <= M; m += 2) {
        float o0[GEMV_R], o1[GEMV_R];
        dot_block_x2(x + m * K, x + (m + 1) * K, w + n0 * K, K, o0, o1);
        for (int r = 0; r < GEMV_R; r++) {
          y[m * N + n0 + r] = o0[r] + (b ? b[n0 + r] : 0.0f);
          y[(m + 1) * N + n0 + r] = o1[r] + (b ? b[n0 + r] : 0.0f);
        }
      }
      for (; m < M; m++) {
        float out[GEMV_R];
        dot_block(x + m * K, w + n0 * K, K, out);
        for (int r = 0; r < GEMV_R; r++) y[m * N + n0 + r] = out[r] + (b ? b[n0 + r] : 0.0f);
      }
    } else {
      for (int64_t n = n0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
          y[m * N + n] = dot_one(x + m * K, w + n * K, K) + (b ? b[n] : 0.0f);
    }
  }
}

/* ---- public kernels and reference twins --------------------------------- */

void ckir_ref_gemv_bias_f32(const float *x, const float *w, const float *b, float *y, int64_t N,
                            int64_t K) {
  for (int64_t n = 0; n < N; n++) {
    double s = 0.0;
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * w[n * K + k];
    y[n] = (float)s + (b ? b[n] : 0.0f);
  }
}

void ckir_ref_gemv_f32(const float *x, const float *w, float *y, int64_t N, int64_t K) {
  ckir_ref_gemv_bias_f32(x, w, NULL, y, N, K);
}

void ckir_gemv_f32(const float *x, const float *w, float *y, int64_t N, int64_t K) {
  ckir_internal_dot_rows(x, 1, w, NULL, y, N, K);
}

void ckir_gemv_bias_f32(const float *x, const float *w, const float *b, float *y, int64_t N,
                        int64_t K) {
  ckir_internal_dot_rows(x, 1, w, b, y, N, K);
}
