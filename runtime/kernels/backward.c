/* ckir runtime: backward (training) kernels and the AdamW optimizer step.
 *
 *   adamw_f32                  one AdamW step (torch.optim.AdamW) on g * gscale[0]
 *   clip_coef_f32              min(1, max_norm / (||g|| + 1e-6)) from grad_sumsq's total
 *                              (NaN when the total is not finite: adamw_f32 then skips)
 *   zero_f32                   x = 0 (before kernels that add into x)
 *   grad_sumsq_f32             out[0] += sum(g^2)          (global-norm clipping)
 *   scale_f32                  x *= s                      (clipping, loss scaling)
 *   cross_entropy_fwd_bwd_f32  mean loss and dlogits = (softmax - onehot) / T
 *   rmsnorm_bwd_f32            dx (overwritten), dgamma (ADDED INTO)
 *   swiglu_bwd_f32             dgate, dup (overwritten)
 *   gelu_tanh_bwd_f32          dx (overwritten)
 *   geglu_bwd_f32              dgate, dup (overwritten)
 *   rmsnorm_offset_bwd_f32     as rmsnorm_bwd_f32, gamma + offset
 *   embed_bwd_f32              dtable[tokens[t]] += dy[t]  (ADDED INTO)
 *
 * Convention: gradients of activations are overwritten; gradients of weights
 * (dgamma, dtable) and the sum of squares are accumulated, so that several
 * micro-batches (or several tensors, for grad_sumsq) add up without a copy;
 * the caller zeroes them once.  add's backward needs no kernel: both inputs
 * receive dy itself.
 *
 * Every body is written once over ckir_vec.h.  Element-wise kernels run in
 * chunks of BW_CHUNK elements, threaded when n >= 4 chunks; row kernels split
 * rows.  The scalar twins ckir_ref_* accumulate in double. */
#include "ckir_internal.h"
#include "ckir_rows.h"

#define BW_CHUNK 8192
#define SQRT_2_OVER_PI 0.7978845608028654
#define GELU_C 0.044715

/* ======================================================================
 * AdamW
 * ====================================================================== */

/* torch.optim.AdamW (amsgrad off, maximize off), step = 1, 2, ...:
 *   w -= lr * wd * w
 *   m  = beta1 m + (1 - beta1) g
 *   v  = beta2 v + (1 - beta2) g^2
 *   w -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps) */
void ckir_ref_adamw_f32(const float *g, const float *gscale, float *w, float *m, float *v,
                        int64_t n, float lr, float beta1, float beta2, float eps,
                        float weight_decay, int64_t step) {
  const double gs = gscale[0];
  if (!isfinite(gs)) return; /* a non-finite gradient norm: leave w, m, v alone */
  const double bc1 = 1.0 - pow((double)beta1, (double)step);
  const double bc2 = 1.0 - pow((double)beta2, (double)step);
  for (int64_t i = 0; i < n; i++) {
    const double gi = (double)g[i] * gs;
    double wi = (double)w[i] * (1.0 - (double)lr * (double)weight_decay);
    const double mi = (double)beta1 * m[i] + (1.0 - (double)beta1) * gi;
    const double vi = (double)beta2 * v[i] + (1.0 - (double)beta2) * gi * gi;
    wi -= (double)lr / bc1 * mi / (sqrt(vi) / sqrt(bc2) + (double)eps);
    w[i] = (float)wi, m[i] = (float)mi, v[i] = (float)vi;
  }
}

typedef struct {
  float gscale, decay, b1, c1, b2, c2, isbc2, eps, step_size;
} adamw_k;

static void adamw_span(float *w, const float *g, float *m, float *v, int64_t n, const adamw_k *k) {
  const ckv decay = ckv_set1(k->decay), b1 = ckv_set1(k->b1), c1 = ckv_set1(k->c1);
  const ckv b2 = ckv_set1(k->b2), c2 = ckv_set1(k->c2), isbc2 = ckv_set1(k->isbc2);
  const ckv eps = ckv_set1(k->eps), ss = ckv_set1(k->step_size), gs = ckv_set1(k->gscale);
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv gi = ckv_mul(ckv_load_n(g + i, ln), gs);
    const ckv mi = ckv_fma(b1, ckv_load_n(m + i, ln), ckv_mul(c1, gi));
    const ckv vi = ckv_fma(b2, ckv_load_n(v + i, ln), ckv_mul(c2, ckv_mul(gi, gi)));
    const ckv den = ckv_fma(ckv_sqrt(vi), isbc2, eps);
    const ckv wi = ckv_mul(ckv_load_n(w + i, ln), decay);
    ckv_store_n(w + i, ln, ckv_fnma(ss, ckv_div(mi, den), wi));
    ckv_store_n(m + i, ln, mi);
    ckv_store_n(v + i, ln, vi);
  });
}

