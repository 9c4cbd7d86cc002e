/* ckir runtime: the fused linear layers of every weight dtype but f32 (fused.c): the
 * targets of --fuse-qkv and --fuse-gate-up.
 *
 * These kernels compose the runtime's own weight-dtype kernels (ckir_quant.h), so
 * their numerics are exactly those of the unfused calls (decode: x quantized per call
 * as gemv_<q> quantizes it; prefill: as gemm_<q>):
 *
 *   gemv_qkv_<d>(+bias), gemv_gate_up_<d> of the panel dtypes (f32p, bf16p, q8_0p,
 *                         q4_1p, q4_0p, q4_kp, q5_kp, q6_kp, q5_0p, q5_1p): their panel
 *                         driver (ckir_pdriver.h): x quantized once for the matrices,
 *                         the panels of the three (the gate's, each run with its up
 *                         panels) claimed by the threads
 *   gemv_qkv_<d>(+bias)   the row-major dtypes: one parallel region; the q, k and v
 *                         rows together are split into one contiguous range per
 *                         thread, and each thread runs gemv_<d> on its pieces
 *   gemv_gate_up_<d>      one parallel region over the N rows; each thread runs
 *                         gemv_<d> on chunks of GUW_CH rows of wg and of wu
 *                         into stack buffers and writes silu(gate) * up
 *   gemm_qkv_<d>(+bias)   the panel dtypes on int8 x: one call that quantizes x once
 *                         for the three matrices (the gate and up pair), each row as
 *                         gemm_<p> computes it; else one call of gemm.c's driver for
 *                         the three outputs (ckir_internal_gemm_outs) where gemm_<d>
 *                         at M rows runs on it (ckir_internal_wread_<d>); else the
 *                         three gemm_<d> calls back to back
 *   gemm_gate_up_<d>      the same driver call in gate_up tiles; else tiles of
 *                         144 x 256 over gemm_<d> (ckir_internal_gate_up_tiles)
 *   gemv / gemm_qkv_<d>_v_q6_kp: q and k in a K-quant panel dtype, v in q6_kp, on the
 *                         K-quant panels' driver (below)
 *
 * Inside the fused region gemv_<d> computes its whole range on the calling
 * thread without a region of its own (CKIR_SHARED_RANGE: a nested one costs
 * ~0.6 us a call). */
#include "ckir_internal.h"
#include "ckir_fused.h"
#include "ckir_quant.h"
#include "ckir_kpanel.h"
#include "ckir_q5panel.h"

#define GUW_CH 256                 /* gate/up rows per gemv pair in decode */
#define FUSED_GEMV_PAR_MIN 65536 /* weights below which decode stays on one thread */

typedef void (*gemv_fn)(const float *x, const void *w, const float *b, float *y, int64_t N,
                        int64_t K);

/* The row-major dtypes' qkv: the q, k and v rows together split into one contiguous
 * range per thread, each thread's pieces by the dtype's gemv (rows r0 .. start rb * r0
 * bytes in) */
static void qkv_gemv(gemv_fn gemv, int64_t rb, const float *x, const void *const w[3],
                     const float *const b[3], float *const y[3], const int64_t N[3], int64_t K) {
  const int64_t total = N[0] + N[1] + N[2];
#pragma omp parallel if (total * K >= FUSED_GEMV_PAR_MIN && total > 1)
  {
    int64_t lo, hi, base = 0;
    ckir_thread_share(total, &lo, &hi);
    for (int i = 0; i < 3; i++) {
      const int64_t s0 = CKIR_MAX(lo, base) - base, s1 = CKIR_MIN(hi, base + N[i]) - base;
      if (s1 > s0)
        gemv(x, (const uint8_t *)w[i] + s0 * rb, b[i] ? b[i] + s0 : NULL, y[i] + s0, s1 - s0, K);
      base += N[i];
    }
  }
}

