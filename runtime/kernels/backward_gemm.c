/* ckir runtime: backward (training) of a linear layer y[M,N] = x[M,K] W[N,K]^T (+ b[N]).
 *
 *   linear_bwd_input_f32   dx[M,K] = dy[M,N] . W[N,K]      (overwritten)
 *   linear_bwd_weight_f32  dw[N,K] = dy[M,N]^T . x[M,K]    (overwritten)
 *   bias_bwd_f32           db[n]   = sum_m dy[m,n]         (overwritten)
 *
 * Both products run gemm.c's blocked driver (ckir_internal_gemm):
 *  - the input gradient is matmul's form with the roles renamed: A = dy[M,N]
 *    (inner dimension N), B = W[N,K] read as b[K_inner=N, N_out=K] (row-copy
 *    packing, no transposes);
 *  - the weight gradient reduces over the M tokens: A = dy^T, which the driver
 *    packs from dy's rows (A stored transposed), and B = x[M,K], again the
 *    row-copy packing.  Its threads split the output dw (rows or columns),
 *    never M, so no thread's partial sums need adding up.
 * Both therefore use gemm's per-thread stack bound (the AVX2 build adds a
 * packed A panel for the weight gradient: ~352 KiB per thread; AVX-512: ~400 KiB).
 *
 * bias_bwd sums dy's rows into db in spans of BB_COLS columns (a 4 KiB run of
 * each row, so every row is read as one contiguous stream and db's span stays
 * in L1), four rows per pass; OpenMP over spans when M * N is large.
 *
 * The scalar twins ckir_ref_* accumulate in double. */
#include "ckir_internal.h"

#ifndef BB_COLS
#define BB_COLS 4096
#endif

/* ---- reference twins ----------------------------------------------------- */

void ckir_ref_linear_bwd_input_f32(const float *dy, const float *w, float *dx, int64_t M,
                                   int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++) {
      double s = 0.0;
      for (int64_t n = 0; n < N; n++) s += (double)dy[m * N + n] * w[n * K + k];
      dx[m * K + k] = (float)s;
    }
}

void ckir_ref_linear_bwd_weight_f32(const float *dy, const float *x, float *dw, int64_t M,
                                    int64_t N, int64_t K) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) {
      double s = 0.0;
      for (int64_t m = 0; m < M; m++) s += (double)dy[m * N + n] * x[m * K + k];
      dw[n * K + k] = (float)s;
    }
}

void ckir_ref_bias_bwd_f32(const float *dy, float *db, int64_t M, int64_t N) {
  for (int64_t n = 0; n < N; n++) {
    double s = 0.0;
    for (int64_t m = 0; m < M; m++) s += dy[m * N + n];
    db[n] = (float)s;
  }
}

/* ---- public kernels -------------------------------------------------------- */

void ckir_linear_bwd_input_f32(const float *dy, const float *w, float *dx, int64_t M, int64_t N,
                               int64_t K) {
  CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1, "linear_bwd_input_f32");
  /* dx[M, K] = A[M, N] . B[N, K]: A = dy, B = w as b[K_inner, N_out] */
  ckir_internal_gemm(dy, 0, w, 0, dx, M, K, N);
}

void ckir_linear_bwd_weight_f32(const float *dy, const float *x, float *dw, int64_t M, int64_t N,
                                int64_t K) {
  CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1, "linear_bwd_weight_f32");
  /* dw[N, K] = A[N, M] . B[M, K]: A = dy^T (stored transposed as dy[M, N]), B = x */
  ckir_internal_gemm(dy, 1, x, 0, dw, N, K, M);
}

/* db[0:n] = sum over the M rows of dy[m * ldy + 0:n] */
static void bias_bwd_span(const float *dy, int64_t ldy, float *db, int64_t M, int64_t n) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    const float *r0 = dy + m * ldy, *r1 = r0 + ldy, *r2 = r1 + ldy, *r3 = r2 + ldy;
    const int init = m == 0;
    int64_t i = 0;
    CKV_LOOP(i, n, ln, {
      ckv s = ckv_add(ckv_add(ckv_load_n(r0 + i, ln), ckv_load_n(r1 + i, ln)),
                      ckv_add(ckv_load_n(r2 + i, ln), ckv_load_n(r3 + i, ln)));
      if (!init) s = ckv_add(ckv_load_n(db + i, ln), s);
      ckv_store_n(db + i, ln, s);
    });
  }
  for (; m < M; m++) {
    const float *r = dy + m * ldy;
    const int init = m == 0;
    int64_t i = 0;
    CKV_LOOP(i, n, ln, {
      ckv s = ckv_load_n(r + i, ln);
      if (!init) s = ckv_add(ckv_load_n(db + i, ln), s);
      ckv_store_n(db + i, ln, s);
    });
  }
}

void ckir_bias_bwd_f32(const float *dy, float *db, int64_t M, int64_t N) {
  CKIR_REQUIRE(M >= 1 && N >= 1, "bias_bwd_f32");
  const int64_t nspans = (N + BB_COLS - 1) / BB_COLS;
#pragma omp parallel for schedule(dynamic, 1) if (M * N >= 16 * CKIR_PAR_MIN_WORK && nspans > 1)
  for (int64_t s = 0; s < nspans; s++) {
    const int64_t n0 = s * BB_COLS, n1 = CKIR_MIN(N, n0 + BB_COLS);
    bias_bwd_span(dy + n0, N, db + n0, M, n1 - n0);
  }
}
