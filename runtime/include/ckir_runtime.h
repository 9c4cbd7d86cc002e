/* ckir runtime: the fp32 kernels that generated model code calls.
 *
 * ABI conventions (see docs/runtime.md):
 *  - every kernel is `void ckir_<name>(buffers..., scalars...)`: buffer pointers
 *    first, in the operand order of runtime/registry.yaml, then scalars;
 *    integer scalars are int64_t, float scalars are float;
 *  - tensors are row-major and contiguous; linear-layer weights are stored
 *    HF-style [N, K] (out_features x in_features);
 *  - kernels never allocate, keep no mutable global state and are reentrant;
 *    they may use OpenMP threads (see ckir_set_num_threads);
 *  - the ISA path (AVX-512, AVX2+FMA or scalar) is chosen when the runtime is
 *    compiled; -DCKIR_FORCE_SCALAR forces the scalar path;
 *  - every kernel has a scalar reference twin `ckir_ref_<name>` with the same
 *    signature: single-threaded, written for clarity, it defines the semantics
 *    and is what the tests compare the fast path against;
 *  - both prototypes are generated from the one table of kernels,
 *    ckir_kernels.def (this header: its CKIR_KERNELS_F32 section).
 */
#ifndef CKIR_RUNTIME_H
#define CKIR_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- threading ---------------------------------------------------------- */

/* Set the number of OpenMP threads later kernel calls may use (n >= 1). */
void ckir_set_num_threads(int n);

/* Number of OpenMP threads kernel calls will use. */
int ckir_get_num_threads(void);

/* The kernel path this library was compiled with: "avx512", "avx2" or "scalar". */
const char *ckir_runtime_isa(void);

/* 1 when the bf16-weight GEMMs with M > 32 rows and an even K round x to bf16
 * and multiply with vdpbf16ps (an AVX-512 build for a CPU with AVX512-BF16),
 * else 0 (x stays fp32).  See ckir_quant.h, Numerics. */
int ckir_runtime_bf16_dot(void);

/* Non-zero when gemm_q8_0p / gemm_q4_1p quantize x per block of 32 and compute
 * every row exactly as gemv_q8_0p / gemv_q4_1p do (and gemm_q4_k / q5_k / q6_k on Q8_K
 * x, as gemv_<k>; the same nonzero values, their dot products vpmaddubsw + vpmaddwd): 1 with int8 dot products by
 * vpdpbusd (AVX512-VNNI or AVX-VNNI), 2 by vpmaddubsw + vpmaddwd (AVX2, AVX-512
 * without VNNI); 0 in a scalar build (fp32 x against the dequantized weights).
 * See ckir_quant.h, Numerics. */
int ckir_runtime_qp_int8_gemm(void);

/* on = 1: the calling thread's q8_0p / q4_1p / q4_0p GEMMs multiply fp32 x by the
 * dequantized panels, and its q4_k / q5_k / q6_k GEMMs fp32 x by the dequantized rows,
 * even where ckir_runtime_qp_int8_gemm() is nonzero (prefill as exact as f32
 * weights, about half the int8 speed); on = 0: back to the int8 GEMM.  Returns the
 * previous setting.  Thread-local; ckir_model_run sets it from the model's choice
 * (ckir_set_int8_prefill) for each call. */
int ckir_runtime_qp_fp32_x(int on);

/* AMX tiles for the GEMMs of prefill: bf16p (M > 32 rows; bf16-rounded x) and
 * q8_0p / q4_1p on int8 x (M > 8; ckir_runtime_qp_int8_gemm, results bit for
 * bit those of the vpdpbusd path):
 *   CKIR_AMX_OFF      vdpbf16ps / vpdpbusd
 *   CKIR_AMX_ON       TDPBF16PS / TDPBSSD / TDPBSUD, where the CPU has
 *                     AMX-TILE, AMX-BF16 and AMX-INT8 and Linux grants the tile
 *                     state (arch_prctl); the default there, unless the
 *                     environment sets CKIR_AMX=0
 *   CKIR_AMX_EMULATE  the AMX driver with each tile instruction run in C: slow,
 *                     for testing the AMX path on machines without AMX (the
 *                     default when the environment sets CKIR_AMX=emulate)
 * Only AVX-512 builds with AVX512-BF16 (ckir_runtime_bf16_dot) have the path.
 * ckir_set_amx sets the process-wide mode and returns the one in effect
 * (CKIR_AMX_OFF when the request cannot be met); ckir_runtime_amx returns it;
 * ckir_runtime_amx_calls counts the AMX GEMM calls run since the library was
 * loaded (each thread's share of a GEMM is one call). */
