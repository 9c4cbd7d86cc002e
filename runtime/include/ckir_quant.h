/* ckir runtime: linear layers and embeddings with bf16 and GGUF-quantized weights.
 *
 * Same ABI conventions as ckir_runtime.h (buffers first, then int64_t / float
 * scalars; row-major; no allocation; OpenMP over output rows; ISA path chosen
 * at build time; a scalar reference twin ckir_ref_<name> for every kernel).
 * Activations and outputs are fp32; only the weights change dtype.
 * docs/quantization.md has the formats, the numerics and the measurements.
 *
 * Weight dtypes
 *   bf16  uint16_t: the top 16 bits of an fp32.
 *   q8_0  34-byte blocks of 32: f16 d, int8 q[32];             value = d*q
 *   q4_0  18-byte blocks of 32: f16 d, uint8 qs[16];           value = d*(nib-8)
 *   q4_1  20-byte blocks of 32: f16 d, f16 m, uint8 qs[16];    value = d*nib + m
 *   (nibble j < 16 is qs[j] & 0xF, nibble j+16 is qs[j] >> 4; little-endian.)
 *   A quantized [N, K] matrix is N rows of K/32 consecutive blocks: K % 32 == 0.
 *
 * Numerics
 *   gemv_<q> (decode): x is quantized per block of 32 to int8 (d_x = max|x|/127,
 *     a = round-to-nearest-even(x / d_x)), each block's dot product is exact in
 *     int32 (AVX512-VNNI vpdpbusd / AVX2 vpmaddubsw+vpmaddwd / scalar), scaled
 *     by d_w*d_x in fp32 and accumulated in fp32.  q4_0 subtracts 8*sum(a);
 *     q4_1 adds m * d_x * sum(a): the whole dequantized weight
 *     d*nib + m meets the same quantized x (as llama.cpp's Q8_1 does).
 *   gemm_<q>, gemm_bf16 (prefill): panels of w are converted to fp32 (exactly
 *     the embed_<q> values) and multiplied by the unquantized fp32 x with an
 *     fp32 register-blocked micro-kernel.  Except gemm_bf16 (and the fused
 *     bf16 GEMMs built on it) in an AVX-512 build for a CPU with AVX512-BF16,
 *     when M > CKIR_WGEMM_SMALL_M and K is even: there x is rounded to bf16
 *     (nearest even) and the products bf16 x bf16 are summed in fp32 by
 *     vdpbf16ps; ckir_runtime_bf16_dot() says whether the build does this.
 *     And except gemm_q8_0p / gemm_q4_1p in every SIMD build (AVX2 or
 *     AVX-512): there every row of x is quantized as gemv_<q> quantizes it,
 *     and each row of y is bit-identical to gemv_<q> of that row of x (prefill
 *     and decode agree exactly); ckir_runtime_qp_int8_gemm() says whether the
 *     build does this.  gemm_q4_k / q5_k / q6_k likewise on Q8_K x (x per
 *     super-block of 256, each row bit-identical to gemv_<k>) in every SIMD build
 *     (quant_kq.c); ckir_runtime_qp_fp32_x(1) puts all of them back on fp32 x.
 *   gemv_bf16: bf16 -> fp32 in registers, fp32 FMA.
 *   embed_<q>, embed_bf16: out = the dequantized rows, bit-identical to
 *     gguf.quants.dequantize: d*q is exact in fp32 (an 11-bit f16 mantissa
 *     times an integer of at most 8 bits), so d*q and (d*q)+m round at most
 *     once whether or not the compiler fuses them.
 *
 * Constraints and stack use
 *   quantized kernels: K % 32 == 0 (E % 32 == 0 for embed); gemv_<q>: K <= 32768
 *   (the quantized x lives on the caller's stack, <= 2.5*K + 256 bytes).
 *   gemm_*: ~17 KiB of stack per thread (one fp32 panel of 16 rows x 256) for
 *   M <= CKIR_WGEMM_SMALL_M, else gemm_f32's bound plus 32 KiB (~432 KiB AVX-512);
 *   gemm_q8_0p / gemm_q4_1p on int8 x: a tile of quantized rows of x, 192 KiB
 *   (6 * K bytes when K > 32768), plus 12 bytes per row and block of 32, per thread.
 *   y must not alias x or w.  Token ids must be in range (the caller checks).
 */
