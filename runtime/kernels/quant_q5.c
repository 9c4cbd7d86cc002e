/* ckir runtime: linear layers and embeddings with Q5_0 and Q5_1 weights.
 *
 * Q5_0 block (22 bytes, 32 weights): f16 d, uint32 qh, uint8 qs[16]; value = d * (q - 16)
 * Q5_1 block (24 bytes, 32 weights): f16 d, f16 m, uint32 qh, uint8 qs[16]; value = d * q + m
 * with q[j] = (qs[j] & 0xF) | bit j of qh << 4 and q[j + 16] = (qs[j] >> 4) | bit j + 16
 * of qh << 4 for j < 16 (qh little-endian).
 *
 * gemv: x is quantized to int8 a per block of 32 (scale d_x), as for Q4_0 / Q4_1.  The
 * unsigned 5-bit q (0..31) meet the signed a in vpdpbusd (AVX2 without VNNI:
 * vpmaddubsw + vpmaddwd, exact since 31 * 127 * 2 < 32768), so
 *   Q5_0: sum (q - 16) a = sum q*a - 16 sum a; the -16 sum a term of each group of 4
 *         lanes is precomputed once per call (array c) and starts the accumulator;
 *         row sum += d_w d_x (that), in fp32.
 *   Q5_1: row sum += d_w d_x sum q*a + m * sx, sx = d_x sum a (the sum of the quantized
 *         block of x): the whole dequantized weight d*q + m meets the quantized x.
 * The 32 values of a block are built in a ymm in natural order (byte j = element j):
 * the nibbles of qs (low half, then high half) or'ed with 0x10 where qh has the bit:
 * AVX-512 (BW+VL) takes qh as a byte mask, AVX2 spreads its bits with a byte shuffle and
 * a compare.  AVX-512 runs two blocks per zmm (one 64-bit mask of both qh), an odd last
 * block on a ymm.
 *
 * gemm: panels of w dequantized to fp32 (ckir_internal_wgemm), as Q4_0 / Q4_1. */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"

#define B50 CKIR_Q5_0_BYTES
#define B51 CKIR_Q5_1_BYTES

/* byte offset of qh in a block (qs follow 4 bytes later) */
#define Q5_QH(has_m) ((has_m) ? 4 : 2)

/* ---- the 32 values of a block ---------------------------------------------------- */

#if defined(CKIR_Q512) || defined(CKIR_Q256)
/* the values 0..31 of the block whose qh is at p (qs at p + 4), natural order */
CKIR_INLINE __m256i q5_bytes(const uint8_t *p) {
  const __m128i q = _mm_loadu_si128((const __m128i *)(p + 4));
  __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
  const uint32_t h = (uint32_t)ckir_q_ld32(p);
#if defined(CKIR_Q512)
  return _mm256_or_si256(v, _mm256_maskz_set1_epi8((__mmask32)h, 0x10));
#else
  /* byte j of the lane gets qh byte j / 8 (lanes: elements 0..15, 16..31), then bit j % 8 */
  const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                       2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), sel);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits);
  return _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
#endif
}
#endif

/* value j of the block whose qh is at p (scalar) */
CKIR_INLINE int q5_value(const uint8_t *p, int j) {
  const uint32_t h = (uint32_t)ckir_q_ld32(p);
  const uint8_t b = p[4 + (j & 15)];
  return (j < 16 ? (b & 0x0F) : (b >> 4)) | (int)(((h >> j) & 1u) << 4);
}

/* ---- dequantization ---------------------------------------------------------- */

/* dst[0..32) = the 32 values of the block at p: (q - off) * d (+ m when has_m).  d*(q-16)
 * and d*q are exact in fp32 (11-bit mantissa times 5 bits), so (d*q)+m rounds once
 * whether or not the compiler fuses it. */
CKIR_INLINE void q5_deq_block(const uint8_t *p, const int has_m, float *dst) {
  const float d = ckir_q_f16(p), m = has_m ? ckir_q_f16(p + 2) : 0.0f;
  const int off = has_m ? 0 : 16;
  const uint8_t *qh = p + Q5_QH(has_m);
#if defined(CKIR_Q512)
  const __m256i q = q5_bytes(qh);
  const __m512i o = _mm512_set1_epi32(off);
  const __m512 dv = _mm512_set1_ps(d), mv = _mm512_set1_ps(m);
  for (int i = 0; i < 2; i++) {
    const __m128i part = i ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(part), o)), dv);
    if (has_m) f = _mm512_add_ps(f, mv);
    _mm512_storeu_ps(dst + 16 * i, f);
  }
