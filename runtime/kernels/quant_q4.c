/* ckir runtime: linear layers and embeddings with Q4_0 and Q4_1 weights.
 *
 * Q4_0 block (18 bytes, 32 weights): f16 d, uint8 qs[16]; value = d * (nib - 8)
 * Q4_1 block (20 bytes, 32 weights): f16 d, f16 m, uint8 qs[16]; value = d * nib + m
 * with nib[j] = qs[j] & 0xF and nib[j + 16] = qs[j] >> 4 for j < 16.
 *
 * gemv: x is quantized to int8 a per block of 32 (scale d_x).  The unsigned
 * nibbles 0..15 meet the signed a in vpdpbusd, so
 *   Q4_0: sum (nib - 8) a = sum nib*a - 8 sum a; the -8 sum a term of each
 *         group of 4 lanes is precomputed once per call (array c) and is the
 *         initial value of the vpdpbusd accumulator, so it costs nothing per row;
 *         row sum += d_w d_x (that), in fp32.
 *   Q4_1: row sum += d_w d_x sum nib*a + m * sx, where sx = d_x sum a is the
 *         sum of the quantized block of x, so the row is exactly the dequantized
 *         weight d*nib + m times the quantized x.  (Using the exact fp32 sum of x
 *         instead leaves only d*nib facing the rounding, but d*nib ranges over
 *         [0, max - min] while d*nib + m is centred on 0: on SmolLM2-135M the
 *         decode logits' max relative error drops from 0.073 to 0.040.)
 * AVX-512 handles two blocks per zmm.  The 32 qs bytes of a block pair are
 * split into nibbles as [lo0 | lo1 | hi0 | hi1] (128-bit lanes), so a is stored
 * in that order too (per pair: a0[0:16] a1[0:16] a0[16:32] a1[16:32]); an odd
 * last block uses a ymm in natural order.  Q4_1 takes four blocks per step
 * where it can (q4_1_quad: one dword permute gathers their 64 qs bytes, a
 * stored per quad as a0..a3 [0:16] then a0..a3 [16:32]), about half the
 * vector instructions per block of the pair step.  The two f16 scales (and Q4_1 mins)
 * of a pair are converted with one vcvtph2ps and spread with one permute.
 * AVX2 (no VNNI: vpmaddubsw + vpmaddwd) runs two weight rows per pass over
 * the activation blocks (q4_rows2).
 *
 * gemm: panels of w dequantized to fp32 (ckir_internal_wgemm). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"

#define B40 CKIR_Q4_0_BYTES
#define B41 CKIR_Q4_1_BYTES

/* ---- dequantization ---------------------------------------------------------- */

/* dst[0..32) = the 32 values of one block; qs = the 16 nibble bytes, d, m scale
 * and offset, `off` = 8 (q4_0) or 0 (q4_1), m added only when has_m. */
CKIR_INLINE void q4_deq_block(const uint8_t *qs, float d, float m, const int off, const int has_m,
                              float *dst) {
#if defined(CKIR_AVX512)
  __m128i v = _mm_loadu_si128((const __m128i *)qs);
  __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0F));
  __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
  __m512 dv = _mm512_set1_ps(d), mv = _mm512_set1_ps(m);
  __m512i o = _mm512_set1_epi32(off);
  __m512 f0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(lo), o)), dv);
  __m512 f1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(hi), o)), dv);
  if (has_m) { /* d*nib is exact in fp32: fused or not, (d*nib)+m rounds once */
    f0 = _mm512_add_ps(f0, mv);
    f1 = _mm512_add_ps(f1, mv);
  }
  _mm512_storeu_ps(dst, f0);
  _mm512_storeu_ps(dst + 16, f1);
#elif defined(CKIR_AVX2)
  __m128i v = _mm_loadu_si128((const __m128i *)qs);
  __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0F));
  __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
  __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
  __m256i o = _mm256_set1_epi32(off);
  __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; i++) {
    __m256 f = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[i]), o)), dv);
    if (has_m) f = _mm256_add_ps(f, mv);
    _mm256_storeu_ps(dst + 8 * i, f);
  }
