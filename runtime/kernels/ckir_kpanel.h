/* ckir runtime, internal: the K-quant panel dtypes q4_kp and q6_kp.
 *
 * A q4_kp / q5_kp / q6_kp matrix [N, K] is ceil(N/32) panels of 32 rows; a panel is
 * K/256 *panel blocks* (32 rows x one super-block column), each the 32 rows' Q4_K / Q5_K / Q6_K
 * super-blocks with their bytes permuted (ckir.quant.pack_block_panels; rows past N
 * are zero bytes):
 *   q4_kp (4608 bytes): f16 d of row r at 2r, f16 dmin at 64 + 2r, then 35 quad planes
 *     g of 128 bytes, byte 128 + 128g + 4r + j = byte 4 + 4g + j of row r's super-block
 *     (planes 0..2 its 12 scale bytes as three words, 3..34 qs[4(g-3) + j]);
 *   q5_kp (5632 bytes): as q4_kp, 43 quad planes (0..2 the scales, 3..10 qh, 11..42 qs);
 *   q6_kp (6720 bytes): f16 d of row r at 2r (the block's bytes 208..209), then 52 quad
 *     planes, byte 64 + 128g + 4r + j = byte 4g + j of row r's block (planes 0..31 ql,
 *     32..47 qh, 48..51 the int8 scales).
 * quant_kpanels.c drives every public kernel of the three dtypes (the GEMVs and int8-x
 * GEMMs through the panel driver, ckir_pdriver.h); per panel it calls the format's core
 * (quant_q45kp.c for q4_kp and q5_kp, quant_q6kp.c). */
#ifndef CKIR_KPANEL_H
#define CKIR_KPANEL_H
#include <stdint.h>

/* one row of x quantized per super-block of 256 ("Q8_K"): a[K] int8 in the natural
 * order, dx[K/256] = max|x_b| / 127, bs[K/16] the sums of 16 consecutive a */
typedef struct {
  int8_t *a;
  float *dx;
  int16_t *bs;
} ckir_q8k;

/* bytes of buffer ckir_internal_q8k_prepare needs for K */
#define CKIR_Q8K_BYTES(K) ((K) + ((K) / 256) * 4 + ((K) / 16) * 2 + 192)
/* x[K] (K % 256 == 0) in Q8_K in buf (CKIR_Q8K_BYTES(K) bytes); ref: by the scalar code
 * of the reference twins, else by the SIMD one (bit-equal) */
ckir_q8k ckir_internal_q8k_prepare(const float *x, int64_t K, uint8_t *buf, int ref);

/* the K-quant formats of the panels */
#define CKIR_KP_Q4 0 /* q4_kp: Q4_K super-blocks, 144 bytes */
#define CKIR_KP_Q6 1 /* q6_kp: Q6_K super-blocks, 210 bytes */
#define CKIR_KP_Q5 2 /* q5_kp: Q5_K super-blocks, 176 bytes */
#define CKIR_KP_BYTES(fmt) ((fmt) == CKIR_KP_Q4 ? 144 : (fmt) == CKIR_KP_Q5 ? 176 : 210)
/* the formats whose f16 fields d, dmin open the block (q4_k, q5_k); q6_k's d closes it */
#define CKIR_KP_DMIN(fmt) ((fmt) != CKIR_KP_Q6)
/* q6_kp stores its 52 quad planes (ql 0..31, qh 32..47, the scales 48..51) in the order
 * its decode core reads them (ckir.quant._q6_k_plane_order): logical plane g in slot
 * ckir_kp6_slot(g), slot s holding plane ckir_kp6_plane(s).  Read in address order, the
 * hardware prefetcher streams the block: in ql / qh / scales order (the core's reads
 * jumping between three places of each block, a 64 KiB software prefetch ahead) the
 * AVX-512 core streamed 0.8x (2 threads) / 0.7x (1 thread) as fast
 * (docs/performance-log.md, "q6_kp planes in read order"). */
