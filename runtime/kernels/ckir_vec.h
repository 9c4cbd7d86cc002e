/* ckir runtime: the vector-operation layer (private; included by ckir_internal.h).
 *
 * One set of names for the operations the kernels need, bound at BUILD time to
 * the ISA that ckir_internal.h selected, so that a kernel whose algorithm is the
 * same at every width is written once:
 *
 *   CKIR_AVX512   ckv = __m512   CKV_W = 16   masked tails with __mmask16
 *   CKIR_AVX2     ckv = __m256   CKV_W = 8    masked tails with vmaskmovps
 *   scalar        ckv = 8 floats CKV_W = 8    plain C loops over the lanes (the
 *                 compiler vectorises them for the baseline ISA: SSE2)
 *
 * Loads and stores come in two kinds: ckv_loadu / ckv_storeu move CKV_W lanes,
 * ckv_load_n / ckv_store_n move the first n lanes (any n >= 0; n >= CKV_W moves
 * all of them, a masked-off lane loads as 0 and is not written).  CKV_LOOP
 * runs a body over [i, n): whole vectors, then at most one partial vector, with
 * `n_` the number of lanes the body may touch:
 *
 *   int64_t i = 0;
 *   CKV_LOOP(i, n, ln, ckv_store_n(out + i, ln, ckv_mul(ckv_load_n(x + i, ln), s)););
 *
 * ckv_load_n with a constant n >= CKV_W is a plain load, so the whole-vector
 * iterations pay nothing for the shared body.
 */
#ifndef CKIR_VEC_H
#define CKIR_VEC_H

/* The body of CKV_LOOP runs with `ln` = CKV_W for every whole vector from i, then
 * once with ln = n - i < CKV_W when lanes are left; i ends at n. */
#define CKV_LOOP(i, n, ln, ...)                             \
  do {                                                      \
    for (; (i) + CKV_W <= (n); (i) += CKV_W) {              \
      const int64_t ln = CKV_W;                             \
      __VA_ARGS__                                           \
    }                                                       \
    if ((i) < (n)) {                                        \
      const int64_t ln = (n) - (i);                         \
      __VA_ARGS__;                                          \
      (i) = (n);                                            \
    }                                                       \
  } while (0)

#if defined(CKIR_AVX512)
/* ======================= AVX-512: 16 lanes ============================== */
#define CKV_W 16
#define CKV_(op) _mm512_##op /* the intrinsic of this width */
typedef __m512 ckv;

/* partial vectors, 0 <= n < CKV_W (the ckv_*_n wrappers below take any n) */
CKIR_INLINE ckv ckv_part_load_(const float *p, int64_t n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), ckir_mask16(n), p);
}
CKIR_INLINE void ckv_part_store_(float *p, int64_t n, ckv v) {
  _mm512_mask_storeu_ps(p, ckir_mask16(n), v);
}
CKIR_INLINE ckv ckv_part_select_(ckv v, int64_t n, float fill) {
  return _mm512_mask_mov_ps(_mm512_set1_ps(fill), ckir_mask16(n), v);
}
/* the horizontal operations (defined once below, after both widths) */
#define CKV_REDUCE_ADD_ _mm512_reduce_add_ps
#define CKV_REDUCE_MAX_ _mm512_reduce_max_ps
#define CKV_REDUCE_ADD_W_ ckir_hsum16_ps512
#define CKV_ROUND_ _mm512_roundscale_ps
/* the exp argument range: below the low end e^x is 0 (the scale underflows),
 * above the high end +inf (it overflows) */