static void gate_up_gemv(gemv_fn gemv, int64_t rb, const float *x, const void *wg,
                         const void *wu, float *out, int64_t N, int64_t K) {
#pragma omp parallel if (2 * N * K >= FUSED_GEMV_PAR_MIN && N > 1)
  {
    int64_t lo, hi;
    ckir_thread_share(N, &lo, &hi);
    for (int64_t c = lo; c < hi; c += GUW_CH) {
      const int64_t n = CKIR_MIN(GUW_CH, hi - c);
      float g[GUW_CH], u[GUW_CH];
      gemv(x, (const uint8_t *)wg + c * rb, NULL, g, n, K);
      gemv(x, (const uint8_t *)wu + c * rb, NULL, u, n, K);
      ckir_internal_silu_mul(g, u, out + c, n);
    }
  }
}

/* q, k, v on one driver call (x packed once per thread for the three) when
 * the dtype's GEMM at M rows runs on gemm.c's driver; 0 if it does not */
static int gemm3(const float *x, ckir_wread r, const uint8_t *const w[3], const float *const b[3],
                 float *const y[3], const int64_t N[3], int64_t M, int64_t K) {
  if (r.kind == GEMM_B_NONE) return 0;
  const ckir_gemm_out o[3] = {{w[0], b[0], y[0], N[0]}, {w[1], b[1], y[1], N[1]},
                              {w[2], b[2], y[2], N[2]}};
  ckir_internal_gemm_outs(x, r, o, 3, 0, M, K);
  return 1;
}

/* Every public kernel of one weight dtype D (C element type WT; RB(K) bytes a row, or a
 * row of a panel) and its reference twin, built on ckir_{gemv,gemm}[_bias]_D.  A panel
 * dtype names its format QP in the hooks ckir_internal_*_FAM (its panel driver's fused
 * GEMVs, its fused GEMMs where it has them); the row-major ones (QP -1) split rows
 * (qkv_gemv, gate_up_gemv).  The twins take the dot product of x with row n of w from
 * ref_gemv_row_D / ref_gemm_row_D. */