void ckir_adamw_f32(const float *g, const float *gscale, float *w, float *m, float *v, int64_t n,
                    float lr, float beta1, float beta2, float eps, float weight_decay,
                    int64_t step) {
  CKIR_REQUIRE(step >= 1, "adamw_f32");
  if (!isfinite(gscale[0])) return; /* a non-finite gradient norm: leave w, m, v alone */
  const double bc1 = 1.0 - pow((double)beta1, (double)step);
  const double bc2 = 1.0 - pow((double)beta2, (double)step);
  const adamw_k k = {
      .gscale = gscale[0],
      .decay = (float)(1.0 - (double)lr * (double)weight_decay),
      .b1 = beta1,
      .c1 = (float)(1.0 - (double)beta1),
      .b2 = beta2,
      .c2 = (float)(1.0 - (double)beta2),
      .isbc2 = (float)(1.0 / sqrt(bc2)),
      .eps = eps,
      .step_size = (float)((double)lr / bc1),
  };
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    const int64_t s = c * BW_CHUNK;
    adamw_span(w + s, g + s, m + s, v + s, CKIR_MIN(BW_CHUNK, n - s), &k);
  }
}

/* torch.nn.utils.clip_grad_norm_: coef = min(1, max_norm / (norm + 1e-6)). */
static float clip_coef(const float *sumsq, float max_norm) {
  if (!isfinite(sumsq[0])) return NAN; /* adamw_f32 then updates nothing */
  if (!(max_norm > 0.0f)) return 1.0f;
  const double c = (double)max_norm / (sqrt((double)sumsq[0]) + 1e-6);
  return c < 1.0 ? (float)c : 1.0f;
}

void ckir_ref_clip_coef_f32(const float *sumsq, float *coef, float max_norm) {
  coef[0] = clip_coef(sumsq, max_norm);
}

void ckir_clip_coef_f32(const float *sumsq, float *coef, float max_norm) {
  coef[0] = clip_coef(sumsq, max_norm);
}

void ckir_ref_zero_f32(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = 0.0f;
}

void ckir_zero_f32(float *x, int64_t n) {
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 16 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    const int64_t s = c * BW_CHUNK;
    memset(x + s, 0, (size_t)CKIR_MIN(BW_CHUNK, n - s) * sizeof(float));
  }
}

/* ======================================================================
 * grad_sumsq, scale
 * ====================================================================== */

void ckir_ref_grad_sumsq_f32(const float *g, float *out, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)g[i] * g[i];
  out[0] = (float)((double)out[0] + s);
}

/* sum of squares of one chunk: fp32 lanes, two accumulators */
static float sumsq_span(const float *g, int64_t n) {
  ckv a0 = ckv_zero(), a1 = ckv_zero();
  int64_t i = 0;
  for (; i + 2 * CKV_W <= n; i += 2 * CKV_W) {
    const ckv x0 = ckv_loadu(g + i), x1 = ckv_loadu(g + i + CKV_W);
    a0 = ckv_fma(x0, x0, a0);
    a1 = ckv_fma(x1, x1, a1);
  }
  CKV_LOOP(i, n, ln, {
    const ckv x = ckv_load_n(g + i, ln);
    a0 = ckv_fma(x, x, a0);
  });
  return ckv_reduce_add(ckv_add(a0, a1));
}

/* Chunks of BW_CHUNK are summed in fp32 lanes, the chunk sums in double. */
void ckir_grad_sumsq_f32(const float *g, float *out, int64_t n) {
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
  double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (n >= 4 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    const int64_t s = c * BW_CHUNK;
    total += (double)sumsq_span(g + s, CKIR_MIN(BW_CHUNK, n - s));
  }
  out[0] = (float)((double)out[0] + total);
}

void ckir_ref_scale_f32(float *x, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void ckir_scale_f32(float *x, int64_t n, float s) {
  const ckv vs = ckv_set1(s);
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    float *p = x + c * BW_CHUNK;
    const int64_t len = CKIR_MIN(BW_CHUNK, n - c * BW_CHUNK);
    int64_t i = 0;
    CKV_LOOP(i, len, ln, ckv_store_n(p + i, ln, ckv_mul(ckv_load_n(p + i, ln), vs)););
  }
}