#ifndef CKIR_QUANT_H
#define CKIR_QUANT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKIR_QK 32              /* elements per quantized block */
#define CKIR_Q8_0_BYTES 34      /* bytes per q8_0 block */
#define CKIR_Q4_0_BYTES 18      /* bytes per q4_0 block */
#define CKIR_Q4_1_BYTES 20      /* bytes per q4_1 block */
#define CKIR_QUANT_MAX_K 32768  /* largest K of gemv_<q> (stack bound) */
#define CKIR_QK_K 256           /* elements per K-quant super-block */
#define CKIR_Q4_K_BYTES 144     /* bytes per q4_k super-block */
#define CKIR_Q5_K_BYTES 176     /* bytes per q5_k super-block */
#define CKIR_Q6_K_BYTES 210     /* bytes per q6_k super-block */
#define CKIR_Q5_0_BYTES 22      /* bytes per q5_0 block: f16 d, uint32 qh, uint8 qs[16] */
#define CKIR_Q5_1_BYTES 24      /* bytes per q5_1 block: f16 d, f16 m, uint32 qh, uint8 qs[16] */

/* ---- the kernels and their reference twins, from the table --------------
 * For each weight dtype D in bf16 (w is uint16_t), q8_0, q4_0, q4_1 (w and
 * table are block bytes, uint8_t):
 *   gemv_D, gemv_bias_D     y[N] = w[N, K] . x[K] (+ b[N])
 *   gemm_D, gemm_bias_D     y[M, N] = x[M, K] . w[N, K]^T (+ b[N])
 *   embed_D                 out[t, :] = fp32(table[tokens[t], :]); table is [V, E] */
#define CKIR_KERNELS_QUANT 1
#include "ckir_kernels.def"
#undef CKIR_KERNELS_QUANT

/* ---- internal: shared by runtime/kernels/{bf16,quant}_*.c ---------------- */

/* dst[0 .. 32 nb) = the fp32 values of nb Q8_0 blocks (quant_q8_0.c; also the
 * Q8_0 KV cache's reader, attention.c) */
void ckir_internal_q8_0_deq(const uint8_t *blocks, int64_t nb, float *dst);

/* dst[0..kc) = fp32 values of row n, columns [k0, k0 + kc), of a weight matrix
 * with K columns (k0 and kc are multiples of 32 for the block formats). */
typedef void (*ckir_wrow_fn)(const void *w, int64_t K, int64_t n, int64_t k0, int64_t kc,
                             float *dst);

/* y[M, N] = x[M, K] . W^T (+ b) where row n of W is what `row` decodes: the
 * panel-converting fp32 GEMM behind gemm_bf16 and gemm_<q>. */
void ckir_internal_wgemm(const float *x, const void *w, ckir_wrow_fn row, const float *b,
                         float *y, int64_t M, int64_t N, int64_t K);

/* The reference twins of a block format whose blocks decode through
 * deq(blocks, nb, has_m, dst) (dst[0 .. 32 nb) = fp32; has_m picks the variant
 * with a min term, e.g. Q4_1 / Q5_1), BYTES bytes a block: y[M, N] = x . W^T (+ b)
 * summed in double, one block at a time; out[t] = row tokens[t] of a table. */
typedef void (*ckir_block_deq_ref_fn)(const uint8_t *blocks, int64_t nb, int has_m,
                                      float *dst);
void ckir_internal_ref_block_gemm(const float *x, const uint8_t *w, const float *b, float *y,
                                  int64_t M, int64_t N, int64_t K, ckir_block_deq_ref_fn deq,
                                  int64_t bytes, int has_m);
void ckir_internal_ref_block_embed(const int32_t *tokens, const uint8_t *table, float *out,
                                   int64_t T, int64_t E, ckir_block_deq_ref_fn deq,
                                   int64_t bytes, int has_m);

/* How gemm.c's blocked driver reads the right operand B (its b_nk): 0 b[K, N]
 * (matmul), GEMM_B_NK w[N, K] (gemm's fp32 weights), or one of the weight
 * layouts below; GEMM_B_NONE: not the blocked driver (a weight dtype's small-M
 * path, see ckir_internal_wread_<d>). */
