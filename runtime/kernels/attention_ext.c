/* ckir runtime: causal attention with a score scale, logit soft-capping and a
 * sliding window (graph.attention with `scale_dim`, `softcap` or `window`).
 *
 *   attention_ext_f32      forward over the KV cache (prefill, decode, backward)
 *   attention_ext_bwd_f32  dq, dk, dv (overwritten) at P = 0
 *
 * Query row (t, h) at position pos = P + t, kv head g = h / (H/KV), sees the keys
 * j with max(0, pos - window + 1) <= j <= pos (window 0: every j <= pos):
 *   s_j = scale q.k_j,  c_j = softcap tanh(s_j / softcap) (softcap 0: c_j = s_j)
 *   p = softmax(c),  out = sum_j p_j v_j
 * The forward is attention.c's (ckir_internal_attention_ext_f32: decode split by
 * positions, prefill in blocks of rows, chunks of keys).  The backward runs each kv head's
 * rows on one thread, so dk and dv (summed over the group's query heads) are
 * race-free; its rows recompute their probabilities.  The scalar twins
 * ckir_ref_* work in double. */
#include "ckir_internal.h"

#define AX_MAX_D 256

/* ---- shared row math ------------------------------------------------------ */

/* the first key row (t, pos) sees */
CKIR_INLINE int64_t ax_first_key(int64_t pos, int64_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

CKIR_INLINE float ax_dot(const float *a, const float *b, int64_t D) {
  ckv acc = ckv_zero();
  int64_t d = 0;
  CKV_LOOP(d, D, ln, acc = ckv_fma(ckv_load_n(a + d, ln), ckv_load_n(b + d, ln), acc););
  return ckv_reduce_add(acc);
}

/* out[0 .. D) += w * x */
CKIR_INLINE void ax_axpy(float *out, float w, const float *x, int64_t D) {
  const ckv vw = ckv_set1(w);
  int64_t d = 0;
  CKV_LOOP(d, D, ln,
           ckv_store_n(out + d, ln, ckv_fma(vw, ckv_load_n(x + d, ln), ckv_load_n(out + d, ln))););
}

/* the probabilities p[0 .. n) of one row (keys j0 .. j0 + n), also returning in
 * *th the tanh of each capped score (softcap > 0) for the backward */
static void ax_probs(const float *qr, const float *kb, int64_t stride, int64_t j0, int64_t n,
                     int64_t D, float scale, float softcap, float *p, float *th) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    float s = scale * ax_dot(qr, kb + (j0 + j) * stride, D);
    if (softcap > 0.0f) {
      const float tj = tanhf(s / softcap);
      if (th) th[j] = tj;
      s = softcap * tj;
    }
    p[j] = s;
    mx = s > mx ? s : mx;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; j++) sum += (p[j] = expf(p[j] - mx));
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; j++) p[j] *= inv;
}

/* ---- forward --------------------------------------------------------------- */

static void ax_row_ref(const float *qr, const float *kb, const float *vb, int64_t stride,
                       int64_t j0, int64_t j1, int64_t D, double scale, double softcap,
                       float *out) {
  double mx = -INFINITY, sum = 0.0, acc[AX_MAX_D];
  for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t j = j0; j <= j1; j++) {
      double s = 0.0;
      for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
      s *= scale;
      if (softcap > 0.0) s = softcap * tanh(s / softcap);
      if (pass == 0) {
        mx = s > mx ? s : mx;
        continue;
      }
      const double e = exp(s - mx);
      sum += e;
      for (int64_t d = 0; d < D; d++) acc[d] += e * vb[j * stride + d];
    }
  for (int64_t d = 0; d < D; d++) out[d] = (float)(acc[d] / sum);
}

void ckir_ref_attention_ext_f32(const float *q, const float *kcache, const float *vcache,
                                float *out, int64_t T, int64_t P, int64_t H, int64_t KV,
                                int64_t D, float scale, float softcap, int64_t window) {
  const int64_t group = H / KV, stride = KV * D;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t g = h / group, pos = P + t;
      ax_row_ref(q + (t * H + h) * D, kcache + g * D, vcache + g * D, stride,
                 ax_first_key(pos, window), pos, D, scale, softcap, out + (t * H + h) * D);
    }
}

void ckir_attention_ext_f32(const float *q, const float *kcache, const float *vcache, float *out,
                            int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D, float scale,
                            float softcap, int64_t window) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && KV >= 1 && H % KV == 0 && D >= 1 && D <= AX_MAX_D &&
                   softcap >= 0.0f && window >= 0,
               "attention_ext_f32");
  ckir_internal_attention_ext_f32(q, kcache, vcache, out, T, P, H, KV, D, scale, softcap, window);
}

