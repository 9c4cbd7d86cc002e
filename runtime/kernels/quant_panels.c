/* ckir runtime: linear layers and embeddings with block-quantized weights
 * pre-packed in panels of CKIR_PANEL rows (layouts in ckir_internal.h):
 * q8_0p (Q8_0 blocks), q4_1p (Q4_1 blocks) and q4_0p (Q4_0 blocks: q4_1p's
 * nibble groups, no m).  The internal functions take the format as `fmt`
 * (CKIR_QP_*); q4_0p computes as q4_1p does, its block's int32 dot products
 * starting at -8 sum(a) (d (nib - 8) . a = d (nib . a - 8 sum(a))), so it has
 * no min term.
 *
 *   gemv_<p> (decode): x quantized per block of 32 exactly as gemv_q8_0 /
 *     gemv_q4_1 do (ckir_internal_quantize_x), once per call; the panel
 *     driver (ckir_pdriver.h) lets the threads claim whole panels.  A panel
 *     block (32 rows x 32 k) holds 4 k of each of its 32 rows per 32-bit lane
 *     (q8_0p: 8 quad rows of int8;
 *     q4_1p: 4 groups of bytes whose low and high nibbles are two quad rows),
 *     so one vpdpbusd multiplies 16 rows by a broadcast quad of x: the block's
 *     exact int32 dot products of 32 rows come out in lanes, are converted and
 *     scaled lane-wise by the 32 row scales (one vcvtph2ps per 16) times d_x
 *     (q4_1p: plus m * d_x * sum(a) of the block, q4_1's min term), and
 *     accumulate in fp32.  No horizontal sum per row and no per-row scale
 *     shuffles (the row-major kernels spend about half their instructions
 *     there).  q8_0p with AVX-512 VNNI: w + 128 (an xor) as the unsigned
 *     operand and -128 sum(a) of the block as the initial value; otherwise the
 *     sign trick (|w| against a with w's sign).  q4_1p's nibbles are unsigned
 *     already.
 *   gemm_<p> (prefill, any M): in every SIMD build, every row of x quantized
 *     and computed exactly as gemv_<p> computes it (qp_gemm_i8: 4-6 rows of x
 *     share each load of a panel block; vpdpbusd with VNNI, else vpmaddubsw +
 *     vpmaddwd; on AMX tiles where the runtime has them: gemm_amx.c, the same
 *     results).  In a scalar build fp32 x against the weights dequantized, as
 *     gemm_q8_0 / gemm_q4_1: gemm.c's blocked driver, each
 *     kc-slice of a panel dequantized straight into the B pack, or for M <=
 *     QP_SMALL_M the panels streamed, each block dequantized once into 4 KiB.
 *   embed_<p>: row n is column n % 32 of its panel.
 */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_pdriver.h"

#define QP_SCALES (2 * CKIR_PANEL)                        /* bytes of a panel block's scales */
#define QP_QUAD (4 * CKIR_PANEL)                          /* bytes of one quad row */
/* q8_0p: software prefetch 4 panel blocks ahead, into L2 only (prefetcht2):
 * measured over Qwen2's decode matrices from DRAM (2 threads, paired, 14
 * rounds) 1.13x gemv_q8_0's rate; with prefetcht0 0.97x, with none 1.09x, 8
 * blocks ahead no better.  q4_1p: none past the start of each thread's range
 * (over GPT-2's matrices, paired, 12 rounds: none 1.39x gemv_q4_1, prefetcht2
 * 1.29x, prefetcht0 1.14x; in whole models prefetcht2 made decode 0.89-1.0x the
 * row-major build's, none 1.19-1.23x) */
#define QP_PFD 4352
_Static_assert(QP_SCALES + 8 * QP_QUAD == CKIR_Q8P_BLOCK, "q8_0p panel block size");
_Static_assert(CKIR_Q8P_BLOCK == CKIR_PANEL * CKIR_Q8_0_BYTES, "q8_0p: 32 Q8_0 blocks");
_Static_assert(CKIR_Q41P_BLOCK == CKIR_PANEL * CKIR_Q4_1_BYTES, "q4_1p: 32 Q4_1 blocks");
_Static_assert(CKIR_QP_QS(CKIR_QP_Q4_1) + 4 * QP_QUAD == CKIR_Q41P_BLOCK,
               "q4_1p panel block size");
_Static_assert(CKIR_QP_QS(CKIR_QP_Q4_0) + 4 * QP_QUAD == CKIR_Q40P_BLOCK,
               "q4_0p panel block size");
_Static_assert(CKIR_Q40P_BLOCK == CKIR_PANEL * CKIR_Q4_0_BYTES, "q4_0p: 32 Q4_0 blocks");
_Static_assert(CKIR_QP_QS(CKIR_QP_Q8_0) == QP_SCALES, "q8_0p's quad rows follow its scales");

#if defined(CKIR_Q512) && defined(__AVX512VNNI__)
#define QP_XOR 1 /* w ^ 0x80 = w + 128 unsigned; the block starts at -128 sum(a) */
#endif

/* q4_1p on ymm: t += the products of a quad group's low nibbles l with xl and
 * high nibbles h with xh; Q41_WIDEN(t) the block's int32 sums per lane.  With
 * VNNI two vpdpbusd into int32.  Without, vpmaddubsw into int16, summed over
 * the block's four groups before one vpmaddwd widens them (at most 8 x 2 x 15
 * x 127 = 30480 < 2^15: exact, 17 instructions per 256 products against 24). */
#if defined(CKIR_Q256) && (defined(__AVXVNNI__) || defined(__AVX512VNNI__))
#define Q41_ACC(t, l, xl, h, xh) CKIR_DPBUSD256(CKIR_DPBUSD256((t), (l), (xl)), (h), (xh))
#define Q41_WIDEN(t) (t)
#elif defined(CKIR_Q256)
#define Q41_ACC(t, l, xl, h, xh)                                                       \
  _mm256_add_epi16((t), _mm256_add_epi16(_mm256_maddubs_epi16((l), (xl)),             \
                                         _mm256_maddubs_epi16((h), (xh))))
#define Q41_WIDEN(t) _mm256_madd_epi16((t), _mm256_set1_epi16(1))
#endif

/* ---- dequantization of a panel block ---------------------------------------- */

static void q8p_deq(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld) {
  const uint8_t *q0 = pb + QP_SCALES + 4 * r0;
#if defined(CKIR_Q512)
  for (int64_t h = 0; h < nr; h += 16) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 2 * (r0 + h))));
    for (int i = 0; i < 8; i++) {
      const __m512i v = _mm512_loadu_si512(q0 + i * QP_QUAD + 4 * h);
      float *o = dst + 4 * i * ld + h;
      _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24)), d));
      _mm512_storeu_ps(o + ld, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 16), 24)), d));
      _mm512_storeu_ps(o + 2 * ld, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 8), 24)), d));
      _mm512_storeu_ps(o + 3 * ld, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(v, 24)), d));
    }
  }
#elif defined(CKIR_Q256)
  for (int64_t h = 0; h < nr; h += 8) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 2 * (r0 + h))));
    for (int i = 0; i < 8; i++) {
      const __m256i v = _mm256_loadu_si256((const __m256i *)(q0 + i * QP_QUAD + 4 * h));
      float *o = dst + 4 * i * ld + h;
      _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24)), d));
      _mm256_storeu_ps(o + ld, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 16), 24)), d));
      _mm256_storeu_ps(o + 2 * ld, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 8), 24)), d));
      _mm256_storeu_ps(o + 3 * ld, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(v, 24)), d));
    }
  }
#else
  for (int64_t n = 0; n < nr; n++) {
    const float d = ckir_q_f16(pb + 2 * (r0 + n));
    for (int i = 0; i < 8; i++) {
      const int8_t *q = (const int8_t *)(q0 + i * QP_QUAD + 4 * n);
      for (int j = 0; j < 4; j++) dst[(4 * i + j) * ld + n] = (float)q[j] * d;
    }
  }
#endif
}

/* the same for a q4_1p panel block (d * nib + m) or a q4_0p one (d * nib - 8 d:
 * exact, d * (nib - 8)) */
