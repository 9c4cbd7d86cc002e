/* ckir runtime, internal: the Q5_0 / Q5_1 panel dtypes q5_0p and q5_1p.
 *
 * A q5_0p / q5_1p matrix [N, K] (K % 32 == 0) is ceil(N/32) panels of 32 rows; a panel
 * is K/32 *panel blocks* (32 rows x one block of 32 values), each the 32 rows' Q5_0 /
 * Q5_1 blocks with their bytes permuted (ckir.quant.pack_block_panels; rows past N are
 * zero bytes):
 *   q5_0p (704 bytes): f16 d of row r at 2r, then 5 quad planes g of 128 bytes, byte
 *     64 + 128g + 4r + j = byte 2 + 4g + j of row r's block: plane 0 its 32-bit qh,
 *     planes 1..4 qs[4(g-1) + j] (low nibble element 4(g-1) + j, high 16 + 4(g-1) + j);
 *   q5_1p (768 bytes): f16 d of row r at 2r, f16 m at 64 + 2r, then the same 5 quad
 *     planes from byte 128 (block bytes 4..23).
 * quant_q5p.c holds the driver of every public kernel of both dtypes and the per-panel
 * cores. */
#ifndef CKIR_Q5PANEL_H
#define CKIR_Q5PANEL_H
#include <stdint.h>

/* the formats (the `fmt` argument below) */
#define CKIR_Q5P_0 0 /* q5_0p: value d (q - 16) */
#define CKIR_Q5P_1 1 /* q5_1p: value d q + m */

/* the fused kernels of the Q5 panels (fused_wdtype.c), as the block panels'
 * ckir_internal_*_qp: x quantized once for the matrices; the GEMMs return 0 where they
 * do not run (fp32 x), and gemm_q5p_f32x is the fp32-x GEMM */
void ckir_internal_gemv_qkv_q5p(const float *x, const uint8_t *const w[3],
                                const float *const b[3], float *const y[3], const int64_t N[3],
                                int64_t K, int fmt);
void ckir_internal_gemv_gate_up_q5p(const float *x, const uint8_t *wg, const uint8_t *wu,
                                    float *out, int64_t N, int64_t K, int fmt);
int ckir_internal_gemm_qkv_q5p(const float *x, const uint8_t *const w[3], const float *const b[3],
                               float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                               int fmt);
int ckir_internal_gemm_gate_up_q5p(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t M, int64_t N, int64_t K, int fmt);
void ckir_internal_gemm_q5p_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                 int64_t M, int64_t N, int64_t K, int fmt);
/* x . row n by the reference twins (gemv: x quantized by the scalar code; gemm: double) */
float ckir_internal_ref_gemv_row_q5_0p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q5_0p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemv_row_q5_1p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q5_1p(const float *x, const uint8_t *w, int64_t n, int64_t K);
#endif /* CKIR_Q5PANEL_H */
