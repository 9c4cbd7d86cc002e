/* ckir runtime: row softmax and mean cross-entropy loss. */
#include "ckir_internal.h"

/* ---- reference twins ----------------------------------------------------- */

void ckir_ref_softmax_f32(const float *x, float *out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
    double s = 0.0;
    for (int64_t c = 0; c < cols; c++) s += exp((double)xr[c] - mx);
    for (int64_t c = 0; c < cols; c++) out[r * cols + c] = (float)(exp((double)xr[c] - mx) / s);
  }
}

void ckir_ref_cross_entropy_f32(const float *logits, const int32_t *targets, float *loss,
                                int64_t T, int64_t V) {
  double total = 0.0;
  for (int64_t t = 0; t < T; t++) {
    const float *xr = logits + t * V;
    float mx = -INFINITY;
    for (int64_t c = 0; c < V; c++) mx = xr[c] > mx ? xr[c] : mx;
    double s = 0.0;
    for (int64_t c = 0; c < V; c++) s += exp((double)xr[c] - mx);
    total += log(s) + mx - xr[targets[t]];
  }
  loss[0] = (float)(total / (double)T);
}

/* ---- row helpers --------------------------------------------------------- */

static float row_max(const float *x, int64_t n) {
#if defined(CKIR_AVX512)
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16)
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), ckir_mask16(n - i), x + i));
  return _mm512_reduce_max_ps(m);
#elif defined(CKIR_AVX2)
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  float r = ckir_hmax_ps256(m);
  for (; i < n; i++) r = x[i] > r ? x[i] : r;
  return r;
#else
  float r = -INFINITY;
  for (int64_t i = 0; i < n; i++) r = x[i] > r ? x[i] : r;
  return r;
#endif
}

/* Returns sum(exp(x - mx)); when out != NULL also stores exp(x - mx) there. */
static float row_exp_sum(const float *x, float *out, int64_t n, float mx) {
#if defined(CKIR_AVX512)
  __m512 vm = _mm512_set1_ps(mx), acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = ckir_mask16(n - i);
    __m512 e = ckir_exp_ps512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
    acc = _mm512_mask_add_ps(acc, k, acc, e);
    if (out) _mm512_mask_storeu_ps(out + i, k, e);
  }
  return _mm512_reduce_add_ps(acc);
#elif defined(CKIR_AVX2)
  __m256 vm = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = ckir_exp_ps256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    acc = _mm256_add_ps(acc, e);
    if (out) _mm256_storeu_ps(out + i, e);
  }
  float s = ckir_hsum_ps256(acc);
  for (; i < n; i++) {
    float e = expf(x[i] - mx);
    s += e;
    if (out) out[i] = e;
  }
  return s;
#else
  float s = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float e = expf(x[i] - mx);
    s += e;
    if (out) out[i] = e;
  }
  return s;
#endif
}

static void row_scale(float *x, int64_t n, float s) {
#if defined(CKIR_AVX512)
  __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = ckir_mask16(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs));
  }
#elif defined(CKIR_AVX2)
  __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; i++) x[i] *= s;
#else
  for (int64_t i = 0; i < n; i++) x[i] *= s;
#endif
}

void ckir_softmax_f32(const float *x, float *out, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= CKIR_PAR_MIN_WORK && rows > 1)
  for (int64_t r = 0; r < rows; r++) {
    float mx = row_max(x + r * cols, cols);
    float s = row_exp_sum(x + r * cols, out + r * cols, cols, mx);
    row_scale(out + r * cols, cols, 1.0f / s);
  }
}

void ckir_cross_entropy_f32(const float *logits, const int32_t *targets, float *loss, int64_t T,
                            int64_t V) {
  double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total) \
    if (T * V >= CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    const float *xr = logits + t * V;
    float mx = row_max(xr, V);
    float s = row_exp_sum(xr, NULL, V, mx);
    total += (double)logf(s) + (double)mx - (double)xr[targets[t]];
  }
  loss[0] = (float)(total / (double)T);
}