CKIR_INLINE void q4p_deq(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld,
                         const int fmt) {
  const int has_m = fmt == CKIR_QP_Q4_1;
  const uint8_t *q0 = pb + CKIR_QP_QS(fmt) + 4 * r0;
#if defined(CKIR_Q512)
  const __m512i low = _mm512_set1_epi32(0x0F);
  for (int64_t h = 0; h < nr; h += 16) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 2 * (r0 + h))));
    const __m512 m =
        has_m ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + QP_SCALES + 2 * (r0 + h))))
              : _mm512_mul_ps(d, _mm512_set1_ps(-8.0f));
    for (int g = 0; g < 4; g++) {
      const __m512i v = _mm512_loadu_si512(q0 + g * QP_QUAD + 4 * h);
      for (int j = 0; j < 4; j++) { /* byte j of each lane: k = 4g + j (low), 16 + 4g + j (high) */
        const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 8 * j + 4), low);
        _mm512_storeu_ps(dst + (4 * g + j) * ld + h, _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), d, m));
        _mm512_storeu_ps(dst + (16 + 4 * g + j) * ld + h,
                         _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), d, m));
      }
    }
  }
#elif defined(CKIR_Q256)
  const __m256i low = _mm256_set1_epi32(0x0F);
  for (int64_t h = 0; h < nr; h += 8) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 2 * (r0 + h))));
    const __m256 m =
        has_m ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + QP_SCALES + 2 * (r0 + h))))
              : _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));
    for (int g = 0; g < 4; g++) {
      const __m256i v = _mm256_loadu_si256((const __m256i *)(q0 + g * QP_QUAD + 4 * h));
      for (int j = 0; j < 4; j++) {
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(v, 8 * j), low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(v, 8 * j + 4), low);
        _mm256_storeu_ps(dst + (4 * g + j) * ld + h, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), d, m));
        _mm256_storeu_ps(dst + (16 + 4 * g + j) * ld + h,
                         _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), d, m));
      }
    }
  }
#else
  for (int64_t n = 0; n < nr; n++) {
    const float d = ckir_q_f16(pb + 2 * (r0 + n));
    const float m = has_m ? ckir_q_f16(pb + QP_SCALES + 2 * (r0 + n)) : -8.0f * d;
    for (int g = 0; g < 4; g++)
      for (int j = 0; j < 4; j++) {
        const uint8_t v = q0[g * QP_QUAD + 4 * n + j];
        dst[(4 * g + j) * ld + n] = (float)(v & 0x0F) * d + m;
        dst[(16 + 4 * g + j) * ld + n] = (float)(v >> 4) * d + m;
      }
  }
#endif
}

static void q41p_deq(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld) {
  q4p_deq(pb, r0, nr, dst, ld, CKIR_QP_Q4_1);
}

static void q40p_deq(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld) {
  q4p_deq(pb, r0, nr, dst, ld, CKIR_QP_Q4_0);
}

typedef void (*qp_deq_fn)(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld);

static qp_deq_fn qp_deq_of(int fmt) {
  return fmt == CKIR_QP_Q4_1 ? q41p_deq : fmt == CKIR_QP_Q4_0 ? q40p_deq : q8p_deq;
}

void ckir_internal_qp_deq(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld,
                          int fmt) {
  qp_deq_of(fmt)(pb, r0, nr, dst, ld);
}

/* ---- gemv ------------------------------------------------------------------ */

/* y[n] (+ b[n]) for the rows of panels [p0, p1) against quantized x (a, dx;
 * cb[bk] = -128 * sum of block bk of a, used with QP_XOR) */
static void q8p_gemv_panels(const int8_t *a, const float *dx, const int32_t *cb,
                            const uint8_t *w, const float *b, float *y, int64_t N, int64_t nb,
                            int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; p++) {
    const uint8_t *pp = w + p * nb * CKIR_Q8P_BLOCK;
    const int64_t n0 = p * CKIR_PANEL, nn = CKIR_MIN(CKIR_PANEL, N - n0);
#if defined(CKIR_Q512)
    __m512 f0 = _mm512_setzero_ps(), f1 = _mm512_setzero_ps();
    for (int64_t bk = 0; bk < nb; bk++) {
      const uint8_t *pb = pp + bk * CKIR_Q8P_BLOCK;
      for (int l = 0; l < CKIR_Q8P_BLOCK; l += 64) __builtin_prefetch(pb + QP_PFD + l, 0, 1);
      const int8_t *ab = a + bk * CKIR_QK;
#if defined(QP_XOR)
      const __m512i flip = _mm512_set1_epi8((char)0x80);
      __m512i s0 = _mm512_set1_epi32(cb[bk]), s1 = s0;
      __m512i t0 = _mm512_setzero_si512(), t1 = t0; /* odd quads: shorter chains */
      for (int i = 0; i < 8; i += 2) {
        const uint8_t *q = pb + QP_SCALES + i * QP_QUAD;
        const __m512i x0 = _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab + 4 * i));
        const __m512i x1 = _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab + 4 * i + 4));
        s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(_mm512_loadu_si512(q), flip), x0);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(_mm512_loadu_si512(q + 64), flip), x0);
        t0 = _mm512_dpbusd_epi32(t0, _mm512_xor_si512(_mm512_loadu_si512(q + QP_QUAD), flip), x1);
        t1 = _mm512_dpbusd_epi32(t1, _mm512_xor_si512(_mm512_loadu_si512(q + QP_QUAD + 64), flip),
                                 x1);
      }
      s0 = _mm512_add_epi32(s0, t0);
      s1 = _mm512_add_epi32(s1, t1);
#else
      (void)cb;
      const __m512i zero = _mm512_setzero_si512();
      __m512i s0 = zero, s1 = zero;
      for (int i = 0; i < 8; i++) {
        const uint8_t *q = pb + QP_SCALES + i * QP_QUAD;
        const __m512i xq = _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab + 4 * i));
        const __m512i w0 = _mm512_loadu_si512(q), w1 = _mm512_loadu_si512(q + 64);
        s0 = CKIR_DPBUSD512(s0, _mm512_abs_epi8(w0),
                            _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(w0), zero, xq));
        s1 = CKIR_DPBUSD512(s1, _mm512_abs_epi8(w1),
                            _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(w1), zero, xq));
      }
#endif
      const __m512 sx = _mm512_set1_ps(dx[bk]);
      const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
      const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32)));
      f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(d0, sx), f0);
      f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(d1, sx), f1);
    }
    const __mmask16 m0 = ckir_mask16(nn), m1 = ckir_mask16(CKIR_MAX(0, nn - 16));
    if (b) {
      f0 = _mm512_add_ps(f0, _mm512_maskz_loadu_ps(m0, b + n0));
      f1 = _mm512_add_ps(f1, _mm512_maskz_loadu_ps(m1, b + n0 + 16));
    }
    _mm512_mask_storeu_ps(y + n0, m0, f0);
    _mm512_mask_storeu_ps(y + n0 + 16, m1, f1);
#elif defined(CKIR_Q256)
    (void)cb;
    __m256 f[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t bk = 0; bk < nb; bk++) {
      const uint8_t *pb = pp + bk * CKIR_Q8P_BLOCK;
      for (int l = 0; l < CKIR_Q8P_BLOCK; l += 64) __builtin_prefetch(pb + QP_PFD + l, 0, 1);
      const int8_t *ab = a + bk * CKIR_QK;
      __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256()};
      for (int i = 0; i < 8; i++) {
        const uint8_t *q = pb + QP_SCALES + i * QP_QUAD;
        const __m256i xq = _mm256_set1_epi32(ckir_q_ld32((const uint8_t *)ab + 4 * i));
        for (int h = 0; h < 4; h++) {
          const __m256i wv = _mm256_loadu_si256((const __m256i *)(q + 32 * h));
          s[h] = CKIR_DPBUSD256(s[h], _mm256_abs_epi8(wv), _mm256_sign_epi8(xq, wv));
        }
      }
      const __m256 sx = _mm256_set1_ps(dx[bk]);
      for (int h = 0; h < 4; h++) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16 * h)));
        f[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h]), _mm256_mul_ps(d, sx), f[h]);
      }
    }
    float out[CKIR_PANEL];
    for (int h = 0; h < 4; h++) _mm256_storeu_ps(out + 8 * h, f[h]);
    for (int64_t r = 0; r < nn; r++) y[n0 + r] = out[r] + (b ? b[n0 + r] : 0.0f);