#define GEMM_B_NONE (-1)
#define GEMM_B_NK 1
/* B pre-packed in f32p panels */
#define GEMM_B_PANELS 2
/* b_nk value for B = w[N, K] in a weight dtype whose rows a ckir_wrow_fn
 * converts to fp32 (bf16, Q8_0, Q4_0, Q4_1): each panel's rows are converted
 * into a stack buffer, then packed as gemm's w.  K slices are then multiples
 * of 32 (the block formats convert whole blocks). */
#define GEMM_B_ROWS 3
/* b_nk value for B = bf16 w[N, K] multiplied by bf16-rounded x (CKIR_BF16DOT):
 * the driver's K counts pairs of k.  w is read as [N][K/2] 32-bit pairs and
 * packed by pack_b_nk like gemm's w (a pair moves as one float would); A is
 * packed by pack_a_bf16 into pairs of rounded x, and the micro-kernel's FMA is
 * vdpbf16ps (acc += a[2i] b[2i] + a[2i+1] b[2i+1]). */
#define GEMM_B_BF16 4
/* b_nk values for B in bf16p panels (the f32p layout of bf16 pairs, see
 * ckir_internal.h): GEMM_B_BF16P reads the pairs in place against bf16-rounded
 * x (CKIR_BF16DOT; K counts pairs, as GEMM_B_BF16); GEMM_B_BF16P_F32 converts
 * each kc-slice of a panel to fp32 into the B pack (pack_b_bf16p) for fp32 x. */
#define GEMM_B_BF16P 5
#define GEMM_B_BF16P_F32 6
/* b_nk values for B in q8_0p / q4_1p / q4_0p panels (ckir_internal.h): each
 * kc-slice (whole blocks of 32) of a panel is dequantized into the B pack
 * (pack_b_qp) */
#define GEMM_B_Q8_0P 7
#define GEMM_B_Q4_1P 8
#define GEMM_B_Q4_0P 9
/* How a weight dtype's GEMM reads W on gemm.c's driver: kind (GEMM_B_*), and
 * for GEMM_B_ROWS the row converter */
typedef struct {
  int kind;
  ckir_wrow_fn row;
} ckir_wread;
/* ckir_internal_wread_<d>(M, K): how gemm_<d> with M rows reads its weights
 * (kind GEMM_B_NONE where it takes its small-M path instead); the fused
 * kernels ask it to run several outputs on one driver call */
