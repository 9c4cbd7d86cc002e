/* ckir runtime: linear layers and embeddings with bf16 weights.
 *
 * bf16 -> fp32 is a 16-bit left shift, done in registers (ckv_load_bf16 of the
 * vector layer, ckir_vec.h).  gemv: fp32 x, fp32 FMA; each thread streams one
 * contiguous range of rows, one row at a time, with software prefetch (decode
 * is bound by the bytes read, so x is not rounded).  gemm: with CKIR_BF16DOT
 * (AVX512-BF16) and M > CKIR_WGEMM_SMALL_M, x rounded to bf16 times the weights
 * by vdpbf16ps on gemm.c's blocked driver (read kind GEMM_B_BF16: twice the
 * fp32 FMA rate on Zen 4, measured); otherwise panels converted to fp32 and
 * the fp32 micro-kernels of ckir_internal_wgemm (quant_common.c). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"

#ifndef BF16_R
#define BF16_R 1 /* rows per bf16_dot_rows call: one sequential stream per thread measured best */
#endif

CKIR_INLINE float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- conversion of a row slice (embed, gemm panels) ----------------------- */

static void bf16_row_to_f32(const uint16_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln, ckv_store_n(dst + i, ln, ckv_load_bf16_n(src + i, ln)););
}

static void bf16_wrow(const void *w, int64_t K, int64_t n, int64_t k0, int64_t kc, float *dst) {
  bf16_row_to_f32((const uint16_t *)w + n * K + k0, kc, dst);
}

/* ---- gemv ---------------------------------------------------------------- */

/* out[r] = dot(x, row r of w) for r < R (R = BF16_R or 1); pfd: prefetch distance */
CKIR_INLINE void bf16_dot_rows(const float *x, const uint16_t *w, int64_t K, int64_t pfd,
                               float *out, const int R) {
  ckv a[BF16_R], c[BF16_R];
  for (int r = 0; r < R; r++) a[r] = c[r] = ckv_zero();
  int64_t k = 0;
  for (; k + 2 * CKV_W <= K; k += 2 * CKV_W) {
    const ckv x0 = ckv_loadu(x + k), x1 = ckv_loadu(x + k + CKV_W);
    for (int r = 0; r < R; r++) {
      const uint16_t *p = w + r * K + k;
      __builtin_prefetch((const char *)p + pfd, 0, 3);
      a[r] = ckv_fma(ckv_load_bf16(p), x0, a[r]);
      c[r] = ckv_fma(ckv_load_bf16(p + CKV_W), x1, c[r]);
    }
  }
  CKV_LOOP(k, K, ln, {
    const ckv x0 = ckv_load_n(x + k, ln);
    for (int r = 0; r < R; r++) a[r] = ckv_fma(ckv_load_bf16_n(w + r * K + k, ln), x0, a[r]);
  });
  for (int r = 0; r < R; r++) out[r] = ckv_reduce_add(ckv_add(a[r], c[r]));
}

static void gemv_bf16_impl(const float *x, const uint16_t *w, const float *b, float *y,
                           int64_t N, int64_t K) {
  const int64_t rb = K * 2, pfd = ckir_q_pf_distance(rb);
  /* each thread streams one contiguous range of rows */
  CKIR_SHARED_RANGE(N * K >= CKIR_GEMV_PAR_MIN && N > 1, N, lo, hi, {
    ckir_q_prefetch((const char *)w + lo * rb, CKIR_MIN(pfd, (hi - lo) * rb));
    for (int64_t n = lo; n < hi; n++) {
      float out;
      bf16_dot_rows(x, w + n * K, K, pfd, &out, 1);
      y[n] = out + (b ? b[n] : 0.0f);
    }
  });
}

CKIR_GEMV_PAIR(bf16, uint16_t, gemv_bf16_impl(x, w, b, y, N, K))

/* ---- gemm ---------------------------------------------------------------- */

/* With CKIR_BF16DOT, M > CKIR_WGEMM_SMALL_M and an even K: bf16-rounded x times
 * the bf16 weights by vdpbf16ps; else fp32 x times the weights converted to fp32. */
ckir_wread ckir_internal_wread_bf16(int64_t M, int64_t K) {
#if defined(CKIR_BF16DOT)
  if (M > CKIR_WGEMM_SMALL_M && K % 2 == 0) return (ckir_wread){GEMM_B_BF16, NULL};
#endif
  (void)K;
  return ckir_internal_wread_rows(M, bf16_wrow);
}

static void gemm_bf16_impl(const float *x, const uint16_t *w, const float *b, float *y, int64_t M,
                           int64_t N, int64_t K) {
  const ckir_wread r = ckir_internal_wread_bf16(M, K);
  if (r.kind == GEMM_B_NONE)
    ckir_internal_wgemm(x, w, bf16_wrow, b, y, M, N, K);
  else
    ckir_internal_gemm_outs(x, r, &(ckir_gemm_out){w, b, y, N}, 1, 0, M, K);
}

CKIR_GEMM_PAIR(bf16, uint16_t, gemm_bf16_impl(x, w, b, y, M, N, K))

/* ---- embed --------------------------------------------------------------- */

void ckir_embed_bf16(const int32_t *tokens, const uint16_t *table, float *out, int64_t T,
                     int64_t E) {
#pragma omp parallel for schedule(static) if (T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) bf16_row_to_f32(table + (int64_t)tokens[t] * E, E, out + t * E);
}

/* ---- reference twins ------------------------------------------------------ */

void ckir_ref_gemv_bias_bf16(const float *x, const uint16_t *w, const float *b, float *y,
                             int64_t N, int64_t K) {
  for (int64_t n = 0; n < N; n++) {
    double s = 0.0;
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * bf16_to_f32(w[n * K + k]);
    y[n] = (float)s + (b ? b[n] : 0.0f);
  }
}

void ckir_ref_gemv_bf16(const float *x, const uint16_t *w, float *y, int64_t N, int64_t K) {
  ckir_ref_gemv_bias_bf16(x, w, NULL, y, N, K);
}

void ckir_ref_gemm_bias_bf16(const float *x, const uint16_t *w, const float *b, float *y,
                             int64_t M, int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++) ckir_ref_gemv_bias_bf16(x + m * K, w, b, y + m * N, N, K);
}

void ckir_ref_gemm_bf16(const float *x, const uint16_t *w, float *y, int64_t M, int64_t N,
                        int64_t K) {
  ckir_ref_gemm_bias_bf16(x, w, NULL, y, M, N, K);
}

void ckir_ref_embed_bf16(const int32_t *tokens, const uint16_t *table, float *out, int64_t T,
                         int64_t E) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t e = 0; e < E; e++) out[t * E + e] = bf16_to_f32(table[(int64_t)tokens[t] * E + e]);
}