#else
    (void)cb;
    float f[CKIR_PANEL] = {0};
    for (int64_t bk = 0; bk < nb; bk++) {
      const uint8_t *pb = pp + bk * CKIR_Q8P_BLOCK;
      const int8_t *ab = a + bk * CKIR_QK;
      for (int r = 0; r < CKIR_PANEL; r++) {
        /* through int8_t pointers (see q8_0_row_scalar in quant_q8_0.c) */
        int32_t is = 0;
        for (int i = 0; i < 8; i++) {
          const int8_t *q = (const int8_t *)(pb + QP_SCALES + i * QP_QUAD + 4 * r);
          for (int j = 0; j < 4; j++) is += q[j] * ab[4 * i + j];
        }
        f[r] += (float)is * (ckir_q_f16(pb + 2 * r) * dx[bk]);
      }
    }
    for (int64_t r = 0; r < nn; r++) y[n0 + r] = f[r] + (b ? b[n0 + r] : 0.0f);
#endif
  }
}

/* the same for q4_1p (sx[bk] = d_x * sum of block bk of a: the min term's
 * factor) or q4_0p (each block's int32 sums start at cb[bk] / 16 = -8 sum(a)) */
CKIR_INLINE void q4p_gemv_panels(const int8_t *a, const float *dx, const int32_t *cb,
                                 const float *sx, const uint8_t *w, const float *b, float *y,
                                 int64_t N, int64_t nb, int64_t p0, int64_t p1, const int fmt) {
  const int has_m = fmt == CKIR_QP_Q4_1;
  const int64_t bb = CKIR_QP_BLOCK(fmt), qs = CKIR_QP_QS(fmt);
  for (int64_t p = p0; p < p1; p++) {
    const uint8_t *pp = w + p * nb * bb;
    const int64_t n0 = p * CKIR_PANEL, nn = CKIR_MIN(CKIR_PANEL, N - n0);
#if defined(CKIR_Q512)
    const __m512i low = _mm512_set1_epi8(0x0F);
    __m512 f0 = _mm512_setzero_ps(), f1 = _mm512_setzero_ps();
    for (int64_t bk = 0; bk < nb; bk++) {
      const uint8_t *pb = pp + bk * bb;
      const uint8_t *ab = (const uint8_t *)(a + bk * CKIR_QK);
      __m512i t0 = _mm512_setzero_si512(), t1 = t0;
      __m512i s0 = has_m ? t0 : _mm512_set1_epi32(cb[bk] / 16), s1 = s0;
      for (int g = 0; g < 4; g++) {
        const uint8_t *q = pb + qs + g * QP_QUAD;
        const __m512i xl = _mm512_set1_epi32(ckir_q_ld32(ab + 4 * g));
        const __m512i xh = _mm512_set1_epi32(ckir_q_ld32(ab + 16 + 4 * g));
        const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64);
        s0 = CKIR_DPBUSD512(s0, _mm512_and_si512(v0, low), xl);
        s1 = CKIR_DPBUSD512(s1, _mm512_and_si512(v1, low), xl);
        t0 = CKIR_DPBUSD512(t0, _mm512_and_si512(_mm512_srli_epi16(v0, 4), low), xh);
        t1 = CKIR_DPBUSD512(t1, _mm512_and_si512(_mm512_srli_epi16(v1, 4), low), xh);
      }
      s0 = _mm512_add_epi32(s0, t0);
      s1 = _mm512_add_epi32(s1, t1);
      const __m512 vx = _mm512_set1_ps(dx[bk]);
      const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
      const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32)));
      if (has_m) {
        const __m512 vs = _mm512_set1_ps(sx[bk]);
        const __m512 m0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + QP_SCALES)));
        const __m512 m1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + QP_SCALES + 32)));
        f0 = _mm512_fmadd_ps(m0, vs, f0);
        f1 = _mm512_fmadd_ps(m1, vs, f1);
      }
      f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(d0, vx), f0);
      f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(d1, vx), f1);
    }
    const __mmask16 k0 = ckir_mask16(nn), k1 = ckir_mask16(CKIR_MAX(0, nn - 16));
    if (b) {
      f0 = _mm512_add_ps(f0, _mm512_maskz_loadu_ps(k0, b + n0));
      f1 = _mm512_add_ps(f1, _mm512_maskz_loadu_ps(k1, b + n0 + 16));
    }
    _mm512_mask_storeu_ps(y + n0, k0, f0);
    _mm512_mask_storeu_ps(y + n0 + 16, k1, f1);
#elif defined(CKIR_Q256)
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256 f[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t bk = 0; bk < nb; bk++) {
      const uint8_t *pb = pp + bk * bb;
      const uint8_t *ab = (const uint8_t *)(a + bk * CKIR_QK);
      __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256()};
      for (int g = 0; g < 4; g++) {
        const uint8_t *q = pb + qs + g * QP_QUAD;
        const __m256i xl = _mm256_set1_epi32(ckir_q_ld32(ab + 4 * g));
        const __m256i xh = _mm256_set1_epi32(ckir_q_ld32(ab + 16 + 4 * g));
        for (int h = 0; h < 4; h++) {
          const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 32 * h));
          s[h] = Q41_ACC(s[h], _mm256_and_si256(v, low), xl,
                         _mm256_and_si256(_mm256_srli_epi16(v, 4), low), xh);
        }
      }
      const __m256i c = _mm256_set1_epi32(has_m ? 0 : cb[bk] / 16);
      for (int h = 0; h < 4; h++) s[h] = _mm256_add_epi32(Q41_WIDEN(s[h]), c);
      const __m256 vx = _mm256_set1_ps(dx[bk]);
      for (int h = 0; h < 4; h++) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16 * h)));
        if (has_m) {
          const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + QP_SCALES + 16 * h)));
          f[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(sx[bk]), f[h]);
        }
        f[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h]), _mm256_mul_ps(d, vx), f[h]);
      }
    }
    float out[CKIR_PANEL];
    for (int h = 0; h < 4; h++) _mm256_storeu_ps(out + 8 * h, f[h]);
    for (int64_t r = 0; r < nn; r++) y[n0 + r] = out[r] + (b ? b[n0 + r] : 0.0f);
#else
    float f[CKIR_PANEL] = {0};
    for (int64_t bk = 0; bk < nb; bk++) {
      const uint8_t *pb = pp + bk * bb;
      const int8_t *ab = a + bk * CKIR_QK;
      for (int r = 0; r < CKIR_PANEL; r++) {
        int32_t is = has_m ? 0 : cb[bk] / 16;
        for (int g = 0; g < 4; g++)
          for (int j = 0; j < 4; j++) {
            const uint8_t v = pb[qs + g * QP_QUAD + 4 * r + j];
            is += (v & 0x0F) * ab[4 * g + j] + (v >> 4) * ab[16 + 4 * g + j];
          }
        if (has_m)
          f[r] += (float)is * (ckir_q_f16(pb + 2 * r) * dx[bk]) +
                  ckir_q_f16(pb + QP_SCALES + 2 * r) * sx[bk];
        else
          f[r] += (float)is * (ckir_q_f16(pb + 2 * r) * dx[bk]);
      }
    }
    for (int64_t r = 0; r < nn; r++) y[n0 + r] = f[r] + (b ? b[n0 + r] : 0.0f);
#endif
  }
}

/* x[K] quantized per block of 32 as gemv_q8_0 quantizes it (a, dx), and per
 * block: cb = -128 * sum(a) (the q8_0p start value with QP_XOR; q4_0p's is cb /
 * 16) and sx = dx * sum(a) (q4_1p's min factor) */
static void qp_quantize_x(const float *x, int64_t K, int8_t *a, float *dx, int32_t *cb,
                          float *sx) {
  ckir_internal_quantize_x(x, K, a, dx);
  for (int64_t bk = 0; bk < K / CKIR_QK; bk++) {
    int32_t t = 0;
    for (int j = 0; j < CKIR_QK; j++) t += a[bk * CKIR_QK + j];
    cb[bk] = -128 * t;
    sx[bk] = dx[bk] * (float)t;
  }
}

/* rows [0, N) of the panels from w, x quantized (a, dx, cb, sx), into y */
static void qp_gemv_run(const int8_t *a, const float *dx, const int32_t *cb, const float *sx,
                        const uint8_t *w, const float *b, float *y, int64_t N, int64_t nb,
                        int64_t p0, int64_t p1, const int fmt) {
  if (fmt == CKIR_QP_Q4_1)
    q4p_gemv_panels(a, dx, cb, sx, w, b, y, N, nb, p0, p1, CKIR_QP_Q4_1);
  else if (fmt == CKIR_QP_Q4_0)
    q4p_gemv_panels(a, dx, cb, sx, w, b, y, N, nb, p0, p1, CKIR_QP_Q4_0);
  else
    q8p_gemv_panels(a, dx, cb, w, b, y, N, nb, p0, p1);
}

