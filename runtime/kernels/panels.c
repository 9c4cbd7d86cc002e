/* ckir runtime: linear layers and embeddings with weights pre-packed in GEMM
 * panels of CKIR_PANEL rows (layouts in ckir_internal.h): f32p (fp32) and
 * bf16p (bf16 pairs).
 *
 *   gemm_f32p (M > F32P_SMALL_M): gemm.c's blocked driver reading the panels in
 *     place (kind GEMM_B_PANELS): no per-call transpose of w, and one
 *     contiguous weight stream per thread.
 *   gemm_bf16p (M > BF16P_SMALL_M): the same driver (GEMM_B_BF16P / GEMM_B_BF16P_F32).
 *     With CKIR_BF16DOT and M > CKIR_WGEMM_SMALL_M, x rounded to bf16 meets the
 *     pairs in place by vdpbf16ps (as gemm_bf16 does, without packing w); else
 *     each slice of a panel is widened to fp32 into the B pack, for fp32 x.
 *   gemv_<p>, and gemm_<p> for small M: f32p_rows / bf16p_rows below.  Each thread takes
 *     one contiguous range of whole panels, i.e. one sequential stream of the
 *     weights; per k (bf16p: per pair of k) it loads the panel's 32 values and
 *     broadcasts x[m, k] of up to PR_MAX rows against them: no horizontal sum
 *     (a row-major gemv reduces a vector per row).  Every output element sums
 *     its K products in a fixed order, in fp32, whatever the thread count.
 *   embed_<p>: row n of the table is the strided column n % 32 of panel n / 32.
 *
 * f32p values are exact fp32: only the order of the summation differs from
 * gemm_f32.  bf16p values are the bf16 ones: the products are those of gemv_bf16
 * and gemm_bf16, summed in another order. */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_pdriver.h"

/* rows of x per pass over a panel: CKIR_PANEL / CKV_W vectors each, kept at
 * <= 8 accumulators (AVX-512: 2 vectors x 4 rows; AVX2 and scalar: 4 x 2) */
#define PR_V (CKIR_PANEL / CKV_W)
#define PR_MAX (8 / PR_V)
/* accumulator sets: two, for two k in flight when few rows share a panel */
#define PR_SETS 2
/* gemm with M <= F32P_SMALL_M streams the panels (as gemm.c's GEMM_SMALL_M) */
#define F32P_SMALL_M 8
/* gemm_bf16p streams the panels up to this M: on AVX-512 up to the bf16 dot
 * product's boundary (measured at M = 16 / 32, 1536x576, Zen 4: 209 / 207
 * GFLOP/s against 128 / 180 on the blocked driver widening to fp32); on AVX2
 * the driver is faster past 8 rows (147 / 163 against 103 / 102) */
#ifndef BF16P_SMALL_M
#if defined(CKIR_AVX512)
#define BF16P_SMALL_M CKIR_WGEMM_SMALL_M
#else
#define BF16P_SMALL_M F32P_SMALL_M
#endif
#endif
/* prefetch distance of the weight stream, in 32-bit values (4 KiB: the next page) */
#define PR_PFD 1024

/* y[r * ldy + n] for the rows r < R and the columns of panel p: the sum of the
 * U accumulator sets, plus b[n] when b != NULL (the columns < N only) */