#else
  for (int j = 0; j < 16; j++) {
    float a = (float)((qs[j] & 0x0F) - off) * d, b = (float)((qs[j] >> 4) - off) * d;
    if (has_m) a += m, b += m;
    dst[j] = a;
    dst[j + 16] = b;
  }
#endif
}

static void q4_0_deq(const uint8_t *blocks, int64_t nb, float *dst) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = blocks + b * B40;
    q4_deq_block(p + 2, ckir_q_f16(p), 0.0f, 8, 0, dst + b * CKIR_QK);
  }
}

static void q4_1_deq(const uint8_t *blocks, int64_t nb, float *dst) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = blocks + b * B41;
    q4_deq_block(p + 4, ckir_q_f16(p), ckir_q_f16(p + 2), 0, 1, dst + b * CKIR_QK);
  }
}

/* plain scalar dequantization (reference twins) */
static void q4_deq_ref(const uint8_t *blocks, int64_t nb, int has_m, float *dst) {
  const int64_t bb = has_m ? B41 : B40;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = blocks + b * bb;
    float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
    float m = has_m ? ckir_internal_f16_to_f32(ckir_q_ld16(p + 2)) : 0.0f;
    const uint8_t *qs = p + (has_m ? 4 : 2);
    for (int j = 0; j < 32; j++) {
      int nib = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
      float v;
      if (has_m)
        v = (float)nib * d + m;
      else
        v = (float)(nib - 8) * d;
      dst[b * CKIR_QK + j] = v;
    }
  }
}

CKIR_BLOCK_ROWS(q4_0, q4_0_deq, B40)
CKIR_BLOCK_ROWS(q4_1, q4_1_deq, B41)

/* ---- activations ------------------------------------------------------------- */

/* Quantized x in the layout the rows kernels read. */
typedef struct {
  int8_t *a;   /* [K] int8 activations (vector layout, see top) */
  int32_t *c;  /* [K/4] q4_0: -8 * sum of each 4 consecutive a (same layout) */
  float *dx;   /* [K/32] block scales */
  float *dxs;  /* [2*K/32] q4_1: dx[b], sx[b] interleaved */
} q4_act;

/* bytes of stack q4_prepare needs for K */
#define Q4_ACT_BYTES(K) ((K) * 2 + ((K) / CKIR_QK) * 16 + 256)

static q4_act q4_prepare(const float *x, int64_t K, int has_m, uint8_t *buf, int ref) {
  const int64_t nb = K / CKIR_QK;
  q4_act s;
  s.a = CKIR_ALIGN64(buf);
  s.c = (int32_t *)CKIR_ALIGN64(s.a + K);
  s.dx = (float *)(s.c + K / 4);
  s.dxs = s.dx + nb;
  if (ref)
    ckir_internal_quantize_x_ref(x, K, s.a, s.dx);
  else
    ckir_internal_quantize_x(x, K, s.a, s.dx);
  if (has_m) { /* dx[b] and sx[b] = dx[b] * sum of the block's a (natural layout) */
    for (int64_t b = 0; b < nb; b++) {
      int32_t t = 0;
      for (int j = 0; j < CKIR_QK; j++) t += s.a[b * CKIR_QK + j];
      s.dxs[2 * b] = s.dx[b], s.dxs[2 * b + 1] = s.dx[b] * (float)t;
    }
  }
  if (!ref) {
#if defined(CKIR_Q512)
    int64_t b0 = 0;
    if (has_m) /* q4_1 quads: a0[0:16] a1[0:16] a2[0:16] a3[0:16] a0[16:32] .. a3[16:32] */
      for (; b0 + 4 <= nb; b0 += 4) {
        int8_t t[4 * CKIR_QK];
        int8_t *p = s.a + b0 * CKIR_QK;
        for (int i = 0; i < 4; i++) {
          memcpy(t + 16 * i, p + CKIR_QK * i, 16);
          memcpy(t + 64 + 16 * i, p + CKIR_QK * i + 16, 16);
        }
        memcpy(p, t, sizeof t);
      }
    for (int64_t b = b0; b + 2 <= nb; b += 2) { /* swap a0[16:32] and a1[0:16] */
      int8_t t[16];
      int8_t *p = s.a + b * CKIR_QK;
      memcpy(t, p + 16, 16);
      memcpy(p + 16, p + 32, 16);
      memcpy(p + 32, t, 16);
    }
#endif
  }
  if (!has_m) {
    for (int64_t i = 0; i < K / 4; i++)
      s.c[i] = -8 * ((int32_t)s.a[4 * i] + s.a[4 * i + 1] + s.a[4 * i + 2] + s.a[4 * i + 3]);
  }
  return s;
}