/* The decode GEMVs (plain, qkv, gate_up) on the panel driver (ckir_pdriver.h,
 * quant_pdriver.c): x quantized once per call, the panels of the call's matrices
 * claimed (CKIR_CLAIMED_ITEMS), each panel one run of its format's GEMV loop above. */
typedef struct {
  int8_t *a;
  float *dx, *sx;
  int32_t *cb;
} qp_x;
static int64_t qp_drv_panel_bytes(int fmt, int64_t K) { return K / CKIR_QK * CKIR_QP_BLOCK(fmt); }
static int64_t qp_drv_x_bytes(int64_t K) {
  return K + K / CKIR_QK * (int64_t)(sizeof(int32_t) + 2 * sizeof(float)) + 128;
}
static void qp_drv_prep(const float *x, int64_t K, uint8_t *buf, int ref, void *xs) {
  (void)ref; /* the reference twins compute row by row (qp_gemv_row_ref) */
  const int64_t nb = K / CKIR_QK;
  qp_x *q = (qp_x *)xs;
  q->a = CKIR_ALIGN64(buf);
  q->cb = (int32_t *)(q->a + K); /* K % 32 == 0: aligned */
  q->dx = (float *)(q->cb + nb);
  q->sx = q->dx + nb;
  qp_quantize_x(x, K, q->a, q->dx, q->cb, q->sx);
}
static void qp_drv_run(int fmt, int ref, const uint8_t *panel, int64_t nb, const void *xs, int X,
                       int64_t pfd, float *out) {
  (void)ref, (void)X, (void)pfd; /* one row of x; the loops prefetch QP_PFD ahead themselves */
  const qp_x *q = (const qp_x *)xs;
  qp_gemv_run(q->a, q->dx, q->cb, q->sx, panel, NULL, out, CKIR_PANEL, nb, 0, 1, fmt);
}
static void qp_values(int fmt, const uint8_t *w, int64_t n, int64_t bk, int64_t K, float *v);
static const ckir_pdrv QP_DRV = {.block = CKIR_QK,
                                 .panel_bytes = qp_drv_panel_bytes,
                                 .x_bytes = qp_drv_x_bytes,
                                 .x_size = sizeof(qp_x),
                                 .prep = qp_drv_prep,
                                 .run = qp_drv_run,
                                 .tx = 1,
                                 .pfd = QP_PFD,
                                 .values = qp_values,
                                 .max_k = CKIR_QUANT_MAX_K};

void ckir_internal_gemv_qkv_qp(const float *x, const uint8_t *const w[3], const float *const b[3],
                               float *const y[3], const int64_t N[3], int64_t K, int fmt) {
  const int fmts[3] = {fmt, fmt, fmt};
  ckir_internal_pdrv_gemv_qkv(&QP_DRV, x, w, b, y, N, K, fmts, "gemv_qkv (block panels)");
}

void ckir_internal_gemv_gate_up_qp(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt) {
  ckir_internal_pdrv_gemv_gate_up(&QP_DRV, x, wg, wu, out, N, K, fmt,
                                  "gemv_gate_up (block panels)");
}

/* ---- gemm for small M --------------------------------------------------------- */

/* y[M, N] = x . W^T (+ b) for small M: contiguous ranges of panels a thread
 * (CKIR_SHARED_RANGE: all of them on a caller's thread inside its region);
 * each panel block (bb bytes) is dequantized once into a 4 KiB buffer (k-major,
 * 32 rows a k), then every row of x accumulates its 32 k into y's 32 columns
 * (fp32 x, the numerics of gemm_q8_0 / gemm_q4_1) */
#define QP_V (CKIR_PANEL / CKV_W)
static void qp_rows(const float *x, int64_t M, const uint8_t *w, int64_t bb, qp_deq_fn deq,
                    const float *b, float *y, int64_t N, int64_t K) {
  const int64_t nb = K / CKIR_QK, P = (N + CKIR_PANEL - 1) / CKIR_PANEL;
  CKIR_SHARED_RANGE(M * N * K >= CKIR_GEMV_PAR_MIN && P > 1, P, p0, p1, {
    float buf[CKIR_QK * CKIR_PANEL] __attribute__((aligned(64)));
    for (int64_t p = p0; p < p1; p++) {
      const int64_t n0 = p * CKIR_PANEL, nn = CKIR_MIN(CKIR_PANEL, N - n0);
      for (int64_t m = 0; m < M; m++) { /* y's columns of this panel start as the bias */
        float *ym = y + m * N + n0;
        for (int64_t r = 0; r < nn; r++) ym[r] = b ? b[n0 + r] : 0.0f;
      }
      for (int64_t bk = 0; bk < nb; bk++) {
        deq(w + (p * nb + bk) * bb, 0, CKIR_PANEL, buf, CKIR_PANEL);
        for (int64_t m = 0; m < M; m++) {
          const float *xm = x + m * K + bk * CKIR_QK;
          ckv acc[2][QP_V];
          for (int j = 0; j < QP_V; j++) acc[0][j] = acc[1][j] = ckv_zero();
          for (int k = 0; k < CKIR_QK; k += 2)
            for (int u = 0; u < 2; u++) {
              const ckv a = ckv_set1(xm[k + u]);
              for (int j = 0; j < QP_V; j++)
                acc[u][j] = ckv_fma(a, ckv_load(buf + (k + u) * CKIR_PANEL + j * CKV_W), acc[u][j]);
            }
          float *ym = y + m * N + n0;
          for (int j = 0; j < QP_V && j * CKV_W < nn; j++) {
            const int64_t lanes = nn - j * CKV_W;
            const ckv s = ckv_add(ckv_add(acc[0][j], acc[1][j]), ckv_load_n(ym + j * CKV_W, lanes));
            ckv_store_n(ym + j * CKV_W, lanes, s);
          }
        }
      }
    }
  });
}

/* ---- gemm with quantized x ---------------------------------------------------- */

#if defined(CKIR_Q512) || defined(CKIR_Q256)
#define QP_I8 1
/* Every row of x quantized per block of 32 as gemv_<p> quantizes it, and each
 * row's outputs computed exactly as gemv_<p> computes them (the same int32
 * block dot products, scaled and summed over the blocks in the same order):
 * gemm_<p> row m == gemv_<p> of row m, bit for bit.  QP_I8_R8 (q8_0p) or
 * QP_I8_R41 (q4_1p, q4_0p) rows of x share each load of the weights.  With AVX-512 VNNI one vpdpbusd multiplies 64 int8
 * pairs; without VNNI (AVX2, AVX-512 without it) vpmaddubsw + vpmaddwd do the
 * same exactly (the sign trick for q8_0p; the unsigned nibbles sum a
 * block's four quad groups in int16 first, at most 8 x 2 x 15 x 127 < 2^15). */
#if defined(CKIR_Q512)
/* rows of x per micro-tile (q8_0p: 4 rows took 1.1-1.3x the time, 8 1.06-1.24x) */
#define QP_I8_R8 6
#define QP_I8_R41 6
#else /* AVX2, sixteen ymm registers (q8_0p: 2 rows took 1.2x the time of 4, 3 1.1x,
       * 6 1.05x; q4_1p, int16 sums: 6 rows 0.81-0.87x the time of 4, 8 1.0-1.09x
       * that of 6) */
#define QP_I8_R8 4
#define QP_I8_R41 6
#endif
/* the most rows of a micro-tile (its arrays' size) */
#define QP_I8_MR (QP_I8_R8 > QP_I8_R41 ? QP_I8_R8 : QP_I8_R41)
#define QP_I8_XB 196608 /* bytes of quantized x a thread holds (a tile of rows) */
/* rows of x an AMX call takes (builds without AMX: never used) */
#if defined(CKIR_AMX_BUILD)
#define QP_AMX_ROWS CKIR_AMX_QP_ROWS
#else
#define QP_AMX_ROWS QP_I8_MR
#endif
/* rows of gate_up's gate and up buffers: a micro-tile's, or an AMX call's */
#define QP_I8_GU CKIR_MAX(QP_I8_MR, QP_AMX_ROWS)

typedef struct {
  const int8_t *a;   /* [rows][K] quantized x */
  const float *dx;   /* [rows][nb] block scales */
  const int32_t *cb; /* [rows][nb] -128 sum(a) (q8_0p; q4_0p: / 16) */
  const float *sx;   /* [rows][nb] dx * sum(a) (q4_1p) */
  int64_t K, nb;
} qp_xq;