/* ======================================================================
 * cross-entropy forward + backward
 * ====================================================================== */

void ckir_ref_cross_entropy_fwd_bwd_f32(const float *logits, const int32_t *targets, float *loss,
                                        float *dlogits, int64_t T, int64_t V) {
  double total = 0.0;
  for (int64_t t = 0; t < T; t++) {
    const float *xr = logits + t * V;
    const int64_t tgt = targets[t];
    CKIR_REQUIRE(tgt >= 0 && tgt < V, "cross_entropy_fwd_bwd_f32");
    const double xt = xr[tgt];
    float mx = -INFINITY;
    for (int64_t c = 0; c < V; c++) mx = xr[c] > mx ? xr[c] : mx;
    double s = 0.0;
    for (int64_t c = 0; c < V; c++) s += exp((double)xr[c] - mx);
    total += log(s) + mx - xt;
    for (int64_t c = 0; c < V; c++) {
      const double p = exp((double)xr[c] - mx) / s;
      dlogits[t * V + c] = (float)((p - (c == tgt ? 1.0 : 0.0)) / (double)T);
    }
  }
  loss[0] = (float)(total / (double)T);
}

/* dlogits may alias logits (the target's logit is read before the row is overwritten). */
void ckir_cross_entropy_fwd_bwd_f32(const float *logits, const int32_t *targets, float *loss,
                                    float *dlogits, int64_t T, int64_t V) {
  double total = 0.0;
  const float inv_t = 1.0f / (float)T;
#pragma omp parallel for schedule(static) reduction(+ : total) \
    if (T * V >= CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++) {
    const float *xr = logits + t * V;
    float *dr = dlogits + t * V;
    const int64_t tgt = targets[t];
    CKIR_REQUIRE(tgt >= 0 && tgt < V, "cross_entropy_fwd_bwd_f32");
    const float xt = xr[tgt];
    const float mx = ckir_row_max(xr, V);
    const float s = ckir_row_exp_sum(xr, dr, V, mx);
    total += (double)logf(s) + (double)mx - (double)xt;
    const ckv k = ckv_set1(inv_t / s);
    int64_t i = 0;
    CKV_LOOP(i, V, ln, ckv_store_n(dr + i, ln, ckv_mul(ckv_load_n(dr + i, ln), k)););
    dr[tgt] -= inv_t;
  }
  loss[0] = (float)(total / (double)T);
}

/* ======================================================================
 * RMSNorm backward
 * ====================================================================== */

/* y = x r gamma, r = (mean(x^2) + eps)^-1/2:
 *   dx = r gamma dy - x r^3 / E * sum(gamma dy x)        (overwritten)
 *   dgamma += sum_t dy x r                               (added into) */
void ckir_ref_rmsnorm_bwd_f32(const float *x, const float *gamma, const float *dy, float *dx,
                              float *dgamma, int64_t T, int64_t E, float eps) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E, *dr = dy + t * E;
    double ss = 0.0, dot = 0.0;
    for (int64_t e = 0; e < E; e++) {
      ss += (double)xr[e] * xr[e];
      dot += (double)gamma[e] * dr[e] * xr[e];
    }
    const double r = 1.0 / sqrt(ss / (double)E + (double)eps);
    const double c = dot * r * r * r / (double)E;
    for (int64_t e = 0; e < E; e++) {
      dx[t * E + e] = (float)(r * gamma[e] * dr[e] - c * xr[e]);
      /* the row sums are in double; dgamma adds the rows one at a time in
       * float, in token order, as the fast path does (no scratch for a
       * double accumulator per column) */
      dgamma[e] += (float)((double)dr[e] * xr[e] * r);
    }
  }
}

#define RB 64          /* rows per block: their r values live on the stack */
#define CB (4 * CKV_W) /* dgamma columns per work item */

