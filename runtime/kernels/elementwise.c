/* ckir runtime: element-wise kernels (swiglu, gelu_tanh, geglu, add, mul, mul_scalar, relu)
 * and copy_last_row.
 *
 * Each public kernel splits [0, n) into chunks of CKIR_EW_CHUNK elements,
 * spreads them over OpenMP threads when n is large, and runs the span function
 * (written once over the vector layer, ckir_vec.h) on each chunk. */
#include "ckir_internal.h"

#define CKIR_EW_CHUNK 8192
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_C 0.044715f

/* ---- reference twins ---------------------------------------------------- */

void ckir_ref_swiglu_f32(const float *gate, const float *up, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void ckir_ref_gelu_tanh_f32(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i], u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v);
    out[i] = 0.5f * v * (1.0f + tanhf(u));
  }
}

void ckir_ref_geglu_f32(const float *gate, const float *up, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float v = gate[i], u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v);
    out[i] = 0.5f * v * (1.0f + tanhf(u)) * up[i];
  }
}

void ckir_ref_mul_scalar_f32(const float *x, float *out, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * s;
}

void ckir_ref_softcap_f32(const float *x, float *out, int64_t n, float cap) {
  for (int64_t i = 0; i < n; i++) out[i] = cap * tanhf(x[i] / cap);
}

void ckir_ref_add_f32(const float *a, const float *b, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ckir_ref_mul_f32(const float *a, const float *b, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void ckir_ref_relu_f32(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ckir_ref_copy_last_row_f32(const float *x, float *out, int64_t T, int64_t cols) {
  for (int64_t j = 0; j < cols; j++) out[j] = x[(T - 1) * cols + j];
}

/* ---- span functions (one body for every ISA, over ckir_vec.h) ----------- */

/* The spans share one signature so that one driver runs them all; the unary
 * ones ignore b. */
typedef void (*ew_span)(const float *a, const float *b, float *out, int64_t n);

static void swiglu_span(const float *gate, const float *up, float *out, int64_t n) {
  const ckv one = ckv_set1(1.0f);
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv g = ckv_load_n(gate + i, ln);
    const ckv e = ckv_exp(ckv_sub(ckv_zero(), g));
    ckv_store_n(out + i, ln, ckv_mul(ckv_div(g, ckv_add(one, e)), ckv_load_n(up + i, ln)));
  });
}

void ckir_internal_silu_mul(const float *g, const float *u, float *out, int64_t n) {
  swiglu_span(g, u, out, n);
}

/* gelu_tanh = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): no cancellation for x < 0. */
CKIR_INLINE ckv gelu_tanh_v(ckv v) {
  const ckv one = ckv_set1(1.0f), k2 = ckv_set1(-2.0f * SQRT_2_OVER_PI), c = ckv_set1(GELU_C);
  const ckv inner = ckv_mul(v, ckv_fma(c, ckv_mul(v, v), one)); /* x + c x^3 */
  return ckv_div(v, ckv_add(one, ckv_exp(ckv_mul(k2, inner))));
}

static void gelu_span(const float *x, const float *unused, float *out, int64_t n) {
  (void)unused;
  int64_t i = 0;
  CKV_LOOP(i, n, ln, ckv_store_n(out + i, ln, gelu_tanh_v(ckv_load_n(x + i, ln))););
}

static void geglu_span(const float *gate, const float *up, float *out, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln,
           ckv_store_n(out + i, ln,
                       ckv_mul(gelu_tanh_v(ckv_load_n(gate + i, ln)), ckv_load_n(up + i, ln))););
}

static void add_span(const float *a, const float *b, float *out, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln,
           ckv_store_n(out + i, ln, ckv_add(ckv_load_n(a + i, ln), ckv_load_n(b + i, ln))););
}

static void mul_span(const float *a, const float *b, float *out, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln,
           ckv_store_n(out + i, ln, ckv_mul(ckv_load_n(a + i, ln), ckv_load_n(b + i, ln))););
}

