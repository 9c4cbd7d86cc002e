/* ckir runtime: element-wise kernels (swiglu, gelu_tanh, add, relu).
 *
 * Each public kernel splits [0, n) into chunks of CKIR_EW_CHUNK elements,
 * spreads them over OpenMP threads when n is large, and runs the ISA span
 * function on each chunk.  Tails use masked loads/stores (AVX-512) or a scalar
 * remainder (AVX2). */
#include "ckir_internal.h"

#define CKIR_EW_CHUNK 8192
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_C 0.044715f

/* ---- scalar semantics (the reference twins) ------------------------------ */

static void swiglu_scalar(const float *gate, const float *up, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

static void gelu_scalar(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v);
    out[i] = 0.5f * v * (1.0f + tanhf(u));
  }
}

static void add_scalar(const float *a, const float *b, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void relu_scalar(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ckir_ref_swiglu_f32(const float *gate, const float *up, float *out, int64_t n) {
  swiglu_scalar(gate, up, out, n);
}
void ckir_ref_gelu_tanh_f32(const float *x, float *out, int64_t n) { gelu_scalar(x, out, n); }
void ckir_ref_add_f32(const float *a, const float *b, float *out, int64_t n) {
  add_scalar(a, b, out, n);
}
void ckir_ref_relu_f32(const float *x, float *out, int64_t n) { relu_scalar(x, out, n); }

/* ---- ISA span functions ------------------------------------------------- */

static void swiglu_span(const float *gate, const float *up, float *out, int64_t n) {
#if defined(CKIR_AVX512)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = ckir_mask16(n - i);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    __m512 e = ckir_exp_ps512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    __m512 r = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u);
    _mm512_mask_storeu_ps(out + i, m, r);
  }
#elif defined(CKIR_AVX2)
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 u = _mm256_loadu_ps(up + i);
    __m256 e = ckir_exp_ps256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u));
  }
  swiglu_scalar(gate + i, up + i, out + i, n - i);
#else
  swiglu_scalar(gate, up, out, n);
#endif
}

/* gelu_tanh = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): no cancellation for x < 0. */
static void gelu_span(const float *x, float *out, int64_t n) {
#if defined(CKIR_AVX512)
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 k2 = _mm512_set1_ps(-2.0f * SQRT_2_OVER_PI);
  const __m512 c = _mm512_set1_ps(GELU_C);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = ckir_mask16(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 v2 = _mm512_mul_ps(v, v);
    __m512 inner = _mm512_mul_ps(v, _mm512_fmadd_ps(c, v2, one)); /* x + c x^3 */
    __m512 e = ckir_exp_ps512(_mm512_mul_ps(k2, inner));
    _mm512_mask_storeu_ps(out + i, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
#elif defined(CKIR_AVX2)
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 k2 = _mm256_set1_ps(-2.0f * SQRT_2_OVER_PI);
  const __m256 c = _mm256_set1_ps(GELU_C);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 v2 = _mm256_mul_ps(v, v);
    __m256 inner = _mm256_mul_ps(v, _mm256_fmadd_ps(c, v2, one));
    __m256 e = ckir_exp_ps256(_mm256_mul_ps(k2, inner));
    _mm256_storeu_ps(out + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  gelu_scalar(x + i, out + i, n - i);
#else
  gelu_scalar(x, out, n);
#endif
}

static void add_span(const float *a, const float *b, float *out, int64_t n) {
#if defined(CKIR_AVX512)
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = ckir_mask16(n - i);
    __m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
#elif defined(CKIR_AVX2)
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  add_scalar(a + i, b + i, out + i, n - i);
#else
  add_scalar(a, b, out, n);
#endif
}

static void relu_span(const float *x, float *out, int64_t n) {
#if defined(CKIR_AVX512)
  const __m512 z = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = ckir_mask16(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_max_ps(_mm512_maskz_loadu_ps(m, x + i), z));
  }
#elif defined(CKIR_AVX2)
  const __m256 z = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_max_ps(_mm256_loadu_ps(x + i), z));
  relu_scalar(x + i, out + i, n - i);
#else
  relu_scalar(x, out, n);
#endif
}

/* ---- public kernels: chunked, threaded when large ------------------------ */

#define CKIR_EW_CHUNKS(n) (((n) + CKIR_EW_CHUNK - 1) / CKIR_EW_CHUNK)
#define CKIR_EW_PAR(n) ((n) >= 4 * CKIR_EW_CHUNK)

void ckir_swiglu_f32(const float *gate, const float *up, float *out, int64_t n) {
  int64_t nc = CKIR_EW_CHUNKS(n);
#pragma omp parallel for schedule(static) if (CKIR_EW_PAR(n))
  for (int64_t c = 0; c < nc; c++) {
    int64_t s = c * CKIR_EW_CHUNK;
    swiglu_span(gate + s, up + s, out + s, CKIR_MIN(CKIR_EW_CHUNK, n - s));
  }
}

void ckir_gelu_tanh_f32(const float *x, float *out, int64_t n) {
  int64_t nc = CKIR_EW_CHUNKS(n);
#pragma omp parallel for schedule(static) if (CKIR_EW_PAR(n))
  for (int64_t c = 0; c < nc; c++) {
    int64_t s = c * CKIR_EW_CHUNK;
    gelu_span(x + s, out + s, CKIR_MIN(CKIR_EW_CHUNK, n - s));
  }
}

void ckir_add_f32(const float *a, const float *b, float *out, int64_t n) {
  int64_t nc = CKIR_EW_CHUNKS(n);
#pragma omp parallel for schedule(static) if (CKIR_EW_PAR(n))
  for (int64_t c = 0; c < nc; c++) {
    int64_t s = c * CKIR_EW_CHUNK;
    add_span(a + s, b + s, out + s, CKIR_MIN(CKIR_EW_CHUNK, n - s));
  }
}

void ckir_relu_f32(const float *x, float *out, int64_t n) {
  int64_t nc = CKIR_EW_CHUNKS(n);
#pragma omp parallel for schedule(static) if (CKIR_EW_PAR(n))
  for (int64_t c = 0; c < nc; c++) {
    int64_t s = c * CKIR_EW_CHUNK;
    relu_span(x + s, out + s, CKIR_MIN(CKIR_EW_CHUNK, n - s));
  }
}
