/* ckir runtime: row softmax and mean cross-entropy loss. */
#include "ckir_internal.h"
#include "ckir_rows.h"

/* ---- reference twins ----------------------------------------------------- */

/* max of the row into *mx; returns sum(exp(x - max)) in double */
static double ref_row_sumexp(const float *xr, int64_t n, float *mx) {
  float m = -INFINITY;
  for (int64_t c = 0; c < n; c++) m = xr[c] > m ? xr[c] : m;
  double s = 0.0;
  for (int64_t c = 0; c < n; c++) s += exp((double)xr[c] - m);
  *mx = m;
  return s;
}

void ckir_ref_softmax_f32(const float *x, float *out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float mx;
    const double s = ref_row_sumexp(xr, cols, &mx);
    for (int64_t c = 0; c < cols; c++) out[r * cols + c] = (float)(exp((double)xr[c] - mx) / s);
  }
}

void ckir_ref_cross_entropy_f32(const float *logits, const int32_t *targets, float *loss,
                                int64_t T, int64_t V) {
  double total = 0.0;
  for (int64_t t = 0; t < T; t++) {
    const float *xr = logits + t * V;
    float mx;
    const double s = ref_row_sumexp(xr, V, &mx);
    total += log(s) + mx - xr[targets[t]];
  }
  loss[0] = (float)(total / (double)T);
}

/* ---- row helpers (over ckir_vec.h) ---------------------------------------- */

static void row_scale(float *x, int64_t n, float s) {
  const ckv vs = ckv_set1(s);
  int64_t i = 0;
  CKV_LOOP(i, n, ln, ckv_store_n(x + i, ln, ckv_mul(ckv_load_n(x + i, ln), vs)););
}

void ckir_softmax_f32(const float *x, float *out, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= CKIR_PAR_MIN_WORK && rows > 1)
  for (int64_t r = 0; r < rows; r++) {
    float mx = ckir_row_max(x + r * cols, cols);
    float s = ckir_row_exp_sum(x + r * cols, out + r * cols, cols, mx);
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
    float mx = ckir_row_max(xr, V);
    float s = ckir_row_exp_sum(xr, NULL, V, mx);
    total += (double)logf(s) + (double)mx - (double)xr[targets[t]];
  }
  loss[0] = (float)(total / (double)T);
}