ckir_wread ckir_internal_wread_f32(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_bf16(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q8_0(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q4_0(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q4_1(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_f32p(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_bf16p(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q8_0p(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q4_1p(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q4_0p(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q4_k(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q5_k(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q6_k(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q5_0(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q5_1(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q4_kp(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q6_kp(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q5_kp(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q5_0p(int64_t M, int64_t K);
ckir_wread ckir_internal_wread_q5_1p(int64_t M, int64_t K);
/* 1 when this thread's GEMMs take fp32 x (ckir_runtime_qp_fp32_x): the block panels'
 * and the K-quants' int8 prefill switched off (quant_panels.c) */
int ckir_internal_qp_fp32_x_on(void);
/* the GEMM_B_ROWS reading of row converter `row` at M rows (GEMM_B_NONE up to
 * CKIR_WGEMM_SMALL_M) */
ckir_wread ckir_internal_wread_rows(int64_t M, ckir_wrow_fn row);

/* One output of ckir_internal_gemm_outs: y[M, N] (row stride N) = x . W^T (+ b) */
typedef struct {
  const void *w;
  const float *b;
  float *y;
  int64_t N;
} ckir_gemm_out;
/* The n (1..3) products of x[M, K] with the outputs' weights, all read as r
 * says, on one parallel region in which each thread packs x once for all its
 * columns (gemm.c, gemm_run); gate_up (n == 2): o[0].y = silu(x . W0^T) *
 * (x . W1^T) instead, in tiles, without the two products in memory.  Every
 * element is summed exactly as the single-output GEMM sums it. */
void ckir_internal_gemm_outs(const float *x, ckir_wread r, const ckir_gemm_out *o, int n,
                             int gate_up, int64_t M, int64_t K);

/* rows of x up to which the weight-dtype GEMMs keep the dot-product form (measured
 * crossover, AVX-512, 2 threads, 1536x576: the blocked driver 1.10x slower at M = 16-24,
 * level at 32, 1.2x faster at 48, 1.6x at 128) */
#define CKIR_WGEMM_SMALL_M 32

/* Quantize x[K] (K % 32 == 0) per block of 32: dx[b] = max|x_b| / 127 (fp32),
 * a[i] = round-to-nearest-even(x[i] / dx[b]) (0 when dx[b] == 0).  `_ref` is
 * the scalar version; a and dx are identical between the two. */
void ckir_internal_quantize_x(const float *x, int64_t K, int8_t *a, float *dx);
void ckir_internal_quantize_x_ref(const float *x, int64_t K, int8_t *a, float *dx);

/* f16 bits -> fp32 (exact, including subnormals, infinities and NaNs). */
float ckir_internal_f16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif

/* Helpers for the kernel sources only: they define CKIR_QUANT_INTERNAL and
 * include ckir_internal.h first. */
#ifdef CKIR_QUANT_INTERNAL
/* the vector paths of the block kernels need AVX512BW+VL (else they use AVX2) */
#if defined(CKIR_AVX512) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define CKIR_Q512 1
#elif defined(CKIR_AVX512) || defined(CKIR_AVX2)
#define CKIR_Q256 1
#endif

/* acc + sum of 4 consecutive u8*s8 products per int32 lane (vpdpbusd; else
 * vpmaddubsw + vpmaddwd, exact here since |u| <= 128 and |s| <= 127). */
#if defined(CKIR_Q512)
#if defined(__AVX512VNNI__)
#define CKIR_DPBUSD512(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s))
#else
#define CKIR_DPBUSD512(acc, u, s) \
  _mm512_add_epi32((acc), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (s)), _mm512_set1_epi16(1)))
#endif
#endif
#if defined(CKIR_Q512) || defined(CKIR_Q256)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define CKIR_DPBUSD256(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#elif defined(__AVXVNNI__)
#define CKIR_DPBUSD256(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#else
#define CKIR_DPBUSD256(acc, u, s) \
  _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#endif
#endif

static inline uint16_t ckir_q_ld16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline int32_t ckir_q_ld32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
/* the f16 at p (a block scale) as fp32 */
static inline float ckir_q_f16(const uint8_t *p) {
#if defined(__F16C__) && (defined(CKIR_AVX512) || defined(CKIR_AVX2))
  return _cvtsh_ss(ckir_q_ld16(p));
#else
  return ckir_internal_f16_to_f32(ckir_q_ld16(p));
#endif
}
#if defined(CKIR_Q512) || defined(CKIR_Q256)
static inline int32_t ckir_q_hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}
#endif
/* gemv runs on one thread below this many weights (an OpenMP fork/join costs
 * about a microsecond, the stream of a small matrix a few) */
#ifndef CKIR_GEMV_PAR_MIN
#define CKIR_GEMV_PAR_MIN 65536
#endif
/* panels of the gate and of the up per claimed item of a panel gate_up GEMV: a run of
 * this many gate panels, then as many up panels.  Alternating one gate and one up panel
 * broke each thread's read into two streams that take turns every panel, and read
 * 0.8x the rate of one plain gemv over the same bytes; 4 or 8 panels at a time read
 * level with it (q4_kp, 2 x 5632 x 2048, two threads, streamed from DRAM;
 * docs/performance-log.md, "Decode GEMVs: claimed panels") */
#define CKIR_GU_PANELS 8
/* gemv prefetch distance: a whole number of rows, at least CKIR_PF_MIN bytes
 * (rows are contiguous, so this is the same column a few rows further on). */
#ifndef CKIR_PF_MIN
#define CKIR_PF_MIN 4096
#endif
static inline int64_t ckir_q_pf_distance(int64_t row_bytes) {
  int64_t m = (CKIR_PF_MIN + row_bytes - 1) / row_bytes;
  return (m < 1 ? 1 : m) * row_bytes;
}
/* prefetch [p, p + bytes) (the start of a thread's stream: nothing is in flight yet) */
static inline void ckir_q_prefetch(const void *p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o, 0, 3);
}
/* 64-byte aligned pointer into a byte buffer with 63 bytes of slack */
#define CKIR_ALIGN64(p) ((void *)(((uintptr_t)(p) + 63) & ~(uintptr_t)63))
#endif /* CKIR_QUANT_INTERNAL */
#endif /* CKIR_QUANT_H */