/* ---- gemv rows ---------------------------------------------------------------- */

/* one row, scalar, natural layout (reference and the scalar build) */
static float q4_row_scalar(const uint8_t *row, int64_t nb, const q4_act *s, int has_m) {
  const int64_t bb = has_m ? B41 : B40;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = row + b * bb;
    const uint8_t *qs = p + (has_m ? 4 : 2);
    const int8_t *ab = s->a + b * CKIR_QK;
    int32_t is = 0;
    for (int j = 0; j < 16; j++) is += (qs[j] & 0x0F) * ab[j] + (qs[j] >> 4) * ab[j + 16];
    float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
    if (has_m) {
      float m = ckir_internal_f16_to_f32(ckir_q_ld16(p + 2));
      acc += (float)is * (d * s->dxs[2 * b]) + m * s->dxs[2 * b + 1];
    } else {
      for (int i = 0; i < 8; i++) is += s->c[b * 8 + i];
      acc += (float)is * (d * s->dx[b]);
    }
  }
  return acc;
}

#if defined(CKIR_Q512)
/* acc + the lanes of the block pair at p (blocks b, b+1) times the activations;
 * for q4_1 also macc += (., m0 sx0, ., m1 sx1) */
CKIR_INLINE __m512 q4_pair(const uint8_t *p, const q4_act *s, int64_t b, int64_t pfd, __m512 acc,
                           __m128 *macc, const int has_m) {
  const int64_t bb = has_m ? B41 : B40, qoff = has_m ? 4 : 2;
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2);
  __builtin_prefetch((const char *)p + pfd, 0, 3);
  __m512i av = _mm512_load_si512((const void *)(s->a + b * CKIR_QK));
  __m512i init = has_m ? _mm512_setzero_si512() : _mm512_load_si512((const void *)(s->c + b * 8));
  __m128 mul; /* lanes: dx0 (dx0|sx0) dx1 (dx1|sx1) matching f16 lanes d0 (.|m0) d1 (.|m1) */
  if (has_m) {
    mul = _mm_loadu_ps(s->dxs + 2 * b);
  } else {
    mul = _mm_castpd_ps(_mm_load_sd((const double *)(s->dx + b)));
    mul = _mm_unpacklo_ps(mul, mul);
  }
  __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + qoff))),
                                      _mm_loadu_si128((const __m128i *)(p + bb + qoff)), 1);
  __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
  __m512i is = CKIR_DPBUSD512(init, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)), av);
  __m128i dd = _mm_insert_epi32(_mm_cvtsi32_si128(ckir_q_ld32(p)), ckir_q_ld32(p + bb), 1);
  __m128 t = _mm_mul_ps(_mm_cvtph_ps(dd), mul);
  if (has_m) *macc = _mm_add_ps(*macc, t); /* lanes 1, 3: m * sx */
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(is),
                         _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(t)), acc);
}
#endif

#if defined(CKIR_Q512)
/* q4_1: acc + the lanes of the 4 blocks at p (b .. b+3, 80 bytes) times the
 * activations (quad layout, see q4_prepare); macc += (d dx, m sx) per block.
 * The qs of the 4 blocks start at dwords 1, 6, 11, 16 of p: one two-source
 * dword permute gathers them into one zmm, whose low and high nibbles meet the
 * activations in two vpdpbusd (lanes 4k..4k+3: block k); the 4 (d, m) pairs
 * (dwords 0, 5, 10, 15) come out of one permute and one vcvtph2ps. */