CKIR_INLINE void panel_store(ckv acc[PR_SETS][PR_MAX][PR_V], const int U, const int R, const float *b,
                             float *y, int64_t ldy, int64_t N, int64_t p) {
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

/* y[m * ldy + n] for rows m < R of x (row stride K) and the panels [p0, p1)
 * of f32p weights */
CKIR_INLINE void f32p_rows_(const float *x, const int R, const float *wp, const float *b,
                            float *y, int64_t ldy, int64_t N, int64_t K, int64_t p0, int64_t p1) {
  /* two k per step when few accumulators are live (the FMA latency) */
  const int U = R * PR_V <= 4 ? 2 : 1;
  for (int64_t p = p0; p < p1; p++) {
    const float *w = wp + p * K * CKIR_PANEL;
    ckv acc[PR_SETS][PR_MAX][PR_V];
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
    panel_store(acc, U, R, b, y, ldy, N, p);
  }
}

/* the same for bf16p weights (K even): per pair of k, the panel's 32 pairs
 * widen to the even-k and the odd-k values (a shift and a mask); the even k
 * accumulate into acc[0], the odd ones into acc[1] when few accumulators are
 * live (measured: two pair rows a step into four sets, 1.00x), else into acc[0]
 * after the even one */
CKIR_INLINE void bf16p_rows_(const float *x, const int R, const uint16_t *wp, const float *b,
                             float *y, int64_t ldy, int64_t N, int64_t K, int64_t p0,
                             int64_t p1) {
  const int U = R * PR_V <= 4 ? 2 : 1;
  const int64_t K2 = K / 2;
  for (int64_t p = p0; p < p1; p++) {
    const uint32_t *w = (const uint32_t *)wp + p * K2 * CKIR_PANEL;
    ckv acc[PR_SETS][PR_MAX][PR_V];
    for (int u = 0; u < U; u++)
      for (int r = 0; r < R; r++)
        for (int j = 0; j < PR_V; j++) acc[u][r][j] = ckv_zero();
    for (int64_t kp = 0; kp < K2; kp++) {
      const uint32_t *wk = w + kp * CKIR_PANEL;
      __builtin_prefetch(wk + PR_PFD);
      __builtin_prefetch(wk + PR_PFD + 16);
      ckv lo[PR_V], hi[PR_V];
      for (int j = 0; j < PR_V; j++) ckv_load_bf16_pairs(wk + j * CKV_W, &lo[j], &hi[j]);
      for (int r = 0; r < R; r++) {
        const ckv a0 = ckv_set1(x[r * K + 2 * kp]), a1 = ckv_set1(x[r * K + 2 * kp + 1]);
        for (int j = 0; j < PR_V; j++) {
          acc[0][r][j] = ckv_fma(a0, lo[j], acc[0][r][j]);
          acc[U - 1][r][j] = ckv_fma(a1, hi[j], acc[U - 1][r][j]);
        }
      }
    }
    panel_store(acc, U, R, b, y, ldy, N, p);
  }
}

/* y[M, N] = x[M, K] . W^T (+ b) for small M: OpenMP over contiguous ranges of
 * panels (inside a caller's active region, all of them on the calling thread:
 * the fused decode kernels' slices); ROWS_ is f32p_rows_ or bf16p_rows_, WT
 * their weight type */
#define CKIR_PANEL_ROWS(NAME, ROWS_, WT)                                                          \
  static void NAME(const float *x, int64_t M, const WT *wp, const float *b, float *y, int64_t N,  \
                   int64_t K) {                                                                   \
    const int64_t P = (N + CKIR_PANEL - 1) / CKIR_PANEL;                                          \
    CKIR_SHARED_RANGE(N * K >= CKIR_GEMV_PAR_MIN && P > 1, P, p0, p1, {                           \
      for (int64_t m = 0; m < M; m += PR_MAX) {                                                   \
        const float *xm = x + m * K;                                                              \
        float *ym = y + m * N;                                                                    \
        switch (CKIR_MIN(PR_MAX, M - m)) {                                                        \
          PR_CASES(ROWS_)                                                                         \
          case 2: ROWS_(xm, 2, wp, b, ym, N, N, K, p0, p1); break;                                \
          default: ROWS_(xm, 1, wp, b, ym, N, N, K, p0, p1); break;                               \
        }                                                                                         \
      }                                                                                           \
    });                                                                                           \
  }
#if PR_MAX >= 4
#define PR_CASES(ROWS_)                                    \
  case 4: ROWS_(xm, 4, wp, b, ym, N, N, K, p0, p1); break; \
  case 3: ROWS_(xm, 3, wp, b, ym, N, N, K, p0, p1); break;
#else
#define PR_CASES(ROWS_)
#endif
CKIR_PANEL_ROWS(f32p_rows, f32p_rows_, float)
CKIR_PANEL_ROWS(bf16p_rows, bf16p_rows_, uint16_t)

/* ---- decode GEMVs on the panel driver (ckir_pdriver.h, quant_pdriver.c) ------------
 * x needs no quantization (the driver's x struct points at x); the panels of the call's
 * matrices are claimed (CKIR_CLAIMED_ITEMS), each panel one pass of f32p_rows_ /
 * bf16p_rows_ over its K (fmt CKIR_PP_F32 / CKIR_PP_BF16; bf16p's block is a k pair). */
typedef struct {
  const float *x;
} pp_x;
static int64_t pp_panel_bytes(int fmt, int64_t K) {
  return CKIR_PANEL * K * (fmt == CKIR_PP_BF16 ? 2 : 4);
}
static int64_t pp_x_bytes(int64_t K) { return (void)K, 1; }
static void pp_prep(const float *x, int64_t K, uint8_t *buf, int ref, void *xs) {
  (void)K, (void)buf, (void)ref;
  ((pp_x *)xs)->x = x;
}
static void pp_run(int fmt, int ref, const uint8_t *panel, int64_t nb, const void *xs, int X,
                   int64_t pfd, float *out) {
  (void)ref, (void)X, (void)pfd; /* one row of x; the loops prefetch PR_PFD ahead themselves */
  const float *x = ((const pp_x *)xs)->x;
  if (fmt == CKIR_PP_BF16)
    bf16p_rows_(x, 1, (const uint16_t *)panel, NULL, out, CKIR_PANEL, CKIR_PANEL, 2 * nb, 0, 1);
  else
    f32p_rows_(x, 1, (const float *)panel, NULL, out, CKIR_PANEL, CKIR_PANEL, nb, 0, 1);
}
#define PP_DRV(BLOCK)                                                                     \
  {.block = (BLOCK), .panel_bytes = pp_panel_bytes, .x_bytes = pp_x_bytes,               \
   .x_size = sizeof(pp_x), .prep = pp_prep, .run = pp_run, .tx = 1,                      \
   .pfd = 4 * PR_PFD, .max_k = INT64_MAX}
static const ckir_pdrv PP_DRV[2] = {[CKIR_PP_F32] = PP_DRV(1), [CKIR_PP_BF16] = PP_DRV(2)};

void ckir_internal_gemv_qkv_pp(const float *x, const uint8_t *const w[3], const float *const b[3],
                               float *const y[3], const int64_t N[3], int64_t K, int fmt) {
  const int fmts[3] = {fmt, fmt, fmt};
  ckir_internal_pdrv_gemv_qkv(&PP_DRV[fmt], x, w, b, y, N, K, fmts, "gemv_qkv (f32p / bf16p)");
}

void ckir_internal_gemv_gate_up_pp(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt) {
  ckir_internal_pdrv_gemv_gate_up(&PP_DRV[fmt], x, wg, wu, out, N, K, fmt,
                                  "gemv_gate_up (f32p / bf16p)");
}

CKIR_GEMV_PAIR(f32p, float,
               ckir_internal_pdrv_gemv_one(&PP_DRV[CKIR_PP_F32], x, (const uint8_t *)w, b, y, N, K,
                                           CKIR_PP_F32, 0, "gemv_f32p"))

ckir_wread ckir_internal_wread_f32p(int64_t M, int64_t K) {
  (void)K;
  return (ckir_wread){M <= F32P_SMALL_M ? GEMM_B_NONE : GEMM_B_PANELS, NULL};
}

/* gemm_bf16p: small M streams the panels; with CKIR_BF16DOT, M > CKIR_WGEMM_SMALL_M
 * multiplies bf16-rounded x by vdpbf16ps (the rule of gemm_bf16), else fp32 x
 * meets each kc-slice of the panels converted to fp32 */
ckir_wread ckir_internal_wread_bf16p(int64_t M, int64_t K) {
  (void)K;
  if (M <= BF16P_SMALL_M) return (ckir_wread){GEMM_B_NONE, NULL};
  const int dot = ckir_runtime_bf16_dot() && M > CKIR_WGEMM_SMALL_M;
  return (ckir_wread){dot ? GEMM_B_BF16P : GEMM_B_BF16P_F32, NULL};
}

static void gemm_f32p_impl(const float *x, const float *w, const float *b, float *y, int64_t M,
                           int64_t N, int64_t K) {
  const ckir_wread r = ckir_internal_wread_f32p(M, K);
  if (r.kind == GEMM_B_NONE)
    f32p_rows(x, M, w, b, y, N, K);
  else
    ckir_internal_gemm_outs(x, r, &(ckir_gemm_out){w, b, y, N}, 1, 0, M, K);
}

CKIR_GEMM_PAIR(f32p, float, gemm_f32p_impl(x, w, b, y, M, N, K))

static void gemm_bf16p_impl(const float *x, const uint16_t *w, const float *b, float *y,
                            int64_t M, int64_t N, int64_t K) {
  const ckir_wread r = ckir_internal_wread_bf16p(M, K);
  if (r.kind == GEMM_B_NONE)
    bf16p_rows(x, M, w, b, y, N, K);
  else
    ckir_internal_gemm_outs(x, r, &(ckir_gemm_out){w, b, y, N}, 1, 0, M, K);
}

CKIR_GEMV_PAIR(bf16p, uint16_t,
               ckir_internal_pdrv_gemv_one(&PP_DRV[CKIR_PP_BF16], x, (const uint8_t *)w, b, y, N,
                                           K, CKIR_PP_BF16, 0, "gemv_bf16p"))

CKIR_GEMM_PAIR(bf16p, uint16_t, gemm_bf16p_impl(x, w, b, y, M, N, K))

void ckir_embed_f32p(const int32_t *tokens, const float *table, float *out, int64_t T,
                     int64_t E) {
#pragma omp parallel for schedule(static) if (T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    const int64_t n = tokens[t];
    const float *col = table + (n / CKIR_PANEL) * E * CKIR_PANEL + n % CKIR_PANEL;
    for (int64_t e = 0; e < E; e++) out[t * E + e] = col[e * CKIR_PANEL];
  }
}