/* One row: dx, and r returned; the gamma used is gamma + offset (rmsnorm_offset). */
static float rmsnorm_bwd_row(const float *x, const float *gamma, const float *dy, float *dx,
                             int64_t E, float eps, float offset) {
  const ckv vo = ckv_set1(offset);
  ckv s0 = ckv_zero(), d0 = ckv_zero();
  int64_t e = 0;
  CKV_LOOP(e, E, ln, {
    const ckv xv = ckv_load_n(x + e, ln);
    const ckv gv = ckv_keep_n(ckv_add(ckv_load_n(gamma + e, ln), vo), ln);
    s0 = ckv_fma(xv, xv, s0);
    d0 = ckv_fma(ckv_mul(gv, ckv_load_n(dy + e, ln)), xv, d0);
  });
  const float r = 1.0f / sqrtf(ckv_reduce_add(s0) / (float)E + eps);
  const ckv vr = ckv_set1(r), vc = ckv_set1(ckv_reduce_add(d0) * r * r * r / (float)E);
  e = 0;
  CKV_LOOP(e, E, ln, {
    const ckv gd = ckv_mul(ckv_add(ckv_load_n(gamma + e, ln), vo), ckv_load_n(dy + e, ln));
    ckv_store_n(dx + e, ln, ckv_fnma(vc, ckv_load_n(x + e, ln), ckv_mul(vr, gd)));
  });
  return r;
}

/* Rows go in blocks of RB: the threads first split the block's rows (dx, r),
 * then its dgamma columns, each column summing the block's rows in order, so
 * dgamma is race-free and independent of the thread count. */
static void rmsnorm_bwd(const float *x, const float *gamma, const float *dy, float *dx,
                        float *dgamma, int64_t T, int64_t E, float eps, float offset) {
  float r[RB];
  const int64_t ncb = (E + CB - 1) / CB;
#pragma omp parallel if (T * E >= CKIR_PAR_MIN_WORK)
  for (int64_t t0 = 0; t0 < T; t0 += RB) {
    const int64_t nb = CKIR_MIN(RB, T - t0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < nb; i++) {
      const int64_t t = t0 + i;
      r[i] = rmsnorm_bwd_row(x + t * E, gamma, dy + t * E, dx + t * E, E, eps, offset);
    }
#pragma omp for schedule(static)
    for (int64_t cb = 0; cb < ncb; cb++) {
      const int64_t e0 = cb * CB, e1 = CKIR_MIN(E, e0 + CB);
      int64_t e = e0;
      CKV_LOOP(e, e1, ln, {
        ckv acc = ckv_load_n(dgamma + e, ln);
        for (int64_t i = 0; i < nb; i++) {
          const int64_t o = (t0 + i) * E + e;
          acc = ckv_fma(ckv_mul(ckv_load_n(dy + o, ln), ckv_load_n(x + o, ln)), ckv_set1(r[i]),
                        acc);
        }
        ckv_store_n(dgamma + e, ln, acc);
      });
    }
  }
}

void ckir_rmsnorm_bwd_f32(const float *x, const float *gamma, const float *dy, float *dx,
                          float *dgamma, int64_t T, int64_t E, float eps) {
  rmsnorm_bwd(x, gamma, dy, dx, dgamma, T, E, eps, 0.0f);
}

/* y = x r (gamma + offset): as rmsnorm_bwd_f32 with gamma + offset in dx; dgamma unchanged. */
void ckir_ref_rmsnorm_offset_bwd_f32(const float *x, const float *gamma, const float *dy,
                                     float *dx, float *dgamma, int64_t T, int64_t E, float eps,
                                     float offset) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E, *dr = dy + t * E;
    double ss = 0.0, dot = 0.0;
    for (int64_t e = 0; e < E; e++) {
      ss += (double)xr[e] * xr[e];
      dot += (double)(gamma[e] + offset) * dr[e] * xr[e];
    }
    const double r = 1.0 / sqrt(ss / (double)E + (double)eps);
    const double c = dot * r * r * r / (double)E;
    for (int64_t e = 0; e < E; e++) {
      dx[t * E + e] = (float)(r * (gamma[e] + offset) * dr[e] - c * xr[e]);
      dgamma[e] += (float)((double)dr[e] * xr[e] * r);
    }
  }
}

void ckir_rmsnorm_offset_bwd_f32(const float *x, const float *gamma, const float *dy, float *dx,
                                 float *dgamma, int64_t T, int64_t E, float eps, float offset) {
  rmsnorm_bwd(x, gamma, dy, dx, dgamma, T, E, eps, offset);
}

/* ======================================================================
 * SwiGLU and GELU(tanh) backward (element-wise)
 * ====================================================================== */

/* out = silu(gate) up, s = sigmoid(gate):
 *   dup = dy silu(gate),  dgate = dy up s (1 + gate (1 - s)) */