#define CKIR_FUSED_WDTYPE(D, WT, RB, QP, FAM)                                                          \
  static void gemv_w_##D(const float *x, const void *w, const float *b, float *y, int64_t N,    \
                         int64_t K) {                                                            \
    if (b)                                                                                       \
      ckir_gemv_bias_##D(x, (const WT *)w, b, y, N, K);                                          \
    else                                                                                         \
      ckir_gemv_##D(x, (const WT *)w, y, N, K);                                                  \
  }                                                                                              \
  /* the gate_up tiles' GEMM, on worker threads: q8_0p / q4_1p come here on fp32 x only   \
   * (int8 x takes ckir_internal_gemm_gate_up_qp), which a worker's thread-local          \
   * ckir_runtime_qp_fp32_x does not know */                                                    \
  static void gemm_w_##D(const float *x, const void *w, float *y, int64_t M, int64_t N,         \
                         int64_t K) {                                                            \
    if (QP >= 0)                                                                                 \
      ckir_internal_gemm_##FAM##_f32x(x, (const uint8_t *)w, NULL, y, M, N, K, QP);                   \
    else                                                                                         \
      ckir_gemm_##D(x, (const WT *)w, y, M, N, K);                                               \
  }                                                                                              \
  static void qkv_gemv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,            \
                           const float *bq, const float *bk, const float *bv, float *q,         \
                           float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) { \
    CKIR_REQUIRE(Nq >= 1 && Nk >= 1 && Nv >= 1 && K >= 1, "gemv_qkv_" #D);                     \
    const void *w[3] = {wq, wk, wv};                                                             \
    const float *b[3] = {bq, bk, bv};                                                            \
    float *y[3] = {q, k, v};                                                                     \
    const int64_t N[3] = {Nq, Nk, Nv};                                                           \
    if (QP >= 0) { /* x quantized once for the three */                                         \
      const uint8_t *const wp[3] = {(const uint8_t *)wq, (const uint8_t *)wk,                    \
                                    (const uint8_t *)wv};                                        \
      ckir_internal_gemv_qkv_##FAM(x, wp, b, y, N, K, QP);                                          \
      return;                                                                                    \
    }                                                                                            \
    qkv_gemv(gemv_w_##D, RB(K), x, w, b, y, N, K);                                                  \
  }                                                                                              \
  void ckir_gemv_qkv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv, float *q,    \
                         float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {   \
    qkv_gemv_##D(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, Nq, Nk, Nv, K);                       \
  }                                                                                              \
  void ckir_gemv_qkv_bias_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,         \
                              const float *bq, const float *bk, const float *bv, float *q,      \
                              float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,           \
                              int64_t K) {                                                       \
    qkv_gemv_##D(x, wq, wk, wv, bq, bk, bv, q, k, v, Nq, Nk, Nv, K);                             \
  }                                                                                              \
  void ckir_gemm_qkv_bias_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,         \
                              const float *bq, const float *bk, const float *bv, float *q,      \
                              float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,            \
                              int64_t Nv, int64_t K) {                                           \
    const uint8_t *const w[3] = {(const uint8_t *)wq, (const uint8_t *)wk, (const uint8_t *)wv}; \
    const float *const b[3] = {bq, bk, bv};                                                      \
    float *const y[3] = {q, k, v};                                                               \
    const int64_t N[3] = {Nq, Nk, Nv};                                                           \
    if (QP >= 0 && ckir_internal_gemm_qkv_##FAM(x, w, b, y, N, M, K, QP)) return;                  \
    if (gemm3(x, ckir_internal_wread_##D(M, K), w, b, y, N, M, K)) return;                      \
    ckir_gemm_bias_##D(x, wq, bq, q, M, Nq, K);                                                  \
    ckir_gemm_bias_##D(x, wk, bk, k, M, Nk, K);                                                  \
    ckir_gemm_bias_##D(x, wv, bv, v, M, Nv, K);                                                  \
  }                                                                                              \
  void ckir_gemm_qkv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv, float *q,    \
                         float *k, float *v, int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,     \
                         int64_t K) {                                                            \
    /* ckir_gemm_bias_D with b NULL is ckir_gemm_D, for every D */                             \
    ckir_gemm_qkv_bias_##D(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, K);          \
  }                                                                                              \
  void ckir_gemv_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out, int64_t N, \
                             int64_t K) {                                                        \
    CKIR_REQUIRE(N >= 1 && K >= 1, "gemv_gate_up_" #D);                                          \
    if (QP >= 0) /* x quantized once for the two */                                              \
      ckir_internal_gemv_gate_up_##FAM(x, (const uint8_t *)wg, (const uint8_t *)wu, out, N, K, QP); \
    else                                                                                         \
      gate_up_gemv(gemv_w_##D, RB(K), x, wg, wu, out, N, K);                                        \
  }                                                                                              \
  void ckir_gemm_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out, int64_t M, \
                             int64_t N, int64_t K) {                                             \
    CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1, "gemm_gate_up_" #D);                                \
    if (QP >= 0 && ckir_internal_gemm_gate_up_##FAM(x, (const uint8_t *)wg, (const uint8_t *)wu, out, \
                                                 M, N, K, QP))                                   \
      return;                                                                                    \
    const ckir_wread r = ckir_internal_wread_##D(M, K);                                          \
    if (r.kind != GEMM_B_NONE) {                                                                 \
      const ckir_gemm_out o[2] = {{wg, NULL, out, N}, {wu, NULL, NULL, N}};                      \
      ckir_internal_gemm_outs(x, r, o, 2, 1, M, K);                                              \
      return;                                                                                    \
    }                                                                                            \
    ckir_internal_gate_up_tiles(x, wg, wu, RB(K), gemm_w_##D, out, M, N, K);                     \
  }                                                                                              \
  /* ---- reference twins: the unfused reference kernels, one call per output */                \
  void ckir_ref_gemv_qkv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,          \
                             float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,  \
                             int64_t K) {                                                        \
    ckir_ref_gemv_##D(x, wq, q, Nq, K);                                                          \
    ckir_ref_gemv_##D(x, wk, k, Nk, K);                                                          \
    ckir_ref_gemv_##D(x, wv, v, Nv, K);                                                          \
  }                                                                                              \
  void ckir_ref_gemv_qkv_bias_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,     \
                                  const float *bq, const float *bk, const float *bv, float *q,  \
                                  float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,       \
                                  int64_t K) {                                                   \
    ckir_ref_gemv_bias_##D(x, wq, bq, q, Nq, K);                                                 \
    ckir_ref_gemv_bias_##D(x, wk, bk, k, Nk, K);                                                 \
    ckir_ref_gemv_bias_##D(x, wv, bv, v, Nv, K);                                                 \
  }                                                                                              \
  void ckir_ref_gemm_qkv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,          \
                             float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,   \
                             int64_t Nv, int64_t K) {                                            \
    ckir_ref_gemm_##D(x, wq, q, M, Nq, K);                                                       \
    ckir_ref_gemm_##D(x, wk, k, M, Nk, K);                                                       \
    ckir_ref_gemm_##D(x, wv, v, M, Nv, K);                                                       \
  }                                                                                              \
  void ckir_ref_gemm_qkv_bias_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,     \
                                  const float *bq, const float *bk, const float *bv, float *q,  \
                                  float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,        \
                                  int64_t Nv, int64_t K) {                                       \
    ckir_ref_gemm_bias_##D(x, wq, bq, q, M, Nq, K);                                              \
    ckir_ref_gemm_bias_##D(x, wk, bk, k, M, Nk, K);                                              \
    ckir_ref_gemm_bias_##D(x, wv, bv, v, M, Nv, K);                                              \
  }                                                                                              \
  void ckir_ref_gemv_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out,        \
                                 int64_t N, int64_t K) {                                         \
    for (int64_t n = 0; n < N; n++) {                                                            \
      const float g = ref_gemv_row_##D(x, wg, n, K), u = ref_gemv_row_##D(x, wu, n, K);         \
      out[n] = g / (1.0f + expf(-g)) * u;                                                        \
    }                                                                                            \
  }                                                                                              \
  void ckir_ref_gemm_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out,        \
                                 int64_t M, int64_t N, int64_t K) {                              \
    for (int64_t m = 0; m < M; m++)                                                              \
      for (int64_t n = 0; n < N; n++) {                                                          \
        const float g = ref_gemm_row_##D(x + m * K, wg, n, K);                                   \
        const float u = ref_gemm_row_##D(x + m * K, wu, n, K);                                   \
        out[m * N + n] = g / (1.0f + expf(-g)) * u;                                              \
      }                                                                                          \
  }