#elif defined(CKIR_Q256)
  const __m256i q = q5_bytes(qh);
  const __m256i o = _mm256_set1_epi32(off);
  const __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; i++) {
    __m256 f = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[i]), o)), dv);
    if (has_m) f = _mm256_add_ps(f, mv);
    _mm256_storeu_ps(dst + 8 * i, f);
  }
#else
  for (int j = 0; j < CKIR_QK; j++) {
    float v = (float)(q5_value(qh, j) - off) * d;
    if (has_m) v += m;
    dst[j] = v;
  }
#endif
}

static void q5_0_deq(const uint8_t *blocks, int64_t nb, float *dst) {
  for (int64_t b = 0; b < nb; b++) q5_deq_block(blocks + b * B50, 0, dst + b * CKIR_QK);
}

static void q5_1_deq(const uint8_t *blocks, int64_t nb, float *dst) {
  for (int64_t b = 0; b < nb; b++) q5_deq_block(blocks + b * B51, 1, dst + b * CKIR_QK);
}

/* plain scalar dequantization (reference twins) */
static void q5_deq_ref(const uint8_t *blocks, int64_t nb, int has_m, float *dst) {
  const int64_t bb = has_m ? B51 : B50;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = blocks + b * bb;
    const float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
    const float m = has_m ? ckir_internal_f16_to_f32(ckir_q_ld16(p + 2)) : 0.0f;
    for (int j = 0; j < CKIR_QK; j++) {
      const int q = q5_value(p + Q5_QH(has_m), j);
      dst[b * CKIR_QK + j] = has_m ? (float)q * d + m : (float)(q - 16) * d;
    }
  }
}

CKIR_BLOCK_ROWS(q5_0, q5_0_deq, B50)
CKIR_BLOCK_ROWS(q5_1, q5_1_deq, B51)

/* ---- activations ------------------------------------------------------------- */

/* x quantized per block of 32, natural layout */
typedef struct {
  int8_t *a;   /* [K] int8 activations */
  int32_t *c;  /* [K/4] q5_0: -16 * sum of each 4 consecutive a */
  float *dx;   /* [K/32] block scales */
  float *sx;   /* [K/32] q5_1: dx[b] * sum of block b's a */
} q5_act;

/* bytes of stack q5_prepare needs for K */
#define Q5_ACT_BYTES(K) ((K) * 2 + ((K) / CKIR_QK) * 8 + 128)

static q5_act q5_prepare(const float *x, int64_t K, int has_m, uint8_t *buf, int ref) {
  const int64_t nb = K / CKIR_QK;
  q5_act s;
  s.a = CKIR_ALIGN64(buf);
  s.c = (int32_t *)(s.a + K);
  s.dx = (float *)(s.c + K / 4);
  s.sx = s.dx + nb;
  if (ref)
    ckir_internal_quantize_x_ref(x, K, s.a, s.dx);
  else
    ckir_internal_quantize_x(x, K, s.a, s.dx);
  for (int64_t i = 0; i < K / 4; i++) {
    const int32_t t = (int32_t)s.a[4 * i] + s.a[4 * i + 1] + s.a[4 * i + 2] + s.a[4 * i + 3];
    s.c[i] = has_m ? t : -16 * t; /* q5_1 keeps the plain sums for sx */
  }
  if (has_m)
    for (int64_t b = 0; b < nb; b++) {
      int32_t t = 0;
      for (int i = 0; i < 8; i++) t += s.c[b * 8 + i];
      s.sx[b] = s.dx[b] * (float)t;
    }
  return s;
}

/* ---- gemv rows ---------------------------------------------------------------- */