void ckir_ref_swiglu_bwd_f32(const float *gate, const float *up, const float *dy, float *dgate,
                             float *dup, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double g = gate[i], s = 1.0 / (1.0 + exp(-g));
    const double d = dy[i];
    dup[i] = (float)(d * g * s);
    dgate[i] = (float)(d * up[i] * s * (1.0 + g * (1.0 - s)));
  }
}

static void swiglu_bwd_span(const float *gate, const float *up, const float *dy, float *dgate,
                            float *dup, int64_t n) {
  const ckv one = ckv_set1(1.0f);
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv g = ckv_load_n(gate + i, ln), d = ckv_load_n(dy + i, ln);
    const ckv s = ckv_div(one, ckv_add(one, ckv_exp(ckv_sub(ckv_zero(), g))));
    const ckv gs = ckv_mul(g, s);
    const ckv u = ckv_load_n(up + i, ln); /* read before dup may overwrite it */
    ckv_store_n(dup + i, ln, ckv_mul(d, gs));
    /* s (1 + g (1 - s)) = s + g s - g s^2 */
    const ckv dsilu = ckv_add(s, ckv_fnma(gs, s, gs));
    ckv_store_n(dgate + i, ln, ckv_mul(ckv_mul(d, u), dsilu));
  });
}

/* the gated backward spans (swiglu, geglu): chunks of BW_CHUNK, threaded when large */
typedef void (*bw_gated_span)(const float *gate, const float *up, const float *dy, float *dgate,
                              float *dup, int64_t n);

static void bw_gated_run(bw_gated_span span, const float *gate, const float *up, const float *dy,
                         float *dgate, float *dup, int64_t n) {
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    const int64_t s = c * BW_CHUNK;
    span(gate + s, up + s, dy + s, dgate + s, dup + s, CKIR_MIN(BW_CHUNK, n - s));
  }
}

void ckir_swiglu_bwd_f32(const float *gate, const float *up, const float *dy, float *dgate,
                         float *dup, int64_t n) {
  bw_gated_run(swiglu_bwd_span, gate, up, dy, dgate, dup, n);
}

/* y = 0.5 x (1 + tanh(u)), u = k (x + c x^3), k = sqrt(2/pi):
 *   dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2)
 * With p = sigmoid(2u) = 0.5 (1 + tanh u), 1 - tanh^2 u = 4 p (1 - p):
 *   dy/dx = p + 2 k x p (1 - p) (1 + 3 c x^2) */
void ckir_ref_gelu_tanh_bwd_f32(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double v = x[i], u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v), th = tanh(u);
    const double d = 0.5 * (1.0 + th) +
                     0.5 * v * (1.0 - th * th) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * v * v);
    dx[i] = (float)(dy[i] * d);
  }
}

/* gelu_tanh'(v) = p + t p (1 - p); *p_out = p = sigmoid(2u), so gelu_tanh(v) = v p. */
CKIR_INLINE ckv gelu_tanh_grad_v(ckv v, ckv *p_out) {
  const ckv one = ckv_set1(1.0f), c = ckv_set1((float)GELU_C), c3 = ckv_set1((float)(3 * GELU_C));
  const ckv km2 = ckv_set1((float)(-2.0 * SQRT_2_OVER_PI));
  const ckv k2 = ckv_set1((float)(2.0 * SQRT_2_OVER_PI));
  const ckv v2 = ckv_mul(v, v);
  const ckv inner = ckv_mul(v, ckv_fma(c, v2, one)); /* x + c x^3 */
  const ckv p = ckv_div(one, ckv_add(one, ckv_exp(ckv_mul(km2, inner))));
  const ckv q = ckv_mul(p, ckv_sub(one, p));
  const ckv t = ckv_mul(ckv_mul(k2, v), ckv_fma(c3, v2, one));
  *p_out = p;
  return ckv_fma(t, q, p);
}

static void gelu_bwd_span(const float *x, const float *dy, float *dx, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    ckv p;
    const ckv d = gelu_tanh_grad_v(ckv_load_n(x + i, ln), &p);
    ckv_store_n(dx + i, ln, ckv_mul(ckv_load_n(dy + i, ln), d));
  });
}

void ckir_gelu_tanh_bwd_f32(const float *x, const float *dy, float *dx, int64_t n) {
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    const int64_t s = c * BW_CHUNK;
    gelu_bwd_span(x + s, dy + s, dx + s, CKIR_MIN(BW_CHUNK, n - s));
  }
}

