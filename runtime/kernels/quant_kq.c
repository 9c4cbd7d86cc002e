/* ckir runtime: linear layers and embeddings with GGUF K-quant weights (Q4_K, Q5_K, Q6_K).
 *
 * A row of K weights is K/256 super-blocks (docs/quantization.md, "K-quants"):
 *   q4_k (144 bytes): f16 d, f16 dmin, scales[12] (6-bit sc[8], m[8]), qs[128]
 *                     value of sub-block j (32 elements) = (d*sc[j])*q - dmin*m[j], q 0..15
 *   q5_k (176 bytes): d, dmin, scales[12], qh[32], qs[128]: q4_k with a fifth bit,
 *                     bit j of qh[l] for element l of sub-block j; q 0..31
 *   q6_k (210 bytes): ql[128], qh[64], int8 sc[16] (sub-blocks of 16), f16 d last;
 *                     value = (d*sc[i])*(q - 32), q 0..63
 * Element e of a q4_k / q5_k super-block: chunk c = e / 64 of qs (32 bytes), low
 * nibble for e % 64 < 32 (sub-block 2c), high nibble otherwise (sub-block 2c+1),
 * byte 32c + e % 32.  q6_k: e = 128h + 32t + l (h < 2, t < 4, l < 32): the low 4
 * bits are nibble t / 2 of ql[64h + 32(t % 2) + l], the high 2 bits are bits 2t,
 * 2t+1 of qh[32h + l].
 *
 * gemv (decode): x is quantized per super-block of 256 to int8 ("Q8_K": d_x =
 * max|x| / 127, a = round-to-nearest-even(x / d_x), and the sums of each 16
 * consecutive a).  A super-block's dot product is an exact int32:
 *   q4_k / q5_k: S = sum_j sc[j] (sum_l q a) and M = sum_j m[j] (sum of sub-block
 *                j's a); the row gains d_x (d S - dmin M)
 *   q6_k:        S = sum_i sc[i] (sum_l q a) - 32 sum_i sc[i] (sum of sub-block i's
 *                a); the row gains (d d_x) S
 * in fp32.  The SIMD paths (AVX2; the same 256-bit code in an AVX-512 build)
 * form the unsigned q bytes of 32 elements in a ymm, multiply them with the
 * signed a by vpmaddubsw (pairs, int16: at most 63 * 127 * 2, no saturation) and
 * scale the pairs by the sub-block's integer scale with vpmaddwd, so S is
 * computed exactly as the scalar code computes it and the rows agree bit for
 * bit with the reference twins'.
 *
 * gemm (prefill), SIMD builds: x's rows quantized as the GEMV quantizes x, and every
 * output computed by the GEMV's row kernels, one row of w against up to KQ_TX rows of
 * x per unpacked super-block: row m of y == gemv(row m of x) bit for bit.  On fp32 x
 * (ckir_runtime_qp_fp32_x, the block panels' switch; and scalar builds): rows of w
 * dequantized to fp32 (exactly the embed values) on ckir_internal_wgemm, as
 * gemm_q4_0 / gemm_q4_1 do.
 *
 * Dequantization equals gguf.quants.dequantize bit for bit: d*sc is exact in
 * fp32 (an 11-bit significand times at most 8 bits), q4_k / q5_k's (d*sc)*q too
 * (at most 5 more bits), so (d*sc)*q - dmin*m rounds once fused or not; q6_k's
 * (d*sc)*(q-32) is one multiplication, rounded once. */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_kpanel.h"

#define QKK CKIR_QK_K
#define KQ_MAX_NB (CKIR_QUANT_MAX_K / CKIR_QK_K)
/* the int8 GEMM's tile: one row of w against up to KQ_TX rows of x; KQ_TILE bounds the
 * accumulators of one row kernel (GEMV: 2 rows of w x 1 row of x) */
#define KQ_TX 4
#define KQ_TILE 4
_Static_assert(KQ_TX == 4, "gemm_<k> dispatches a tail of 1 to 3 rows of x");
/* bytes of x's quantized rows (Q8_K) a GEMM thread keeps on its stack at once */
#define KQ_XB (96 * 1024)

/* ---- scales --------------------------------------------------------------- */

/* the 6-bit scales sc[8] and mins m[8] of a q4_k / q5_k super-block's 12 scale bytes s,
 * four at a time in 32-bit words: sc[j] = s[j] & 63 and m[j] = s[j + 4] & 63 (j < 4);
 * sc[j + 4] = (s[j + 8] & 15) | (s[j] >> 6) << 4 and m[j + 4] = (s[j + 8] >> 4) |
 * (s[j + 4] >> 6) << 4 */
static inline void kq_scale_min(const uint8_t *s, uint8_t sc[8], uint8_t m[8]) {
  uint32_t u0, u1, u2;
  memcpy(&u0, s, 4);
  memcpy(&u1, s + 4, 4);
  memcpy(&u2, s + 8, 4);
  const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const uint32_t sc0 = u0 & lo6, m0 = u1 & lo6;
  const uint32_t sc1 = (u2 & lo4) | (((u0 >> 6) & lo2) << 4);
  const uint32_t m1 = ((u2 >> 4) & lo4) | (((u1 >> 6) & lo2) << 4);
  memcpy(sc, &sc0, 4);
  memcpy(sc + 4, &sc1, 4);
  memcpy(m, &m0, 4);
  memcpy(m + 4, &m1, 4);
}

/* ---- dequantization (embed, gemm rows, reference) ------------------------- */

/* dst[0..256) = the values of one super-block */
static void q4_k_deq1(const uint8_t *p, float *dst) {
  uint8_t sc[8], m[8];
  kq_scale_min(p + 4, sc, m);
  const float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
  const float dmin = ckir_internal_f16_to_f32(ckir_q_ld16(p + 2));
  const uint8_t *qs = p + 16;
  for (int c = 0; c < 4; c++) {
    const float d0 = d * (float)sc[2 * c], m0 = dmin * (float)m[2 * c];
    const float d1 = d * (float)sc[2 * c + 1], m1 = dmin * (float)m[2 * c + 1];
    for (int l = 0; l < 32; l++) {
      dst[64 * c + l] = d0 * (float)(qs[32 * c + l] & 15) - m0;
      dst[64 * c + 32 + l] = d1 * (float)(qs[32 * c + l] >> 4) - m1;
    }
  }
}