#if defined(CKIR_Q512)
/* y[r][n0 .. n0 + nn) for the R rows of xq from row r0, panel pp (nb blocks) */
CKIR_INLINE void qp_i8_tile(const qp_xq *xq, int64_t r0, const int R, const uint8_t *pp,
                            const int fmt, const float *b, float *y, int64_t ldy, int64_t n0,
                            int64_t nn) {
  const int nib = fmt != CKIR_QP_Q8_0, has_m = fmt == CKIR_QP_Q4_1;
  __m512 f[QP_I8_MR][2];
  for (int r = 0; r < R; r++) f[r][0] = f[r][1] = _mm512_setzero_ps();
  for (int64_t bk = 0; bk < xq->nb; bk++) {
    const uint8_t *pb = pp + bk * CKIR_QP_BLOCK(fmt);
    __m512i s[QP_I8_MR][2];
    const uint8_t *ab[QP_I8_MR];
    for (int r = 0; r < R; r++) {
      ab[r] = (const uint8_t *)(xq->a + (r0 + r) * xq->K + bk * CKIR_QK);
      const int32_t c = xq->cb[(r0 + r) * xq->nb + bk];
#if defined(QP_XOR)
      s[r][0] = s[r][1] = _mm512_set1_epi32(has_m ? 0 : nib ? c / 16 : c);
#else
      s[r][0] = s[r][1] = _mm512_set1_epi32(fmt == CKIR_QP_Q4_0 ? c / 16 : 0);
#endif
    }
    if (nib) {
      const __m512i low = _mm512_set1_epi8(0x0F);
      for (int g = 0; g < 4; g++) {
        const uint8_t *q = pb + CKIR_QP_QS(fmt) + g * QP_QUAD;
        const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64);
        const __m512i l0 = _mm512_and_si512(v0, low), l1 = _mm512_and_si512(v1, low);
        const __m512i h0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), low);
        const __m512i h1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), low);
        for (int r = 0; r < R; r++) {
          const __m512i xl = _mm512_set1_epi32(ckir_q_ld32(ab[r] + 4 * g));
          const __m512i xh = _mm512_set1_epi32(ckir_q_ld32(ab[r] + 16 + 4 * g));
          s[r][0] = CKIR_DPBUSD512(s[r][0], l0, xl);
          s[r][1] = CKIR_DPBUSD512(s[r][1], l1, xl);
          s[r][0] = CKIR_DPBUSD512(s[r][0], h0, xh);
          s[r][1] = CKIR_DPBUSD512(s[r][1], h1, xh);
        }
      }
    } else {
      for (int i = 0; i < 8; i++) {
        const uint8_t *q = pb + QP_SCALES + i * QP_QUAD;
#if defined(QP_XOR)
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        const __m512i w0 = _mm512_xor_si512(_mm512_loadu_si512(q), flip);
        const __m512i w1 = _mm512_xor_si512(_mm512_loadu_si512(q + 64), flip);
        for (int r = 0; r < R; r++) {
          const __m512i xv = _mm512_set1_epi32(ckir_q_ld32(ab[r] + 4 * i));
          s[r][0] = _mm512_dpbusd_epi32(s[r][0], w0, xv);
          s[r][1] = _mm512_dpbusd_epi32(s[r][1], w1, xv);
        }
#else
        const __m512i zero = _mm512_setzero_si512();
        const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64);
        const __m512i w0 = _mm512_abs_epi8(v0), w1 = _mm512_abs_epi8(v1);
        const __mmask64 n0 = _mm512_movepi8_mask(v0), n1 = _mm512_movepi8_mask(v1);
        for (int r = 0; r < R; r++) {
          const __m512i xv = _mm512_set1_epi32(ckir_q_ld32(ab[r] + 4 * i));
          s[r][0] = CKIR_DPBUSD512(s[r][0], w0, _mm512_mask_sub_epi8(xv, n0, zero, xv));
          s[r][1] = CKIR_DPBUSD512(s[r][1], w1, _mm512_mask_sub_epi8(xv, n1, zero, xv));
        }
#endif
      }
    }
    const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
    const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32)));
    if (has_m) {
      const __m512 m0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + QP_SCALES)));
      const __m512 m1 =
          _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + QP_SCALES + 32)));
      for (int r = 0; r < R; r++) {
        const __m512 vx = _mm512_set1_ps(xq->dx[(r0 + r) * xq->nb + bk]);
        const __m512 vs = _mm512_set1_ps(xq->sx[(r0 + r) * xq->nb + bk]);
        f[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][0]), _mm512_mul_ps(d0, vx),
                                  _mm512_fmadd_ps(m0, vs, f[r][0]));
        f[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][1]), _mm512_mul_ps(d1, vx),
                                  _mm512_fmadd_ps(m1, vs, f[r][1]));
      }
    } else {
      for (int r = 0; r < R; r++) {
        const __m512 vx = _mm512_set1_ps(xq->dx[(r0 + r) * xq->nb + bk]);
        f[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][0]), _mm512_mul_ps(d0, vx), f[r][0]);
        f[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][1]), _mm512_mul_ps(d1, vx), f[r][1]);
      }
    }
  }
  const __mmask16 k0 = ckir_mask16(nn), k1 = ckir_mask16(CKIR_MAX(0, nn - 16));
  const __m512 b0 = b ? _mm512_maskz_loadu_ps(k0, b + n0) : _mm512_setzero_ps();
  const __m512 b1 = b ? _mm512_maskz_loadu_ps(k1, b + n0 + 16) : _mm512_setzero_ps();
  for (int r = 0; r < R; r++) {
    _mm512_mask_storeu_ps(y + r * ldy + n0, k0, _mm512_add_ps(f[r][0], b0));
    _mm512_mask_storeu_ps(y + r * ldy + n0 + 16, k1, _mm512_add_ps(f[r][1], b1));
  }
}
#else
/* the same with AVX2: the panel as two halves of 16 rows, 2 ymm of a quad row each */
CKIR_INLINE void qp_i8_tile(const qp_xq *xq, int64_t r0, const int R, const uint8_t *pp,
                            const int fmt, const float *b, float *y, int64_t ldy, int64_t n0,
                            int64_t nn) {
  const int nib = fmt != CKIR_QP_Q8_0, has_m = fmt == CKIR_QP_Q4_1;
  for (int o = 0; o < CKIR_PANEL && o < nn; o += 16) { /* o: the half's first row */
    __m256 f[QP_I8_MR][2];
    for (int r = 0; r < R; r++) f[r][0] = f[r][1] = _mm256_setzero_ps();
    for (int64_t bk = 0; bk < xq->nb; bk++) {
      const uint8_t *pb = pp + bk * CKIR_QP_BLOCK(fmt);
      __m256i s[QP_I8_MR][2];
      const uint8_t *ab[QP_I8_MR];
      for (int r = 0; r < R; r++) {
        ab[r] = (const uint8_t *)(xq->a + (r0 + r) * xq->K + bk * CKIR_QK);
        s[r][0] = s[r][1] = _mm256_setzero_si256();
      }
      if (nib) {
        const __m256i low = _mm256_set1_epi8(0x0F);
        for (int g = 0; g < 4; g++) {
          const uint8_t *q = pb + CKIR_QP_QS(fmt) + g * QP_QUAD + 4 * o;
          const __m256i v0 = _mm256_loadu_si256((const __m256i *)q);
          const __m256i v1 = _mm256_loadu_si256((const __m256i *)(q + 32));
          const __m256i l0 = _mm256_and_si256(v0, low), l1 = _mm256_and_si256(v1, low);
          const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low);
          const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low);
          for (int r = 0; r < R; r++) {
            const __m256i xl = _mm256_set1_epi32(ckir_q_ld32(ab[r] + 4 * g));
            const __m256i xh = _mm256_set1_epi32(ckir_q_ld32(ab[r] + 16 + 4 * g));
            s[r][0] = Q41_ACC(s[r][0], l0, xl, h0, xh);
            s[r][1] = Q41_ACC(s[r][1], l1, xl, h1, xh);
          }
        }
        for (int r = 0; r < R; r++) { /* q4_0p: from -8 sum(a) */
          const __m256i c =
              _mm256_set1_epi32(has_m ? 0 : xq->cb[(r0 + r) * xq->nb + bk] / 16);
          s[r][0] = _mm256_add_epi32(Q41_WIDEN(s[r][0]), c);
          s[r][1] = _mm256_add_epi32(Q41_WIDEN(s[r][1]), c);
        }
      } else {
        for (int i = 0; i < 8; i++) {
          const uint8_t *q = pb + QP_SCALES + i * QP_QUAD + 4 * o;
          const __m256i v0 = _mm256_loadu_si256((const __m256i *)q);
          const __m256i v1 = _mm256_loadu_si256((const __m256i *)(q + 32));
          const __m256i w0 = _mm256_abs_epi8(v0), w1 = _mm256_abs_epi8(v1);
          for (int r = 0; r < R; r++) {
            const __m256i xv = _mm256_set1_epi32(ckir_q_ld32(ab[r] + 4 * i));
            s[r][0] = CKIR_DPBUSD256(s[r][0], w0, _mm256_sign_epi8(xv, v0));
            s[r][1] = CKIR_DPBUSD256(s[r][1], w1, _mm256_sign_epi8(xv, v1));
          }
        }
      }
      const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 2 * o)));
      const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 2 * o + 16)));
      if (has_m) {
        const uint8_t *pm = pb + QP_SCALES + 2 * o;
        const __m256 m0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pm));
        const __m256 m1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pm + 16)));
        for (int r = 0; r < R; r++) {
          const __m256 vx = _mm256_set1_ps(xq->dx[(r0 + r) * xq->nb + bk]);
          const __m256 vs = _mm256_set1_ps(xq->sx[(r0 + r) * xq->nb + bk]);
          f[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][0]), _mm256_mul_ps(d0, vx),
                                    _mm256_fmadd_ps(m0, vs, f[r][0]));
          f[r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][1]), _mm256_mul_ps(d1, vx),
                                    _mm256_fmadd_ps(m1, vs, f[r][1]));
        }
      } else {
        for (int r = 0; r < R; r++) {
          const __m256 vx = _mm256_set1_ps(xq->dx[(r0 + r) * xq->nb + bk]);
          f[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][0]), _mm256_mul_ps(d0, vx), f[r][0]);
          f[r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][1]), _mm256_mul_ps(d1, vx), f[r][1]);
        }
      }
    }
    const int64_t cnt = CKIR_MIN(16, nn - o); /* outputs of this half */
    float bias[16] = {0}, out[16];
    for (int64_t j = 0; b && j < cnt; j++) bias[j] = b[n0 + o + j];
    const __m256 b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
    for (int r = 0; r < R; r++) {
      float *yr = y + r * ldy + n0 + o;
      const __m256 y0 = _mm256_add_ps(f[r][0], b0), y1 = _mm256_add_ps(f[r][1], b1);
      if (cnt == 16) {
        _mm256_storeu_ps(yr, y0);
        _mm256_storeu_ps(yr + 8, y1);
      } else {
        _mm256_storeu_ps(out, y0);
        _mm256_storeu_ps(out + 8, y1);
        for (int64_t j = 0; j < cnt; j++) yr[j] = out[j];
      }
    }
  }
}
#endif