#define RB_BF16(K) ((K) * (int64_t)sizeof(uint16_t))
#define RB_Q8_0(K) ((K) / CKIR_QK * CKIR_Q8_0_BYTES)
#define RB_Q4_0(K) ((K) / CKIR_QK * CKIR_Q4_0_BYTES)
#define RB_Q4_1(K) ((K) / CKIR_QK * CKIR_Q4_1_BYTES)

/* x . row n of a row-major matrix, by the unfused reference kernels */
#define CKIR_REF_ROWS(D, WT, RB)                                                                 \
  static float ref_gemv_row_##D(const float *x, const WT *w, int64_t n, int64_t K) {            \
    float y;                                                                                     \
    ckir_ref_gemv_##D(x, (const WT *)((const uint8_t *)w + n * RB(K)), &y, 1, K);                \
    return y;                                                                                    \
  }                                                                                              \
  static float ref_gemm_row_##D(const float *x, const WT *w, int64_t n, int64_t K) {            \
    float y;                                                                                     \
    ckir_ref_gemm_##D(x, (const WT *)((const uint8_t *)w + n * RB(K)), &y, 1, 1, K);             \
    return y;                                                                                    \
  }

/* the panel dtypes: x . row n (a strided column of a panel) by their reference rows */
#define ref_gemv_row_f32p ckir_internal_ref_row_f32p
#define ref_gemm_row_f32p ckir_internal_ref_row_f32p
#define RB_F32P(K) ((K) * (int64_t)sizeof(float))
#define ref_gemv_row_bf16p ckir_internal_ref_row_bf16p
#define ref_gemm_row_bf16p ckir_internal_ref_row_bf16p

