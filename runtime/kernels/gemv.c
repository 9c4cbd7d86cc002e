/* ckir runtime: matrix-vector products for decode (M = 1).
 *
 * Memory-bandwidth bound: every weight is read once.  Rows of w are processed
 * GEMV_R at a time (GEMV_R concurrent sequential streams, x stays in L1) and
 * the row blocks are split statically over OpenMP threads, so both cores pull
 * from memory.  The same core serves gemm when M is tiny: the w block is then
 * reused from cache for every row of x.  The dot products are the shared row
 * microkernels of ckir_rows.h (also behind the fused qkv / gate_up kernels). */
#include "ckir_internal.h"
#include "ckir_rows.h"

#define GEMV_R CKIR_ROWS_R

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
        ckir_dot4_x2(x + m * K, x + (m + 1) * K, w + n0 * K, K, o0, o1);
        for (int r = 0; r < GEMV_R; r++) {
          y[m * N + n0 + r] = o0[r] + (b ? b[n0 + r] : 0.0f);
          y[(m + 1) * N + n0 + r] = o1[r] + (b ? b[n0 + r] : 0.0f);
        }
      }
      for (; m < M; m++) {
        float out[GEMV_R];
        ckir_dot4(x + m * K, w + n0 * K, K, out);
        for (int r = 0; r < GEMV_R; r++) y[m * N + n0 + r] = out[r] + (b ? b[n0 + r] : 0.0f);
      }
    } else {
      for (int64_t n = n0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
          y[m * N + n] = ckir_dot1(x + m * K, w + n * K, K) + (b ? b[n] : 0.0f);
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

CKIR_GEMV_PAIR(f32, float, ckir_internal_dot_rows(x, 1, w, b, y, N, K))