/* qp_i8_tile with R and the format as compile-time constants */
#define QP_I8_ROWS(FMT)                                                                  \
  static void qp_i8_rows_##FMT(const qp_xq *xq, int64_t r0, int R, const uint8_t *pp,  \
                               const float *b, float *y, int64_t ldy, int64_t n0,        \
                               int64_t nn) {                                              \
    switch (R) {                                                                          \
    case 6: qp_i8_tile(xq, r0, 6, pp, FMT, b, y, ldy, n0, nn); break;                     \
    case 5: qp_i8_tile(xq, r0, 5, pp, FMT, b, y, ldy, n0, nn); break;                     \
    case 4: qp_i8_tile(xq, r0, 4, pp, FMT, b, y, ldy, n0, nn); break;                     \
    case 3: qp_i8_tile(xq, r0, 3, pp, FMT, b, y, ldy, n0, nn); break;                     \
    case 2: qp_i8_tile(xq, r0, 2, pp, FMT, b, y, ldy, n0, nn); break;                     \
    default: qp_i8_tile(xq, r0, 1, pp, FMT, b, y, ldy, n0, nn); break;                    \
    }                                                                                     \
  }
_Static_assert(QP_I8_MR <= 6, "qp_i8_rows: a case per row count up to QP_I8_MR");
QP_I8_ROWS(CKIR_QP_Q8_0)
QP_I8_ROWS(CKIR_QP_Q4_1)
QP_I8_ROWS(CKIR_QP_Q4_0)

static void qp_i8_rows(const qp_xq *xq, int64_t r0, int R, const uint8_t *pp, int fmt,
                       const float *b, float *y, int64_t ldy, int64_t n0, int64_t nn) {
  if (fmt == CKIR_QP_Q4_1)
    qp_i8_rows_CKIR_QP_Q4_1(xq, r0, R, pp, b, y, ldy, n0, nn);
  else if (fmt == CKIR_QP_Q4_0)
    qp_i8_rows_CKIR_QP_Q4_0(xq, r0, R, pp, b, y, ldy, n0, nn);
  else
    qp_i8_rows_CKIR_QP_Q8_0(xq, r0, R, pp, b, y, ldy, n0, nn);
}

/* rows [r0, r0 + R) of xq times panel pp, into y (its row 0 is row r0; columns
 * [n0, n0 + nn) of the panel's, + b[n0 ..] when b): on the AMX tiles of mode amx
 * (R <= QP_AMX_ROWS) or the micro-tiles (R <= the dtype's micro-tile rows),
 * the same results either way */
static void qp_i8_step(int amx, const qp_xq *xq, int64_t r0, int64_t R, const uint8_t *pp,
                       int fmt, const float *b, float *y, int64_t ldy, int64_t n0, int64_t nn) {
#if defined(CKIR_AMX_BUILD)
  if (amx) {
    ckir_internal_amx_qp_panel(amx, xq->a + r0 * xq->K, xq->K, xq->dx + r0 * xq->nb,
                               xq->sx + r0 * xq->nb, xq->cb + r0 * xq->nb, R, pp, fmt,
                               b ? b + n0 : NULL, y + n0, ldy, nn);
    return;
  }
#else
  (void)amx;
#endif
  qp_i8_rows(xq, r0, (int)R, pp, fmt, b, y, ldy, n0, nn);
}

/* The int8 GEMMs: y_i = x . W_i^T (+ b_i) for nseg matrices sharing x (gemm: 1,
 * gemm_qkv: 3), or with `gate_up` out = silu(x . Wg^T) * (x . Wu^T) (segs[0]
 * gate, segs[1] up, out in segs[0].y).  The panels of all matrices (gate_up:
 * of the gate; each with its up panel) are numbered in one sequence, and each
 * thread takes one contiguous range of it; for every tile of rows of x, which
 * the thread quantizes once for all its panels, it runs the micro-tiles of
 * QP_I8_R8 / QP_I8_R41 rows over its panels, each tile prefetching its slice
 * of the next panel into L2 (measured on whole prefills, SmolLM-135M, paired:
 * q8_0 1.03x, q4_1 1.03x, q4_1 on the AVX2 build 1.06x). */