CKIR_REF_ROWS(bf16, uint16_t, RB_BF16)
CKIR_REF_ROWS(q8_0, uint8_t, RB_Q8_0)
CKIR_REF_ROWS(q4_0, uint8_t, RB_Q4_0)
CKIR_REF_ROWS(q4_1, uint8_t, RB_Q4_1)
CKIR_FUSED_WDTYPE(bf16, uint16_t, RB_BF16, -1, qp)
CKIR_FUSED_WDTYPE(q8_0, uint8_t, RB_Q8_0, -1, qp)
CKIR_FUSED_WDTYPE(q4_0, uint8_t, RB_Q4_0, -1, qp)
CKIR_FUSED_WDTYPE(q4_1, uint8_t, RB_Q4_1, -1, qp)
CKIR_FUSED_WDTYPE(f32p, float, RB_F32P, CKIR_PP_F32, pp)
CKIR_FUSED_WDTYPE(bf16p, uint16_t, RB_BF16, CKIR_PP_BF16, pp)
#define ref_gemv_row_q8_0p ckir_internal_ref_gemv_row_q8_0p
#define ref_gemm_row_q8_0p ckir_internal_ref_gemm_row_q8_0p
CKIR_FUSED_WDTYPE(q8_0p, uint8_t, RB_Q8_0, CKIR_QP_Q8_0, qp)
#define ref_gemv_row_q4_1p ckir_internal_ref_gemv_row_q4_1p
#define ref_gemm_row_q4_1p ckir_internal_ref_gemm_row_q4_1p
CKIR_FUSED_WDTYPE(q4_1p, uint8_t, RB_Q4_1, CKIR_QP_Q4_1, qp)
#define ref_gemv_row_q4_0p ckir_internal_ref_gemv_row_q4_0p
#define ref_gemm_row_q4_0p ckir_internal_ref_gemm_row_q4_0p
CKIR_FUSED_WDTYPE(q4_0p, uint8_t, RB_Q4_0, CKIR_QP_Q4_0, qp)
#define RB_Q4_K(K) ((K) / CKIR_QK_K * CKIR_Q4_K_BYTES)
#define RB_Q5_K(K) ((K) / CKIR_QK_K * CKIR_Q5_K_BYTES)
#define RB_Q6_K(K) ((K) / CKIR_QK_K * CKIR_Q6_K_BYTES)
CKIR_REF_ROWS(q4_k, uint8_t, RB_Q4_K)
CKIR_REF_ROWS(q5_k, uint8_t, RB_Q5_K)
CKIR_REF_ROWS(q6_k, uint8_t, RB_Q6_K)
CKIR_FUSED_WDTYPE(q4_k, uint8_t, RB_Q4_K, -1, qp)
CKIR_FUSED_WDTYPE(q5_k, uint8_t, RB_Q5_K, -1, qp)
CKIR_FUSED_WDTYPE(q6_k, uint8_t, RB_Q6_K, -1, qp)
#define RB_Q5_0(K) ((K) / CKIR_QK * CKIR_Q5_0_BYTES)
#define RB_Q5_1(K) ((K) / CKIR_QK * CKIR_Q5_1_BYTES)
CKIR_REF_ROWS(q5_0, uint8_t, RB_Q5_0)
CKIR_REF_ROWS(q5_1, uint8_t, RB_Q5_1)
CKIR_FUSED_WDTYPE(q5_0, uint8_t, RB_Q5_0, -1, qp)
CKIR_FUSED_WDTYPE(q5_1, uint8_t, RB_Q5_1, -1, qp)
#define ref_gemv_row_q4_kp ckir_internal_ref_gemv_row_q4_kp
#define ref_gemm_row_q4_kp ckir_internal_ref_gemm_row_q4_kp
CKIR_FUSED_WDTYPE(q4_kp, uint8_t, RB_Q4_K, CKIR_KP_Q4, kp)
#define ref_gemv_row_q6_kp ckir_internal_ref_gemv_row_q6_kp
#define ref_gemm_row_q6_kp ckir_internal_ref_gemm_row_q6_kp
CKIR_FUSED_WDTYPE(q6_kp, uint8_t, RB_Q6_K, CKIR_KP_Q6, kp)
#define ref_gemv_row_q5_kp ckir_internal_ref_gemv_row_q5_kp
#define ref_gemm_row_q5_kp ckir_internal_ref_gemm_row_q5_kp
CKIR_FUSED_WDTYPE(q5_kp, uint8_t, RB_Q5_K, CKIR_KP_Q5, kp)