static void q5_k_deq1(const uint8_t *p, float *dst) {
  uint8_t sc[8], m[8];
  kq_scale_min(p + 4, sc, m);
  const float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
  const float dmin = ckir_internal_f16_to_f32(ckir_q_ld16(p + 2));
  const uint8_t *qh = p + 16, *qs = p + 48;
  for (int c = 0; c < 4; c++) {
    const int j0 = 2 * c, j1 = 2 * c + 1;
    const float d0 = d * (float)sc[j0], m0 = dmin * (float)m[j0];
    const float d1 = d * (float)sc[j1], m1 = dmin * (float)m[j1];
    for (int l = 0; l < 32; l++) {
      const int q0 = (qs[32 * c + l] & 15) | (((qh[l] >> j0) & 1) << 4);
      const int q1 = (qs[32 * c + l] >> 4) | (((qh[l] >> j1) & 1) << 4);
      dst[64 * c + l] = d0 * (float)q0 - m0;
      dst[64 * c + 32 + l] = d1 * (float)q1 - m1;
    }
  }
}

/* q6_k's q (0..63) of element 128h + 32t + l */
static inline int q6_level(const uint8_t *p, int h, int t, int l) {
  const uint8_t lo = p[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1));
  const uint8_t hi = p[128 + 32 * h + l] >> (2 * t);
  return (lo & 15) | ((hi & 3) << 4);
}

static void q6_k_deq1(const uint8_t *p, float *dst) {
  const float d = ckir_internal_f16_to_f32(ckir_q_ld16(p + 208));
  const int8_t *sc = (const int8_t *)(p + 192);
  for (int h = 0; h < 2; h++)
    for (int t = 0; t < 4; t++) {
      const int e0 = 128 * h + 32 * t;
      const float da = d * (float)sc[e0 / 16], db = d * (float)sc[e0 / 16 + 1];
      for (int l = 0; l < 32; l++)
        dst[e0 + l] = (l < 16 ? da : db) * (float)(q6_level(p, h, t, l) - 32);
    }
}

#define KQ_DEQ(D, BYTES)                                                   \
  static void D##_deq(const uint8_t *blocks, int64_t nb, float *dst) {     \
    for (int64_t b = 0; b < nb; b++) D##_deq1(blocks + b * (BYTES), dst + b * QKK); \
  }
KQ_DEQ(q4_k, CKIR_Q4_K_BYTES)
KQ_DEQ(q5_k, CKIR_Q5_K_BYTES)
KQ_DEQ(q6_k, CKIR_Q6_K_BYTES)

/* ---- activations: Q8_K ---------------------------------------------------- */

/* a [K], dx [K/256], bs [K/16] sums of 16 consecutive a (ckir_kpanel.h) */
typedef ckir_q8k kq_act;

/* bytes of stack kq_prepare needs for K */
#define KQ_ACT_BYTES(K) CKIR_Q8K_BYTES(K)

/* one super-block of x: ab[0..256) = round-to-nearest-even(xb / d) (0 where d = 0),
 * *dxb = d = max|xb| / 127, bsb[g] = sum of ab[16g .. 16g + 16); with perm, each run of
 * 32 a is stored at run order[j] (below), bsb stays in the natural order.  The SIMD
 * paths compute the same a (an IEEE division rounded to nearest even, as lrintf does
 * under the default rounding mode) and the same integer sums: they are bit-equal to
 * the scalar code, which the reference twins run. */
static const int kq_order[8] = {0, 2, 1, 3, 4, 6, 5, 7};

static void kq_quant1_scalar(const float *xb, int8_t *ab, float *dxb, int16_t *bsb, int perm) {
  float amax = 0.0f;
  for (int i = 0; i < QKK; i++) amax = fmaxf(amax, fabsf(xb[i]));
  const float d = amax / 127.0f;
  *dxb = d;
  int8_t t[QKK];
  for (int i = 0; i < QKK; i++) t[i] = d == 0.0f ? 0 : (int8_t)lrintf(xb[i] / d);
  for (int g = 0; g < QKK / 16; g++) {
    int s = 0;
    for (int i = 0; i < 16; i++) s += t[16 * g + i];
    bsb[g] = (int16_t)s;
  }
  for (int j = 0; j < 8; j++) memcpy(ab + 32 * (perm ? kq_order[j] : j), t + 32 * j, 32);
}

/* max |x| over a super-block (max(x, -x) is |x| exactly) */
CKIR_INLINE float kq_amax(const float *xb) {
  ckv m = ckv_zero();
  for (int i = 0; i < QKK; i += CKV_W) {
    const ckv v = ckv_loadu(xb + i);
    m = ckv_max(m, ckv_max(v, ckv_sub(ckv_zero(), v)));
  }
  return ckv_reduce_max(m);
}

