/* ckir runtime, internal: the driver of the panel formats whose kernels run on a
 * per-panel core (the K-quant panels q4_kp / q5_kp / q6_kp, quant_kpanels.c; the Q5
 * panels q5_0p / q5_1p, quant_q5p.c; the decode GEMVs of the block panels q8_0p /
 * q4_0p / q4_1p, quant_panels.c, and of f32p / bf16p, panels.c, whose prefill GEMMs
 * are their own).  quant_pdriver.c.
 *
 * A format describes itself with a ckir_pdrv: how x is quantized (prep, into a struct of
 * x_size bytes pointing into a buffer of x_bytes(K) bytes) and how a core meets one
 * panel of 32 rows with 1 to tx such rows of x (run).  The driver then gives
 *   gemv: x quantized once; the panels of the matrices of one call (gemv 1, gemv_qkv 3,
 *     gate_up: the gate's, each run of CKIR_GU_PANELS with its up panels) form one
 *     sequence, whose panels (gate_up: runs) the threads claim (CKIR_CLAIMED_ITEMS);
 *   gemm on int8 x: x's rows in tiles (<= xb bytes of them quantized), the panels of
 *     each tile claimed as the gemv's are, a thread quantizing a tile's rows itself
 *     where it claims one of its panels; every panel meets the tile's rows tx at a
 *     time, so row m of y equals the gemv of row m of x bit for bit;
 *   on the format's dequantized values (values): the rows a GEMM on fp32 x reads, and
 *     embed. */
#ifndef CKIR_PDRIVER_H
#define CKIR_PDRIVER_H
#include <stddef.h>
#include <stdint.h>
#include "ckir_quant.h" /* ckir_wrow_fn */

typedef struct {
  /* the elements of x one block of the format covers along K (32 or 256) */
  int64_t block;
  /* bytes of one panel at K */
  int64_t (*panel_bytes)(int fmt, int64_t K);
  /* bytes of the buffer one row of quantized x needs at K, and sizeof its struct */
  int64_t (*x_bytes)(int64_t K);
  size_t x_size;
  /* x[K] quantized into buf, its struct written to xs (ref: the scalar code) */
  void (*prep)(const float *x, int64_t K, uint8_t *buf, int ref, void *xs);
  /* out[i * 32 + r] = row r of the panel . x_i (i < X), the core (ref: the portable one) */
  void (*run)(int fmt, int ref, const uint8_t *panel, int64_t nb, const void *xs, int X,
              int64_t pfd, float *out);
  /* rows of x per core call, prefetch distance (bytes), stack bytes of x per GEMM thread */
  int tx;
  int64_t pfd;
  int64_t xb;
  /* v[0, block) = the values of row n, block b of a [N, K] matrix, dequantized (NULL
   * for a format whose rows and embed are its own) */
  void (*values)(int fmt, const uint8_t *w, int64_t n, int64_t b, int64_t K, float *v);
  /* the largest K of the GEMVs (x's quantized copy is on the stack) */
  int64_t max_k;
} ckir_pdrv;

/* one weight matrix of a call: y[M, N] (row stride N) = x . w^T (+ b), w in the
 * driver's format fmt (the matrices of one call may differ in format: q4_kp and q6_kp
 * share their quantization of x) */
typedef struct {
  const uint8_t *w;
  const float *b;
  float *y;
  int64_t N;
  int fmt;
} ckir_pseg;

/* y_i = W_i x (+ b_i) for nseg matrices sharing x, or with gate_up out = silu(Wg x) *
 * (Wu x) (segs[0] the gate, out its y; segs[1] the up), on one quantization of x */
void ckir_internal_pdrv_gemv(const ckir_pdrv *d, const float *x, const ckir_pseg *segs, int nseg,
                             int gate_up, int64_t K, int ref);
/* the same for the M rows of x on int8 x */
void ckir_internal_pdrv_gemm_i8(const ckir_pdrv *d, const float *x, int64_t M, int64_t K,
                                const ckir_pseg *segs, int nseg, int gate_up);

/* The entry points every panel format of the driver shares (what names the kernel in
 * a violated constraint; K a multiple of d->block, at most d->max_k in decode):
 * y = W x (+ b); the fused qkv (each matrix in its own format fmt[i]) and gate_up GEMVs
 * on one quantization of x; the GEMM,
 * on int8 x where ckir_internal_pdrv_i8_now() (a SIMD build whose calling thread has
 * not asked for fp32 x), else fp32 x against the rows row dequantizes; the fused GEMMs
 * on int8 x, 0 where they do not run (fp32 x: the caller takes gemm.c's driver). */
int ckir_internal_pdrv_i8_now(void);
void ckir_internal_pdrv_gemv_one(const ckir_pdrv *d, const float *x, const uint8_t *w,
                                 const float *b, float *y, int64_t N, int64_t K, int fmt, int ref,
                                 const char *what);
void ckir_internal_pdrv_gemv_qkv(const ckir_pdrv *d, const float *x, const uint8_t *const w[3],
                                 const float *const b[3], float *const y[3], const int64_t N[3],
                                 int64_t K, const int fmt[3], const char *what);
void ckir_internal_pdrv_gemv_gate_up(const ckir_pdrv *d, const float *x, const uint8_t *wg,
                                     const uint8_t *wu, float *out, int64_t N, int64_t K, int fmt,
                                     const char *what);
void ckir_internal_pdrv_gemm_one(const ckir_pdrv *d, const float *x, const uint8_t *w,
                                 const float *b, float *y, int64_t M, int64_t N, int64_t K, int fmt,
                                 ckir_wrow_fn row, const char *what);
int ckir_internal_pdrv_gemm_qkv(const ckir_pdrv *d, const float *x, const uint8_t *const w[3],
                                const float *const b[3], float *const y[3], const int64_t N[3],
                                int64_t M, int64_t K, const int fmt[3]);
int ckir_internal_pdrv_gemm_gate_up(const ckir_pdrv *d, const float *x, const uint8_t *wg,
                                    const uint8_t *wu, float *out, int64_t M, int64_t N, int64_t K,
                                    int fmt);
/* columns [k0, k0 + kc) of row n of w, whole blocks dequantized by d->values (the rows a
 * GEMM on fp32 x reads: the body of a ckir_wrow_fn); embed: out[t] = row tokens[t] of
 * the [V, E] table, over the T tokens on threads where par (the reference twins: 0) */
void ckir_internal_pdrv_wrow(const ckir_pdrv *d, int fmt, const void *w, int64_t K, int64_t n,
                             int64_t k0, int64_t kc, float *dst);
void ckir_internal_pdrv_embed(const ckir_pdrv *d, int fmt, const int32_t *tokens,
                              const uint8_t *table, float *out, int64_t T, int64_t E, int par,
                              const char *what);
#endif /* CKIR_PDRIVER_H */