static void qp_gemm_i8(const float *x, int64_t M, int64_t K, const int fmt, const ckir_pseg *segs,
                       int nseg, int gate_up) {
  const int64_t nb = K / CKIR_QK, pbytes = nb * CKIR_QP_BLOCK(fmt);
  int64_t P = 0, Nall = 0;
  for (int i = 0; i < (gate_up ? 1 : nseg); i++) {
    P += (segs[i].N + CKIR_PANEL - 1) / CKIR_PANEL;
    Nall += segs[i].N;
  }
  const int mr = fmt != CKIR_QP_Q8_0 ? QP_I8_R41 : QP_I8_R8; /* rows of x per micro-tile */
  const int64_t mt = CKIR_MIN(M, CKIR_MAX(mr, QP_I8_XB / K / mr * mr));
  const int par = M * Nall * K * (gate_up ? 2 : 1) >= CKIR_GEMV_PAR_MIN && P > 1;
  int nt = 1;
#ifdef _OPENMP
  if (par) nt = omp_get_max_threads();
#endif
  /* each thread its own rows (every panel), or a contiguous range of panels
   * (every row) */
  const int own = ckir_own_split(M, nt, 4 * mr, (double)P * pbytes * (gate_up ? 2 : 1));
  /* on AMX tiles (gemm_amx.c): each panel over up to QP_AMX_ROWS rows a call */
  int amx = 0;
#if defined(CKIR_AMX_BUILD)
  amx = ckir_internal_amx();
#endif
#pragma omp parallel if (par)
  {
    int64_t p0 = 0, p1 = P, r0 = 0, r1 = M;
    if (own)
      ckir_own_rows(M, &r0, &r1);
    else
      ckir_thread_share(P, &p0, &p1);
    int8_t a[(mt + 15) * K]; /* the tiles read whole 16-row tiles */
    int32_t cb[mt * nb];
    float dx[mt * nb], sx[mt * nb];
    float g[QP_I8_GU * CKIR_PANEL], u[QP_I8_GU * CKIR_PANEL];
    const qp_xq xq = {a, dx, cb, sx, K, nb};
    for (int64_t m0 = r0; m0 < r1 && p1 > p0; m0 += mt) {
      const int64_t rows = CKIR_MIN(mt, r1 - m0);
      for (int64_t r = 0; r < rows; r++)
        qp_quantize_x(x + (m0 + r) * K, K, a + r * K, dx + r * nb, cb + r * nb, sx + r * nb);
      if (amx) memset(a + rows * K, 0, (size_t)((rows + 15) / 16 * 16 - rows) * (size_t)K);
      int seg = 0;
      int64_t base = 0; /* the first panel of segs[seg] in the sequence */
      for (int64_t q = p0; q < p1; q++) {
        while (q - base >= (segs[seg].N + CKIR_PANEL - 1) / CKIR_PANEL)
          base += (segs[seg++].N + CKIR_PANEL - 1) / CKIR_PANEL;
        const ckir_pseg *sg = &segs[seg];
        const int64_t p = q - base, n0 = p * CKIR_PANEL, nn = CKIR_MIN(CKIR_PANEL, sg->N - n0);
        /* the next panel this thread runs (gate_up: with its up panel), its
         * lines prefetched a slice per step of rows */
        const uint8_t *nx = NULL, *nu = NULL;
        if (q + 1 < p1) {
          const int last = n0 + CKIR_PANEL >= sg->N;
          nx = last ? segs[seg + 1].w : sg->w + (p + 1) * pbytes;
          if (gate_up) nu = segs[1].w + (p + 1) * pbytes;
        }
        /* rows a step: a micro-tile, or an AMX call's */
        const int64_t step = amx ? QP_AMX_ROWS : mr;
        const int64_t lines = (pbytes + 63) / 64, tiles = (rows + step - 1) / step;
        const int64_t per = (lines + tiles - 1) / tiles;
        for (int64_t r = 0; r < rows; r += step) {
          const int64_t R = CKIR_MIN(step, rows - r);
          const int64_t l0 = r / step * per, l1 = CKIR_MIN(lines, l0 + per);
          for (int64_t l = l0; nx && l < l1; l++) {
            _mm_prefetch((const char *)nx + 64 * l, _MM_HINT_T1);
            if (nu) _mm_prefetch((const char *)nu + 64 * l, _MM_HINT_T1);
          }
          if (gate_up) {
            qp_i8_step(amx, &xq, r, R, sg->w + p * pbytes, fmt, NULL, g, CKIR_PANEL, 0, nn);
            qp_i8_step(amx, &xq, r, R, segs[1].w + p * pbytes, fmt, NULL, u, CKIR_PANEL, 0, nn);
            for (int64_t i = 0; i < R; i++)
              ckir_internal_silu_mul(g + i * CKIR_PANEL, u + i * CKIR_PANEL,
                                     sg->y + (m0 + r + i) * sg->N + n0, nn);
          } else {
            qp_i8_step(amx, &xq, r, R, sg->w + p * pbytes, fmt, sg->b,
                       sg->y + (m0 + r) * sg->N, sg->N, n0, nn);
          }
        }
      }
    }
  }
}
#endif

/* gemm_<p> streams the panels up to this M (measured with q8_0p, 1536x576,
 * AVX-512, 2 threads: M = 4 99 GFLOP/s streaming against 32 on the blocked
 * driver; M = 32 147 against 168) */
#ifndef QP_SMALL_M
#define QP_SMALL_M 8
#endif

ckir_wread ckir_internal_wread_q8_0p(int64_t M, int64_t K) {
  (void)K;
  return (ckir_wread){M <= QP_SMALL_M ? GEMM_B_NONE : GEMM_B_Q8_0P, NULL};
}

ckir_wread ckir_internal_wread_q4_1p(int64_t M, int64_t K) {
  (void)K;
  return (ckir_wread){M <= QP_SMALL_M ? GEMM_B_NONE : GEMM_B_Q4_1P, NULL};
}

ckir_wread ckir_internal_wread_q4_0p(int64_t M, int64_t K) {
  (void)K;
  return (ckir_wread){M <= QP_SMALL_M ? GEMM_B_NONE : GEMM_B_Q4_0P, NULL};
}

void ckir_internal_gemm_qp_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                int64_t M, int64_t N, int64_t K, int fmt) {
  const ckir_wread r = fmt == CKIR_QP_Q4_1   ? ckir_internal_wread_q4_1p(M, K)
                       : fmt == CKIR_QP_Q4_0 ? ckir_internal_wread_q4_0p(M, K)
                                             : ckir_internal_wread_q8_0p(M, K);
  if (r.kind == GEMM_B_NONE)
    qp_rows(x, M, w, CKIR_QP_BLOCK(fmt), qp_deq_of(fmt), b, y, N, K);
  else
    ckir_internal_gemm_outs(x, r, &(ckir_gemm_out){w, b, y, N}, 1, 0, M, K);
}

/* ---- reference rows: the row-major block of row n, block bk ------------------- */

/* the q8_0 block (2-byte d, 32 int8) of row n, block bk of a q8_0p matrix */
static void q8p_block(const uint8_t *w, int64_t n, int64_t bk, int64_t K, uint8_t blk[34]) {
  const uint8_t *pb = w + ((n / CKIR_PANEL) * (K / CKIR_QK) + bk) * CKIR_Q8P_BLOCK;
  const int64_t r = n % CKIR_PANEL;
  memcpy(blk, pb + 2 * r, 2);
  for (int i = 0; i < 8; i++) memcpy(blk + 2 + 4 * i, pb + QP_SCALES + i * QP_QUAD + 4 * r, 4);
}

/* the q4_1 block (d, m, qs[16]) of row n, block bk of a q4_1p matrix, or the
 * q4_0 one (d, qs[16]) of a q4_0p matrix */
static void q4p_block(const uint8_t *w, int64_t n, int64_t bk, int64_t K, int fmt,
                      uint8_t blk[20]) {
  const int has_m = fmt == CKIR_QP_Q4_1;
  const uint8_t *pb = w + ((n / CKIR_PANEL) * (K / CKIR_QK) + bk) * CKIR_QP_BLOCK(fmt);
  const int64_t r = n % CKIR_PANEL, qs = has_m ? 4 : 2;
  memcpy(blk, pb + 2 * r, 2);
  if (has_m) memcpy(blk + 2, pb + QP_SCALES + 2 * r, 2);
  for (int g = 0; g < 4; g++)
    memcpy(blk + qs + 4 * g, pb + CKIR_QP_QS(fmt) + g * QP_QUAD + 4 * r, 4);
}

/* the 32 values of row n, block bk (exactly d * q, d * nib + m, or d * (nib - 8)) */
static void qp_values(int fmt, const uint8_t *w, int64_t n, int64_t bk, int64_t K, float *v) {
  uint8_t blk[34];
  if (fmt != CKIR_QP_Q8_0) {
    const int has_m = fmt == CKIR_QP_Q4_1, qs = has_m ? 4 : 2;
    q4p_block(w, n, bk, K, fmt, blk);
    const float d = ckir_internal_f16_to_f32(ckir_q_ld16(blk));
    const float m = has_m ? ckir_internal_f16_to_f32(ckir_q_ld16(blk + 2)) : -8.0f * d;
    for (int j = 0; j < 16; j++) {
      v[j] = (float)(blk[qs + j] & 0x0F) * d + m;
      v[j + 16] = (float)(blk[qs + j] >> 4) * d + m;
    }
  } else {
    q8p_block(w, n, bk, K, blk);
    const float d = ckir_internal_f16_to_f32(ckir_q_ld16(blk));
    const int8_t *q = (const int8_t *)(blk + 2);
    for (int j = 0; j < CKIR_QK; j++) v[j] = (float)q[j] * d;
  }
}

