/* ckir runtime: fused linear layers with fp32 weights (targets of --fuse-qkv and
 * --fuse-gate-up).
 *
 *   gemv_qkv_f32, gemv_qkv_bias_f32      q, k, v = x . wq^T, x . wk^T, x . wv^T (+ b)
 *   gemm_qkv_f32, gemm_qkv_bias_f32      the same for M rows of x (prefill)
 *   gemv_gate_up_f32, gemm_gate_up_f32   out = silu(x . wg^T) * (x . wu^T)
 *
 * Decode (and prefill with M up to gemm_f32's small-M bound) streams the
 * weights in the dot-product form: blocks of FR weight rows, x stays in L1, and
 * the blocks of all matrices are split statically over the threads of ONE
 * parallel region (the unfused code opens one region per matrix, plus one for
 * swiglu).  The dot products accumulate exactly as gemv.c does, so a fused
 * gemv gives the same bits as the separate gemv_f32 calls.
 *
 * Prefill with larger M runs gemm.c's blocked driver once for the fused call
 * (ckir_internal_gemm_outs): qkv's three matrices are one sequence of column
 * panels over the threads, and gate_up's output goes out in tiles whose gate
 * and up blocks land in stack buffers before silu(gate) * up is written, so
 * there is no gate/up buffer and no separate swiglu pass.  Each thread packs x
 * once for all its columns.
 *
 * ckir_internal_gate_up_tiles (below) is that tiling over any per-tile GEMM:
 * the weight dtypes' small-M GEMMs (fused_wdtype.c) run in it. */
#include "ckir_internal.h"
#include "ckir_fused.h"
#include "ckir_quant.h"
#include "ckir_rows.h"

#define FR CKIR_ROWS_R /* weight rows per block (as GEMV_R in gemv.c) */
#define GU_CH 64  /* gate/up rows per work unit of the streaming form */
/* gate_up GEMM tiles: at most GU_MT rows (a multiple of every GEMM_MR: 12, 6, 4)
 * by GU_NT columns (a multiple of every GEMM_NR).  Measured on M = 16..512,
 * N = 1536, K = 576 (2 threads): 144 x 256 runs at the speed of the unfused
 * gemm + gemm + swiglu or faster; 96 x 128 was 10-20 % slower (partial
 * register panels, more packing). */
#ifndef GU_MT
#define GU_MT 144
#endif
#ifndef GU_NT
#define GU_NT 256
#endif

/* out[r] = dot(x, w + r*K) for r < n: blocks of FR rows, then single rows (the
 * row microkernels of gemv_f32, ckir_rows.h) */
static inline void rows_dot(const float *x, const float *w, int64_t n, int64_t K, float *out) {
  int64_t r = 0;
  for (; r + FR <= n; r += FR) ckir_dot4(x, w + r * K, K, out + r);
  for (; r < n; r++) out[r] = ckir_dot1(x, w + r * K, K);
}

/* ---- qkv ------------------------------------------------------------------ */

typedef struct {
  const float *w; /* [N, K] */
  const float *b; /* [N] or NULL */
  float *y;       /* [M, N] */
  int64_t N;
} fl_lin;

/* y_i[m, :] = x[m, :] . w_i^T (+ b_i) for the three matrices, M rows of x, in one
 * parallel region over the blocks of FR rows of all matrices. */
static void lin3_rows(const float *x, int64_t M, const fl_lin L[3], int64_t K) {
  int64_t nb[3], total = 0, rows = 0;
  for (int i = 0; i < 3; i++) {
    nb[i] = (L[i].N + FR - 1) / FR;
    total += nb[i];
    rows += L[i].N;
  }
#pragma omp parallel for schedule(static) if (M * rows * K >= 8 * CKIR_PAR_MIN_WORK && total > 1)
  for (int64_t blk = 0; blk < total; blk++) {
    int i = 0;
    int64_t j = blk;
    while (j >= nb[i]) j -= nb[i++];
    const fl_lin *l = &L[i];
    const int64_t n0 = j * FR, nr = CKIR_MIN(FR, l->N - n0);
    for (int64_t m = 0; m < M; m++) {
      float o[FR];
      rows_dot(x + m * K, l->w + n0 * K, nr, K, o);
      float *y = l->y + m * l->N + n0;
      for (int64_t r = 0; r < nr; r++) y[r] = o[r] + (l->b ? l->b[n0 + r] : 0.0f);
    }
  }
}

