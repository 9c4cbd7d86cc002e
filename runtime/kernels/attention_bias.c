/* ckir runtime: attention with an additive bias (the ONNX Attention op's attn_mask),
 * for one batch entry (ckir.onnx_backend):
 *
 *   attention_bias_f32(q [T, H*D], k [S, KV*D], v [S, KV*Dv], bias [H, T, S],
 *                      out [T, H*Dv], scores [H, T, S], T, S, H, KV, D, Dv, P,
 *                      scale, softcap, causal, left, right, mode)
 *
 * Query row i of head h (kv head g = h / (H / KV)) against key j:
 *
 *   s = scale * q.k                      (softcap > 0: s = softcap * tanh(s / softcap))
 *   b = bias[h, i, j], -inf where masked: causal and j > i + P; left >= 0 and
 *       i + P - j > left; right >= 0 and j - (i + P) > right
 *   z = s + b,  p = softmax_j(z),  out[i, h] = sum_j p_j v[j, g]
 *
 * A row whose bias b is -inf for every key (fully masked; P may be negative)
 * has p = 0 and out = 0.  `scores` receives, per (h, i, j), s (mode 0 and 1),
 * z (mode 2) or p (mode 3 and -1): ONNX's qk_matmul_output; it is also the kernel's
 * row workspace.  Plain C loops (the compiler vectorises them); threads split
 * the (h, i) rows.  out must not alias q, k or v. */
#include "ckir_internal.h"

/* b for (i, j) of a row whose bias row is brow: the mask as -inf, else brow[j] */
static inline float masked_bias(const float *brow, int64_t i, int64_t j, int64_t P,
                                int64_t causal, int64_t left, int64_t right) {
  const int64_t diff = i + P - j;
  if ((causal && diff < 0) || (left >= 0 && diff > left) || (right >= 0 && -diff > right))
    return -INFINITY;
  return brow[j];
}

/* s = scale * q.k of row (h, i) and key j, soft-capped */
static inline float qk_score(const float *qr, const float *kr, int64_t D, float scale,
                             float softcap) {
  float s = 0.0f;
  for (int64_t c = 0; c < D; c++) s += qr[c] * kr[c];
  s *= scale;
  return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

void ckir_attention_bias_f32(const float *q, const float *k, const float *v, const float *bias,
                             float *out, float *scores, int64_t T, int64_t S, int64_t H,
                             int64_t KV, int64_t D, int64_t Dv, int64_t P, float scale,
                             float softcap, int64_t causal, int64_t left, int64_t right,
                             int64_t mode) {
  const int64_t group = H / KV;
  CKIR_FOR_STATIC(H * T * S * (D + Dv) >= CKIR_PAR_MIN_WORK, r, H * T, {
    const int64_t h = r / T, i = r % T, g = h / group;
    const float *qr = q + i * H * D + h * D;
    const float *brow = bias + r * S;
    float *z = scores + r * S;
    float *o = out + i * H * Dv + h * Dv;
    int all_masked = 1;
    float m = -INFINITY;
    for (int64_t j = 0; j < S; j++) { /* z = s + b, its max */
      const float b = masked_bias(brow, i, j, P, causal, left, right);
      all_masked &= b == -INFINITY;
      z[j] = qk_score(qr, k + j * KV * D + g * D, D, scale, softcap) + b;
      if (z[j] > m) m = z[j];
    }
    for (int64_t c = 0; c < Dv; c++) o[c] = 0.0f;
    if (!all_masked) { /* p = exp(z - m) / sum (m = -inf only when no z is finite) */
      const float m0 = m == -INFINITY ? 0.0f : m;
      float sum = 0.0f;
      for (int64_t j = 0; j < S; j++) {
        const float e = expf(z[j] - m0);
        const float *vr = v + j * KV * Dv + g * Dv;
        z[j] = e;
        sum += e;
        for (int64_t c = 0; c < Dv; c++) o[c] += e * vr[c];
      }
      const float inv = sum == 0.0f ? 1.0f : 1.0f / sum;
      for (int64_t c = 0; c < Dv; c++) o[c] *= inv;
      for (int64_t j = 0; j < S; j++) z[j] *= inv;
    } else {
      for (int64_t j = 0; j < S; j++) z[j] = 0.0f;
    }
    if (mode >= 0 && mode <= 2) /* the scores before the softmax, recomputed */
      for (int64_t j = 0; j < S; j++)
        z[j] = qk_score(qr, k + j * KV * D + g * D, D, scale, softcap) +
               (mode == 2 ? masked_bias(brow, i, j, P, causal, left, right) : 0.0f);
  });
}

/* the scalar twin's s (double sums) of row (h, i) and key j */
static double ref_score(const float *q, const float *k, int64_t i, int64_t h, int64_t g,
                        int64_t j, int64_t H, int64_t KV, int64_t D, float scale, float softcap) {
  double s = 0.0;
  for (int64_t c = 0; c < D; c++) s += (double)q[i * H * D + h * D + c] * k[j * KV * D + g * D + c];
  s *= scale;
  return softcap > 0.0f ? softcap * tanh(s / softcap) : s;
}

/* the scalar twin: the same definition with double sums, one key at a time */
void ckir_ref_attention_bias_f32(const float *q, const float *k, const float *v,
                                 const float *bias, float *out, float *scores, int64_t T,
                                 int64_t S, int64_t H, int64_t KV, int64_t D, int64_t Dv,
                                 int64_t P, float scale, float softcap, int64_t causal,
                                 int64_t left, int64_t right, int64_t mode) {
  const int64_t group = H / KV;
  for (int64_t r = 0; r < H * T; r++) {
    const int64_t h = r / T, i = r % T, g = h / group;
    const float *brow = bias + r * S;
    float *o = out + i * H * Dv + h * Dv;
    double m = -INFINITY, sum = 0.0;
    int all_masked = 1;
    for (int64_t j = 0; j < S; j++) {
      const double s = ref_score(q, k, i, h, g, j, H, KV, D, scale, softcap);
      const double b = masked_bias(brow, i, j, P, causal, left, right);
      all_masked &= b == -INFINITY;
      scores[r * S + j] = (float)(mode >= 0 && mode <= 1 ? s : s + b);
      if (s + b > m) m = s + b;
    }
    const double m0 = m == -INFINITY ? 0.0 : m;
    for (int64_t c = 0; c < Dv; c++) o[c] = 0.0f;
    for (int64_t j = 0; j < S && !all_masked; j++)
      sum += exp(ref_score(q, k, i, h, g, j, H, KV, D, scale, softcap) +
                 masked_bias(brow, i, j, P, causal, left, right) - m0);
    for (int64_t j = 0; j < S && !all_masked; j++) {
      const double p = exp(ref_score(q, k, i, h, g, j, H, KV, D, scale, softcap) +
                           masked_bias(brow, i, j, P, causal, left, right) - m0) /
                       (sum == 0.0 ? 1.0 : sum);
      if (mode == 3 || mode < 0) scores[r * S + j] = (float)p;
      for (int64_t c = 0; c < Dv; c++) o[c] += (float)(p * v[j * KV * Dv + g * Dv + c]);
    }
    if ((mode == 3 || mode < 0) && all_masked)
      for (int64_t j = 0; j < S; j++) scores[r * S + j] = 0.0f;
  }
}