/* qkv whose q and k are K-quant panels D (format F) and v another, DV (FV): the layers of
 * a Q4_K_M / Q5_K_M file whose attn_v llama.cpp stores in Q6_K.  The three matrices
 * share x's Q8_K quantization, so decode still quantizes x once and claims the panels
 * of the three as one sequence (ckir_pdriver.h), each panel on its own format's core;
 * prefill on int8 x the same per tile; on fp32 x the three unfused GEMMs. */
#define CKIR_FUSED_QKV_KP_MIXED(D, F, DV, FV)                                                      \
  static void qkv_gemv_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,        \
                                    const uint8_t *wv, const float *bq, const float *bk,        \
                                    const float *bv, float *q, float *k, float *v, int64_t Nq,   \
                                    int64_t Nk, int64_t Nv, int64_t K) {                         \
    CKIR_REQUIRE(Nq >= 1 && Nk >= 1 && Nv >= 1 && K >= 1, "gemv_qkv_" #D "_v_" #DV);            \
    const uint8_t *const w[3] = {wq, wk, wv};                                                    \
    const float *const b[3] = {bq, bk, bv};                                                      \
    float *const y[3] = {q, k, v};                                                               \
    const int64_t N[3] = {Nq, Nk, Nv};                                                           \
    const int fmt[3] = {F, F, FV};                                                               \
    ckir_internal_gemv_qkv_kp_fmts(x, w, b, y, N, K, fmt);                                      \
  }                                                                                              \
  void ckir_gemv_qkv_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,          \
                                  const uint8_t *wv, float *q, float *k, float *v, int64_t Nq,   \
                                  int64_t Nk, int64_t Nv, int64_t K) {                           \
    qkv_gemv_##D##_v_##DV(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, Nq, Nk, Nv, K);              \
  }                                                                                              \
  void ckir_gemv_qkv_bias_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,     \
                                       const uint8_t *wv, const float *bq, const float *bk,     \
                                       const float *bv, float *q, float *k, float *v,           \
                                       int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {          \
    qkv_gemv_##D##_v_##DV(x, wq, wk, wv, bq, bk, bv, q, k, v, Nq, Nk, Nv, K);                    \
  }                                                                                              \
  void ckir_gemm_qkv_bias_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,     \
                                       const uint8_t *wv, const float *bq, const float *bk,     \
                                       const float *bv, float *q, float *k, float *v,           \
                                       int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,            \
                                       int64_t K) {                                              \
    CKIR_REQUIRE(M >= 1 && Nq >= 1 && Nk >= 1 && Nv >= 1 && K >= 256 && K % 256 == 0,          \
                 "gemm_qkv_" #D "_v_" #DV);                                                      \
    const uint8_t *const w[3] = {wq, wk, wv};                                                    \
    const float *const b[3] = {bq, bk, bv};                                                      \
    float *const y[3] = {q, k, v};                                                               \
    const int64_t N[3] = {Nq, Nk, Nv};                                                           \
    const int fmt[3] = {F, F, FV};                                                               \
    if (ckir_internal_gemm_qkv_kp_fmts(x, w, b, y, N, M, K, fmt)) return;                       \
    ckir_gemm_bias_##D(x, wq, bq, q, M, Nq, K);                                                  \
    ckir_gemm_bias_##D(x, wk, bk, k, M, Nk, K);                                                  \
    ckir_gemm_bias_##DV(x, wv, bv, v, M, Nv, K);                                                 \
  }                                                                                              \
  void ckir_gemm_qkv_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,          \
                                  const uint8_t *wv, float *q, float *k, float *v, int64_t M,    \
                                  int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {               \
    ckir_gemm_qkv_bias_##D##_v_##DV(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, K); \
  }                                                                                              \
  /* ---- reference twins: the unfused reference kernels, one call per output */                \
  void ckir_ref_gemv_qkv_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,      \
                                      const uint8_t *wv, float *q, float *k, float *v,          \
                                      int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {           \
    ckir_ref_gemv_qkv_bias_##D##_v_##DV(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, Nq, Nk, Nv, K); \
  }                                                                                              \
  void ckir_ref_gemv_qkv_bias_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk, \
                                           const uint8_t *wv, const float *bq, const float *bk, \
                                           const float *bv, float *q, float *k, float *v,       \
                                           int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {      \
    ckir_ref_gemv_bias_##D(x, wq, bq, q, Nq, K);                                                 \
    ckir_ref_gemv_bias_##D(x, wk, bk, k, Nk, K);                                                 \
    ckir_ref_gemv_bias_##DV(x, wv, bv, v, Nv, K);                                                \
  }                                                                                              \
  void ckir_ref_gemm_qkv_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk,      \
                                      const uint8_t *wv, float *q, float *k, float *v,          \
                                      int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,             \
                                      int64_t K) {                                               \
    ckir_ref_gemm_qkv_bias_##D##_v_##DV(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, \
                                        K);                                                      \
  }                                                                                              \
  void ckir_ref_gemm_qkv_bias_##D##_v_##DV(const float *x, const uint8_t *wq, const uint8_t *wk, \
                                           const uint8_t *wv, const float *bq, const float *bk, \
                                           const float *bv, float *q, float *k, float *v,       \
                                           int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,        \
                                           int64_t K) {                                          \
    ckir_ref_gemm_bias_##D(x, wq, bq, q, M, Nq, K);                                              \
    ckir_ref_gemm_bias_##D(x, wk, bk, k, M, Nk, K);                                              \
    ckir_ref_gemm_bias_##DV(x, wv, bv, v, M, Nv, K);                                             \
  }
CKIR_FUSED_QKV_KP_MIXED(q4_kp, CKIR_KP_Q4, q6_kp, CKIR_KP_Q6)
CKIR_FUSED_QKV_KP_MIXED(q5_kp, CKIR_KP_Q5, q6_kp, CKIR_KP_Q6)
#define ref_gemv_row_q5_0p ckir_internal_ref_gemv_row_q5_0p
#define ref_gemm_row_q5_0p ckir_internal_ref_gemm_row_q5_0p
CKIR_FUSED_WDTYPE(q5_0p, uint8_t, RB_Q5_0, CKIR_Q5P_0, q5p)
#define ref_gemv_row_q5_1p ckir_internal_ref_gemv_row_q5_1p
#define ref_gemm_row_q5_1p ckir_internal_ref_gemm_row_q5_1p
CKIR_FUSED_WDTYPE(q5_1p, uint8_t, RB_Q5_1, CKIR_Q5P_1, q5p)