CKIR_INLINE __m512 q4_1_quad(const uint8_t *p, const q4_act *s, int64_t b, int64_t pfd,
                             __m512 acc, __m256 *macc) {
  const __m512i qidx = _mm512_setr_epi32(1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 28, 29, 30, 31);
  const __m512i sidx = _mm512_setr_epi32(0, 5, 10, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i fidx = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __builtin_prefetch((const char *)p + pfd, 0, 3); /* 80 bytes: one or two lines */
  __builtin_prefetch((const char *)p + pfd + 64, 0, 3);
  const __m512i z0 = _mm512_loadu_si512((const void *)p);
  const __m512i z1 = _mm512_loadu_si512((const void *)(p + 16)); /* dwords 4..19 */
  const __m512i q = _mm512_permutex2var_epi32(z0, qidx, z1);
  const int8_t *a = s->a + b * CKIR_QK;
  __m512i is = CKIR_DPBUSD512(_mm512_setzero_si512(), _mm512_and_si512(q, m4),
                              _mm512_load_si512((const void *)a));
  is = CKIR_DPBUSD512(is, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
                      _mm512_load_si512((const void *)(a + 64)));
  const __m128i dm = _mm512_castsi512_si128(_mm512_permutexvar_epi32(sidx, z0));
  const __m256 t = _mm256_mul_ps(_mm256_cvtph_ps(dm), _mm256_loadu_ps(s->dxs + 2 * b));
  *macc = _mm256_add_ps(*macc, t); /* odd lanes: m * sx */
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(is),
                         _mm512_permutexvar_ps(fidx, _mm512_castps256_ps512(t)), acc);
}
#endif