/* 16 a (int8, in an xmm) of x[0..16) / d rounded to nearest even, *sum their sum */
#if defined(CKIR_Q512)
CKIR_INLINE __m128i kq_q16(const float *x, float d, int *sum) {
  const __m512i q = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(x), _mm512_set1_ps(d)));
  *sum = _mm512_reduce_add_epi32(q);
  return _mm512_cvtsepi32_epi8(q);
}
#elif defined(CKIR_Q256)
CKIR_INLINE __m128i kq_q16(const float *x, float d, int *sum) {
  const __m256 dv = _mm256_set1_ps(d);
  const __m256i q0 = _mm256_cvtps_epi32(_mm256_div_ps(_mm256_loadu_ps(x), dv));
  const __m256i q1 = _mm256_cvtps_epi32(_mm256_div_ps(_mm256_loadu_ps(x + 8), dv));
  *sum = ckir_q_hsum_epi32(_mm256_add_epi32(q0, q1));
  /* packs interleave the 128-bit lanes: words q0[0..3] q1[0..3] | q0[4..7] q1[4..7] */
  const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
  return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
#endif
#if defined(CKIR_Q512) || defined(CKIR_Q256)
static void kq_quant1_simd(const float *xb, int8_t *ab, float *dxb, int16_t *bsb, int perm) {
  const float d = kq_amax(xb) / 127.0f;
  *dxb = d;
  if (d == 0.0f) {
    memset(ab, 0, QKK);
    memset(bsb, 0, QKK / 16 * sizeof(int16_t));
    return;
  }
  for (int g = 0; g < QKK / 16; g++) {
    int sum;
    const __m128i q = kq_q16(xb + 16 * g, d, &sum);
    const int run = perm ? kq_order[g >> 1] : g >> 1;
    _mm_storeu_si128((__m128i *)(ab + 32 * run + 16 * (g & 1)), q);
    bsb[g] = (int16_t)sum;
  }
}
#else
#define kq_quant1_simd kq_quant1_scalar
#endif

/* x quantized per super-block; ref: by the scalar code (the reference twins), else by
 * the SIMD one (bit-equal); perm: the AVX-512 q4_k / q5_k rows' order of the 8 runs of
 * 32 a, 0 2 1 3 4 6 5 7 (one zmm of nibbles holds sub-blocks 2c and 2c + 2) */
static kq_act kq_prepare(const float *x, int64_t K, uint8_t *buf, int perm, int ref) {
  kq_act s;
  s.a = CKIR_ALIGN64(buf);
  s.dx = (float *)CKIR_ALIGN64(s.a + K);
  s.bs = (int16_t *)(s.dx + K / QKK);
  for (int64_t b = 0; b < K / QKK; b++) {
    if (ref)
      kq_quant1_scalar(x + b * QKK, s.a + b * QKK, s.dx + b, s.bs + b * 16, perm);
    else
      kq_quant1_simd(x + b * QKK, s.a + b * QKK, s.dx + b, s.bs + b * 16, perm);
  }
  return s;
}

/* prefetch the super-block of `bytes` at p (the same column pfd bytes, a few rows,
 * further on): a line every 64 bytes; the line of its last byte is the next block's
 * first (rows are contiguous).  Into L2 (prefetcht1), not L1: streamed from DRAM, one
 * thread, a decode step of 135M-class K-quant matrices took 0.86 (q4_k), 0.92 (q5_k),
 * 0.74 (q6_k) of the time it took with prefetcht0 (paired; docs/performance-log.md) */
CKIR_INLINE void kq_prefetch(const uint8_t *p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
}

/* ---- super-block dot products: scalar -------------------------------------- */

static float q4_k_dot_scalar(const uint8_t *p, const int8_t *a, const int16_t *bs, float dx) {
  uint8_t sc[8], m[8];
  kq_scale_min(p + 4, sc, m);
  const uint8_t *qs = p + 16;
  int32_t S = 0, M = 0;
  for (int c = 0; c < 4; c++) {
    int32_t s0 = 0, s1 = 0;
    for (int l = 0; l < 32; l++) {
      s0 += (qs[32 * c + l] & 15) * a[64 * c + l];
      s1 += (qs[32 * c + l] >> 4) * a[64 * c + 32 + l];
    }
    S += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
  }
  for (int j = 0; j < 8; j++) M += m[j] * (bs[2 * j] + bs[2 * j + 1]);
  return dx * (ckir_internal_f16_to_f32(ckir_q_ld16(p)) * (float)S -
               ckir_internal_f16_to_f32(ckir_q_ld16(p + 2)) * (float)M);
}

static float q5_k_dot_scalar(const uint8_t *p, const int8_t *a, const int16_t *bs, float dx) {
  uint8_t sc[8], m[8];
  kq_scale_min(p + 4, sc, m);
  const uint8_t *qh = p + 16, *qs = p + 48;
  int32_t S = 0, M = 0;
  for (int c = 0; c < 4; c++) {
    int32_t s0 = 0, s1 = 0;
    for (int l = 0; l < 32; l++) {
      s0 += ((qs[32 * c + l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4)) * a[64 * c + l];
      s1 += ((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4)) * a[64 * c + 32 + l];
    }
    S += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
  }
  for (int j = 0; j < 8; j++) M += m[j] * (bs[2 * j] + bs[2 * j + 1]);
  return dx * (ckir_internal_f16_to_f32(ckir_q_ld16(p)) * (float)S -
               ckir_internal_f16_to_f32(ckir_q_ld16(p + 2)) * (float)M);
}

static float q6_k_dot_scalar(const uint8_t *p, const int8_t *a, const int16_t *bs, float dx) {
  const int8_t *sc = (const int8_t *)(p + 192);
  int32_t S = 0, M = 0;
  for (int h = 0; h < 2; h++)
    for (int t = 0; t < 4; t++) {
      const int e0 = 128 * h + 32 * t;
      int32_t s0 = 0, s1 = 0;
      for (int l = 0; l < 16; l++) {
        s0 += q6_level(p, h, t, l) * a[e0 + l];
        s1 += q6_level(p, h, t, l + 16) * a[e0 + 16 + l];
      }
      S += sc[e0 / 16] * s0 + sc[e0 / 16 + 1] * s1;
    }
  for (int i = 0; i < 16; i++) M += sc[i] * bs[i];
  return (ckir_internal_f16_to_f32(ckir_q_ld16(p + 208)) * dx) * (float)(S - 32 * M);
}

/* ---- what the SIMD rows share (AVX2 and AVX-512) ---------------------------- */

#if defined(CKIR_Q512) || defined(CKIR_Q256)
/* the 16 header bytes of a q4_k / q5_k super-block, dwords (d, dmin), u0, u1, u2 of
 * kq_scale_min, unpacked in an xmm to the bytes sc[0..8) m[0..8) by kq_scale_min's
 * formulas, a dword at a time */
CKIR_INLINE __m128i kq_scm(__m128i hdr) {
  const __m128i ua = _mm_shuffle_epi32(hdr, _MM_SHUFFLE(3, 2, 3, 1)); /* u0 u2 u1 u2 */
  const __m128i ub = _mm_shuffle_epi32(hdr, _MM_SHUFFLE(2, 2, 1, 1)); /* u0 u0 u1 u1 */
  return _mm_or_si128(
      _mm_and_si128(_mm_srlv_epi32(ua, _mm_setr_epi32(0, 0, 0, 4)),
                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
      _mm_and_si128(_mm_srli_epi32(ub, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}
/* int32 lane j: m[j] (bs[2j] + bs[2j + 1]), the int16 pairs (m[j], m[j]) made from the
 * bytes m = scm[8..16) by a vpshufb (zero high bytes) */
CKIR_INLINE __m256i kq_min_terms(__m128i scm, const int16_t *bs) {
  const __m256i mctl = _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,
                                        12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1);
  const __m256i mm = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(scm), mctl);
  return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bs), mm);
}
/* vpshufb control picking int16 word j of every 128-bit lane */
#define KQ_WORD(j) ((short)(0x0101 * 2 * (j) + 0x0100))
#endif

/* ---- rows: AVX2 --------------------------------------------------------------
 * 32 weights per ymm (chunk c of qs: sub-blocks 2c, low nibbles, and 2c + 1; q6_k:
 * 16-element sub-blocks in the two 128-bit lanes), vpmaddubsw with a then vpmaddwd
 * with the sub-blocks' scales (spread by vpshufb), the super-block's int32 lanes
 * scaled by d * d_x into an fp32 accumulator and the min (q6_k: -32) term into
 * another; one reduction per row.  a in the natural order. */
#if defined(CKIR_Q256)
#define KQ_ROWS 1
CKIR_INLINE __m256i kq_dot256(__m256i q, const int8_t *a, __m256i scale) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)a)), scale);
}

