/* ckir runtime: fused linear layers with bf16 / Q8_0 / Q4_0 / Q4_1 weights
 * (targets of --fuse-qkv and --fuse-gate-up when the weights are stored in
 * one of those dtypes).
 *
 * These kernels compose the runtime's own weight-dtype kernels
 * (ckir_quant.h), so their numerics are exactly those of the unfused calls
 * (decode: x quantized per call to q8 for the block formats, as gemv_<q>
 * does; prefill: fp32 x against dequantized panels):
 *
 *   gemv_qkv_<d>(+bias)   one parallel region; the q, k and v rows together are
 *                         split into one contiguous range per thread, and each
 *                         thread runs gemv_<d> on its pieces of wq, wk, wv
 *   gemv_gate_up_<d>      one parallel region over the N rows; each thread runs
 *                         gemv_<d> on chunks of GUW_CH rows of wg and of wu
 *                         into stack buffers and writes silu(gate) * up
 *   gemm_qkv_<d>(+bias)   the three gemm_<d> calls back to back
 *   gemm_gate_up_<d>      tiles of 144 x 256 (ckir_internal_gate_up_tiles)
 *
 * Inside the fused region the called kernel opens a nested parallel region,
 * which OpenMP runs on the calling thread alone (nesting is inactive unless
 * OMP_MAX_ACTIVE_LEVELS / a list OMP_NUM_THREADS enables it: then the inner
 * kernels spawn threads of their own, still correct, but oversubscribed).
 * The kernels called split their work with omp_get_num_threads() inside their
 * region, so a nested call computes its whole range. */
#include "ckir_internal.h"
#include "ckir_fused.h"
#include "ckir_quant.h"

#define GUW_CH 256                 /* gate/up rows per gemv pair in decode */
#define FUSED_GEMV_PAR_MIN 65536 /* weights below which decode stays on one thread */

typedef void (*gemv_fn)(const float *x, const void *w, const float *b, float *y, int64_t N,
                        int64_t K);