#define CKIR_AMX_OFF 0
#define CKIR_AMX_ON 1
#define CKIR_AMX_EMULATE 2
int ckir_set_amx(int mode);
int ckir_runtime_amx(void);
long ckir_runtime_amx_calls(void);

/* ---- what each kernel computes (prototypes: ckir_kernels.def) ---------- */

/* embed_f32: out[t, :] = table[tokens[t], :] for t < T; table is [V, E], out is [T, E].
 * Token ids must be in [0, V): the caller checks them. */

/* pos_embed_add_f32: x[t, :] += wpe[P + t, :] for t < T (GPT-2 learned positions); x is [T, E]
 * (read-write), wpe is [max_positions, E] with P + T <= max_positions. */

/* kv_store_f32: kcache[P + t, :] = k[t, :] and vcache[P + t, :] = v[t, :] for t < T.
 * k, v are [T, KVD]; the caches are [max_ctx, KVD]; other rows are untouched. */

/* ---- normalisation ------------------------------------------------------ */

/* rmsnorm_f32: RMSNorm (HF Llama): out[t, :] = x[t, :] * rsqrt(mean(x[t, :]^2) + eps) * gamma.
 * x, out are [T, E] (out may alias x); gamma is [E]. */

/* layernorm_f32: LayerNorm (torch.nn.LayerNorm, biased variance):
 * out[t, :] = (x[t, :] - mean) * rsqrt(var + eps) * gamma + beta.
 * x, out are [T, E] (out may alias x); gamma, beta are [E]. */

/* ---- linear layers ------------------------------------------------------ */

/* gemm_f32: y[M, N] = x[M, K] . w[N, K]^T (prefill).  Cache- and register-blocked,
 * OpenMP-threaded.  y must not alias x or w.  Uses up to ~400 KiB of stack
 * per thread for packed panels (docs/runtime.md). */

/* gemm_bias_f32: y[M, N] = x[M, K] . w[N, K]^T + b[N] (bias broadcast over rows). */

/* gemv_f32: y[N] = w[N, K] . x[K] (decode, M = 1): streams w once, OpenMP over N. */

/* gemv_bias_f32: y[N] = w[N, K] . x[K] + b[N]. */

/* matmul_f32: c[M, N] = a[M, K] . b[K, N] (b is NOT transposed).  c must not alias a or b. */

/* matmul_relu_f32: c[M, N] = max(a[M, K] . b[K, N], 0). */

/* ---- attention ---------------------------------------------------------- */

/* rope_f32: Rotary embedding in place, HF "rotate_half" convention (Llama, Qwen2).
 * q is [T, H*D], k is [T, KV*D]; token t has position p = P + t.  For
 * i < D/2: inv_freq = 1 / theta^(2i/D) (float32), angle = (float)p * inv_freq,
 * x1 = x[i], x2 = x[i + D/2]: x[i] = x1*cos - x2*sin, x[i + D/2] = x2*cos + x1*sin,
 * for every head of q and k.  D must be even. */

/* attention_f32: Causal attention over the KV cache.  q, out are [T, H*D]; kcache, vcache are
 * [ctx, KV*D].  Query t (position P + t) attends to cache rows 0..P+t; head h
 * reads kv head h / (H / KV); scale 1/sqrt(D).  Online softmax, no scratch.
 * Constraints: D <= 256, H % KV == 0.  out must not alias q. */

/* ---- element-wise ------------------------------------------------------- */

/* swiglu_f32: out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up; out may alias. */

/* gelu_tanh_f32: GPT-2 "gelu_new": out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
 * out may alias x. */

/* gelu_erf_f32: transformers' "gelu": out = 0.5 x (1 + erf(x / sqrt 2)) (kernels/gelu_erf.c,
 * about 3e-7 relative); out may alias x. */

/* add_f32: out[i] = a[i] + b[i]; out may alias a or b. */

/* relu_f32: out[i] = max(x[i], 0); out may alias x. */

/* copy_last_row_f32: out[0, :] = x[T - 1, :] of x[T, cols] (the footer of a prefill
 * compiled with logits=last runs on this one row); out must not overlap x. */

/* ---- softmax and loss --------------------------------------------------- */

/* softmax_f32: Row-wise numerically stable softmax of x[rows, cols]; out may alias x. */

/* cross_entropy_f32: loss[0] = mean over t < T of -log softmax(logits[t, :])[targets[t]];
 * logits is [T, V]; targets must be in [0, V) (checked by the caller). */

/* ---- the kernels and their reference twins, from the table -------------- */

#define CKIR_KERNELS_F32 1
#include "ckir_kernels.def"
#undef CKIR_KERNELS_F32

#ifdef __cplusplus
}
#endif
#endif /* CKIR_RUNTIME_H */