/* ---- backward (P = 0: k and v are the T rows of keys and values) ----------- */

/* Per row: dp_j = dout.v_j, delta = dout.out, dc_j = p_j (dp_j - delta),
 * ds_j = dc_j (1 - tanh^2) (softcap > 0; else ds_j = dc_j),
 * dq = scale sum_j ds_j k_j, dk_j += scale ds_j q, dv_j += p_j dout. */
void ckir_ref_attention_ext_bwd_f32(const float *q, const float *k, const float *v,
                                    const float *out, const float *dout, float *dq, float *dk,
                                    float *dv, int64_t T, int64_t H, int64_t KV, int64_t D,
                                    float scale, float softcap, int64_t window) {
  const int64_t group = H / KV, stride = KV * D;
  for (int64_t i = 0; i < T * stride; i++) dk[i] = 0.0f, dv[i] = 0.0f;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t g = h / group, j0 = ax_first_key(t, window);
      const float *qr = q + (t * H + h) * D, *dr = dout + (t * H + h) * D;
      const float *orow = out + (t * H + h) * D;
      const float *kb = k + g * D, *vb = v + g * D;
      double mx = -INFINITY, sum = 0.0, delta = 0.0, acc[AX_MAX_D];
      for (int pass = 0; pass < 2; pass++)
        for (int64_t j = j0; j <= t; j++) {
          double s = 0.0;
          for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
          s *= scale;
          if (softcap > 0.0f) s = softcap * tanh(s / softcap);
          if (pass == 0)
            mx = s > mx ? s : mx;
          else
            sum += exp(s - mx);
        }
      for (int64_t d = 0; d < D; d++) delta += (double)dr[d] * orow[d], acc[d] = 0.0;
      for (int64_t j = j0; j <= t; j++) {
        const float *kj = kb + j * stride, *vj = vb + j * stride;
        double s = 0.0, dp = 0.0, dtanh = 1.0;
        for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kj[d], dp += (double)dr[d] * vj[d];
        s *= scale;
        if (softcap > 0.0f) {
          const double th = tanh(s / softcap);
          s = softcap * th;
          dtanh = 1.0 - th * th;
        }
        const double p = exp(s - mx) / sum, ds = scale * p * (dp - delta) * dtanh;
        float *dkj = dk + j * stride + g * D, *dvj = dv + j * stride + g * D;
        for (int64_t d = 0; d < D; d++) {
          acc[d] += ds * kj[d];
          dkj[d] += (float)(ds * qr[d]);
          dvj[d] += (float)(p * dr[d]);
        }
      }
      for (int64_t d = 0; d < D; d++) dq[(t * H + h) * D + d] = (float)acc[d];
    }
}

void ckir_attention_ext_bwd_f32(const float *q, const float *k, const float *v, const float *out,
                                const float *dout, float *dq, float *dk, float *dv, int64_t T,
                                int64_t H, int64_t KV, int64_t D, float scale, float softcap,
                                int64_t window) {
  CKIR_REQUIRE(T >= 1 && KV >= 1 && H % KV == 0 && D >= 1 && D <= AX_MAX_D && softcap >= 0.0f &&
                   window >= 0,
               "attention_ext_bwd_f32");
  const int64_t group = H / KV, stride = KV * D;
#pragma omp parallel for schedule(dynamic, 1) if (T * T * H * D >= CKIR_PAR_MIN_WORK && KV > 1)
  for (int64_t g = 0; g < KV; g++) {
    for (int64_t t = 0; t < T; t++) {
      memset(dk + t * stride + g * D, 0, (size_t)D * sizeof(float));
      memset(dv + t * stride + g * D, 0, (size_t)D * sizeof(float));
    }
    float p[T + 1], th[T + 1];
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const int64_t r = t * H + h, j0 = ax_first_key(t, window), n = t - j0 + 1;
        const float *qr = q + r * D, *dr = dout + r * D;
        ax_probs(qr, k + g * D, stride, j0, n, D, scale, softcap, p, th);
        const float delta = ax_dot(dr, out + r * D, D);
        float acc[AX_MAX_D];
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        for (int64_t j = 0; j < n; j++) {
          const float *kj = k + (j0 + j) * stride + g * D, *vj = v + (j0 + j) * stride + g * D;
          float ds = scale * p[j] * (ax_dot(dr, vj, D) - delta);
          if (softcap > 0.0f) ds *= 1.0f - th[j] * th[j];
          ax_axpy(acc, ds, kj, D);
          ax_axpy(dk + (j0 + j) * stride + g * D, ds, qr, D);
          ax_axpy(dv + (j0 + j) * stride + g * D, p[j], dr, D);
        }
        memcpy(dq + r * D, acc, (size_t)D * sizeof(float));
      }
  }
}