/* the calling thread's contiguous share [lo, hi) of n rows */
static void thread_rows(int64_t n, int64_t *lo, int64_t *hi) {
#ifdef _OPENMP
  const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
  const int64_t t = 0, nt = 1;
#endif
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

static void qkv_gemv(gemv_fn gemv, int64_t rb, const float *x, const void *const w[3],
                     const float *const b[3], float *const y[3], const int64_t N[3], int64_t K) {
  const int64_t total = N[0] + N[1] + N[2];
#pragma omp parallel if (total * K >= FUSED_GEMV_PAR_MIN && total > 1)
  {
    int64_t lo, hi, base = 0;
    thread_rows(total, &lo, &hi);
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
    thread_rows(N, &lo, &hi);
    for (int64_t c = lo; c < hi; c += GUW_CH) {
      const int64_t n = CKIR_MIN(GUW_CH, hi - c);
      float g[GUW_CH], u[GUW_CH];
      gemv(x, (const uint8_t *)wg + c * rb, NULL, g, n, K);
      gemv(x, (const uint8_t *)wu + c * rb, NULL, u, n, K);
      ckir_internal_silu_mul(g, u, out + c, n);
    }
  }
}

/* Every public kernel of one weight dtype D (C element type WT, RB(K) bytes
 * per row) and its reference twin, built on ckir_{gemv,gemm}[_bias]_D. */
#define CKIR_FUSED_WDTYPE(D, WT, RB)                                                             \
  static void gemv_w_##D(const float *x, const void *w, const float *b, float *y, int64_t N,    \
                         int64_t K) {                                                            \
    if (b)                                                                                       \
      ckir_gemv_bias_##D(x, (const WT *)w, b, y, N, K);                                          \
    else                                                                                         \
      ckir_gemv_##D(x, (const WT *)w, y, N, K);                                                  \
  }                                                                                              \
  static void gemm_w_##D(const float *x, const void *w, float *y, int64_t M, int64_t N,         \
                         int64_t K) {                                                            \
    ckir_gemm_##D(x, (const WT *)w, y, M, N, K);                                                 \
  }                                                                                              \
  static void qkv_gemv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,            \
                           const float *bq, const float *bk, const float *bv, float *q,         \
                           float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) { \
    CKIR_REQUIRE(Nq >= 1 && Nk >= 1 && Nv >= 1 && K >= 1, "gemv_qkv_" #D);                     \
    const void *w[3] = {wq, wk, wv};                                                             \
    const float *b[3] = {bq, bk, bv};                                                            \
    float *y[3] = {q, k, v};                                                                     \
    const int64_t N[3] = {Nq, Nk, Nv};                                                           \
    qkv_gemv(gemv_w_##D, RB(K), x, w, b, y, N, K);                                               \
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
  void ckir_gemm_qkv_##D(const float *x, const WT *wq, const WT *wk, const WT *wv, float *q,    \
                         float *k, float *v, int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,     \
                         int64_t K) {                                                            \
    ckir_gemm_##D(x, wq, q, M, Nq, K);                                                           \
    ckir_gemm_##D(x, wk, k, M, Nk, K);                                                           \
    ckir_gemm_##D(x, wv, v, M, Nv, K);                                                           \
  }                                                                                              \
  void ckir_gemm_qkv_bias_##D(const float *x, const WT *wq, const WT *wk, const WT *wv,         \
                              const float *bq, const float *bk, const float *bv, float *q,      \
                              float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,            \
                              int64_t Nv, int64_t K) {                                           \
    ckir_gemm_bias_##D(x, wq, bq, q, M, Nq, K);                                                  \
    ckir_gemm_bias_##D(x, wk, bk, k, M, Nk, K);                                                  \
    ckir_gemm_bias_##D(x, wv, bv, v, M, Nv, K);                                                  \
  }                                                                                              \
  void ckir_gemv_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out, int64_t N, \
                             int64_t K) {                                                        \
    CKIR_REQUIRE(N >= 1 && K >= 1, "gemv_gate_up_" #D);                                          \
    gate_up_gemv(gemv_w_##D, RB(K), x, wg, wu, out, N, K);                                       \
  }                                                                                              \
  void ckir_gemm_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out, int64_t M, \
                             int64_t N, int64_t K) {                                             \
    CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1, "gemm_gate_up_" #D);                                \
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
    const int64_t rb = RB(K);                                                                    \
    for (int64_t n = 0; n < N; n++) {                                                            \
      float g, u;                                                                                \
      ckir_ref_gemv_##D(x, (const WT *)((const uint8_t *)wg + n * rb), &g, 1, K);                \
      ckir_ref_gemv_##D(x, (const WT *)((const uint8_t *)wu + n * rb), &u, 1, K);                \
      out[n] = g / (1.0f + expf(-g)) * u;                                                        \
    }                                                                                            \
  }                                                                                              \
  void ckir_ref_gemm_gate_up_##D(const float *x, const WT *wg, const WT *wu, float *out,        \
                                 int64_t M, int64_t N, int64_t K) {                              \
    const int64_t rb = RB(K);                                                                    \
    for (int64_t m = 0; m < M; m++)                                                              \
      for (int64_t n = 0; n < N; n++) {                                                          \
        float g, u;                                                                              \
        ckir_ref_gemm_##D(x + m * K, (const WT *)((const uint8_t *)wg + n * rb), &g, 1, 1, K);   \
        ckir_ref_gemm_##D(x + m * K, (const WT *)((const uint8_t *)wu + n * rb), &u, 1, 1, K);   \
        out[m * N + n] = g / (1.0f + expf(-g)) * u;                                              \
      }                                                                                          \
  }

#define RB_BF16(K) ((K) * (int64_t)sizeof(uint16_t))
#define RB_Q8_0(K) ((K) / CKIR_QK * CKIR_Q8_0_BYTES)
#define RB_Q4_0(K) ((K) / CKIR_QK * CKIR_Q4_0_BYTES)
#define RB_Q4_1(K) ((K) / CKIR_QK * CKIR_Q4_1_BYTES)

CKIR_FUSED_WDTYPE(bf16, uint16_t, RB_BF16)
CKIR_FUSED_WDTYPE(q8_0, uint8_t, RB_Q8_0)
CKIR_FUSED_WDTYPE(q4_0, uint8_t, RB_Q4_0)
CKIR_FUSED_WDTYPE(q4_1, uint8_t, RB_Q4_1)
