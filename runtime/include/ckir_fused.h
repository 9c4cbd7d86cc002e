/* ckir runtime: fused kernels, the targets of the fusion passes
 * (--fuse-qkv, --fuse-gate-up, --fuse-add-rmsnorm; docs/passes/fuse-*.md).
 *
 * Same ABI as ckir_runtime.h: buffers first (registry operand order, see
 * runtime/registry_fused.yaml), then int64_t / float scalars; row-major;
 * no allocation; OpenMP; ISA path chosen at build time; a scalar reference
 * twin ckir_ref_<name> (same signature) for every kernel.  Outputs must not
 * alias inputs unless stated.
 *
 * qkv (three linear layers on the same input x[M, K]):
 *   q[M, Nq] = x . wq^T (+ bq),  k[M, Nk] = x . wk^T (+ bk),  v[M, Nv] = x . wv^T (+ bv)
 *   gemv_* (decode, M = 1) and gemm_* with M <= 8: one parallel region over
 *   blocks of 4 weight rows of all three matrices (x is read from L1 by every
 *   block; the three matrices need not be contiguous).  gemm_* with M > 8:
 *   the three blocked GEMMs of the runtime back to back.
 *
 * gate_up (SwiGLU MLP input side, no gate/up buffers):
 *   out[M, N] = silu(x . wg^T) * (x . wu^T),  silu(g) = g / (1 + e^-g)
 *   gemv / M <= 8: one parallel region over chunks of 64 rows of wg and wu;
 *   gemm with M > 8: tiles of (<= 144 rows of x) x (256 columns), each the
 *   two runtime GEMMs into stack tiles, then silu * up into out; tiles spread
 *   over the threads.  Stack: 288 KiB per thread for the tiles plus the
 *   GEMM's packed panels (~400 KiB): keep OMP_STACKSIZE >= 1 MiB.
 *
 * Weight dtypes: the kernels above take fp32 weights (fused_linear.c); the
 * _bf16 / _q8_0 / _q4_0 / _q4_1 variants below (fused_wdtype.c) compose the
 * runtime's own weight-dtype gemv/gemm (ckir_quant.h) with the same numerics
 * as the unfused calls: in decode, one parallel region whose threads each run
 * the gemv on their share of the rows (the nested region runs on the calling
 * thread); in prefill, three gemm calls (qkv) or the 144 x 256 tiles (gate_up).
 *
 * add_rmsnorm (residual add then RMSNorm of the sum):
 *   s[T, E] = a + b;  h[t, :] = s[t, :] * rsqrt(mean(s[t, :]^2) + eps) * gamma
 *   s may alias a or b; h may alias a or b but not s.
 */
#ifndef CKIR_FUSED_H
#define CKIR_FUSED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the kernels and their reference twins, from the table --------------
 * gemv_qkv_D, gemv_qkv_bias_D, gemm_qkv_D, gemm_qkv_bias_D, gemv_gate_up_D,
 * gemm_gate_up_D for D in f32, bf16, q8_0, q4_0, q4_1 (weights float, uint16_t
 * or block bytes uint8_t), and add_rmsnorm_f32. */
#define CKIR_KERNELS_FUSED 1
#include "ckir_kernels.def"
#undef CKIR_KERNELS_FUSED

/* ---- internal: shared by runtime/kernels/fused_*.c ------------------------ */

/* y[M, N] = x[M, K] . W^T for a weight matrix of any dtype (a runtime gemm) */
typedef void (*ckir_fused_gemm_fn)(const float *x, const void *w, float *y, int64_t M, int64_t N,
                                   int64_t K);
/* out[M, N] = silu(x . wg^T) * (x . wu^T) by tiles of <= 144 rows x 256 columns spread
 * over the threads; each tile calls `gemm` twice (it then runs on the calling
 * thread) into stack tiles (288 KiB); row n of a weight matrix starts at n * row_bytes. */
void ckir_internal_gate_up_tiles(const float *x, const void *wg, const void *wu,
                                 int64_t row_bytes, ckir_fused_gemm_fn gemm, float *out,
                                 int64_t M, int64_t N, int64_t K);

#ifdef __cplusplus
}
#endif
#endif /* CKIR_FUSED_H */