/* one row . quantized x, scalar (reference and the scalar build) */
static float q5_row_scalar(const uint8_t *row, int64_t nb, const q5_act *s, int has_m) {
  const int64_t bb = has_m ? B51 : B50;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = row + b * bb;
    const int8_t *ab = s->a + b * CKIR_QK;
    int32_t is = 0;
    for (int j = 0; j < CKIR_QK; j++) is += q5_value(p + Q5_QH(has_m), j) * ab[j];
    const float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
    if (has_m) {
      const float m = ckir_internal_f16_to_f32(ckir_q_ld16(p + 2));
      acc += (float)is * (d * s->dx[b]) + m * s->sx[b];
    } else {
      for (int i = 0; i < 8; i++) is += s->c[b * 8 + i];
      acc += (float)is * (d * s->dx[b]);
    }
  }
  return acc;
}

#if defined(CKIR_Q512) || defined(CKIR_Q256)
/* the int32 lanes of one block (8 lanes of 4 products; q5_0: with its -16 sum a) */
CKIR_INLINE __m256i q5_block_dot(const uint8_t *p, const q5_act *s, int64_t b, const int has_m) {
  const __m256i init =
      has_m ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(s->c + b * 8));
  return CKIR_DPBUSD256(init, q5_bytes(p + Q5_QH(has_m)),
                        _mm256_loadu_si256((const __m256i *)(s->a + b * CKIR_QK)));
}

/* one row . quantized x; pfd: prefetch distance in bytes */
CKIR_INLINE float q5_row(const uint8_t *row, int64_t nb, const q5_act *s, int64_t pfd,
                         const int has_m) {
  const int64_t bb = has_m ? B51 : B50;
  float mt = 0.0f; /* q5_1: sum of m * sx */
  int64_t b = 0;
#if defined(CKIR_Q512)
  __m512 acc = _mm512_setzero_ps();
  for (; b + 2 <= nb; b += 2) { /* blocks b, b + 1: zmm lanes 0..7 and 8..15 */
    const uint8_t *p0 = row + b * bb, *p1 = p0 + bb;
    __builtin_prefetch((const char *)p0 + pfd, 0, 3);
    const __m512i init = has_m ? _mm512_setzero_si512()
                               : _mm512_loadu_si512((const void *)(s->c + b * 8));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q5_bytes(p0 + Q5_QH(has_m))),
                                         q5_bytes(p1 + Q5_QH(has_m)), 1);
    const __m512i is =
        CKIR_DPBUSD512(init, q, _mm512_loadu_si512((const void *)(s->a + b * CKIR_QK)));
    const float s0 = ckir_q_f16(p0) * s->dx[b], s1 = ckir_q_f16(p1) * s->dx[b + 1];
    const __m512 sc = _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_set1_ps(s0)), _mm256_castps_pd(_mm256_set1_ps(s1)), 1));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), sc, acc);
    if (has_m) mt += ckir_q_f16(p0 + 2) * s->sx[b] + ckir_q_f16(p1 + 2) * s->sx[b + 1];
  }
  float tail = 0.0f;
  if (b < nb) { /* odd last block */
    const uint8_t *p = row + b * bb;
    tail = (float)ckir_q_hsum_epi32(q5_block_dot(p, s, b, has_m)) * (ckir_q_f16(p) * s->dx[b]);
    if (has_m) mt += ckir_q_f16(p + 2) * s->sx[b];
  }
  return _mm512_reduce_add_ps(acc) + tail + mt;
#else
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(); /* two FMA chains */
  for (; b < nb; b++) {
    const uint8_t *p = row + b * bb;
    __builtin_prefetch((const char *)p + pfd, 0, 3);
    const __m256 f = _mm256_cvtepi32_ps(q5_block_dot(p, s, b, has_m));
    const __m256 sc = _mm256_set1_ps(ckir_q_f16(p) * s->dx[b]);
    if (b & 1)
      acc1 = _mm256_fmadd_ps(f, sc, acc1);
    else
      acc0 = _mm256_fmadd_ps(f, sc, acc0);
    if (has_m) mt += ckir_q_f16(p + 2) * s->sx[b];
  }
  return ckir_hsum_ps256(_mm256_add_ps(acc0, acc1)) + mt;
#endif
}
#endif

