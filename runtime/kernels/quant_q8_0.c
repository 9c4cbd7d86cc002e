/* ckir runtime: linear layers and embeddings with Q8_0 weights.
 *
 * Q8_0 block (34 bytes, 32 weights): f16 d, int8 q[32]; value = d * q.
 *
 * gemv: x is quantized to int8 per block of 32 (ckir_internal_quantize_x);
 * w (signed) x a (signed) is computed with the unsigned x signed vpdpbusd by
 * the sign trick: |w| as the unsigned operand, a with w's sign as the signed
 * one (AVX-512 with VNNI: w + 128 as the unsigned operand and -128 sum a as the
 * accumulator's initial value, see Q8_XOR).  AVX-512 takes two blocks per zmm: the block sums stay in int32 lanes,
 * are converted to fp32 and scaled lane-wise by d_w * d_x (the two block
 * scales are converted together and spread over their 8 lanes with one
 * permute); two accumulators per row.  Each thread streams one contiguous
 * range of rows, one row at a time (a single sequential stream per core got
 * more bandwidth than 2, 4 or 8 interleaved rows), prefetching ahead.
 *
 * gemm: panels of w dequantized to fp32 (ckir_internal_wgemm). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"

#define BLK CKIR_Q8_0_BYTES

/* ---- dequantization (embed, gemm panels) ---------------------------------- */

static void q8_0_deq(const uint8_t *blocks, int64_t nb, float *dst) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = blocks + b * BLK;
    float d = ckir_q_f16(p);
    float *o = dst + b * CKIR_QK;
#if defined(CKIR_AVX512)
    __m512 dv = _mm512_set1_ps(d);
    for (int h = 0; h < 2; h++) {
      __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 2 + 16 * h)));
      _mm512_storeu_ps(o + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(q), dv));
    }
#elif defined(CKIR_AVX2)
    __m256 dv = _mm256_set1_ps(d);
    for (int h = 0; h < 4; h++) {
      __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * h)));
      _mm256_storeu_ps(o + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(q), dv));
    }
#else
    const int8_t *q = (const int8_t *)(p + 2);
    for (int j = 0; j < CKIR_QK; j++) o[j] = (float)q[j] * d;
#endif
  }
}

static void q8_0_deq_ref(const uint8_t *blocks, int64_t nb, float *dst) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = blocks + b * BLK;
    float d = ckir_internal_f16_to_f32(ckir_q_ld16(p));
    const int8_t *q = (const int8_t *)(p + 2);
    for (int j = 0; j < CKIR_QK; j++) dst[b * CKIR_QK + j] = (float)q[j] * d;
  }
}

CKIR_BLOCK_ROWS(q8_0, q8_0_deq, BLK)

void ckir_internal_q8_0_deq(const uint8_t *blocks, int64_t nb, float *dst) {
  q8_0_deq(blocks, nb, dst);
}

/* ---- gemv ---------------------------------------------------------------- */

/* sum over blocks of (int dot of block b) * d_w * d_x, one row, scalar */
static float q8_0_row_scalar(const uint8_t *row, int64_t nb, const int8_t *a, const float *dx) {
  float s = 0.0f;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = row + b * BLK;
    const int8_t *ab = a + b * CKIR_QK;
    /* Read q through an int8_t pointer: GCC 12 with AVX-VNNI turns
     * `(int8_t)uint8_value * int8` dot loops into vpdpbusd (u8 x s8): wrong sums. */
    const int8_t *q = (const int8_t *)(p + 2);
    int32_t is = 0;
    for (int j = 0; j < CKIR_QK; j++) is += q[j] * ab[j];
    s += (float)is * (ckir_internal_f16_to_f32(ckir_q_ld16(p)) * dx[b]);
  }
  return s;
}

#if defined(CKIR_Q512) && defined(__AVX512VNNI__)
/* With VNNI (no int16 saturation inside vpdpbusd): w ^ 0x80 = w + 128 is the
 * unsigned operand, so sum (w + 128) a = sum w a + 128 sum a; the
 * -128 sum a of each group of 4 lanes is precomputed once per call (array c)
 * and is the initial value of the accumulator.  One xor instead of the sign
 * trick's mask, masked subtract and abs. */
