/* ckir runtime: RMSNorm (HF Llama; rmsnorm_offset: gamma + offset) and LayerNorm
 * (torch.nn.LayerNorm).
 * Rows are independent; OpenMP splits rows when T*E is large.  Sums are
 * accumulated in fp32 vector lanes (several partial sums) on the fast path,
 * in double in the reference twins. */
#include "ckir_internal.h"
#include "ckir_rows.h"

/* ---- reference twins ----------------------------------------------------- */

void ckir_ref_rmsnorm_f32(const float *x, const float *gamma, float *out, int64_t T, int64_t E,
                          float eps) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E;
    double ss = 0.0;
    for (int64_t e = 0; e < E; e++) ss += (double)xr[e] * xr[e];
    float r = 1.0f / sqrtf((float)(ss / (double)E) + eps);
    for (int64_t e = 0; e < E; e++) out[t * E + e] = (xr[e] * r) * gamma[e];
  }
}

/* RMSNorm with gamma + offset (in f32, before the product) */
void ckir_ref_rmsnorm_offset_f32(const float *x, const float *gamma, float *out, int64_t T,
                                 int64_t E, float eps, float offset) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E;
    double ss = 0.0;
    for (int64_t e = 0; e < E; e++) ss += (double)xr[e] * xr[e];
    float r = 1.0f / sqrtf((float)(ss / (double)E) + eps);
    for (int64_t e = 0; e < E; e++) out[t * E + e] = (xr[e] * r) * (gamma[e] + offset);
  }
}

void ckir_ref_layernorm_f32(const float *x, const float *gamma, const float *beta, float *out,
                            int64_t T, int64_t E, float eps) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E;
    double s = 0.0, ss = 0.0;
    for (int64_t e = 0; e < E; e++) s += xr[e];
    double mean = s / (double)E;
    for (int64_t e = 0; e < E; e++) ss += (xr[e] - mean) * (xr[e] - mean);
    float r = 1.0f / sqrtf((float)(ss / (double)E) + eps);
    float mf = (float)mean;
    for (int64_t e = 0; e < E; e++) out[t * E + e] = (xr[e] - mf) * r * gamma[e] + beta[e];
  }
}

/* ---- one row (over ckir_vec.h; the sum of squares and the scaling are the
 * shared row microkernels of ckir_rows.h) ---------------------------------- */

static float sum_all(const float *x, int64_t E) {
  ckv a0 = ckv_zero(), a1 = ckv_zero();
  int64_t e = 0;
  for (; e + 2 * CKV_W <= E; e += 2 * CKV_W) {
    a0 = ckv_add(a0, ckv_loadu(x + e));
    a1 = ckv_add(a1, ckv_loadu(x + e + CKV_W));
  }
  CKV_LOOP(e, E, ln, a0 = ckv_add(a0, ckv_load_n(x + e, ln)););
  return ckv_reduce_add(ckv_add(a0, a1));
}

/* sum of (x - mean)^2 */
static float sum_centered_squares(const float *x, int64_t E, float mean) {
  const ckv m = ckv_set1(mean);
  ckv a0 = ckv_zero();
  int64_t e = 0;
  CKV_LOOP(e, E, ln, {
    const ckv d = ckv_keep_n(ckv_sub(ckv_load_n(x + e, ln), m), ln);
    a0 = ckv_fma(d, d, a0);
  });
  return ckv_reduce_add(a0);
}

void ckir_rmsnorm_f32(const float *x, const float *gamma, float *out, int64_t T, int64_t E,
                      float eps) {
  CKIR_FOR_STATIC(T * E >= CKIR_PAR_MIN_WORK && T > 1, t, T, {
    const float ms = ckir_row_sumsq(x + t * E, NULL, NULL, E) / (float)E;
    ckir_row_scale(x + t * E, gamma, NULL, out + t * E, E, 0.0f, 1.0f / sqrtf(ms + eps));
  });
}

void ckir_rmsnorm_offset_f32(const float *x, const float *gamma, float *out, int64_t T, int64_t E,
                             float eps, float offset) {
  const ckv vo = ckv_set1(offset);
  CKIR_FOR_STATIC(T * E >= CKIR_PAR_MIN_WORK && T > 1, t, T, {
    const float *xr = x + t * E;
    float *yr = out + t * E;
    const ckv vr = ckv_set1(1.0f / sqrtf(ckir_row_sumsq(xr, NULL, NULL, E) / (float)E + eps));
    int64_t e = 0;
    CKV_LOOP(e, E, ln, {
      const ckv g = ckv_add(ckv_load_n(gamma + e, ln), vo);
      ckv_store_n(yr + e, ln, ckv_mul(ckv_mul(ckv_load_n(xr + e, ln), vr), g));
    });
  });
}

void ckir_layernorm_f32(const float *x, const float *gamma, const float *beta, float *out,
                        int64_t T, int64_t E, float eps) {
  CKIR_FOR_STATIC(T * E >= CKIR_PAR_MIN_WORK && T > 1, t, T, {
    const float mean = sum_all(x + t * E, E) / (float)E;
    const float var = sum_centered_squares(x + t * E, E, mean) / (float)E;
    ckir_row_scale(x + t * E, gamma, beta, out + t * E, E, mean, 1.0f / sqrtf(var + eps));
  });
}