/* one row of w against X rows of x (s[0 .. X)) -> out[0 .. X); each pair computed as
 * the GEMV (X = 1) computes it */
CKIR_INLINE void q45_k_row256(const uint8_t *row, int64_t nb, const kq_act *s, int64_t pfd,
                              const int q5, const int X, float *out) {
  const int64_t bytes = q5 ? CKIR_Q5_K_BYTES : CKIR_Q4_K_BYTES;
  const __m256i mask = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  __m256 acc[KQ_TX], accm[KQ_TX];
  for (int i = 0; i < X; i++) acc[i] = accm[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = row + b * bytes;
    kq_prefetch(p + pfd, bytes);
    const __m128i hdr = _mm_loadu_si128((const __m128i *)p);
    const __m128i scm = kq_scm(hdr);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
    const uint8_t *qs = p + (q5 ? 48 : 16);
    __m256i isum[KQ_TX]; /* x row i's int32 lanes; each chunk unpacked once for the X rows */
    for (int i = 0; i < X; i++) isum[i] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) { /* chunk c: sub-blocks 2c (low nibbles) and 2c + 1 */
      const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
      __m256i lo = _mm256_and_si256(v, mask);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
      if (q5) {
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 16));
        const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), one);
        const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(h0, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(h1, 4));
      }
      const __m256i s0 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(KQ_WORD(2 * c)));
      const __m256i s1 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(KQ_WORD(2 * c + 1)));
      for (int i = 0; i < X; i++) {
        const int8_t *a = s[i].a + b * QKK + 64 * c;
        isum[i] = _mm256_add_epi32(isum[i], kq_dot256(lo, a, s0));
        isum[i] = _mm256_add_epi32(isum[i], kq_dot256(hi, a + 32, s1));
      }
    }
    const __m128 dh = _mm_cvtph_ps(hdr);
    for (int i = 0; i < X; i++) {
      const __m256i mt = kq_min_terms(scm, s[i].bs + b * 16);
      const __m128 dd = _mm_mul_ps(dh, _mm_set1_ps(s[i].dx[b])); /* d dx, dmin dx */
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_broadcastss_ps(dd), acc[i]);
      accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_broadcastss_ps(_mm_movehdup_ps(dd)),
                                accm[i]);
    }
  }
  for (int i = 0; i < X; i++) out[i] = ckir_hsum_ps256(acc[i]) - ckir_hsum_ps256(accm[i]);
}

CKIR_INLINE void q6_k_row256(const uint8_t *row, int64_t nb, const kq_act *s, int64_t pfd,
                             const int X, float *out) {
  const __m256i mask = _mm256_set1_epi8(15), three = _mm256_set1_epi8(3);
  __m256 acc[KQ_TX], accm[KQ_TX];
  for (int i = 0; i < X; i++) acc[i] = accm[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = row + b * CKIR_Q6_K_BYTES;
    kq_prefetch(p + pfd, CKIR_Q6_K_BYTES);
    const __m256i sc16y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
    __m256i isum[KQ_TX]; /* x row i's int32 lanes; each run unpacked once for the X rows */
    for (int i = 0; i < X; i++) isum[i] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
      const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
      const __m256i l0 = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
      const __m256i l1 = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
      /* every 128-bit lane: sc[8h .. 8h + 8) as int16 */
      const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16y, 1)
                                                        : _mm256_castsi256_si128(sc16y));
      for (int t = 0; t < 4; t++) {
        const __m256i lv = t & 1 ? l1 : l0;
        const __m256i lo = t >> 1 ? _mm256_and_si256(_mm256_srli_epi16(lv, 4), mask)
                                  : _mm256_and_si256(lv, mask);
        const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * t)), three);
        /* elements 128h + 32t + l: sub-blocks 8h + 2t, + 1 */
        const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
        const __m256i sv = _mm256_shuffle_epi8(
            sch, _mm256_setr_m128i(_mm_set1_epi16(KQ_WORD(2 * t)), _mm_set1_epi16(KQ_WORD(2 * t + 1))));
        for (int i = 0; i < X; i++)
          isum[i] = _mm256_add_epi32(isum[i], kq_dot256(q, s[i].a + b * QKK + 128 * h + 32 * t, sv));
      }
    }
    const float d = ckir_q_f16(p + 208);
    for (int i = 0; i < X; i++) {
      const __m256i mt =
          _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(s[i].bs + b * 16)), sc16y);
      const float ddx = d * s[i].dx[b];
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_set1_ps(ddx), acc[i]);
      accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_set1_ps(32.0f * ddx), accm[i]);
    }
  }
  for (int i = 0; i < X; i++) out[i] = ckir_hsum_ps256(acc[i]) - ckir_hsum_ps256(accm[i]);
}
#define KQ_PERM_q4_k 0
#define KQ_PERM_q5_k 0
#define KQ_PERM_q6_k 0
/* rows row, row + rb (R = 2) or row alone (R = 1) -> out[0 .. R) */
#define KQ_ROWS_q4_k(row, rb, nb, s, pfd, R, out) \
  for (int r_ = 0; r_ < (R); r_++) q45_k_row256((row) + r_ * (rb), nb, s, pfd, 0, 1, (out) + r_)
#define KQ_ROWS_q5_k(row, rb, nb, s, pfd, R, out) \
  for (int r_ = 0; r_ < (R); r_++) q45_k_row256((row) + r_ * (rb), nb, s, pfd, 1, 1, (out) + r_)
#define KQ_ROWS_q6_k(row, rb, nb, s, pfd, R, out) \
  for (int r_ = 0; r_ < (R); r_++) q6_k_row256((row) + r_ * (rb), nb, s, pfd, 1, (out) + r_)
/* the GEMM's tile: one row of w against X rows of x (s[0 .. X)) */
#define KQ_TILE_q4_k(row, nb, s, pfd, X, out) q45_k_row256(row, nb, s, pfd, 0, X, out)
#define KQ_TILE_q5_k(row, nb, s, pfd, X, out) q45_k_row256(row, nb, s, pfd, 1, X, out)
#define KQ_TILE_q6_k(row, nb, s, pfd, X, out) q6_k_row256(row, nb, s, pfd, X, out)
#endif

/* ---- rows: AVX-512 (BW + VL) --------------------------------------------------
 * 64 weights per zmm: with AVX512-VNNI the unsigned q bytes meet a by vpdpbusd (int32
 * sums of 4), two such runs are packed to words and meet the sub-blocks' integer scales
 * by one vpdpwssd (kq_dot2_vnni); without it by vpmaddubsw (int16 pairs) then vpmaddwd;
 * the super-block's int32 lanes are converted
 * and scaled by d * d_x into an fp32 accumulator, the min (q6_k: -32) term is
 * accumulated apart; one reduction per row.  q4_k / q5_k read a permuted
 * (kq_prepare). */
