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
 *   GEMM's packed panels (~352 KiB): keep OMP_STACKSIZE >= 1 MiB.
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

/* ---- qkv, fp32 weights --------------------------------------------------- */

void ckir_gemv_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                       float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,
                       int64_t K);
void ckir_gemv_qkv_bias_f32(const float *x, const float *wq, const float *wk, const float *wv,
                            const float *bq, const float *bk, const float *bv, float *q,
                            float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K);
void ckir_gemm_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                       float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,
                       int64_t Nv, int64_t K);
void ckir_gemm_qkv_bias_f32(const float *x, const float *wq, const float *wk, const float *wv,
                            const float *bq, const float *bk, const float *bv, float *q,
                            float *k, float *v, int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,
                            int64_t K);

/* ---- gate_up, fp32 weights ----------------------------------------------- */

void ckir_gemv_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                           int64_t N, int64_t K);
void ckir_gemm_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                           int64_t M, int64_t N, int64_t K);

/* ---- add + rmsnorm ---------------------------------------------------------- */

void ckir_add_rmsnorm_f32(const float *a, const float *b, const float *gamma, float *s, float *h,
                          int64_t T, int64_t E, float eps);

/* ---- scalar reference twins ------------------------------------------------- */

void ckir_ref_gemv_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                           float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,
                           int64_t K);
void ckir_ref_gemv_qkv_bias_f32(const float *x, const float *wq, const float *wk,
                                const float *wv, const float *bq, const float *bk,
                                const float *bv, float *q, float *k, float *v, int64_t Nq,
                                int64_t Nk, int64_t Nv, int64_t K);
void ckir_ref_gemm_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                           float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,
                           int64_t Nv, int64_t K);
void ckir_ref_gemm_qkv_bias_f32(const float *x, const float *wq, const float *wk,
                                const float *wv, const float *bq, const float *bk,
                                const float *bv, float *q, float *k, float *v, int64_t M,
                                int64_t Nq, int64_t Nk, int64_t Nv, int64_t K);
void ckir_ref_gemv_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                               int64_t N, int64_t K);
void ckir_ref_gemm_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                               int64_t M, int64_t N, int64_t K);
void ckir_ref_add_rmsnorm_f32(const float *a, const float *b, const float *gamma, float *s,
                              float *h, int64_t T, int64_t E, float eps);

#ifdef __cplusplus
}
#endif
#endif /* CKIR_FUSED_H */
