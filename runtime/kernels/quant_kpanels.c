/* ckir runtime: linear layers and embeddings with K-quant weights in panels, q4_kp, q5_kp
 * and q6_kp (layouts in ckir_kpanel.h; docs/quantization.md, "q4_kp, q5_kp, q6_kp").
 *
 * Every kernel runs on the format's core (ckir_kp_core_fn): 32 rows of w, one panel,
 * against 1 to CKIR_KP_TX rows of x quantized per super-block (Q8_K, exactly as
 * gemv_q4_k / gemv_q6_k quantize x), each super-block's exact int32 dot products
 * scaled as the row-major kernels scale them.
 *
 *   gemv_<p> (decode) and gemm_<p> on int8 x (prefill, SIMD builds): the panel driver
 *     (ckir_pdriver.h, quant_pdriver.c) over the format's core: decode quantizes x once
 *     per call (once for q, k, v; once for gate and up) and the threads claim whole
 *     panels (CKIR_CLAIMED_ITEMS); prefill quantizes x's rows per tile (each
 *     thread its own copy, <= KP_XB bytes) and meets every panel with CKIR_KP_TX rows
 *     at a time: row m of y == gemv_<p>(row m of x) bit for bit.
 *     With fp32 x (ckir_runtime_qp_fp32_x, and scalar builds): the rows dequantized to
 *     fp32 on ckir_internal_wgemm, as gemm_q4_k / gemm_q6_k do.
 *   embed_<p>: row n is row n % 32 of its panel, gathered and dequantized.
 *   reference twins: the portable core on the scalar quantization of x (bit-equal to
 *     ckir_ref_gemv_q4_k / _q6_k on the unpacked rows), fp32 dequantized rows summed in
 *     double for the GEMM. */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_kpanel.h"
#include "ckir_pdriver.h"

#if defined(CKIR_Q512) || defined(CKIR_Q256)
#define KP_FAST 1
#else
#define KP_FAST 0
#endif
/* the driver's first prefetch of a stream (bytes, at most a panel) */
#define KP_PFD 16384
/* the distance gemv gives fmt's core (bytes ahead in the panel stream):
 * - q4_kp none: its core reads each panel block in address order and the hardware
 *   prefetcher keeps up (streamed from DRAM, one thread, the SIMD core took 0.75x the
 *   CPU time it took with a 4 KiB distance, paired, 9 rounds; on two threads 64 KiB
 *   and 128 KiB read no faster than none);
 * - q5_kp (streamed from DRAM, one thread, paired): AVX-512 none (1.35x the CPU time
 *   rate with 4 KiB), AVX2 8 KiB (1.11x 4 KiB's; none 0.5x);
 * - q6_kp: its planes are stored in the order its core reads them.  AVX-512 none: the
 *   hardware prefetcher keeps up (streaming 2048 x 5632, paired: 1.26x (2 threads) /
 *   1.40x (1 thread) the byte-order planes' rate with a 64 KiB distance, which on the
 *   new order gave 1.09x / 1.18x).  AVX2 64 KiB: its core sweeps a block once per lane
 *   group of 8 rows (none: 0.4x; 1.27x (2 threads) / 0.97x (1) the byte-order planes'
 *   rate); docs/performance-log.md, "q6_kp planes in read order". */
#if defined(CKIR_Q512)
#define KP_PFD_Q5 0
#define KP_PFD_Q6 0
#else
#define KP_PFD_Q5 8192
#define KP_PFD_Q6 65536
#endif
#define KP_PFD_OF(fmt) ((fmt) == CKIR_KP_Q4 ? 0 : (fmt) == CKIR_KP_Q5 ? KP_PFD_Q5 : KP_PFD_Q6)
/* bytes of x's quantized rows a GEMM thread keeps on its stack at once */
#define KP_XB (96 * 1024)
#define KP_MAX_BYTES 210
_Static_assert(CKIR_PANEL == 32, "the K-quant panels are 32 rows");

/* ---- the layout ------------------------------------------------------------------ */