#define Q8_XOR 1
#endif

#if defined(CKIR_Q512)
/* acc + the lanes of blocks p, p + BLK (a pair) times a, a + 32, scaled;
 * c: the Q8_XOR initial values of the pair's lanes */
CKIR_INLINE __m512 q8_0_pair(const uint8_t *p, const int8_t *a, const int32_t *c, const float *dx,
                             int64_t pfd, __m512 acc) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
  __builtin_prefetch((const char *)p + pfd, 0, 3); /* a pair spans 68 bytes */
  __builtin_prefetch((const char *)p + pfd + 64, 0, 3);
  __m512i av = _mm512_load_si512((const void *)a);
  __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2))),
                                  _mm256_loadu_si256((const __m256i *)(p + BLK + 2)), 1);
#if defined(Q8_XOR)
  (void)zero;
  __m512i is = CKIR_DPBUSD512(_mm512_load_si512((const void *)c),
                              _mm512_xor_si512(wv, _mm512_set1_epi8((char)0x80)), av);
#else
  (void)c;
  __m512i as = _mm512_mask_sub_epi8(av, _mm512_movepi8_mask(wv), zero, av); /* a * sign(w) */
  __m512i is = CKIR_DPBUSD512(zero, _mm512_abs_epi8(wv), as);
#endif
  /* f16 lanes d0 . d1 . -> fp32; times dx0 dx0 dx1 dx1; spread over 8 lanes each */
  __m128 dxp = _mm_castpd_ps(_mm_load_sd((const double *)dx));
  __m128i dd = _mm_insert_epi32(_mm_cvtsi32_si128(ckir_q_ld32(p)), ckir_q_ld32(p + BLK), 1);
  __m128 sc = _mm_mul_ps(_mm_cvtph_ps(dd), _mm_unpacklo_ps(dxp, dxp));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(is),
                         _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(sc)), acc);
}
#endif

/* one row (nb blocks at row) . quantized x; pfd: prefetch distance in bytes */
static inline float q8_0_row(const uint8_t *row, int64_t nb, const int8_t *a, const int32_t *c,
                             const float *dx, int64_t pfd) {
#if defined(CKIR_Q512)
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(); /* two FMA chains */
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    acc0 = q8_0_pair(row + b * BLK, a + b * CKIR_QK, c + b * 8, dx + b, pfd, acc0);
    acc1 = q8_0_pair(row + (b + 2) * BLK, a + (b + 2) * CKIR_QK, c + (b + 2) * 8, dx + b + 2, pfd,
                     acc1);
  }
  if (b + 2 <= nb) {
    acc0 = q8_0_pair(row + b * BLK, a + b * CKIR_QK, c + b * 8, dx + b, pfd, acc0);
    b += 2;
  }
  float tail = 0.0f;
  if (b < nb) { /* odd last block */
    const uint8_t *p = row + b * BLK;
    __m256i av = _mm256_load_si256((const __m256i *)(a + b * CKIR_QK));
    __m256i wv = _mm256_loadu_si256((const __m256i *)(p + 2));
    __m256i is = CKIR_DPBUSD256(_mm256_setzero_si256(), _mm256_abs_epi8(wv),
                                _mm256_sign_epi8(av, wv));
    tail = (float)ckir_q_hsum_epi32(is) * (ckir_q_f16(p) * dx[b]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail;
#elif defined(CKIR_Q256)
  (void)c;
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *p = row + b * BLK;
    __builtin_prefetch((const char *)p + pfd, 0, 3);
    __m256i av = _mm256_load_si256((const __m256i *)(a + b * CKIR_QK));
    __m256i wv = _mm256_loadu_si256((const __m256i *)(p + 2));
    __m256i is = CKIR_DPBUSD256(_mm256_setzero_si256(), _mm256_abs_epi8(wv),
                                _mm256_sign_epi8(av, wv));
    acc[b & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(ckir_q_f16(p) * dx[b]),
                                 acc[b & 1]);
  }
  return ckir_hsum_ps256(_mm256_add_ps(acc[0], acc[1]));
#else
  (void)pfd, (void)c;
  return q8_0_row_scalar(row, nb, a, dx);
#endif
}