#define CKV_EXP_LO -104.0f
#define CKV_EXP_HI 89.0f
/* p * 2^n for integral n in [-151, 129] */
CKIR_INLINE ckv ckv_ldexp(ckv p, ckv n, ckv x) {
  (void)x;
  return _mm512_scalef_ps(p, n);
}
/* CKV_W bf16 at p as fp32 (a 16-bit left shift) */
CKIR_INLINE ckv ckv_load_bf16(const uint16_t *p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* CKV_W bf16 pairs at p (32 bits each: an even k low, the next k high) as fp32:
 * *lo the low halves, *hi the high ones (a shift and a mask, no shuffle) */
CKIR_INLINE void ckv_load_bf16_pairs(const uint32_t *p, ckv *lo, ckv *hi) {
  const __m512i v = _mm512_loadu_si512((const void *)p);
  *lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  *hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
}

#elif defined(CKIR_AVX2)
/* ======================= AVX2 + FMA: 8 lanes ============================ */
#define CKV_W 8
#define CKV_(op) _mm256_##op
typedef __m256 ckv;

CKIR_INLINE ckv ckv_part_load_(const float *p, int64_t n, float fill) {
  const __m256i m = ckir_mask8(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
CKIR_INLINE void ckv_part_store_(float *p, int64_t n, ckv v) {
  _mm256_maskstore_ps(p, ckir_mask8(n), v);
}
CKIR_INLINE ckv ckv_part_select_(ckv v, int64_t n, float fill) {
  return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(ckir_mask8(n)));
}
#define CKV_REDUCE_ADD_ ckir_hsum_ps256
#define CKV_REDUCE_MAX_ ckir_hmax_ps256
#define CKV_REDUCE_ADD_W_ ckir_hsum8_ps256
#define CKV_ROUND_ _mm256_round_ps
#define CKV_EXP_LO -87.33654f
#define CKV_EXP_HI 88.72283f
/* p * 2^n for integral n in [-126, 128]: 2^n = 2^(n - n/2) * 2^(n/2) keeps both
 * factors normal; lanes whose unclamped x was above CKV_EXP_HI give +inf */
CKIR_INLINE ckv ckv_ldexp(ckv p, ckv n, ckv x) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(CKV_EXP_HI), _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(p, s1), s2), _mm256_set1_ps(INFINITY), big);
}
CKIR_INLINE ckv ckv_load_bf16(const uint16_t *p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
CKIR_INLINE void ckv_load_bf16_pairs(const uint32_t *p, ckv *lo, ckv *hi) {
  const __m256i v = _mm256_loadu_si256((const __m256i *)p);
  *lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  *hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

#else
/* ======================= scalar: 8 lanes of plain C ======================= */
#define CKV_W 8
typedef struct {
  float l[8];
} ckv;

#define CKV_MAP(expr)                               \
  ckv r_;                                           \
  for (int j_ = 0; j_ < 8; j_++) r_.l[j_] = (expr); \
  return r_

CKIR_INLINE ckv ckv_zero(void) { CKV_MAP(0.0f); }
CKIR_INLINE ckv ckv_set1(float a) { CKV_MAP(a); }
CKIR_INLINE ckv ckv_loadu(const float *p) { CKV_MAP(p[j_]); }
CKIR_INLINE ckv ckv_load(const float *p) { CKV_MAP(p[j_]); }
CKIR_INLINE void ckv_storeu(float *p, ckv v) {
  for (int j = 0; j < 8; j++) p[j] = v.l[j];
}
CKIR_INLINE void ckv_store(float *p, ckv v) { ckv_storeu(p, v); }
CKIR_INLINE ckv ckv_part_load_(const float *p, int64_t n, float fill) {
  CKV_MAP(j_ < n ? p[j_] : fill);
}
CKIR_INLINE void ckv_part_store_(float *p, int64_t n, ckv v) {
  for (int j = 0; j < n; j++) p[j] = v.l[j];
}
CKIR_INLINE ckv ckv_part_select_(ckv v, int64_t n, float fill) { CKV_MAP(j_ < n ? v.l[j_] : fill); }
CKIR_INLINE ckv ckv_add(ckv a, ckv b) { CKV_MAP(a.l[j_] + b.l[j_]); }
CKIR_INLINE ckv ckv_sub(ckv a, ckv b) { CKV_MAP(a.l[j_] - b.l[j_]); }
CKIR_INLINE ckv ckv_mul(ckv a, ckv b) { CKV_MAP(a.l[j_] * b.l[j_]); }
CKIR_INLINE ckv ckv_div(ckv a, ckv b) { CKV_MAP(a.l[j_] / b.l[j_]); }
CKIR_INLINE ckv ckv_sqrt(ckv a) { CKV_MAP(sqrtf(a.l[j_])); }
CKIR_INLINE ckv ckv_max(ckv a, ckv b) { CKV_MAP(a.l[j_] > b.l[j_] ? a.l[j_] : b.l[j_]); }
CKIR_INLINE ckv ckv_min(ckv a, ckv b) { CKV_MAP(a.l[j_] < b.l[j_] ? a.l[j_] : b.l[j_]); }
/* the scalar build has no FMA instruction: a*b + c rounds twice (as its
 * plain C loops always did) */
CKIR_INLINE ckv ckv_fma(ckv a, ckv b, ckv c) { CKV_MAP(a.l[j_] * b.l[j_] + c.l[j_]); }
CKIR_INLINE ckv ckv_fms(ckv a, ckv b, ckv c) { CKV_MAP(a.l[j_] * b.l[j_] - c.l[j_]); }
CKIR_INLINE ckv ckv_fnma(ckv a, ckv b, ckv c) { CKV_MAP(c.l[j_] - a.l[j_] * b.l[j_]); }
CKIR_INLINE float ckv_reduce_add(ckv v) {
  return ((v.l[0] + v.l[1]) + (v.l[2] + v.l[3])) + ((v.l[4] + v.l[5]) + (v.l[6] + v.l[7]));
}
CKIR_INLINE ckv ckv_reduce_add_w(const ckv v[CKV_W]) { CKV_MAP(ckv_reduce_add(v[j_])); }
CKIR_INLINE float ckv_reduce_max(ckv v) {
  float r = v.l[0];
  for (int j = 1; j < 8; j++) r = v.l[j] > r ? v.l[j] : r;
  return r;
}
/* e^x per lane from libm (the scalar build's exp) */
CKIR_INLINE ckv ckv_exp(ckv x) { CKV_MAP(expf(x.l[j_])); }
CKIR_INLINE ckv ckv_load_bf16(const uint16_t *p) {
  ckv r;
  for (int j = 0; j < 8; j++) {
    const uint32_t u = (uint32_t)p[j] << 16;
    memcpy(&r.l[j], &u, sizeof(float));
  }
  return r;
}
CKIR_INLINE void ckv_load_bf16_pairs(const uint32_t *p, ckv *lo, ckv *hi) {
  for (int j = 0; j < 8; j++) {
    const uint32_t l = p[j] << 16, h = p[j] & 0xFFFF0000u;
    memcpy(&lo->l[j], &l, sizeof(float));
    memcpy(&hi->l[j], &h, sizeof(float));
  }
}
#undef CKV_MAP
#endif

#if defined(CKIR_AVX512) || defined(CKIR_AVX2)
/* ---- the operations named alike at both widths (CKV_ = _mm512_ / _mm256_) ---- */
CKIR_INLINE ckv ckv_zero(void) { return CKV_(setzero_ps)(); }
CKIR_INLINE ckv ckv_set1(float a) { return CKV_(set1_ps)(a); }
CKIR_INLINE ckv ckv_loadu(const float *p) { return CKV_(loadu_ps)(p); }
CKIR_INLINE ckv ckv_load(const float *p) { return CKV_(load_ps)(p); } /* aligned */
CKIR_INLINE void ckv_storeu(float *p, ckv v) { CKV_(storeu_ps)(p, v); }
CKIR_INLINE void ckv_store(float *p, ckv v) { CKV_(store_ps)(p, v); } /* aligned */
CKIR_INLINE ckv ckv_add(ckv a, ckv b) { return CKV_(add_ps)(a, b); }
CKIR_INLINE ckv ckv_sub(ckv a, ckv b) { return CKV_(sub_ps)(a, b); }
CKIR_INLINE ckv ckv_mul(ckv a, ckv b) { return CKV_(mul_ps)(a, b); }
CKIR_INLINE ckv ckv_div(ckv a, ckv b) { return CKV_(div_ps)(a, b); }
CKIR_INLINE ckv ckv_sqrt(ckv a) { return CKV_(sqrt_ps)(a); }
CKIR_INLINE ckv ckv_max(ckv a, ckv b) { return CKV_(max_ps)(a, b); }
CKIR_INLINE ckv ckv_min(ckv a, ckv b) { return CKV_(min_ps)(a, b); }
/* a*b + c, a*b - c and c - a*b, each with one rounding */
CKIR_INLINE ckv ckv_fma(ckv a, ckv b, ckv c) { return CKV_(fmadd_ps)(a, b, c); }
CKIR_INLINE ckv ckv_fms(ckv a, ckv b, ckv c) { return CKV_(fmsub_ps)(a, b, c); }
CKIR_INLINE ckv ckv_fnma(ckv a, ckv b, ckv c) { return CKV_(fnmadd_ps)(a, b, c); }
CKIR_INLINE float ckv_reduce_add(ckv v) { return CKV_REDUCE_ADD_(v); }
CKIR_INLINE float ckv_reduce_max(ckv v) { return CKV_REDUCE_MAX_(v); }
/* lane i = the sum of the lanes of v[i] (CKV_W vectors in, one out) */
CKIR_INLINE ckv ckv_reduce_add_w(const ckv v[CKV_W]) { return CKV_REDUCE_ADD_W_(v); }
CKIR_INLINE ckv ckv_round(ckv v) {
  return CKV_ROUND_(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* e^x per lane: n = round(x log2 e), r = x - n ln2 (two-constant split), e^r by
 * the degree-7 Taylor polynomial of ckir_internal.h, times 2^n.  x below
 * CKV_EXP_LO gives 0, above CKV_EXP_HI +inf. */
CKIR_INLINE ckv ckv_exp(ckv x) {
  const ckv xc = ckv_min(ckv_max(x, ckv_set1(CKV_EXP_LO)), ckv_set1(CKV_EXP_HI));
  const ckv n = ckv_round(ckv_mul(xc, ckv_set1(CKIR_LOG2E)));
  ckv r = ckv_fnma(n, ckv_set1(CKIR_LN2_HI), xc);
  r = ckv_fnma(n, ckv_set1(CKIR_LN2_LO), r);
  ckv p = ckv_set1(CKIR_EXP_C7);
  p = ckv_fma(p, r, ckv_set1(CKIR_EXP_C6));
  p = ckv_fma(p, r, ckv_set1(CKIR_EXP_C5));
  p = ckv_fma(p, r, ckv_set1(CKIR_EXP_C4));
  p = ckv_fma(p, r, ckv_set1(CKIR_EXP_C3));
  p = ckv_fma(p, r, ckv_set1(CKIR_EXP_C2));
  p = ckv_fma(p, r, ckv_set1(1.0f));
  p = ckv_fma(p, r, ckv_set1(1.0f));
  return ckv_ldexp(p, n, x);
}
#endif

/* Keep a vector in a register: an empty asm that "changes" it, so that GCC
 * cannot fold its load into every instruction that uses it. */
#if defined(CKIR_AVX512) || defined(CKIR_AVX2)
#define CKV_PIN(v) __asm__("" : "+v"(v))
#else
#define CKV_PIN(v) ((void)(v))
#endif

/* ---- the first n lanes (any n >= 0; n >= CKV_W: the whole vector) ---------- */
/* the first n lanes from p, the others `fill` (ckv_load_n: 0) */
CKIR_INLINE ckv ckv_load_n_or(const float *p, int64_t n, float fill) {
  return n >= CKV_W ? ckv_loadu(p) : ckv_part_load_(p, n, fill);
}
CKIR_INLINE ckv ckv_load_n(const float *p, int64_t n) { return ckv_load_n_or(p, n, 0.0f); }
/* write the first n lanes of v to p, nothing past them */
CKIR_INLINE void ckv_store_n(float *p, int64_t n, ckv v) {
  if (n >= CKV_W)
    ckv_storeu(p, v);
  else
    ckv_part_store_(p, n, v);
}
/* v with the lanes >= n set to fill (ckv_keep_n: 0) */
CKIR_INLINE ckv ckv_select_n(ckv v, int64_t n, float fill) {
  return n >= CKV_W ? v : ckv_part_select_(v, n, fill);
}
CKIR_INLINE ckv ckv_keep_n(ckv v, int64_t n) { return ckv_select_n(v, n, 0.0f); }

/* the first n (any n >= 0) bf16 at p as fp32, lanes >= n zero */
CKIR_INLINE ckv ckv_load_bf16_n(const uint16_t *p, int64_t n) {
  if (n >= CKV_W) return ckv_load_bf16(p);
  uint16_t tmp[CKV_W] = {0};
  memcpy(tmp, p, (size_t)n * sizeof(uint16_t));
  return ckv_load_bf16(tmp);
}

#endif /* CKIR_VEC_H */