static inline int ckir_kp6_slot(int g) {
  static const unsigned char slot[52] = {0, 3, 6, 9, 14, 17, 20, 23, 1, 4, 7, 10, 15, 18, 21, 24, 26, 29, 32, 35, 40, 43, 46, 49, 27, 30, 33, 36, 41, 44, 47, 50, 2, 5, 8, 11, 16, 19, 22, 25, 28, 31, 34, 37, 42, 45, 48, 51, 12, 13, 38, 39};
  return slot[g];
}
static inline int ckir_kp6_plane(int s) {
  static const unsigned char plane[52] = {0, 8, 32, 1, 9, 33, 2, 10, 34, 3, 11, 35, 48, 49, 4, 12, 36, 5, 13, 37, 6, 14, 38, 7, 15, 39, 16, 24, 40, 17, 25, 41, 18, 26, 42, 19, 27, 43, 50, 51, 20, 28, 44, 21, 29, 45, 22, 30, 46, 23, 31, 47};
  return plane[s];
}

/* x . one row-major super-block of fmt, exactly as gemv_q4_k / gemv_q6_k's scalar code:
 * q4_k / q5_k dx (d S - dmin M), q6_k (d dx)(S - 32 M) */
float ckir_internal_kq_dot(int fmt, const uint8_t *block, const int8_t *a, const int16_t *bs,
                           float dx);
/* the 256 fp32 values of one row-major super-block of fmt (gguf's dequantization) */
void ckir_internal_kq_deq1(int fmt, const uint8_t *block, float *dst);

/* rows of x one call of a core takes */
#define CKIR_KP_TX 4
/* The core of a K-quant panel format: out[i * CKIR_PANEL + r] (i < X, r < CKIR_PANEL) =
 * the sum over the nb super-block columns b = 0 .. nb - 1, in that order, of row r of
 * the panel . x_i's super-block b, each term as ckir_internal_kq_dot forms it (the
 * same per-row operations for every X, so a GEMM row equals the GEMV of that row of x
 * bit for bit).  panel: the panel's first byte (column b at panel + b * CKIR_PANEL *
 * BYTES); 1 <= X <= CKIR_KP_TX; pfd: software prefetch distance in bytes ahead of the
 * column being read (0: none; the stream is contiguous, panel after panel). */
typedef void (*ckir_kp_core_fn)(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                                int64_t pfd, float *out);
void ckir_internal_core_q4_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out);
void ckir_internal_core_q6_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out);
void ckir_internal_core_q5_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out);
/* the portable core of fmt (each row's super-block gathered, then ckir_internal_kq_dot):
 * the scalar builds' core and the reference twins' */
void ckir_internal_core_kp_portable(int fmt, const uint8_t *panel, int64_t nb,
                                    const ckir_q8k *xs, int X, float *out);
/* the row-major super-block of row r of a panel block of fmt (the inverse permutation) */
void ckir_internal_kp_block(int fmt, const uint8_t *pblock, int r, uint8_t *block);

/* the fused kernels of the K-quant panels (fused_wdtype.c), as the block panels'
 * ckir_internal_*_qp (fmt CKIR_KP_*): x quantized once for the matrices; the GEMMs
 * return 0 where they do not run (fp32 x), and gemm_kp_f32x is the fp32-x GEMM */
void ckir_internal_gemv_qkv_kp(const float *x, const uint8_t *const w[3], const float *const b[3],
                               float *const y[3], const int64_t N[3], int64_t K, int fmt);
void ckir_internal_gemv_gate_up_kp(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt);
int ckir_internal_gemm_qkv_kp(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt);
int ckir_internal_gemm_gate_up_kp(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt);
/* qkv with each matrix in its own K-quant panel format fmt[i] (the three share x's Q8_K
 * quantization): the mixed kernels gemv_qkv_<d>_v_<dv> (fused_wdtype.c) */
void ckir_internal_gemv_qkv_kp_fmts(const float *x, const uint8_t *const w[3],
                                    const float *const b[3], float *const y[3],
                                    const int64_t N[3], int64_t K, const int fmt[3]);
int ckir_internal_gemm_qkv_kp_fmts(const float *x, const uint8_t *const w[3],
                                   const float *const b[3], float *const y[3],
                                   const int64_t N[3], int64_t M, int64_t K, const int fmt[3]);
void ckir_internal_gemm_kp_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                int64_t M, int64_t N, int64_t K, int fmt);
/* x . row n by the reference twins (gemv: x quantized by the scalar code; gemm: double) */
float ckir_internal_ref_gemv_row_q4_kp(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q4_kp(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemv_row_q6_kp(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q6_kp(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemv_row_q5_kp(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q5_kp(const float *x, const uint8_t *w, int64_t n, int64_t K);
#endif /* CKIR_KPANEL_H */