void ckir_internal_kp_block(int fmt, const uint8_t *pb, int r, uint8_t *blk) {
  /* q4_k / q5_k: d, dmin (bytes 0..3) first, then bytes 4.. in quads; q6_k: d (bytes
   * 208..209) first, then bytes 0..207 in quads, in its plane order (ckir_kpanel.h) */
  const int dmin = CKIR_KP_DMIN(fmt), nf = dmin ? 2 : 1, bytes = CKIR_KP_BYTES(fmt);
  const int rest = dmin ? 4 : 0, nq = (bytes - 2 * nf) / 4;
  for (int f = 0; f < nf; f++)
    memcpy(blk + (dmin ? 2 * f : 208), pb + 2 * CKIR_PANEL * f + 2 * r, 2);
  for (int s = 0; s < nq; s++) {
    const int g = fmt == CKIR_KP_Q6 ? ckir_kp6_plane(s) : s; /* the plane in slot s */
    memcpy(blk + rest + 4 * g, pb + 2 * CKIR_PANEL * nf + 4 * CKIR_PANEL * s + 4 * r, 4);
  }
}

void ckir_internal_core_kp_portable(int fmt, const uint8_t *panel, int64_t nb,
                                    const ckir_q8k *xs, int X, float *out) {
  const int64_t pbb = (int64_t)CKIR_PANEL * CKIR_KP_BYTES(fmt);
  for (int r = 0; r < CKIR_PANEL; r++) {
    float acc[CKIR_KP_TX] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; b++) {
      uint8_t blk[KP_MAX_BYTES];
      ckir_internal_kp_block(fmt, panel + b * pbb, r, blk);
      for (int i = 0; i < X; i++)
        acc[i] += ckir_internal_kq_dot(fmt, blk, xs[i].a + b * 256, xs[i].bs + b * 16,
                                       xs[i].dx[b]);
    }
    for (int i = 0; i < X; i++) out[i * CKIR_PANEL + r] = acc[i];
  }
}

/* bytes of one panel of fmt at K */
static int64_t kp_panel_bytes(int fmt, int64_t K) {
  return K / 256 * CKIR_PANEL * CKIR_KP_BYTES(fmt);
}

/* the 256 values of row n, super-block b of a [N, K] matrix of fmt */
static void kp_values(int fmt, const uint8_t *w, int64_t n, int64_t b, int64_t K, float *v) {
  uint8_t blk[KP_MAX_BYTES];
  const uint8_t *pb = w + (n / CKIR_PANEL) * kp_panel_bytes(fmt, K) +
                      b * CKIR_PANEL * CKIR_KP_BYTES(fmt);
  ckir_internal_kp_block(fmt, pb, (int)(n % CKIR_PANEL), blk);
  ckir_internal_kq_deq1(fmt, blk, v);
}

/* one core call: the format's (SIMD) core, or the portable one (ref) */
CKIR_INLINE void kp_run(int fmt, int ref, const uint8_t *panel, int64_t nb, const ckir_q8k *xs,
                        int X, int64_t pfd, float *out) {
  if (ref)
    ckir_internal_core_kp_portable(fmt, panel, nb, xs, X, out);
  else if (fmt == CKIR_KP_Q4)
    ckir_internal_core_q4_kp(panel, nb, xs, X, pfd, out);
  else if (fmt == CKIR_KP_Q5)
    ckir_internal_core_q5_kp(panel, nb, xs, X, pfd, out);
  else
    ckir_internal_core_q6_kp(panel, nb, xs, X, pfd, out);
}

/* ---- gemv, gemm on int8 x: the panel driver (quant_pdriver.c) ---------------------- */