static void qkv(const float *x, const float *wq, const float *wk, const float *wv,
                const float *bq, const float *bk, const float *bv, float *q, float *k, float *v,
                int64_t M, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {
  CKIR_REQUIRE(M >= 1 && Nq >= 1 && Nk >= 1 && Nv >= 1 && K >= 1, "qkv_f32");
  const ckir_wread r = ckir_internal_wread_f32(M, K);
  if (r.kind == GEMM_B_NONE) {
    const fl_lin L[3] = {{wq, bq, q, Nq}, {wk, bk, k, Nk}, {wv, bv, v, Nv}};
    lin3_rows(x, M, L, K);
  } else {
    const ckir_gemm_out o[3] = {{wq, bq, q, Nq}, {wk, bk, k, Nk}, {wv, bv, v, Nv}};
    ckir_internal_gemm_outs(x, r, o, 3, 0, M, K);
  }
}

void ckir_gemv_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                       float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,
                       int64_t K) {
  qkv(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_gemv_qkv_bias_f32(const float *x, const float *wq, const float *wk, const float *wv,
                            const float *bq, const float *bk, const float *bv, float *q,
                            float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {
  qkv(x, wq, wk, wv, bq, bk, bv, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_gemm_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                       float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,
                       int64_t Nv, int64_t K) {
  qkv(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, K);
}

void ckir_gemm_qkv_bias_f32(const float *x, const float *wq, const float *wk, const float *wv,
                            const float *bq, const float *bk, const float *bv, float *q,
                            float *k, float *v, int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,
                            int64_t K) {
  qkv(x, wq, wk, wv, bq, bk, bv, q, k, v, M, Nq, Nk, Nv, K);
}

/* ---- gate_up -------------------------------------------------------------- */

/* streaming form: chunks of GU_CH rows of wg and wu per work unit */
static void gate_up_rows(const float *x, int64_t M, const float *wg, const float *wu, float *out,
                         int64_t N, int64_t K) {
  const int64_t nch = (N + GU_CH - 1) / GU_CH;
#pragma omp parallel for schedule(static) if (2 * M * N * K >= 8 * CKIR_PAR_MIN_WORK && nch > 1)
  for (int64_t c = 0; c < nch; c++) {
    const int64_t n0 = c * GU_CH, nr = CKIR_MIN(GU_CH, N - n0);
    for (int64_t m = 0; m < M; m++) {
      float g[GU_CH], u[GU_CH];
      rows_dot(x + m * K, wg + n0 * K, nr, K, g);
      rows_dot(x + m * K, wu + n0 * K, nr, K, u);
      ckir_internal_silu_mul(g, u, out + m * N + n0, nr);
    }
  }
}

void ckir_gemv_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                           int64_t N, int64_t K) {
  CKIR_REQUIRE(N >= 1 && K >= 1, "gemv_gate_up_f32");
  gate_up_rows(x, 1, wg, wu, out, N, K);
}

void ckir_internal_gate_up_tiles(const float *x, const void *wg, const void *wu,
                                 int64_t row_bytes, ckir_fused_gemm_fn gemm, float *out,
                                 int64_t M, int64_t N, int64_t K) {
  /* row tiles of about equal size, at most GU_MT rows: tile i starts at row
   * i * M / mtiles rounded down to whole 12-row register panels, so with
   * M / mtiles <= GU_MT - 12 every tile has M / mtiles +- 11 rows, and none of
   * a call with M > 32 has 32 rows or fewer (M / mtiles > 66 when mtiles > 1):
   * the bf16 GEMM of every tile then rounds x as the whole call's would
   * (ckir_quant.h).  Tiles ordered column-major (tiles of one weight block run
   * back to back) and handed out one at a time, so a thread that the host
   * slows down takes fewer tiles. */
  const int64_t mtiles = (M + GU_MT - 13) / (GU_MT - 12);
  const int64_t ntiles = (N + GU_NT - 1) / GU_NT, tiles = mtiles * ntiles;
#pragma omp parallel for schedule(dynamic, 1) if (tiles > 1)
  for (int64_t t = 0; t < tiles; t++) {
    const int64_t i = t % mtiles, n0 = (t / mtiles) * GU_NT;
    const int64_t m0 = M * i / mtiles / 12 * 12;
    const int64_t m1 = i + 1 == mtiles ? M : M * (i + 1) / mtiles / 12 * 12;
    const int64_t mc = m1 - m0, nc = CKIR_MIN(GU_NT, N - n0);
    float g[GU_MT * GU_NT] __attribute__((aligned(64)));
    float u[GU_MT * GU_NT] __attribute__((aligned(64)));
    gemm(x + m0 * K, (const uint8_t *)wg + n0 * row_bytes, g, mc, nc, K);
    gemm(x + m0 * K, (const uint8_t *)wu + n0 * row_bytes, u, mc, nc, K);
    for (int64_t i = 0; i < mc; i++)
      ckir_internal_silu_mul(g + i * nc, u + i * nc, out + (m0 + i) * N + n0, nc);
  }
}

void ckir_gemm_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                           int64_t M, int64_t N, int64_t K) {
  CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1, "gemm_gate_up_f32");
  const ckir_wread r = ckir_internal_wread_f32(M, K);
  if (r.kind == GEMM_B_NONE) {
    gate_up_rows(x, M, wg, wu, out, N, K);
  } else {
    const ckir_gemm_out o[2] = {{wg, NULL, out, N}, {wu, NULL, NULL, N}};
    ckir_internal_gemm_outs(x, r, o, 2, 1, M, K);
  }
}

/* ---- reference twins ------------------------------------------------------ */

void ckir_ref_gemm_qkv_bias_f32(const float *x, const float *wq, const float *wk,
                                const float *wv, const float *bq, const float *bk,
                                const float *bv, float *q, float *k, float *v, int64_t M,
                                int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {
  ckir_ref_gemm_bias_f32(x, wq, bq, q, M, Nq, K);
  ckir_ref_gemm_bias_f32(x, wk, bk, k, M, Nk, K);
  ckir_ref_gemm_bias_f32(x, wv, bv, v, M, Nv, K);
}

void ckir_ref_gemm_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                           float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,
                           int64_t Nv, int64_t K) {
  ckir_ref_gemm_qkv_bias_f32(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, K);
}

void ckir_ref_gemv_qkv_bias_f32(const float *x, const float *wq, const float *wk,
                                const float *wv, const float *bq, const float *bk,
                                const float *bv, float *q, float *k, float *v, int64_t Nq,
                                int64_t Nk, int64_t Nv, int64_t K) {
  ckir_ref_gemm_qkv_bias_f32(x, wq, wk, wv, bq, bk, bv, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_ref_gemv_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                           float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,
                           int64_t K) {
  ckir_ref_gemm_qkv_bias_f32(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_ref_gemm_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                               int64_t M, int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double sg = 0.0, su = 0.0;
      for (int64_t kk = 0; kk < K; kk++) {
        sg += (double)x[m * K + kk] * wg[n * K + kk];
        su += (double)x[m * K + kk] * wu[n * K + kk];
      }
      const float g = (float)sg, u = (float)su;
      out[m * N + n] = g / (1.0f + expf(-g)) * u;
    }
}

void ckir_ref_gemv_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                               int64_t N, int64_t K) {
  ckir_ref_gemm_gate_up_f32(x, wg, wu, out, 1, N, K);
}