#if defined(CKIR_Q512)
#define KQ_ROWS 1
/* the int16 scale vector of two 32-weight runs: lanes 0..15 sc[j0], 16..31 sc[j1], from
 * sc16 holding the 8 scales in every 128-bit lane (a vpshufb: cheaper than vpermw) */
CKIR_INLINE __m512i kq_word_ctl(int j) { return _mm512_set1_epi16(KQ_WORD(j)); }
CKIR_INLINE __m512i kq_sc2(__m512i sc16, int j0, int j1) {
  const __m512i ctl = _mm512_mask_blend_epi64(0xF0, kq_word_ctl(j0), kq_word_ctl(j1));
  return _mm512_shuffle_epi8(sc16, ctl);
}

#if defined(__AVX512VNNI__)
/* AVX512-VNNI: two runs of 64 q bytes (q0 against a0, q1 against a1) in 6 instructions
 * of which 4 multiply (the multiplier ports bound these loops): a vpdpbusd each gives
 * int32 sums of 4 q a (at most 4 * 63 * 127 = 32004: int16 without saturation), one
 * vpackssdw packs both to words (128-bit lane k: q0's 4 dwords of lane k, then q1's),
 * and one vpdpwssd multiplies the words by their sub-blocks' scales (`scale`, laid out
 * as the pack lays the words) and adds the pairs to acc: the same exact integers as
 * vpmaddubsw + vpmaddwd (which need 4 multiplications for 2 runs) */
CKIR_INLINE __m512i kq_dot2_vnni(__m512i acc, __m512i q0, const int8_t *a0, __m512i q1,
                                 const int8_t *a1, __m512i scale) {
  const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0, _mm512_loadu_si512((const void *)a0));
  const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q1, _mm512_loadu_si512((const void *)a1));
  return _mm512_dpwssd_epi32(acc, _mm512_packs_epi32(p0, p1), scale);
}
/* vpshufb control: in 128-bit lane k (k < 4), words 0..3 pick int16 word lo[k] and words
 * 4..7 word hi[k] of that lane (the scales of kq_dot2_vnni's two runs) */
CKIR_INLINE __m512i kq_pack_ctl(const int lo[4], const int hi[4]) {
  int64_t q[8];
  for (int k = 0; k < 4; k++) {
    q[2 * k] = (int64_t)(0x0001000100010001ull * (uint16_t)KQ_WORD(lo[k]));
    q[2 * k + 1] = (int64_t)(0x0001000100010001ull * (uint16_t)KQ_WORD(hi[k]));
  }
  return _mm512_loadu_si512((const void *)q);
}
#else
/* acc + the int32 lanes of (q . a) pairs times scale: vpmaddubsw, then vpmaddwd +
 * vpaddd */
CKIR_INLINE __m512i kq_dot512(__m512i acc, __m512i q, const int8_t *a, __m512i scale) {
  const __m512i pairs = _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)a));
  return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, scale));
}
#endif

/* q4_k (q5 = 0) and q5_k (q5 = 1): R rows of w (rb bytes apart) against X rows of x
 * (s[0 .. X)), out[r * X + i] = row r . x row i.  Each super-block of a row is unpacked
 * once for the X rows of x; every (row, x row) pair is computed exactly as the GEMV's
 * (R = 2 or 1, X = 1) and the GEMM's (R = 1, X <= KQ_TX) use of it: the same integers,
 * the same fp32 operations in the same order. */
CKIR_INLINE void q45_k_rows512(const uint8_t *row, int64_t rb, int64_t nb, const kq_act *s,
                               int64_t pfd, const int q5, const int R, const int X, float *out) {
  const int64_t bytes = q5 ? CKIR_Q5_K_BYTES : CKIR_Q4_K_BYTES;
  const __m512i mask = _mm512_set1_epi8(15), one = _mm512_set1_epi8(1);
  __m512 acc[KQ_TILE];
  __m256 accm[KQ_TILE];
  for (int i = 0; i < R * X; i++) {
    acc[i] = _mm512_setzero_ps();
    accm[i] = _mm256_setzero_ps();
  }
#if defined(__AVX512VNNI__)
  static const int lo0[4] = {0, 0, 2, 2}, hi0[4] = {1, 1, 3, 3};
  static const int lo1[4] = {4, 4, 6, 6}, hi1[4] = {5, 5, 7, 7};
  const __m512i ctl0 = kq_pack_ctl(lo0, hi0), ctl1 = kq_pack_ctl(lo1, hi1);
#endif
  for (int64_t b = 0; b < nb; b++)
    for (int r = 0; r < R; r++) {
      const uint8_t *p = row + r * rb + b * bytes;
      kq_prefetch(p + pfd, bytes);
      const __m128i hdr = _mm_loadu_si128((const __m128i *)p);
      const __m128i scm = kq_scm(hdr);
      const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scm));
      const uint8_t *qs = p + (q5 ? 48 : 16);
      __m512i isum[KQ_TX]; /* x row i's int32 lanes; each 64 bytes unpacked once for the X rows */
      for (int i = 0; i < X; i++) isum[i] = _mm512_setzero_si512();
      for (int h = 0; h < 2; h++) { /* chunks 2h, 2h + 1: sub-blocks 4h .. 4h + 3 */
        const __m512i v = _mm512_loadu_si512((const void *)(qs + 64 * h));
        __m512i lo = _mm512_and_si512(v, mask);                    /* 4h, 4h + 2 */
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask); /* 4h + 1, 4h + 3 */
        if (q5) {
          const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 16));
          const __m128i c0 = _mm_cvtsi32_si128(4 * h), c1 = _mm_cvtsi32_si128(4 * h + 2);
          const __m128i c2 = _mm_cvtsi32_si128(4 * h + 1), c3 = _mm_cvtsi32_si128(4 * h + 3);
          const __m512i hl = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srl_epi16(qh, c0)),
                                                _mm256_srl_epi16(qh, c1), 1);
          const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srl_epi16(qh, c2)),
                                                _mm256_srl_epi16(qh, c3), 1);
          lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(hl, one), 4));
          hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(hh, one), 4));
        }
#if defined(__AVX512VNNI__)
        /* lanes 0, 1 of lo are sub-block 4h, of hi 4h + 1; lanes 2, 3: 4h + 2, 4h + 3 */
        const __m512i sv = _mm512_shuffle_epi8(sc16, h ? ctl1 : ctl0);
        for (int i = 0; i < X; i++) {
          const int8_t *a = s[i].a + b * QKK + 128 * h;
          isum[i] = kq_dot2_vnni(isum[i], lo, a, hi, a + 64, sv);
        }