static int64_t kp_drv_x_bytes(int64_t K) { return CKIR_Q8K_BYTES(K); }
static void kp_drv_prep(const float *x, int64_t K, uint8_t *buf, int ref, void *xs) {
  *(ckir_q8k *)xs = ckir_internal_q8k_prepare(x, K, buf, ref);
}
static void kp_drv_run(int fmt, int ref, const uint8_t *panel, int64_t nb, const void *xs, int X,
                       int64_t pfd, float *out) {
  /* the driver's distance (KP_PFD in gemv, 0 in the GEMM) as fmt's core wants it */
  kp_run(fmt, ref, panel, nb, (const ckir_q8k *)xs, X, pfd ? KP_PFD_OF(fmt) : 0, out);
}
static const ckir_pdrv KP_DRV = {.block = 256,
                                 .panel_bytes = kp_panel_bytes,
                                 .x_bytes = kp_drv_x_bytes,
                                 .x_size = sizeof(ckir_q8k),
                                 .prep = kp_drv_prep,
                                 .run = kp_drv_run,
                                 .tx = CKIR_KP_TX,
                                 .pfd = KP_PFD,
                                 .xb = KP_XB,
                                 .values = kp_values,
                                 .max_k = CKIR_QUANT_MAX_K};

void ckir_internal_gemv_qkv_kp_fmts(const float *x, const uint8_t *const w[3],
                                    const float *const b[3], float *const y[3],
                                    const int64_t N[3], int64_t K, const int fmt[3]) {
  ckir_internal_pdrv_gemv_qkv(&KP_DRV, x, w, b, y, N, K, fmt, "gemv_qkv (K-quant panels)");
}

void ckir_internal_gemv_qkv_kp(const float *x, const uint8_t *const w[3],
                               const float *const b[3], float *const y[3], const int64_t N[3],
                               int64_t K, int fmt) {
  const int fmts[3] = {fmt, fmt, fmt};
  ckir_internal_gemv_qkv_kp_fmts(x, w, b, y, N, K, fmts);
}

void ckir_internal_gemv_gate_up_kp(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt) {
  ckir_internal_pdrv_gemv_gate_up(&KP_DRV, x, wg, wu, out, N, K, fmt,
                                  "gemv_gate_up (K-quant panels)");
}

/* ---- gemm ---------------------------------------------------------------------- */

/* columns [k0, k0 + kc) of row n (whole super-blocks dequantized) */
#define KP_WROW(D, FMT)                                                                 \
  static void D##_wrow(const void *w, int64_t K, int64_t n, int64_t k0, int64_t kc,     \
                       float *dst) {                                                    \
    ckir_internal_pdrv_wrow(&KP_DRV, FMT, w, K, n, k0, kc, dst);                        \
  }
KP_WROW(q4_kp, CKIR_KP_Q4)
KP_WROW(q6_kp, CKIR_KP_Q6)
KP_WROW(q5_kp, CKIR_KP_Q5)

CKIR_INLINE ckir_wrow_fn kp_wrow(int fmt) {
  return fmt == CKIR_KP_Q4 ? q4_kp_wrow : fmt == CKIR_KP_Q5 ? q5_kp_wrow : q6_kp_wrow;
}

void ckir_internal_gemm_kp_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                int64_t M, int64_t N, int64_t K, int fmt) {
  ckir_internal_wgemm(x, w, kp_wrow(fmt), b, y, M, N, K);
}

int ckir_internal_gemm_qkv_kp_fmts(const float *x, const uint8_t *const w[3],
                                   const float *const b[3], float *const y[3],
                                   const int64_t N[3], int64_t M, int64_t K, const int fmt[3]) {
  return ckir_internal_pdrv_gemm_qkv(&KP_DRV, x, w, b, y, N, M, K, fmt);
}

int ckir_internal_gemm_qkv_kp(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt) {
  const int fmts[3] = {fmt, fmt, fmt};
  return ckir_internal_gemm_qkv_kp_fmts(x, w, b, y, N, M, K, fmts);
}

int ckir_internal_gemm_gate_up_kp(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt) {
  return ckir_internal_pdrv_gemm_gate_up(&KP_DRV, x, wg, wu, out, M, N, K, fmt);
}

/* x . row n the way gemv_<p>'s reference twin computes it (x quantized by the scalar
 * code), and in double against the dequantized row (the GEMM's reference) */