/* rows [lo, hi) of the GEMV, on the calling thread */
CKIR_INLINE void q5_gemv_rows(const uint8_t *w, int64_t rb, int64_t nb, const q5_act *sp,
                              int64_t pfd, const float *bias, float *y, int64_t lo, int64_t hi,
                              const int has_m) {
  const q5_act s = *sp;
  ckir_q_prefetch(w + lo * rb, CKIR_MIN(pfd, (hi - lo) * rb));
  for (int64_t n = lo; n < hi; n++) {
#if defined(CKIR_Q512) || defined(CKIR_Q256)
    const float v = has_m ? q5_row(w + n * rb, nb, &s, pfd, 1) : q5_row(w + n * rb, nb, &s, pfd, 0);
#else
    const float v = q5_row_scalar(w + n * rb, nb, &s, has_m);
#endif
    y[n] = v + (bias ? bias[n] : 0.0f);
  }
}

static void gemv_q5_impl(const float *x, const uint8_t *w, const float *bias, float *y,
                         int64_t N, int64_t K, const int has_m) {
  CKIR_REQUIRE(N >= 1 && K >= CKIR_QK && K % CKIR_QK == 0 && K <= CKIR_QUANT_MAX_K,
               has_m ? "gemv_q5_1" : "gemv_q5_0");
  const int64_t nb = K / CKIR_QK, rb = nb * (has_m ? B51 : B50);
  uint8_t buf[Q5_ACT_BYTES(K)];
  const q5_act s = q5_prepare(x, K, has_m, buf, 0);
  const int64_t pfd = ckir_q_pf_distance(rb);
  /* each thread streams one contiguous range of rows */
  CKIR_SHARED_RANGE(N * K >= CKIR_GEMV_PAR_MIN && N > 1, N, lo, hi,
                    q5_gemv_rows(w, rb, nb, &s, pfd, bias, y, lo, hi, has_m););
}

static void ref_gemv_q5(const float *x, const uint8_t *w, const float *bias, float *y, int64_t N,
                        int64_t K, int has_m) {
  const int64_t nb = K / CKIR_QK, rb = nb * (has_m ? B51 : B50);
  uint8_t buf[Q5_ACT_BYTES(K)];
  const q5_act s = q5_prepare(x, K, has_m, buf, 1);
  for (int64_t n = 0; n < N; n++)
    y[n] = q5_row_scalar(w + n * rb, nb, &s, has_m) + (bias ? bias[n] : 0.0f);
}

/* ---- public kernels ------------------------------------------------------------ */

CKIR_GEMV_PAIR(q5_0, uint8_t, gemv_q5_impl(x, w, b, y, N, K, 0))
CKIR_GEMV_PAIR(q5_1, uint8_t, gemv_q5_impl(x, w, b, y, N, K, 1))
CKIR_GEMM_PAIR(q5_0, uint8_t, ckir_internal_wgemm(x, w, q5_0_wrow, b, y, M, N, K))
CKIR_GEMM_PAIR(q5_1, uint8_t, ckir_internal_wgemm(x, w, q5_1_wrow, b, y, M, N, K))
CKIR_EMBED_BLOCKS(q5_0, q5_0_deq, B50)
CKIR_EMBED_BLOCKS(q5_1, q5_1_deq, B51)

/* ---- reference twins ------------------------------------------------------------ */

CKIR_REF_GEMV_PAIR(q5_0, uint8_t, ref_gemv_q5(x, w, b, y, N, K, 0))
CKIR_REF_GEMV_PAIR(q5_1, uint8_t, ref_gemv_q5(x, w, b, y, N, K, 1))
CKIR_REF_GEMM_PAIR(q5_0, uint8_t,
                   ckir_internal_ref_block_gemm(x, w, b, y, M, N, K, q5_deq_ref, B50, 0))
CKIR_REF_GEMM_PAIR(q5_1, uint8_t,
                   ckir_internal_ref_block_gemm(x, w, b, y, M, N, K, q5_deq_ref, B51, 1))
void ckir_ref_embed_q5_0(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,
                         int64_t E) {
  ckir_internal_ref_block_embed(tokens, table, out, T, E, q5_deq_ref, B50, 0);
}
void ckir_ref_embed_q5_1(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,
                         int64_t E) {
  ckir_internal_ref_block_embed(tokens, table, out, T, E, q5_deq_ref, B51, 1);
}