static void relu_span(const float *x, const float *unused, float *out, int64_t n) {
  (void)unused;
  const ckv z = ckv_zero();
  int64_t i = 0;
  CKV_LOOP(i, n, ln, ckv_store_n(out + i, ln, ckv_max(ckv_load_n(x + i, ln), z)););
}

/* ---- public kernels: chunked, threaded when large ------------------------ */

static void ew_run(ew_span span, const float *a, const float *b, float *out, int64_t n) {
  const int64_t nc = (n + CKIR_EW_CHUNK - 1) / CKIR_EW_CHUNK;
  CKIR_FOR_STATIC(n >= 4 * CKIR_EW_CHUNK, c, nc, {
    const int64_t s = c * CKIR_EW_CHUNK;
    span(a + s, b ? b + s : NULL, out + s, CKIR_MIN(CKIR_EW_CHUNK, n - s));
  });
}

void ckir_swiglu_f32(const float *gate, const float *up, float *out, int64_t n) {
  ew_run(swiglu_span, gate, up, out, n);
}
void ckir_gelu_tanh_f32(const float *x, float *out, int64_t n) {
  ew_run(gelu_span, x, NULL, out, n);
}
void ckir_geglu_f32(const float *gate, const float *up, float *out, int64_t n) {
  ew_run(geglu_span, gate, up, out, n);
}
void ckir_add_f32(const float *a, const float *b, float *out, int64_t n) {
  ew_run(add_span, a, b, out, n);
}
/* tanh(u) = 1 - 2 / (1 + exp(2u)) (exp overflowing to inf gives 1, underflowing to 0
 * gives -1); shared with softcap_bwd_f32 through ckir_vec.h's exp only */
CKIR_INLINE ckv tanh_v(ckv u) {
  const ckv one = ckv_set1(1.0f), two = ckv_set1(2.0f);
  return ckv_sub(one, ckv_div(two, ckv_add(one, ckv_exp(ckv_mul(two, u)))));
}

/* out = cap tanh(x / cap) (logit soft-capping; out may alias x) */
void ckir_softcap_f32(const float *x, float *out, int64_t n, float cap) {
  const int64_t nc = (n + CKIR_EW_CHUNK - 1) / CKIR_EW_CHUNK;
  const ckv vc = ckv_set1(cap), vi = ckv_set1(1.0f / cap);
  CKIR_FOR_STATIC(n >= 4 * CKIR_EW_CHUNK, c, nc, {
    const int64_t s0 = c * CKIR_EW_CHUNK, e = CKIR_MIN(CKIR_EW_CHUNK, n - s0);
    int64_t i = 0;
    CKV_LOOP(i, e, ln,
             ckv_store_n(out + s0 + i, ln,
                         ckv_mul(vc, tanh_v(ckv_mul(ckv_load_n(x + s0 + i, ln), vi)))););
  });
}

/* The factor is a param, not an operand: its own chunked loop (out may alias x). */
void ckir_mul_scalar_f32(const float *x, float *out, int64_t n, float s) {
  const int64_t nc = (n + CKIR_EW_CHUNK - 1) / CKIR_EW_CHUNK;
  const ckv vs = ckv_set1(s);
  CKIR_FOR_STATIC(n >= 4 * CKIR_EW_CHUNK, c, nc, {
    const int64_t s0 = c * CKIR_EW_CHUNK, e = CKIR_MIN(CKIR_EW_CHUNK, n - s0);
    int64_t i = 0;
    CKV_LOOP(i, e, ln,
             ckv_store_n(out + s0 + i, ln, ckv_mul(ckv_load_n(x + s0 + i, ln), vs)););
  });
}
void ckir_mul_f32(const float *a, const float *b, float *out, int64_t n) {
  ew_run(mul_span, a, b, out, n);
}
void ckir_relu_f32(const float *x, float *out, int64_t n) { ew_run(relu_span, x, NULL, out, n); }

/* One row of at most a few thousand floats: memcpy is the fast path. */
void ckir_copy_last_row_f32(const float *x, float *out, int64_t T, int64_t cols) {
  memcpy(out, x + (T - 1) * cols, (size_t)cols * sizeof(float));
}
