/* ckir runtime: causal multi-head / grouped-query attention over the KV cache.
 *
 * One (query t, head h) pair is one unit of work; pairs are spread over OpenMP
 * threads round-robin (pair = t*H + h, schedule(static, 1)), which balances the
 * causal triangle.  Keys are visited in blocks of ATTN_KB (16 on AVX-512, 8 on
 * AVX2): the block's scores live in registers / a small stack array, the
 * running max and sum are updated once per block (online softmax), and the
 * output accumulator (<= 256 floats) lives on the stack.  No T x T scores.
 * AVX2 keeps the FMA pipes fed: a block's 8 scores are 8 independent chains
 * (chunks of D outer, keys inner) reduced by one 8-way horizontal sum, and
 * p . V runs four 8-float chunks of D at a time (SmolLM-135M shape, decode at
 * position ~160: attention 1.44 -> 0.89 ms per token, measured with
 * `ckir bench --profile`). */
#include "ckir_internal.h"

#define ATTN_MAX_D 256

/* ---- reference: two passes (max, then exp-weighted sum), double precision --- */

static void attn_row_ref(const float *qr, const float *kb, const float *vb, int64_t stride,
                         int64_t L, int64_t D, float *out) {
  double scale = 1.0 / sqrt((double)D);
  double mx = -INFINITY;
  for (int64_t j = 0; j < L; j++) {
    double s = 0.0;
    for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
    s *= scale;
    mx = s > mx ? s : mx;
  }
  double acc[ATTN_MAX_D];
  double sum = 0.0;
  for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
  for (int64_t j = 0; j < L; j++) {
    double s = 0.0;
    for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
    double p = exp(s * scale - mx);
    sum += p;
    for (int64_t d = 0; d < D; d++) acc[d] += p * vb[j * stride + d];
  }
  for (int64_t d = 0; d < D; d++) out[d] = (float)(acc[d] / sum);
}

void ckir_ref_attention_f32(const float *q, const float *kcache, const float *vcache, float *out,
                            int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {
  int64_t group = H / KV, stride = KV * D;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      int64_t g = h / group;
      attn_row_ref(q + (t * H + h) * D, kcache + g * D, vcache + g * D, stride, P + t + 1, D,
                   out + (t * H + h) * D);
    }
}

/* ---- SIMD rows ---------------------------------------------------------- */