/* out = gelu_tanh(gate) up:  dup = dy gelu_tanh(gate),  dgate = dy up gelu_tanh'(gate) */
void ckir_ref_geglu_bwd_f32(const float *gate, const float *up, const float *dy, float *dgate,
                            float *dup, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double v = gate[i], u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v), th = tanh(u);
    const double d = 0.5 * (1.0 + th) +
                     0.5 * v * (1.0 - th * th) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * v * v);
    const double g = dy[i], uv = up[i];
    dup[i] = (float)(g * 0.5 * v * (1.0 + th));
    dgate[i] = (float)(g * uv * d);
  }
}

static void geglu_bwd_span(const float *gate, const float *up, const float *dy, float *dgate,
                           float *dup, int64_t n) {
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv v = ckv_load_n(gate + i, ln), d = ckv_load_n(dy + i, ln);
    const ckv u = ckv_load_n(up + i, ln); /* read before dup may overwrite it */
    ckv p;
    const ckv dg = gelu_tanh_grad_v(v, &p);
    ckv_store_n(dup + i, ln, ckv_mul(d, ckv_mul(v, p)));
    ckv_store_n(dgate + i, ln, ckv_mul(ckv_mul(d, u), dg));
  });
}

void ckir_geglu_bwd_f32(const float *gate, const float *up, const float *dy, float *dgate,
                        float *dup, int64_t n) {
  bw_gated_run(geglu_bwd_span, gate, up, dy, dgate, dup, n);
}

/* y = cap tanh(x / cap):  dx = dy (1 - tanh^2(x / cap)) */
void ckir_ref_softcap_bwd_f32(const float *x, const float *dy, float *dx, int64_t n, float cap) {
  for (int64_t i = 0; i < n; i++) {
    const double t = tanh((double)x[i] / cap);
    dx[i] = (float)(dy[i] * (1.0 - t * t));
  }
}

void ckir_softcap_bwd_f32(const float *x, const float *dy, float *dx, int64_t n, float cap) {
  const ckv one = ckv_set1(1.0f), two = ckv_set1(2.0f), vi = ckv_set1(2.0f / cap);
  const int64_t nc = (n + BW_CHUNK - 1) / BW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * BW_CHUNK)
  for (int64_t c = 0; c < nc; c++) {
    const int64_t s = c * BW_CHUNK, e = CKIR_MIN(BW_CHUNK, n - s);
    int64_t i = 0;
    CKV_LOOP(i, e, ln, {
      /* 1 - tanh^2(u) = 4 / (2 + z + 1/z), z = exp(2u): 0, not NaN, where z is 0 or inf */
      const ckv z = ckv_exp(ckv_mul(ckv_load_n(x + s + i, ln), vi));
      const ckv den = ckv_add(ckv_add(two, z), ckv_div(one, z));
      const ckv d = ckv_div(ckv_mul(two, two), den);
      ckv_store_n(dx + s + i, ln, ckv_mul(ckv_load_n(dy + s + i, ln), d));
    });
  }
}

/* ======================================================================
 * embedding backward
 * ====================================================================== */

void ckir_ref_embed_bwd_f32(const int32_t *tokens, const float *dy, float *dtable, int64_t T,
                            int64_t E) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t e = 0; e < E; e++) dtable[(int64_t)tokens[t] * E + e] += dy[t * E + e];
}

/* The threads split the columns, each running over every token in order: rows
 * of repeated tokens add up without a race, in the same order at any thread
 * count. */
void ckir_embed_bwd_f32(const int32_t *tokens, const float *dy, float *dtable, int64_t T,
                        int64_t E) {
  const int64_t ncb = (E + CB - 1) / CB;
#pragma omp parallel for schedule(static) if (T * E >= CKIR_PAR_MIN_WORK && ncb > 1)
  for (int64_t cb = 0; cb < ncb; cb++) {
    const int64_t e0 = cb * CB, e1 = CKIR_MIN(E, e0 + CB);
    for (int64_t t = 0; t < T; t++) {
      float *row = dtable + (int64_t)tokens[t] * E;
      const float *src = dy + t * E;
      int64_t e = e0;
      CKV_LOOP(e, e1, ln, {
        const ckv sum = ckv_add(ckv_load_n(row + e, ln), ckv_load_n(src + e, ln));
        ckv_store_n(row + e, ln, sum);
      });
    }
  }
}