#else
        const __m512i s_lo = kq_sc2(sc16, 4 * h, 4 * h + 2), s_hi = kq_sc2(sc16, 4 * h + 1, 4 * h + 3);
        for (int i = 0; i < X; i++) {
          const int8_t *a = s[i].a + b * QKK + 128 * h;
          isum[i] = kq_dot512(isum[i], lo, a, s_lo);
          isum[i] = kq_dot512(isum[i], hi, a + 64, s_hi);
        }
#endif
      }
      /* d and dmin from one vcvtph2ps, spread once; per row of x one product each with
       * d_x (a broadcast load): d d_x and dmin d_x, as the scalar code rounds them */
      const __m128 dh = _mm_cvtph_ps(hdr);
      const __m512 vd = _mm512_broadcastss_ps(dh);
      const __m256 vdm = _mm256_broadcastss_ps(_mm_movehdup_ps(dh));
      for (int i = 0; i < X; i++) {
        const __m256i mt = kq_min_terms(scm, s[i].bs + b * 16);
        const __m512 vx = _mm512_set1_ps(s[i].dx[b]);
        const int o = r * X + i;
        acc[o] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(vd, vx), acc[o]);
        accm[o] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_mul_ps(vdm, _mm512_castps512_ps256(vx)),
                                  accm[o]);
      }
    }
  for (int o = 0; o < R * X; o++) /* one reduction: acc - accm */
    out[o] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[o], _mm512_zextps256_ps512(accm[o])));
}

/* q6_k: R rows of w against X rows of x, as q45_k_rows512 */
CKIR_INLINE void q6_k_rows512(const uint8_t *row, int64_t rb, int64_t nb, const kq_act *s,
                              int64_t pfd, const int R, const int X, float *out) {
  const __m512i mask = _mm512_set1_epi8(15), three = _mm512_set1_epi8(3);
  __m512 acc[KQ_TILE];
  __m256 accm[KQ_TILE];
  for (int i = 0; i < R * X; i++) {
    acc[i] = _mm512_setzero_ps();
    accm[i] = _mm256_setzero_ps();
  }
  /* 128-bit lane k of lo covers sub-block 8h + k, of hi 8h + 4 + k: every lane holds
   * sc[8h .. 8h + 8) as int16, a vpshufb picks word k (lo) or 4 + k (hi) */
#if defined(__AVX512VNNI__)
  static const int pk_lo[4] = {0, 1, 2, 3}, pk_hi[4] = {4, 5, 6, 7};
  const __m512i ctl_pk = kq_pack_ctl(pk_lo, pk_hi);
#else
  const __m512i ctl_lo = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_set_m128i(_mm512_castsi512_si128(kq_word_ctl(1)),
                                              _mm512_castsi512_si128(kq_word_ctl(0)))),
      _mm256_set_m128i(_mm512_castsi512_si128(kq_word_ctl(3)), _mm512_castsi512_si128(kq_word_ctl(2))),
      1);
  const __m512i ctl_hi = _mm512_add_epi8(ctl_lo, _mm512_set1_epi8(8));
#endif
  for (int64_t b = 0; b < nb; b++)
    for (int r = 0; r < R; r++) {
      const uint8_t *p = row + r * rb + b * CKIR_Q6_K_BYTES;
      kq_prefetch(p + pfd, CKIR_Q6_K_BYTES);
      const int8_t *sc = (const int8_t *)(p + 192);
      const __m256i sc16y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
      __m512i lo[2], hi[2], s_lo[2];
#if !defined(__AVX512VNNI__)
      __m512i s_hi[2];
#endif
      for (int h = 0; h < 2; h++) { /* elements 128h .. 128h + 127: sub-blocks 8h .. 8h + 7 */
        const __m512i v = _mm512_loadu_si512((const void *)(p + 64 * h));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
        const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        const __m512i h23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 4)),
                                               _mm256_srli_epi16(qh, 6), 1);
        lo[h] = _mm512_or_si512(_mm512_and_si512(v, mask),
                                _mm512_slli_epi16(_mm512_and_si512(h01, three), 4));
        hi[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), mask),
                                _mm512_slli_epi16(_mm512_and_si512(h23, three), 4));
        const __m512i sch = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16y, 1)
                                                     : _mm256_castsi256_si128(sc16y));
#if defined(__AVX512VNNI__)
        /* kq_dot2_vnni's words: lane k, sub-block 8h + k (lo) then 8h + 4 + k (hi) */
        s_lo[h] = _mm512_shuffle_epi8(sch, ctl_pk);
#else
        s_lo[h] = _mm512_shuffle_epi8(sch, ctl_lo);
        s_hi[h] = _mm512_shuffle_epi8(sch, ctl_hi);
#endif
      }
      const __m512 vd = _mm512_set1_ps(ckir_q_f16(p + 208));
      for (int i = 0; i < X; i++) {
        const int8_t *a = s[i].a + b * QKK;
#if defined(__AVX512VNNI__)
        __m512i isum = kq_dot2_vnni(_mm512_setzero_si512(), lo[0], a, hi[0], a + 64, s_lo[0]);
        isum = kq_dot2_vnni(isum, lo[1], a + 128, hi[1], a + 192, s_lo[1]);
#else
        __m512i isum = kq_dot512(_mm512_setzero_si512(), lo[0], a, s_lo[0]);
        isum = kq_dot512(isum, hi[0], a + 64, s_hi[0]);
        isum = kq_dot512(isum, lo[1], a + 128, s_lo[1]);
        isum = kq_dot512(isum, hi[1], a + 192, s_hi[1]);
#endif
        /* 32 sc[i] (bs[2i] + ...): the -32 term, pairs of sub-blocks per int32 lane */
        const __m256i mt =
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(s[i].bs + b * 16)), sc16y);
        const __m512 ddx = _mm512_mul_ps(vd, _mm512_set1_ps(s[i].dx[b])); /* d d_x */
        const int o = r * X + i;
        acc[o] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), ddx, acc[o]);
        accm[o] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm512_castps512_ps256(ddx), accm[o]);
      }
    }
  /* one reduction: acc - 32 accm (the -32 term, scaled at the end: exact, a power of 2) */
  for (int o = 0; o < R * X; o++)
    out[o] = _mm512_reduce_add_ps(
        _mm512_fnmadd_ps(_mm512_zextps256_ps512(accm[o]), _mm512_set1_ps(32.0f), acc[o]));
}
#define KQ_PERM_q4_k 1
#define KQ_PERM_q5_k 1
#define KQ_PERM_q6_k 0
/* two rows a pass where there are two (their blocks interleaved: more independent work
 * in flight per activation block, the a loads shared) */
