/* ckir runtime: the erf GELU (transformers' "gelu", ONNX Gelu approximate="none")
 * and its backward:
 *
 *   gelu_erf_f32       out = 0.5 x (1 + erf(x / sqrt 2))
 *   gelu_erf_bwd_f32   dx  = dy * (Phi(x) + x phi(x))       (dx may alias x or dy)
 *
 * The normal CDF Phi is ckir_erf.h's (one body for every ISA over the vector
 * layer); the reference twins use libm's erf in double.  Chunked as the other
 * element-wise kernels, threaded when n is large. */
#include "ckir_erf.h"

#define CKIR_GELU_ERF_CHUNK 8192

void ckir_ref_gelu_erf_f32(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double v = x[i];
    out[i] = (float)(0.5 * v * erfc(-v * 0.70710678118654752440));
  }
}

void ckir_ref_gelu_erf_bwd_f32(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double v = x[i];
    const double d = 0.5 * erfc(-v * 0.70710678118654752440) +
                     v * exp(-0.5 * v * v) * 0.39894228040143267794;
    dx[i] = (float)(dy[i] * d);
  }
}

static void gelu_erf_span(const float *x, float *out, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln, ckv_store_n(out + i, ln, ckv_gelu_erf(ckv_load_n(x + i, ln))););
}

static void gelu_erf_bwd_span(const float *x, const float *dy, float *dx, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv d = ckv_gelu_erf_grad(ckv_load_n(x + i, ln));
    ckv_store_n(dx + i, ln, ckv_mul(ckv_load_n(dy + i, ln), d));
  });
}

void ckir_gelu_erf_f32(const float *x, float *out, int64_t n) {
  const int64_t nc = (n + CKIR_GELU_ERF_CHUNK - 1) / CKIR_GELU_ERF_CHUNK;
  CKIR_FOR_STATIC(n >= 4 * CKIR_GELU_ERF_CHUNK, c, nc, {
    const int64_t s = c * CKIR_GELU_ERF_CHUNK;
    gelu_erf_span(x + s, out + s, CKIR_MIN(CKIR_GELU_ERF_CHUNK, n - s));
  });
}

void ckir_gelu_erf_bwd_f32(const float *x, const float *dy, float *dx, int64_t n) {
  const int64_t nc = (n + CKIR_GELU_ERF_CHUNK - 1) / CKIR_GELU_ERF_CHUNK;
  CKIR_FOR_STATIC(n >= 4 * CKIR_GELU_ERF_CHUNK, c, nc, {
    const int64_t s = c * CKIR_GELU_ERF_CHUNK;
    gelu_erf_bwd_span(x + s, dy + s, dx + s, CKIR_MIN(CKIR_GELU_ERF_CHUNK, n - s));
  });
}
