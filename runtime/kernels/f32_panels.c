/* ckir runtime: linear layers and embeddings with f32p weights: fp32 stored
 * pre-packed in GEMM panels of CKIR_PANEL rows (layout in ckir_internal.h).
 *
 *   gemm_f32p (M > GEMM_SMALL_M): gemm.c's blocked driver reading the panels in
 *     place (ckir_internal_gemm_panels): no per-call transpose of w, and one
 *     contiguous weight stream per thread.
 *   gemv_f32p, and gemm_f32p for small M: panel_rows below.  Each thread takes
 *     one contiguous range of whole panels, i.e. one sequential stream of the
 *     weights; per k it loads the panel's 32 floats and broadcasts x[m, k] of up
 *     to PR_MAX rows against them.  Every output element sums its K products in
 *     k order, in fp32, whatever the thread count.
 *   embed_f32p: row n of the table is the strided column n % 32 of panel n / 32.
 *
 * The values are exact fp32: only the order of the summation differs from gemm_f32. */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"

/* rows of x per pass over a panel: CKIR_PANEL / CKV_W vectors each, kept at
 * <= 8 accumulators (AVX-512: 2 vectors x 4 rows; AVX2 and scalar: 4 x 2) */
#define PR_V (CKIR_PANEL / CKV_W)
#define PR_MAX (8 / PR_V)
/* gemm with M <= F32P_SMALL_M streams the panels (as gemm.c's GEMM_SMALL_M) */
#define F32P_SMALL_M 8
/* prefetch distance of the weight stream, in floats (4 KiB: the next page) */
#define PR_PFD 1024

/* y[m * ldy + n] for rows m < R of x (row stride K) and the panels [p0, p1) */
CKIR_INLINE void panel_rows_(const float *x, const int R, const float *wp, const float *b,
                             float *y, int64_t ldy, int64_t N, int64_t K, int64_t p0,
                             int64_t p1) {
  /* two k per step when few accumulators are live (the FMA latency) */
  const int U = R * PR_V <= 4 ? 2 : 1;
  for (int64_t p = p0; p < p1; p++) {
    const float *w = wp + p * K * CKIR_PANEL;
    ckv acc[2][PR_MAX][PR_V];
    for (int u = 0; u < U; u++)
      for (int r = 0; r < R; r++)
        for (int j = 0; j < PR_V; j++) acc[u][r][j] = ckv_zero();
    int64_t k = 0;
    for (; k + U <= K; k += U)
      for (int u = 0; u < U; u++) {
        const float *wk = w + (k + u) * CKIR_PANEL;
        __builtin_prefetch(wk + PR_PFD);
        __builtin_prefetch(wk + PR_PFD + 16);
        ckv wv[PR_V];
        for (int j = 0; j < PR_V; j++) wv[j] = ckv_loadu(wk + j * CKV_W);
        for (int r = 0; r < R; r++) {
          const ckv a = ckv_set1(x[r * K + k + u]);
          for (int j = 0; j < PR_V; j++) acc[u][r][j] = ckv_fma(a, wv[j], acc[u][r][j]);
        }
      }
    for (; k < K; k++) {
      const float *wk = w + k * CKIR_PANEL;
      for (int r = 0; r < R; r++) {
        const ckv a = ckv_set1(x[r * K + k]);
        for (int j = 0; j < PR_V; j++) acc[0][r][j] = ckv_fma(a, ckv_loadu(wk + j * CKV_W), acc[0][r][j]);
      }
    }
    const int64_t n0 = p * CKIR_PANEL, nn = CKIR_MIN(CKIR_PANEL, N - n0);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < PR_V; j++) {
        const int64_t lanes = nn - j * CKV_W;
        if (lanes <= 0) break;
        ckv s = acc[0][r][j];
        for (int u = 1; u < U; u++) s = ckv_add(s, acc[u][r][j]);
        if (b) s = ckv_add(s, ckv_load_n(b + n0 + j * CKV_W, lanes));
        ckv_store_n(y + r * ldy + n0 + j * CKV_W, lanes, s);
      }
  }
}