#define KQ_ROWS_q4_k(row, rb, nb, s, pfd, R, out) q45_k_rows512(row, rb, nb, s, pfd, 0, R, 1, out)
#define KQ_ROWS_q5_k(row, rb, nb, s, pfd, R, out) q45_k_rows512(row, rb, nb, s, pfd, 1, R, 1, out)
#define KQ_ROWS_q6_k(row, rb, nb, s, pfd, R, out) q6_k_rows512(row, rb, nb, s, pfd, R, 1, out)
/* the GEMM's tile: one row of w against X rows of x (s[0 .. X)) */
#define KQ_TILE_q4_k(row, nb, s, pfd, X, out) q45_k_rows512(row, 0, nb, s, pfd, 0, 1, X, out)
#define KQ_TILE_q5_k(row, nb, s, pfd, X, out) q45_k_rows512(row, 0, nb, s, pfd, 1, 1, X, out)
#define KQ_TILE_q6_k(row, nb, s, pfd, X, out) q6_k_rows512(row, 0, nb, s, pfd, 1, X, out)
#endif

/* ---- the kernels of one dtype ------------------------------------------------ */

/* Everything of K-quant dtype D (BYTES per super-block): gemv (x as Q8_K, one
 * contiguous range of rows per thread), gemm (int8 x: D##_gemm_i8; fp32 x: rows
 * dequantized, wgemm), embed,
 * the wgemm row reader and the reference twins. */
#if defined(KQ_ROWS)
#define KQ_FAST 1
#define KQ_FAST_ROWS(D, row, rb, nb, s, pfd, R, out) KQ_ROWS_##D(row, rb, nb, s, pfd, R, out)
#define KQ_FAST_TILE(D, row, nb, s, pfd, X, out) KQ_TILE_##D(row, nb, s, pfd, X, out)
#define KQ_PERM(D) KQ_PERM_##D
#else
#define KQ_FAST 0
#define KQ_FAST_ROWS(D, row, rb, nb, s, pfd, R, out) ((void)(pfd), (void)(out))
#define KQ_FAST_TILE(D, row, nb, s, pfd, X, out) ((void)(s), (void)(out))
#define KQ_PERM(D) 0
#endif
/* gemm_<k> on int8 x (Q8_K rows, every row as gemv_<k> computes it) now: a SIMD build
 * whose calling thread has not asked for fp32 x (ckir_runtime_qp_fp32_x, the switch of
 * the block panels' int8 prefill) */