static float kp_gemv_row_ref(const float *x, const uint8_t *w, int64_t n, int64_t K, int fmt) {
  uint8_t buf[CKIR_Q8K_BYTES(K)];
  const ckir_q8k s = ckir_internal_q8k_prepare(x, K, buf, 1);
  const int64_t pbb = (int64_t)CKIR_PANEL * CKIR_KP_BYTES(fmt);
  const uint8_t *panel = w + (n / CKIR_PANEL) * kp_panel_bytes(fmt, K);
  float acc = 0.0f;
  for (int64_t b = 0; b < K / 256; b++) {
    uint8_t blk[KP_MAX_BYTES];
    ckir_internal_kp_block(fmt, panel + b * pbb, (int)(n % CKIR_PANEL), blk);
    acc += ckir_internal_kq_dot(fmt, blk, s.a + b * 256, s.bs + b * 16, s.dx[b]);
  }
  return acc;
}

static double kp_gemm_row_ref(const float *x, const uint8_t *w, int64_t n, int64_t K, int fmt) {
  double acc = 0.0;
  float v[256];
  for (int64_t b = 0; b < K / 256; b++) {
    kp_values(fmt, w, n, b, K, v);
    for (int j = 0; j < 256; j++) acc += (double)x[b * 256 + j] * v[j];
  }
  return acc;
}

/* ---- the public kernels of each dtype -------------------------------------------- */

#define KP_KERNELS(D, FMT)                                                                    \
  CKIR_GEMV_PAIR(D, uint8_t,                                                                  \
    ckir_internal_pdrv_gemv_one(&KP_DRV, x, w, b, y, N, K, FMT, 0, "gemv_" #D))               \
  CKIR_REF_GEMV_PAIR(D, uint8_t,                                                              \
    ckir_internal_pdrv_gemv_one(&KP_DRV, x, w, b, y, N, K, FMT, 1, "gemv_" #D))               \
  CKIR_GEMM_PAIR(D, uint8_t, ckir_internal_pdrv_gemm_one(&KP_DRV, x, w, b, y, M, N, K, FMT,   \
                                                        D##_wrow, "gemm_" #D))                \
  CKIR_REF_GEMM_PAIR(D, uint8_t, {                                                            \
    for (int64_t m = 0; m < M; m++)                                                           \
      for (int64_t n = 0; n < N; n++)                                                         \
        y[m * N + n] = (float)kp_gemm_row_ref(x + m * K, w, n, K, FMT) + (b ? b[n] : 0.0f);   \
  })                                                                                          \
  /* on fp32 x gemm.c's driver at every M in a SIMD build (as gemm_q4_k's); none on int8 x \
   * (the fused GEMMs take ckir_internal_gemm_*_kp then) */                                   \
  ckir_wread ckir_internal_wread_##D(int64_t M, int64_t K) {                                  \
    (void)K;                                                                                  \
    if (!KP_FAST) return ckir_internal_wread_rows(M, D##_wrow);                               \
    return ckir_internal_pdrv_i8_now() ? (ckir_wread){GEMM_B_NONE, NULL} : (ckir_wread){GEMM_B_ROWS, D##_wrow}; \
  }                                                                                           \
  void ckir_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,     \
                      int64_t E) {                                                            \
    ckir_internal_pdrv_embed(&KP_DRV, FMT, tokens, table, out, T, E, 1, "embed_" #D);         \
  }                                                                                           \
  void ckir_ref_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T, \
                          int64_t E) {                                                        \
    ckir_internal_pdrv_embed(&KP_DRV, FMT, tokens, table, out, T, E, 0, "embed_" #D);         \
  }                                                                                           \
  float ckir_internal_ref_gemv_row_##D(const float *x, const uint8_t *w, int64_t n, int64_t K) { \
    return kp_gemv_row_ref(x, w, n, K, FMT);                                                  \
  }                                                                                           \
  float ckir_internal_ref_gemm_row_##D(const float *x, const uint8_t *w, int64_t n, int64_t K) { \
    return (float)kp_gemm_row_ref(x, w, n, K, FMT);                                           \
  }

KP_KERNELS(q4_kp, CKIR_KP_Q4)
KP_KERNELS(q6_kp, CKIR_KP_Q6)
KP_KERNELS(q5_kp, CKIR_KP_Q5)