/* y[M, N] = x[M, K] . W^T (+ b) for small M: OpenMP over contiguous ranges of panels */
static void panel_rows(const float *x, int64_t M, const float *wp, const float *b, float *y,
                       int64_t N, int64_t K) {
  const int64_t P = (N + CKIR_PANEL - 1) / CKIR_PANEL;
#pragma omp parallel if (N * K >= CKIR_GEMV_PAR_MIN && P > 1)
  {
#ifdef _OPENMP
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int64_t t = 0, nt = 1;
#endif
    const int64_t p0 = P * t / nt, p1 = P * (t + 1) / nt;
    for (int64_t m = 0; m < M; m += PR_MAX) {
      const float *xm = x + m * K;
      float *ym = y + m * N;
      switch (CKIR_MIN(PR_MAX, M - m)) {
#if PR_MAX >= 4
        case 4: panel_rows_(xm, 4, wp, b, ym, N, N, K, p0, p1); break;
        case 3: panel_rows_(xm, 3, wp, b, ym, N, N, K, p0, p1); break;
#endif
        case 2: panel_rows_(xm, 2, wp, b, ym, N, N, K, p0, p1); break;
        default: panel_rows_(xm, 1, wp, b, ym, N, N, K, p0, p1); break;
      }
    }
  }
}

void ckir_gemv_f32p(const float *x, const float *w, float *y, int64_t N, int64_t K) {
  panel_rows(x, 1, w, NULL, y, N, K);
}

void ckir_gemv_bias_f32p(const float *x, const float *w, const float *b, float *y, int64_t N,
                         int64_t K) {
  panel_rows(x, 1, w, b, y, N, K);
}

void ckir_gemm_f32p(const float *x, const float *w, float *y, int64_t M, int64_t N, int64_t K) {
  if (M <= F32P_SMALL_M)
    panel_rows(x, M, w, NULL, y, N, K);
  else
    ckir_internal_gemm_panels(x, w, NULL, y, M, N, K);
}

void ckir_gemm_bias_f32p(const float *x, const float *w, const float *b, float *y, int64_t M,
                         int64_t N, int64_t K) {
  if (M <= F32P_SMALL_M)
    panel_rows(x, M, w, b, y, N, K);
  else
    ckir_internal_gemm_panels(x, w, b, y, M, N, K);
}

void ckir_embed_f32p(const int32_t *tokens, const float *table, float *out, int64_t T,
                     int64_t E) {
#pragma omp parallel for schedule(static) if (T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    const int64_t n = tokens[t];
    const float *col = table + (n / CKIR_PANEL) * E * CKIR_PANEL + n % CKIR_PANEL;
    for (int64_t e = 0; e < E; e++) out[t * E + e] = col[e * CKIR_PANEL];
  }
}

/* ---- reference twins ------------------------------------------------------ */

void ckir_ref_gemm_bias_f32p(const float *x, const float *w, const float *b, float *y, int64_t M,
                             int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)x[m * K + k] * CKIR_PANEL_AT(w, n, k, K);
      y[m * N + n] = (float)s + (b ? b[n] : 0.0f);
    }
}

void ckir_ref_gemm_f32p(const float *x, const float *w, float *y, int64_t M, int64_t N,
                        int64_t K) {
  ckir_ref_gemm_bias_f32p(x, w, NULL, y, M, N, K);
}

void ckir_ref_gemv_f32p(const float *x, const float *w, float *y, int64_t N, int64_t K) {
  ckir_ref_gemm_bias_f32p(x, w, NULL, y, 1, N, K);
}

void ckir_ref_gemv_bias_f32p(const float *x, const float *w, const float *b, float *y, int64_t N,
                             int64_t K) {
  ckir_ref_gemm_bias_f32p(x, w, b, y, 1, N, K);
}

void ckir_ref_embed_f32p(const int32_t *tokens, const float *table, float *out, int64_t T,
                         int64_t E) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t e = 0; e < E; e++) out[t * E + e] = CKIR_PANEL_AT(table, tokens[t], e, E);
}