static void gemv_q8_0_impl(const float *x, const uint8_t *w, const float *bias, float *y,
                           int64_t N, int64_t K) {
  const int64_t nb = K / CKIR_QK, rb = nb * BLK;
  uint8_t buf[2 * K + nb * (int64_t)sizeof(float) + 192];
  int8_t *a = CKIR_ALIGN64(buf);
  int32_t *c = (int32_t *)CKIR_ALIGN64(a + K);
  float *dx = (float *)(c + K / 4);
  ckir_internal_quantize_x(x, K, a, dx);
#if defined(Q8_XOR)
  for (int64_t i = 0; i < K / 4; i++)
    c[i] = -128 * ((int32_t)a[4 * i] + a[4 * i + 1] + a[4 * i + 2] + a[4 * i + 3]);
#endif
  const int64_t pfd = ckir_q_pf_distance(rb);
  /* each thread streams one contiguous range of rows */
  CKIR_SHARED_RANGE(N * K >= CKIR_GEMV_PAR_MIN && N > 1, N, lo, hi, {
    ckir_q_prefetch(w + lo * rb, CKIR_MIN(pfd, (hi - lo) * rb));
    for (int64_t n = lo; n < hi; n++)
      y[n] = q8_0_row(w + n * rb, nb, a, c, dx, pfd) + (bias ? bias[n] : 0.0f);
  });
}

CKIR_GEMV_PAIR(q8_0, uint8_t, gemv_q8_0_impl(x, w, b, y, N, K))

/* ---- gemm, embed ------------------------------------------------------------ */

CKIR_GEMM_PAIR(q8_0, uint8_t, ckir_internal_wgemm(x, w, q8_0_wrow, b, y, M, N, K))
CKIR_EMBED_BLOCKS(q8_0, q8_0_deq, BLK)

/* ---- reference twins ------------------------------------------------------ */

void ckir_ref_gemv_bias_q8_0(const float *x, const uint8_t *w, const float *b, float *y,
                             int64_t N, int64_t K) {
  const int64_t nb = K / CKIR_QK;
  int8_t a[K];
  float dx[nb];
  ckir_internal_quantize_x_ref(x, K, a, dx);
  for (int64_t n = 0; n < N; n++)
    y[n] = q8_0_row_scalar(w + n * nb * BLK, nb, a, dx) + (b ? b[n] : 0.0f);
}

void ckir_ref_gemv_q8_0(const float *x, const uint8_t *w, float *y, int64_t N, int64_t K) {
  ckir_ref_gemv_bias_q8_0(x, w, NULL, y, N, K);
}

void ckir_ref_gemm_bias_q8_0(const float *x, const uint8_t *w, const float *b, float *y,
                             int64_t M, int64_t N, int64_t K) {
  const int64_t nb = K / CKIR_QK;
  float v[CKIR_QK];
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t bk = 0; bk < nb; bk++) {
        q8_0_deq_ref(w + (n * nb + bk) * BLK, 1, v);
        for (int j = 0; j < CKIR_QK; j++) s += (double)x[m * K + bk * CKIR_QK + j] * v[j];
      }
      y[m * N + n] = (float)s + (b ? b[n] : 0.0f);
    }
}

void ckir_ref_gemm_q8_0(const float *x, const uint8_t *w, float *y, int64_t M, int64_t N,
                        int64_t K) {
  ckir_ref_gemm_bias_q8_0(x, w, NULL, y, M, N, K);
}

void ckir_ref_embed_q8_0(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,
                         int64_t E) {
  const int64_t nb = E / CKIR_QK;
  for (int64_t t = 0; t < T; t++)
    q8_0_deq_ref(table + (int64_t)tokens[t] * nb * BLK, nb, out + t * E);
}