#if !defined(CKIR_Q256) /* AVX2 runs two rows a pass: q4_rows2 below */
/* one row . quantized x; has_m selects q4_1; pfd: prefetch distance in bytes */
CKIR_INLINE float q4_row(const uint8_t *row, int64_t nb, const q4_act *s, int64_t pfd,
                         const int has_m) {
  const int64_t bb = has_m ? B41 : B40, qoff = has_m ? 4 : 2;
#if defined(CKIR_Q512)
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(); /* two FMA chains */
  __m128 macc = _mm_setzero_ps();
  int64_t b = 0;
  if (has_m) {
    __m256 qm = _mm256_setzero_ps();
    for (; b + 8 <= nb; b += 8) {
      acc0 = q4_1_quad(row + b * bb, s, b, pfd, acc0, &qm);
      acc1 = q4_1_quad(row + (b + 4) * bb, s, b + 4, pfd, acc1, &qm);
    }
    if (b + 4 <= nb) {
      acc0 = q4_1_quad(row + b * bb, s, b, pfd, acc0, &qm);
      b += 4;
    }
    macc = _mm_add_ps(_mm256_castps256_ps128(qm), _mm256_extractf128_ps(qm, 1));
  }
  for (; b + 4 <= nb; b += 4) {
    acc0 = q4_pair(row + b * bb, s, b, pfd, acc0, &macc, has_m);
    acc1 = q4_pair(row + (b + 2) * bb, s, b + 2, pfd, acc1, &macc, has_m);
  }
  if (b + 2 <= nb) {
    acc0 = q4_pair(row + b * bb, s, b, pfd, acc0, &macc, has_m);
    b += 2;
  }
  float tail = 0.0f;
  if (b < nb) { /* odd last block: ymm, natural order */
    const uint8_t *p = row + b * bb;
    __m256i av = _mm256_load_si256((const __m256i *)(s->a + b * CKIR_QK));
    __m256i init = has_m ? _mm256_setzero_si256() : _mm256_load_si256((const __m256i *)(s->c + b * 8));
    __m128i q = _mm_loadu_si128((const __m128i *)(p + qoff));
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    __m256i is = CKIR_DPBUSD256(init, _mm256_and_si256(v, _mm256_set1_epi8(0x0F)), av);
    tail = (float)ckir_q_hsum_epi32(is) * (ckir_q_f16(p) * s->dx[b]);
    if (has_m) tail += ckir_q_f16(p + 2) * s->dxs[2 * b + 1];
  }
  float m = 0.0f;
  if (has_m) {
    float l[4];
    _mm_storeu_ps(l, macc);
    m = l[1] + l[3];
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + m + tail;
#else
  (void)bb, (void)qoff, (void)pfd;
  return q4_row_scalar(row, nb, s, has_m);
#endif
}
#endif

#if defined(CKIR_Q256)
/* rows `row` and `row + rb` . quantized x -> out[0], out[1] (rb = 0: one row,
 * computed twice).  Sharing a pass between two rows loads each activation
 * block once for both, and the scales of both blocks come in one vcvtph2ps:
 * lanes (d0, m0, d1, m1) times (dx, sx, dx, sx) give the d*dx factors of the
 * int dot products and, in lanes 1 and 3, the q4_1 min terms m*sx.  AVX2
 * without VNNI spends ~10 cycles per block per row one at a time (the nibble
 * split, the two-instruction int8 dot and two scalar f16 conversions), so
 * q4 decode is compute-bound here; two rows a pass cut the work per block. */
CKIR_INLINE void q4_rows2(const uint8_t *row, int64_t rb, int64_t nb, const q4_act *s,
                          int64_t pfd, const int has_m, float out[2]) {
  const int64_t bb = has_m ? B41 : B40, qoff = has_m ? 4 : 2;
  const __m256i nib = _mm256_set1_epi8(0x0F);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m128 macc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p0 = row + b * bb, *p1 = p0 + rb;
    __builtin_prefetch((const char *)p0 + pfd, 0, 3);
    __builtin_prefetch((const char *)p1 + pfd, 0, 3);
    const __m256i av = _mm256_load_si256((const __m256i *)(s->a + b * CKIR_QK));
    const __m256i init =
        has_m ? _mm256_setzero_si256() : _mm256_load_si256((const __m256i *)(s->c + b * 8));
    const __m128i q0 = _mm_loadu_si128((const __m128i *)(p0 + qoff));
    const __m128i q1 = _mm_loadu_si128((const __m128i *)(p1 + qoff));
    const __m256i v0 = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), _mm_srli_epi16(q0, 4), 1);
    const __m256i v1 = _mm256_inserti128_si256(_mm256_castsi128_si256(q1), _mm_srli_epi16(q1, 4), 1);
    const __m256i is0 = CKIR_DPBUSD256(init, _mm256_and_si256(v0, nib), av);
    const __m256i is1 = CKIR_DPBUSD256(init, _mm256_and_si256(v1, nib), av);
    /* (d0, m0, d1, m1) as f16; q4_0 has no m: those lanes hold qs bytes, unused */
    const __m128i dd = _mm_insert_epi32(_mm_cvtsi32_si128(ckir_q_ld32(p0)), ckir_q_ld32(p1), 1);
    __m128 mul;
    if (has_m) {
      mul = _mm_castpd_ps(_mm_loaddup_pd((const double *)(s->dxs + 2 * b)));
    } else {
      mul = _mm_set1_ps(s->dx[b]);
    }
    const __m128 t = _mm_mul_ps(_mm_cvtph_ps(dd), mul);
    if (has_m) macc = _mm_add_ps(macc, t);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is0), _mm256_broadcastss_ps(t), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is1), _mm256_broadcastss_ps(_mm_movehl_ps(t, t)),
                           acc1);
  }
  float m[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (has_m) _mm_storeu_ps(m, macc);
  out[0] = ckir_hsum_ps256(acc0) + m[1];
  out[1] = ckir_hsum_ps256(acc1) + m[3];
}
#endif