/* x . row n the way gemv_<p> computes it (x quantized: a, dx), scalar */
static float qp_gemv_row_ref(const int8_t *a, const float *dx, const uint8_t *w, int64_t n,
                             int64_t K, int fmt) {
  float s = 0.0f;
  for (int64_t bk = 0; bk < K / CKIR_QK; bk++) {
    uint8_t blk[34];
    const int8_t *ab = a + bk * CKIR_QK;
    int32_t is = 0, t = 0;
    if (fmt != CKIR_QP_Q8_0) {
      const int has_m = fmt == CKIR_QP_Q4_1, qs = has_m ? 4 : 2;
      q4p_block(w, n, bk, K, fmt, blk);
      for (int j = 0; j < 16; j++)
        is += (blk[qs + j] & 0x0F) * ab[j] + (blk[qs + j] >> 4) * ab[j + 16];
      for (int j = 0; j < CKIR_QK; j++) t += ab[j];
      const float d = ckir_internal_f16_to_f32(ckir_q_ld16(blk));
      if (has_m)
        s += (float)is * (d * dx[bk]) +
             ckir_internal_f16_to_f32(ckir_q_ld16(blk + 2)) * (dx[bk] * (float)t);
      else /* d (nib - 8) . a */
        s += (float)(is - 8 * t) * (d * dx[bk]);
    } else {
      q8p_block(w, n, bk, K, blk);
      const int8_t *q = (const int8_t *)(blk + 2);
      for (int j = 0; j < CKIR_QK; j++) is += q[j] * ab[j];
      s += (float)is * (ckir_internal_f16_to_f32(ckir_q_ld16(blk)) * dx[bk]);
    }
  }
  return s;
}

/* x . row n in double against the dequantized weights (gemm's numerics) */
static double qp_gemm_row_ref(const float *x, const uint8_t *w, int64_t n, int64_t K, int fmt) {
  double s = 0.0;
  float v[CKIR_QK];
  for (int64_t bk = 0; bk < K / CKIR_QK; bk++) {
    qp_values(fmt, w, n, bk, K, v);
    for (int j = 0; j < CKIR_QK; j++) s += (double)x[bk * CKIR_QK + j] * v[j];
  }
  return s;
}

/* ---- the public kernels of each dtype ------------------------------------------ */

#if defined(QP_I8)
#if defined(QP_XOR) || defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
#define QP_GEMM_I8 1 /* int8 x, dot products by vpdpbusd */
#else
#define QP_GEMM_I8 2 /* int8 x, dot products by vpmaddubsw + vpmaddwd */
#endif
static void qp_gemm_i8_one(const float *x, const uint8_t *w, const float *b, float *y, int64_t M,
                           int64_t N, int64_t K, int fmt) {
  const ckir_pseg seg = {w, b, y, N, fmt};
  qp_gemm_i8(x, M, K, fmt, &seg, 1, 0);
}
#else
#define QP_GEMM_I8 0
#define qp_gemm_i8_one(...) ((void)0)
#endif
int ckir_runtime_qp_int8_gemm(void) { return QP_GEMM_I8; }

/* 1: this thread's q8_0p / q4_1p GEMMs take fp32 x (the dequantized-panel path) even
 * where the int8 GEMM exists.  Thread-local, so models run by different threads keep
 * their own choice; so it is read by the public kernels on the calling thread, and a
 * kernel whose worker threads run q8_0p / q4_1p GEMMs passes the choice on (the
 * gate_up tiles call ckir_internal_gemm_qp_f32x). */
static _Thread_local int qp_fp32_x;
int ckir_runtime_qp_fp32_x(int on) {
  const int prev = qp_fp32_x;
  qp_fp32_x = on != 0;
  return prev;
}
#define QP_I8_NOW (QP_GEMM_I8 && !qp_fp32_x)
int ckir_internal_qp_fp32_x_on(void) { return qp_fp32_x; }

int ckir_internal_gemm_qkv_qp(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt) {
#if defined(QP_I8)
  if (qp_fp32_x) return 0;
  const ckir_pseg segs[3] = {{w[0], b[0], y[0], N[0], fmt}, {w[1], b[1], y[1], N[1], fmt},
                             {w[2], b[2], y[2], N[2], fmt}};
  qp_gemm_i8(x, M, K, fmt, segs, 3, 0);
  return 1;
#else
  (void)x, (void)w, (void)b, (void)y, (void)N, (void)M, (void)K, (void)fmt;
  return 0;
#endif
}

int ckir_internal_gemm_gate_up_qp(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt) {
#if defined(QP_I8)
  if (qp_fp32_x) return 0;
  const ckir_pseg segs[2] = {{wg, NULL, out, N, fmt}, {wu, NULL, NULL, N, fmt}};
  qp_gemm_i8(x, M, K, fmt, segs, 2, 1);
  return 1;
#else
  (void)x, (void)wg, (void)wu, (void)out, (void)M, (void)N, (void)K, (void)fmt;
  return 0;
#endif
}

/* Every kernel of block panel dtype D (format FMT, CKIR_QP_*) and its reference
 * twin */
#define CKIR_QP_KERNELS(D, FMT)                                                                 \
  CKIR_GEMV_PAIR(D, uint8_t,                                                                    \
                 ckir_internal_pdrv_gemv_one(&QP_DRV, x, w, b, y, N, K, FMT, 0, "gemv_" #D))      \
  void ckir_gemm_bias_##D(const float *x, const uint8_t *w, const float *b, float *y, int64_t M, \
                          int64_t N, int64_t K) {                                                \
    if (QP_I8_NOW)                                                                               \
      qp_gemm_i8_one(x, w, b, y, M, N, K, FMT);                                                \
    else                                                                                         \
      ckir_internal_gemm_qp_f32x(x, w, b, y, M, N, K, FMT);                                    \
  }                                                                                              \
  void ckir_gemm_##D(const float *x, const uint8_t *w, float *y, int64_t M, int64_t N,          \
                     int64_t K) {                                                                \
    ckir_gemm_bias_##D(x, w, NULL, y, M, N, K);                                                  \
  }                                                                                              \
  void ckir_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,       \
                      int64_t E) {                                                               \
    ckir_internal_pdrv_embed(&QP_DRV, FMT, tokens, table, out, T, E, 1, "embed_" #D);            \
  }                                                                                              \
  float ckir_internal_ref_gemv_row_##D(const float *x, const uint8_t *w, int64_t n, int64_t K) { \
    int8_t a[K];                                                                                 \
    float dx[K / CKIR_QK];                                                                       \
    ckir_internal_quantize_x_ref(x, K, a, dx);                                                   \
    return qp_gemv_row_ref(a, dx, w, n, K, FMT);                                               \
  }                                                                                              \
  float ckir_internal_ref_gemm_row_##D(const float *x, const uint8_t *w, int64_t n, int64_t K) { \
    return (float)qp_gemm_row_ref(x, w, n, K, FMT);                                            \
  }                                                                                              \
  void ckir_ref_gemv_bias_##D(const float *x, const uint8_t *w, const float *b, float *y,       \
                              int64_t N, int64_t K) {                                            \
    int8_t a[K];                                                                                 \
    float dx[K / CKIR_QK];                                                                       \
    ckir_internal_quantize_x_ref(x, K, a, dx);                                                   \
    for (int64_t n = 0; n < N; n++)                                                              \
      y[n] = qp_gemv_row_ref(a, dx, w, n, K, FMT) + (b ? b[n] : 0.0f);                         \
  }                                                                                              \
  void ckir_ref_gemv_##D(const float *x, const uint8_t *w, float *y, int64_t N, int64_t K) {    \
    ckir_ref_gemv_bias_##D(x, w, NULL, y, N, K);                                                 \
  }                                                                                              \
  void ckir_ref_gemm_bias_##D(const float *x, const uint8_t *w, const float *b, float *y,       \
                              int64_t M, int64_t N, int64_t K) {                                 \
    for (int64_t m = 0; m < M; m++)                                                              \
      for (int64_t n = 0; n < N; n++)                                                            \
        y[m * N + n] = (float)qp_gemm_row_ref(x + m * K, w, n, K, FMT) + (b ? b[n] : 0.0f);    \
  }                                                                                              \
  void ckir_ref_gemm_##D(const float *x, const uint8_t *w, float *y, int64_t M, int64_t N,      \
                         int64_t K) {                                                            \
    ckir_ref_gemm_bias_##D(x, w, NULL, y, M, N, K);                                              \
  }                                                                                              \
  void ckir_ref_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,   \
                          int64_t E) {                                                           \
    ckir_internal_pdrv_embed(&QP_DRV, FMT, tokens, table, out, T, E, 0, "embed_" #D);            \
  }

CKIR_QP_KERNELS(q8_0p, CKIR_QP_Q8_0)
CKIR_QP_KERNELS(q4_1p, CKIR_QP_Q4_1)
CKIR_QP_KERNELS(q4_0p, CKIR_QP_Q4_0)