#define KQ_I8_NOW (KQ_FAST && !ckir_internal_qp_fp32_x_on())
#define KQ_KERNELS(D, BYTES)                                                                     \
  static float D##_row(const uint8_t *row, int64_t nb, const kq_act *s, int64_t pfd, int ref) { \
    float acc = 0.0f;                                                                            \
    for (int64_t b = 0; b < nb; b++) {                                                           \
      const uint8_t *p = row + b * (BYTES);                                                      \
      const int8_t *a = s->a + b * QKK;                                                          \
      const int16_t *bs = s->bs + b * 16;                                                        \
      if (!ref) kq_prefetch(p + pfd, (BYTES));                                                   \
      acc += D##_dot_scalar(p, a, bs, s->dx[b]);                                                 \
    }                                                                                            \
    return acc;                                                                                  \
  }                                                                                              \
  static void D##_gemv(const float *x, const uint8_t *w, const float *bias, float *y, int64_t N, \
                       int64_t K, int ref) {                                                     \
    CKIR_REQUIRE(N >= 1 && K >= 1 && K % QKK == 0 && K <= CKIR_QUANT_MAX_K, "gemv_" #D);         \
    const int64_t nb = K / QKK, rb = nb * (BYTES);                                               \
    uint8_t buf[KQ_ACT_BYTES(K)];                                                                \
    const kq_act s = kq_prepare(x, K, buf, !ref && KQ_FAST && KQ_PERM(D), ref);                       \
    if (ref) {                                                                                   \
      for (int64_t n = 0; n < N; n++)                                                            \
        y[n] = D##_row(w + n * rb, nb, &s, 0, 1) + (bias ? bias[n] : 0.0f);                         \
      return;                                                                                    \
    }                                                                                            \
    const int64_t pfd = ckir_q_pf_distance(rb);                                                  \
    CKIR_SHARED_RANGE(N * K >= CKIR_GEMV_PAR_MIN && N > 1, N, lo, hi, {                          \
      ckir_q_prefetch(w + lo * rb, CKIR_MIN(pfd, (hi - lo) * rb));                               \
      for (int64_t n = lo; n < hi; n += 2) {                                                     \
        float o[2];                                                                              \
        const int R = n + 1 < hi ? 2 : 1;                                                        \
        if (!KQ_FAST)                                                                            \
          for (int r = 0; r < R; r++) o[r] = D##_row(w + (n + r) * rb, nb, &s, pfd, 0);          \
        else if (R == 2)                                                                         \
          KQ_FAST_ROWS(D, w + n * rb, rb, nb, &s, pfd, 2, o);                                    \
        else                                                                                     \
          KQ_FAST_ROWS(D, w + n * rb, rb, nb, &s, pfd, 1, o);                                    \
        for (int r = 0; r < R; r++) y[n + r] = o[r] + (bias ? bias[n + r] : 0.0f);               \
      }                                                                                          \
    });                                                                                          \
  }                                                                                              \
  CKIR_GEMV_PAIR(D, uint8_t, D##_gemv(x, w, b, y, N, K, 0))                                      \
  CKIR_REF_GEMV_PAIR(D, uint8_t, D##_gemv(x, w, b, y, N, K, 1))                                  \
  /* columns [k0, k0 + kc) (multiples of 32) of row n: whole super-blocks dequantized */         \
  static void D##_wrow(const void *w, int64_t K, int64_t n, int64_t k0, int64_t kc,              \
                       float *dst) {                                                             \
    const uint8_t *row = (const uint8_t *)w + n * (K / QKK * (BYTES));                           \
    float tmp[QKK];                                                                              \
    for (int64_t k = k0; k < k0 + kc;) {                                                         \
      const int64_t b = k / QKK, off = k - b * QKK;                                              \
      const int64_t take = CKIR_MIN(QKK - off, k0 + kc - k);                                     \
      if (off == 0 && take == QKK) {                                                             \
        D##_deq1(row + b * (BYTES), dst + (k - k0));                                             \
      } else {                                                                                   \
        D##_deq1(row + b * (BYTES), tmp);                                                        \
        memcpy(dst + (k - k0), tmp + off, (size_t)take * sizeof(float));                         \
      }                                                                                          \
      k += take;                                                                                 \
    }                                                                                            \
  }                                                                                              \
  /* the fused GEMMs' reader: none on int8 x (they call gemm_<k>: gemm_qkv three times,  \
   * gate_up in tiles on worker threads, whose thread-local switch is the default, int8); \
   * on fp32 x gemm.c's driver at every M in a SIMD build, so the gate_up tiles (and      \
   * their worker threads) never run gemm_<k> then */                                      \
  ckir_wread ckir_internal_wread_##D(int64_t M, int64_t K) {                                     \
    (void)K;                                                                                     \
    if (!KQ_FAST) return ckir_internal_wread_rows(M, D##_wrow);                                  \
    return KQ_I8_NOW ? (ckir_wread){GEMM_B_NONE, NULL} : (ckir_wread){GEMM_B_ROWS, D##_wrow};    \
  }                                                                                              \
  /* int8 x: each thread one contiguous range of the N rows of w; for every tile of x's   \
   * rows (quantized by each thread as gemv_<k> quantizes x, <= KQ_XB bytes), every row  \
   * of the range meets the tile's rows KQ_TX at a time, each super-block unpacked once  \
   * per KQ_TX rows of x (KQ_FAST_TILE); row m of y == gemv_<k>(row m of x), bit for bit */ \
  static void D##_gemm_i8(const float *x, const uint8_t *w, const float *bias, float *y,        \
                          int64_t M, int64_t N, int64_t K) {                                     \
    const int64_t nb = K / QKK, rb = nb * (BYTES), xb = KQ_ACT_BYTES(K);                         \
    const int64_t mt = CKIR_MIN(M, CKIR_MAX(KQ_TX, KQ_XB / xb / KQ_TX * KQ_TX));                \
    const int par = M * N * K >= CKIR_GEMV_PAR_MIN && N > 1 && !ckir_in_parallel();             \
    _Pragma("omp parallel if (par)") {                                                           \
      int64_t lo, hi;                                                                            \
      ckir_thread_share(N, &lo, &hi);                                                            \
      uint8_t buf[mt * xb];                                                                      \
      kq_act s[mt];                                                                              \
      for (int64_t m0 = 0; m0 < M && hi > lo; m0 += mt) {                                        \
        const int64_t rows = CKIR_MIN(mt, M - m0);                                               \
        for (int64_t r = 0; r < rows; r++)                                                       \
          s[r] = kq_prepare(x + (m0 + r) * K, K, buf + r * xb, KQ_PERM(D), 0);                   \
        for (int64_t n = lo; n < hi; n++) {                                                      \
          const float bn = bias ? bias[n] : 0.0f;                                                \
          for (int64_t r = 0; r < rows; r += KQ_TX) {                                            \
            float o[KQ_TX];                                                                      \
            const int64_t X = CKIR_MIN(KQ_TX, rows - r);                                         \
            const uint8_t *row = w + n * rb;                                                     \
            if (X == KQ_TX)                                                                      \
              KQ_FAST_TILE(D, row, nb, s + r, rb, KQ_TX, o);                                     \
            else if (X == 3)                                                                     \
              KQ_FAST_TILE(D, row, nb, s + r, rb, 3, o);                                         \
            else if (X == 2)                                                                     \
              KQ_FAST_TILE(D, row, nb, s + r, rb, 2, o);                                         \
            else                                                                                 \
              KQ_FAST_TILE(D, row, nb, s + r, rb, 1, o);                                         \
            for (int64_t i = 0; i < X; i++) y[(m0 + r + i) * N + n] = o[i] + bn;                 \
          }                                                                                      \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  CKIR_GEMM_PAIR(D, uint8_t, {                                                                   \
    CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1 && K % QKK == 0, "gemm_" #D);                       \
    if (KQ_I8_NOW && K <= CKIR_QUANT_MAX_K)                                                      \
      D##_gemm_i8(x, w, b, y, M, N, K);                                                          \
    else                                                                                         \
      ckir_internal_wgemm(x, w, D##_wrow, b, y, M, N, K);                                        \
  })                                                                                             \
  void ckir_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,        \
                      int64_t E) {                                                               \
    CKIR_REQUIRE(T >= 1 && E >= 1 && E % QKK == 0, "embed_" #D);                                 \
    const int64_t nb = E / QKK;                                                                  \
    _Pragma("omp parallel for schedule(static) if (T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)")    \
    for (int64_t t = 0; t < T; t++)                                                              \
      D##_deq(table + (int64_t)tokens[t] * nb * (BYTES), nb, out + t * E);                       \
  }                                                                                              \
  void ckir_ref_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,    \
                          int64_t E) {                                                           \
    const int64_t nb = E / QKK;                                                                  \
    for (int64_t t = 0; t < T; t++)                                                              \
      D##_deq(table + (int64_t)tokens[t] * nb * (BYTES), nb, out + t * E);                       \
  }                                                                                              \
  CKIR_REF_GEMM_PAIR(D, uint8_t, {                                                               \
    const int64_t nb = K / QKK;                                                                  \
    float v[QKK];                                                                                \
    for (int64_t m = 0; m < M; m++)                                                              \
      for (int64_t n = 0; n < N; n++) {                                                          \
        double acc = 0.0;                                                                        \
        for (int64_t bk = 0; bk < nb; bk++) {                                                    \
          D##_deq1(w + (n * nb + bk) * (BYTES), v);                                              \
          for (int j = 0; j < QKK; j++) acc += (double)x[m * K + bk * QKK + j] * v[j];           \
        }                                                                                        \
        y[m * N + n] = (float)acc + (b ? b[n] : 0.0f);                                           \
      }                                                                                          \
  })

KQ_KERNELS(q4_k, CKIR_Q4_K_BYTES)
KQ_KERNELS(q5_k, CKIR_Q5_K_BYTES)
KQ_KERNELS(q6_k, CKIR_Q6_K_BYTES)

/* ---- for the K-quant panels (quant_kpanels.c) ---------------------------------- */

ckir_q8k ckir_internal_q8k_prepare(const float *x, int64_t K, uint8_t *buf, int ref) {
  return kq_prepare(x, K, buf, 0, ref);
}

float ckir_internal_kq_dot(int fmt, const uint8_t *block, const int8_t *a, const int16_t *bs,
                           float dx) {
  return fmt == CKIR_KP_Q4 ? q4_k_dot_scalar(block, a, bs, dx) : q6_k_dot_scalar(block, a, bs, dx);
}

void ckir_internal_kq_deq1(int fmt, const uint8_t *block, float *dst) {
  if (fmt == CKIR_KP_Q4)
    q4_k_deq1(block, dst);
  else
    q6_k_deq1(block, dst);
}