/* rows [lo, hi) of the GEMV, on the calling thread */
CKIR_INLINE void q4_gemv_rows(const uint8_t *w, int64_t rb, int64_t nb, const q4_act *sp,
                              int64_t pfd, const float *bias, float *y, int64_t lo, int64_t hi,
                              const int has_m) {
  const q4_act s = *sp;
  ckir_q_prefetch(w + lo * rb, CKIR_MIN(pfd, (hi - lo) * rb));
#if defined(CKIR_Q256)
  for (int64_t n = lo; n < hi; n += 2) {
    float o[2];
    const int64_t step = n + 1 < hi ? rb : 0; /* an odd last row runs alone */
    if (has_m)
      q4_rows2(w + n * rb, step, nb, &s, pfd, 1, o);
    else
      q4_rows2(w + n * rb, step, nb, &s, pfd, 0, o);
    y[n] = o[0] + (bias ? bias[n] : 0.0f);
    if (n + 1 < hi) y[n + 1] = o[1] + (bias ? bias[n + 1] : 0.0f);
  }
#else
  for (int64_t n = lo; n < hi; n++) {
    float v = has_m ? q4_row(w + n * rb, nb, &s, pfd, 1) : q4_row(w + n * rb, nb, &s, pfd, 0);
    y[n] = v + (bias ? bias[n] : 0.0f);
  }
#endif
}

static void gemv_q4_impl(const float *x, const uint8_t *w, const float *bias, float *y,
                         int64_t N, int64_t K, const int has_m) {
  const int64_t nb = K / CKIR_QK, rb = nb * (has_m ? B41 : B40);
  uint8_t buf[Q4_ACT_BYTES(K)];
  const q4_act s = q4_prepare(x, K, has_m, buf, 0);
  const int64_t pfd = ckir_q_pf_distance(rb);
  /* each thread streams one contiguous range of rows */
  CKIR_SHARED_RANGE(N * K >= CKIR_GEMV_PAR_MIN && N > 1, N, lo, hi,
                    q4_gemv_rows(w, rb, nb, &s, pfd, bias, y, lo, hi, has_m););
}

static void ref_gemv_q4(const float *x, const uint8_t *w, const float *bias, float *y, int64_t N,
                        int64_t K, int has_m) {
  const int64_t nb = K / CKIR_QK, rb = nb * (has_m ? B41 : B40);
  uint8_t buf[Q4_ACT_BYTES(K)];
  const q4_act s = q4_prepare(x, K, has_m, buf, 1);
  for (int64_t n = 0; n < N; n++) y[n] = q4_row_scalar(w + n * rb, nb, &s, has_m) + (bias ? bias[n] : 0.0f);
}

/* ---- public kernels ------------------------------------------------------------ */

CKIR_GEMV_PAIR(q4_0, uint8_t, gemv_q4_impl(x, w, b, y, N, K, 0))
CKIR_GEMV_PAIR(q4_1, uint8_t, gemv_q4_impl(x, w, b, y, N, K, 1))
CKIR_GEMM_PAIR(q4_0, uint8_t, ckir_internal_wgemm(x, w, q4_0_wrow, b, y, M, N, K))
CKIR_GEMM_PAIR(q4_1, uint8_t, ckir_internal_wgemm(x, w, q4_1_wrow, b, y, M, N, K))
CKIR_EMBED_BLOCKS(q4_0, q4_0_deq, B40)
CKIR_EMBED_BLOCKS(q4_1, q4_1_deq, B41)

/* ---- reference twins ------------------------------------------------------------ */

CKIR_REF_GEMV_PAIR(q4_0, uint8_t, ref_gemv_q4(x, w, b, y, N, K, 0))
CKIR_REF_GEMV_PAIR(q4_1, uint8_t, ref_gemv_q4(x, w, b, y, N, K, 1))
CKIR_REF_GEMM_PAIR(q4_0, uint8_t,
                   ckir_internal_ref_block_gemm(x, w, b, y, M, N, K, q4_deq_ref, B40, 0))
CKIR_REF_GEMM_PAIR(q4_1, uint8_t,
                   ckir_internal_ref_block_gemm(x, w, b, y, M, N, K, q4_deq_ref, B41, 1))
void ckir_ref_embed_q4_0(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,
                         int64_t E) {
  ckir_internal_ref_block_embed(tokens, table, out, T, E, q4_deq_ref, B40, 0);
}
void ckir_ref_embed_q4_1(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,
                         int64_t E) {
  ckir_internal_ref_block_embed(tokens, table, out, T, E, q4_deq_ref, B41, 1);
}