/* row n of a bf16p table: the strided column n % 32 of panel n / 32, in pairs */
void ckir_embed_bf16p(const int32_t *tokens, const uint16_t *table, float *out, int64_t T,
                      int64_t E) {
#pragma omp parallel for schedule(static) if (T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    const int64_t n = tokens[t];
    const uint32_t *col =
        (const uint32_t *)table + (n / CKIR_PANEL) * (E / 2) * CKIR_PANEL + n % CKIR_PANEL;
    for (int64_t e = 0; e < E; e += 2) {
      const uint32_t pair = col[e / 2 * CKIR_PANEL], lo = pair << 16, hi = pair & 0xFFFF0000u;
      memcpy(out + t * E + e, &lo, sizeof(float));
      memcpy(out + t * E + e + 1, &hi, sizeof(float));
    }
  }
}

/* ---- reference twins ------------------------------------------------------ */

CKIR_INLINE float bf16p_at(const uint16_t *w, int64_t n, int64_t k, int64_t K) {
  const uint32_t u = (uint32_t)CKIR_PANEL_BF16_AT(w, n, k, K) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* the reference twins of panel dtype D (weights WT; AT(w, n, k, K) the value of
 * element (n, k)): double sums of x . row n, in k order (ckir_internal_ref_row_D,
 * also the reference rows of the fused kernels) */
#define CKIR_PANEL_REFS(D, WT, AT)                                                             \
  float ckir_internal_ref_row_##D(const float *x, const WT *w, int64_t n, int64_t K) {         \
    double s = 0.0;                                                                            \
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * AT(w, n, k, K);                         \
    return (float)s;                                                                           \
  }                                                                                            \
  void ckir_ref_gemm_bias_##D(const float *x, const WT *w, const float *b, float *y, int64_t M,  \
                              int64_t N, int64_t K) {                                          \
    for (int64_t m = 0; m < M; m++)                                                            \
      for (int64_t n = 0; n < N; n++)                                                          \
        y[m * N + n] = ckir_internal_ref_row_##D(x + m * K, w, n, K) + (b ? b[n] : 0.0f);      \
  }                                                                                            \
  void ckir_ref_gemm_##D(const float *x, const WT *w, float *y, int64_t M, int64_t N,         \
                         int64_t K) {                                                          \
    ckir_ref_gemm_bias_##D(x, w, NULL, y, M, N, K);                                            \
  }                                                                                            \
  void ckir_ref_gemv_##D(const float *x, const WT *w, float *y, int64_t N, int64_t K) {       \
    ckir_ref_gemm_bias_##D(x, w, NULL, y, 1, N, K);                                            \
  }                                                                                            \
  void ckir_ref_gemv_bias_##D(const float *x, const WT *w, const float *b, float *y, int64_t N, \
                              int64_t K) {                                                     \
    ckir_ref_gemm_bias_##D(x, w, b, y, 1, N, K);                                               \
  }                                                                                            \
  void ckir_ref_embed_##D(const int32_t *tokens, const WT *table, float *out, int64_t T,      \
                          int64_t E) {                                                         \
    for (int64_t t = 0; t < T; t++)                                                            \
      for (int64_t e = 0; e < E; e++) out[t * E + e] = AT(table, tokens[t], e, E);             \
  }
CKIR_PANEL_REFS(f32p, float, CKIR_PANEL_AT)
CKIR_PANEL_REFS(bf16p, uint16_t, bf16p_at)

/* the fused kernels' hooks (fused_wdtype.c, family pp): the fp32-x GEMM of format fmt;
 * no fused GEMM of their own (0: gemm.c's driver takes the three / the pair) */
void ckir_internal_gemm_pp_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                int64_t M, int64_t N, int64_t K, int fmt) {
  if (fmt == CKIR_PP_BF16)
    gemm_bf16p_impl(x, (const uint16_t *)w, b, y, M, N, K);
  else
    gemm_f32p_impl(x, (const float *)w, b, y, M, N, K);
}

int ckir_internal_gemm_qkv_pp(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt) {
  (void)x, (void)w, (void)b, (void)y, (void)N, (void)M, (void)K, (void)fmt;
  return 0;
}

int ckir_internal_gemm_gate_up_pp(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt) {
  (void)x, (void)wg, (void)wu, (void)out, (void)M, (void)N, (void)K, (void)fmt;
  return 0;
}