#if defined(CKIR_AVX512)
static void attn_row(const float *qr, const float *kb, const float *vb, int64_t stride, int64_t L,
                     int64_t D, float *out) {
  float qs[ATTN_MAX_D] __attribute__((aligned(64)));
  float acc[ATTN_MAX_D] __attribute__((aligned(64)));
  float pj[16] __attribute__((aligned(64)));
  const int64_t nc = (D + 15) / 16;
  const __mmask16 tail = ckir_mask16(D - (nc - 1) * 16);
  const __m512 vscale = _mm512_set1_ps(1.0f / sqrtf((float)D));
  for (int64_t c = 0; c < nc; c++) {
    __mmask16 m = c == nc - 1 ? tail : 0xFFFF;
    _mm512_store_ps(qs + 16 * c, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, qr + 16 * c), vscale));
    _mm512_store_ps(acc + 16 * c, _mm512_setzero_ps());
  }
  float mrun = -INFINITY, lrun = 0.0f;
  for (int64_t j0 = 0; j0 < L; j0 += 16) {
    const int64_t nk = CKIR_MIN(16, L - j0);
    const __mmask16 km = ckir_mask16(nk);
    __m512 part[16];
    for (int j = 0; j < 16; j++) part[j] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nk; j++) {
      const float *kr = kb + (j0 + j) * stride;
      __m512 a = _mm512_setzero_ps();
      for (int64_t c = 0; c < nc; c++) {
        __mmask16 m = c == nc - 1 ? tail : 0xFFFF;
        a = _mm512_fmadd_ps(_mm512_load_ps(qs + 16 * c), _mm512_maskz_loadu_ps(m, kr + 16 * c), a);
      }
      part[j] = a;
    }
    __m512 s = ckir_hsum16_ps512(part);
    float bmax = _mm512_mask_reduce_max_ps(km, s);
    float mnew = bmax > mrun ? bmax : mrun;
    __m512 p = _mm512_maskz_mov_ps(km, ckv_exp(_mm512_sub_ps(s, _mm512_set1_ps(mnew))));
    float corr = expf(mrun - mnew);
    lrun = lrun * corr + _mm512_reduce_add_ps(p);
    mrun = mnew;
    _mm512_store_ps(pj, p);
    const __m512 vcorr = _mm512_set1_ps(corr);
    for (int64_t c = 0; c < nc; c++) {
      __mmask16 m = c == nc - 1 ? tail : 0xFFFF;
      __m512 a = _mm512_mul_ps(_mm512_load_ps(acc + 16 * c), vcorr);
      for (int64_t j = 0; j < nk; j++)
        a = _mm512_fmadd_ps(_mm512_set1_ps(pj[j]),
                            _mm512_maskz_loadu_ps(m, vb + (j0 + j) * stride + 16 * c), a);
      _mm512_store_ps(acc + 16 * c, a);
    }
  }
  const __m512 inv = _mm512_set1_ps(1.0f / lrun);
  for (int64_t c = 0; c < nc; c++) {
    __mmask16 m = c == nc - 1 ? tail : 0xFFFF;
    _mm512_mask_storeu_ps(out + 16 * c, m, _mm512_mul_ps(_mm512_load_ps(acc + 16 * c), inv));
  }
}
#elif defined(CKIR_AVX2)
static void attn_row(const float *qr, const float *kb, const float *vb, int64_t stride, int64_t L,
                     int64_t D, float *out) {
  float qs[ATTN_MAX_D + 8] __attribute__((aligned(32)));
  float acc[ATTN_MAX_D + 8] __attribute__((aligned(32)));
  float sj[8] __attribute__((aligned(32)));
  const int64_t nc = (D + 7) / 8;
  const __m256i tail = ckir_mask8(D - (nc - 1) * 8);
  const __m256i full = _mm256_set1_epi32(-1);
  const float scale = 1.0f / sqrtf((float)D);
  for (int64_t c = 0; c < nc; c++) {
    __m256i m = c == nc - 1 ? tail : full;
    _mm256_store_ps(qs + 8 * c,
                    _mm256_mul_ps(_mm256_maskload_ps(qr + 8 * c, m), _mm256_set1_ps(scale)));
    _mm256_store_ps(acc + 8 * c, _mm256_setzero_ps());
  }
  float mrun = -INFINITY, lrun = 0.0f;
  for (int64_t j0 = 0; j0 < L; j0 += 8) {
    const int64_t nk = CKIR_MIN(8, L - j0);
    const __m256 kmask = _mm256_castsi256_ps(ckir_mask8(nk));
    /* keys inner, chunks outer: nk independent FMA chains instead of one per key */
    const float *kr = kb + j0 * stride;
    __m256 part[8];
    for (int64_t j = 0; j < 8; j++) part[j] = _mm256_setzero_ps();
    for (int64_t c = 0; c + 1 < nc; c++) {
      const __m256 qc = _mm256_load_ps(qs + 8 * c);
      if (nk == 8) {
        for (int j = 0; j < 8; j++)
          part[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kr + j * stride + 8 * c), part[j]);
      } else {
        for (int64_t j = 0; j < nk; j++)
          part[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kr + j * stride + 8 * c), part[j]);
      }
    }
    const __m256 ql = _mm256_load_ps(qs + 8 * (nc - 1));
    for (int64_t j = 0; j < nk; j++)
      part[j] = _mm256_fmadd_ps(ql, _mm256_maskload_ps(kr + j * stride + 8 * (nc - 1), tail), part[j]);
    /* the block's scores in one vector; lanes >= nk are -inf for the max */
    const __m256 s = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), ckir_hsum8_ps256(part), kmask);
    const float bmax = ckir_hmax_ps256(s);
    float mnew = bmax > mrun ? bmax : mrun;
    __m256 p = ckv_exp(_mm256_sub_ps(s, _mm256_set1_ps(mnew)));
    p = _mm256_and_ps(p, kmask);
    float corr = expf(mrun - mnew);
    lrun = lrun * corr + ckir_hsum_ps256(p);
    mrun = mnew;
    _mm256_store_ps(sj, p);
    const __m256 vcorr = _mm256_set1_ps(corr);
    /* acc += p . V: four chunks at a time (four independent FMA chains), keys inner */
    const float *vr = vb + j0 * stride;
    int64_t c = 0;
    for (; c + 4 < nc; c += 4) {
      __m256 a[4];
      for (int i = 0; i < 4; i++) a[i] = _mm256_mul_ps(_mm256_load_ps(acc + 8 * (c + i)), vcorr);
      for (int64_t j = 0; j < nk; j++) {
        const __m256 pj = _mm256_set1_ps(sj[j]);
        for (int i = 0; i < 4; i++)
          a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + j * stride + 8 * (c + i)), a[i]);
      }
      for (int i = 0; i < 4; i++) _mm256_store_ps(acc + 8 * (c + i), a[i]);
    }
    for (; c < nc; c++) {
      const __m256i m = c + 1 < nc ? full : tail;
      __m256 a = _mm256_mul_ps(_mm256_load_ps(acc + 8 * c), vcorr);
      for (int64_t j = 0; j < nk; j++)
        a = _mm256_fmadd_ps(_mm256_set1_ps(sj[j]), _mm256_maskload_ps(vr + j * stride + 8 * c, m), a);
      _mm256_store_ps(acc + 8 * c, a);
    }
  }
  const float inv = 1.0f / lrun;
  for (int64_t d = 0; d < D; d++) out[d] = acc[d] * inv;
}
#else
/* Scalar path: online softmax one key at a time, float accumulation. */
static void attn_row(const float *qr, const float *kb, const float *vb, int64_t stride, int64_t L,
                     int64_t D, float *out) {
  float acc[ATTN_MAX_D];
  const float scale = 1.0f / sqrtf((float)D);
  float mrun = -INFINITY, lrun = 0.0f;
  for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
  for (int64_t j = 0; j < L; j++) {
    const float *kr = kb + j * stride, *vr = vb + j * stride;
    float s = 0.0f;
    for (int64_t d = 0; d < D; d++) s += qr[d] * kr[d];
    s *= scale;
    float mnew = s > mrun ? s : mrun;
    float corr = expf(mrun - mnew), p = expf(s - mnew);
    lrun = lrun * corr + p;
    for (int64_t d = 0; d < D; d++) acc[d] = acc[d] * corr + p * vr[d];
    mrun = mnew;
  }
  for (int64_t d = 0; d < D; d++) out[d] = acc[d] / lrun;
}
#endif

void ckir_attention_f32(const float *q, const float *kcache, const float *vcache, float *out,
                        int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && KV >= 1 && H % KV == 0 && D >= 1 && D <= ATTN_MAX_D,
               "attention_f32");
  const int64_t group = H / KV, stride = KV * D, pairs = T * H;
  /* work ~ pairs * context * D; stay serial for tiny calls */
#pragma omp parallel for schedule(static, 1) if (pairs * (P + T) * D >= CKIR_PAR_MIN_WORK && pairs > 1)
  for (int64_t pr = 0; pr < pairs; pr++) {
    const int64_t t = pr / H, h = pr % H, g = h / group;
    attn_row(q + pr * D, kcache + g * D, vcache + g * D, stride, P + t + 1, D, out + pr * D);
  }
}
