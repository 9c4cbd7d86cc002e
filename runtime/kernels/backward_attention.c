/* ckir runtime: backward of layernorm, rope, causal attention and the learned
 * position table (training).
 *
 *   layernorm_bwd_f32  dx (overwritten), dgamma, dbeta (ADDED INTO)
 *   rope_bwd_f32       dq, dk rotated in place by the opposite angle
 *   attention_bwd_f32  dq, dk, dv (overwritten) of causal attention_f32 at P = 0
 *   pos_embed_bwd_f32  dwpe[P + t] += dy[t]  (ADDED INTO)
 *
 * Conventions as backward.c: gradients of activations are overwritten, of
 * weights added into; one body per kernel over ckir_vec.h; the scalar twins
 * ckir_ref_* accumulate in double.  Results do not depend on the thread count:
 * every sum runs in a fixed order. */
#include <float.h>

#include "ckir_internal.h"
#include "ckir_rope.h"
#include "ckir_rows.h"

/* ======================================================================
 * LayerNorm backward
 * ====================================================================== */

/* y = xh gamma + beta, xh = (x - mean) r, r = (var + eps)^-1/2, g = gamma dy:
 *   dx = r (g - mean(g) - xh mean(g xh))        (overwritten)
 *   dgamma += sum_t dy xh,  dbeta += sum_t dy   (added into) */
void ckir_ref_layernorm_bwd_f32(const float *x, const float *gamma, const float *dy, float *dx,
                                float *dgamma, float *dbeta, int64_t T, int64_t E, float eps) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * E, *dr = dy + t * E;
    double s = 0.0, ss = 0.0, sg = 0.0, sgx = 0.0;
    for (int64_t e = 0; e < E; e++) s += xr[e];
    const double mean = s / (double)E;
    for (int64_t e = 0; e < E; e++) ss += (xr[e] - mean) * (xr[e] - mean);
    const double r = 1.0 / sqrt(ss / (double)E + (double)eps);
    for (int64_t e = 0; e < E; e++) {
      const double g = (double)gamma[e] * dr[e];
      sg += g;
      sgx += g * (xr[e] - mean) * r;
    }
    sg /= (double)E, sgx /= (double)E;
    for (int64_t e = 0; e < E; e++) {
      const double xh = (xr[e] - mean) * r;
      dx[t * E + e] = (float)(r * ((double)gamma[e] * dr[e] - sg - xh * sgx));
      /* as rmsnorm_bwd's twin: the row terms in double, added in float in token order */
      dgamma[e] += (float)((double)dr[e] * xh);
      dbeta[e] += dr[e];
    }
  }
}

#define LN_RB 64          /* rows per block: their mean and r live on the stack */
#define LN_CB (4 * CKV_W) /* dgamma/dbeta columns per work item */

/* One row: dx, and its mean and r (the forward's: float sums, r = 1/sqrtf(var + eps)). */
static void layernorm_bwd_row(const float *x, const float *gamma, const float *dy, float *dx,
                              int64_t E, float eps, float *mean_out, float *r_out) {
  ckv a0 = ckv_zero();
  int64_t e = 0;
  CKV_LOOP(e, E, ln, a0 = ckv_add(a0, ckv_load_n(x + e, ln)););
  const float mean = ckv_reduce_add(a0) / (float)E;
  const ckv vm = ckv_set1(mean);
  ckv ss = ckv_zero(), sg = ckv_zero(), sgx = ckv_zero();
  e = 0;
  CKV_LOOP(e, E, ln, {
    const ckv xc = ckv_keep_n(ckv_sub(ckv_load_n(x + e, ln), vm), ln);
    const ckv g = ckv_mul(ckv_load_n(gamma + e, ln), ckv_load_n(dy + e, ln));
    ss = ckv_fma(xc, xc, ss);
    sg = ckv_add(sg, g);
    sgx = ckv_fma(g, xc, sgx);
  });
  const float r = 1.0f / sqrtf(ckv_reduce_add(ss) / (float)E + eps);
  /* dx = r (g - (mean(g) + (x - mean) r^2 mean(g (x - mean)))): the difference
   * before the scaling, so that a row of E = 1 gets 0 exactly */
  const ckv vr = ckv_set1(r), mg = ckv_set1(ckv_reduce_add(sg) / (float)E);
  const ckv k1 = ckv_set1(r * r * ckv_reduce_add(sgx) / (float)E);
  e = 0;
  CKV_LOOP(e, E, ln, {
    const ckv g = ckv_mul(ckv_load_n(gamma + e, ln), ckv_load_n(dy + e, ln));
    const ckv xc = ckv_sub(ckv_load_n(x + e, ln), vm);
    ckv_store_n(dx + e, ln, ckv_mul(vr, ckv_sub(g, ckv_fma(xc, k1, mg))));
  });
  *mean_out = mean;
  *r_out = r;
}

/* As rmsnorm_bwd_f32: rows in blocks of LN_RB, the threads first split the
 * block's rows (dx, mean, r), then its dgamma/dbeta columns, each column
 * adding the block's rows in order: race-free and independent of the thread
 * count. */
void ckir_layernorm_bwd_f32(const float *x, const float *gamma, const float *dy, float *dx,
                            float *dgamma, float *dbeta, int64_t T, int64_t E, float eps) {
  float mean[LN_RB], r[LN_RB];
  const int64_t ncb = (E + LN_CB - 1) / LN_CB;
#pragma omp parallel if (T * E >= CKIR_PAR_MIN_WORK)
  for (int64_t t0 = 0; t0 < T; t0 += LN_RB) {
    const int64_t nb = CKIR_MIN(LN_RB, T - t0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < nb; i++) {
      const int64_t t = t0 + i;
      layernorm_bwd_row(x + t * E, gamma, dy + t * E, dx + t * E, E, eps, &mean[i], &r[i]);
    }
#pragma omp for schedule(static)
    for (int64_t cb = 0; cb < ncb; cb++) {
      const int64_t e0 = cb * LN_CB, e1 = CKIR_MIN(E, e0 + LN_CB);
      int64_t e = e0;
      CKV_LOOP(e, e1, ln, {
        ckv ag = ckv_load_n(dgamma + e, ln), ab = ckv_load_n(dbeta + e, ln);
        for (int64_t i = 0; i < nb; i++) {
          const int64_t o = (t0 + i) * E + e;
          const ckv d = ckv_load_n(dy + o, ln);
          const ckv xh = ckv_mul(ckv_sub(ckv_load_n(x + o, ln), ckv_set1(mean[i])), ckv_set1(r[i]));
          ag = ckv_fma(d, xh, ag);
          ab = ckv_add(ab, d);
        }
        ckv_store_n(dgamma + e, ln, ag);
        ckv_store_n(dbeta + e, ln, ab);
      });
    }
  }
}

/* ======================================================================
 * RoPE backward
 * ====================================================================== */

/* rope_f32 rotates each pair by +angle (scaled by mscale); its transpose
 * rotates by -angle with the same scale: ckir_rope.h with sin negated, the
 * same float32 angles.  Dims past R passed through: their gradient too. */
void ckir_ref_rope_bwd_f32(float *dq, float *dk, int64_t T, int64_t H, int64_t KV, int64_t D,
                           int64_t P, float theta, int64_t R, float factor, float ramp_w,
                           float ramp_i, float ramp_0, float mscale) {
  const ckir_rope_cfg cfg =
      ckir_rope_make_cfg(D, theta, R, factor, ramp_w, ramp_i, ramp_0, mscale, -1.0f);
  ckir_rope_rotate_ref(dq, dk, T, H, KV, P, &cfg);
}

void ckir_rope_bwd_f32(float *dq, float *dk, int64_t T, int64_t H, int64_t KV, int64_t D,
                       int64_t P, float theta, int64_t R, float factor, float ramp_w,
                       float ramp_i, float ramp_0, float mscale) {
  CKIR_ROPE_REQUIRE(D, R, P, theta, factor, mscale, "rope_bwd_f32");
  const ckir_rope_cfg cfg =
      ckir_rope_make_cfg(D, theta, R, factor, ramp_w, ramp_i, ramp_0, mscale, -1.0f);
  ckir_rope_rotate(dq, dk, T, H, KV, P, &cfg);
}

/* rope_ext_f32's transpose: the same divisor table, the opposite angle */
void ckir_ref_rope_ext_bwd_f32(float *dq, float *dk, int64_t T, int64_t H, int64_t KV, int64_t D,
                               int64_t P, float theta, int64_t R, float mscale, const float *ext) {
  const ckir_rope_cfg cfg = ckir_rope_make_ext_cfg(D, theta, R, mscale, ext, -1.0f);
  ckir_rope_rotate_ref(dq, dk, T, H, KV, P, &cfg);
}

void ckir_rope_ext_bwd_f32(float *dq, float *dk, int64_t T, int64_t H, int64_t KV, int64_t D,
                           int64_t P, float theta, int64_t R, float mscale, const float *ext) {
  ckir_rope_require_ext(D, R, P, theta, mscale, ext, "rope_ext_bwd_f32");
  const ckir_rope_cfg cfg = ckir_rope_make_ext_cfg(D, theta, R, mscale, ext, -1.0f);
  ckir_rope_rotate(dq, dk, T, H, KV, P, &cfg);
}

/* ======================================================================
 * position-table backward
 * ====================================================================== */

void ckir_ref_pos_embed_bwd_f32(const float *dy, float *dwpe, int64_t T, int64_t E, int64_t P) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t e = 0; e < E; e++) dwpe[(P + t) * E + e] += dy[t * E + e];
}

void ckir_pos_embed_bwd_f32(const float *dy, float *dwpe, int64_t T, int64_t E, int64_t P) {
  /* the rows [P, P+T) of dwpe and dy are both contiguous blocks of T*E floats */
  ckir_add_f32(dwpe + P * E, dy, dwpe + P * E, T * E);
}

/* ======================================================================
 * attention backward
 * ====================================================================== */

/* Per query row (t, h), kv head g = h / (H/KV), keys j <= t, scale = 1/sqrt(D):
 *   s_j = scale q.k_j,  p = softmax(s),  dp_j = dout.v_j,  delta = dout.out (= sum_j p_j dp_j)
 *   ds_j = p_j (dp_j - delta)
 *   dq = scale sum_j ds_j k_j,  dk_j += scale ds_j q,  dv_j += p_j dout
 * The twin takes the rows one at a time: the softmax statistics in double
 * (two passes over the keys), dq in double, and the row's terms added into
 * dk and dv in float, in row order (no scratch for double accumulators). */
void ckir_ref_attention_bwd_f32(const float *q, const float *k, const float *v, const float *out,
                                const float *dout, float *dq, float *dk, float *dv, int64_t T,
                                int64_t H, int64_t KV, int64_t D) {
  const int64_t group = H / KV, stride = KV * D;
  const double scale = 1.0 / sqrt((double)D);
  for (int64_t i = 0; i < T * stride; i++) dk[i] = 0.0f, dv[i] = 0.0f;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t g = h / group;
      const float *qr = q + (t * H + h) * D, *dr = dout + (t * H + h) * D;
      const float *orow = out + (t * H + h) * D;
      const float *kb = k + g * D, *vb = v + g * D;
      double mx = -INFINITY, sum = 0.0, delta = 0.0, acc[256];
      for (int64_t j = 0; j <= t; j++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
        mx = s * scale > mx ? s * scale : mx;
      }
      for (int64_t j = 0; j <= t; j++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
        sum += exp(s * scale - mx);
      }
      for (int64_t d = 0; d < D; d++) delta += (double)dr[d] * orow[d], acc[d] = 0.0;
      for (int64_t j = 0; j <= t; j++) {
        const float *kj = kb + j * stride, *vj = vb + j * stride;
        double s = 0.0, dp = 0.0;
        for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kj[d], dp += (double)dr[d] * vj[d];
        const double p = exp(s * scale - mx) / sum, ds = scale * p * (dp - delta);
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

/* ---- the fast path ----------------------------------------------------------
 *
 * Three passes in one parallel region, each over independent work items (so
 * any schedule gives the same bits), with no scratch but the stack and dq:
 *
 *   1. lse:  per (kv head g, block of AB_ROWS query rows of its group): the
 *            log-sum-exp of each row's scaled scores, parked in dq[row][0];
 *   2. dk,dv: per (g, block of CKV_W keys): every later row of the group's
 *            heads (t >= the block's first key), p = exp(s - lse) and ds from
 *            the scores recomputed; dk, dv of the block accumulate on the
 *            stack and are stored once;
 *   3. dq:   per (g, block of AB_ROWS rows): lse read back, then the rows'
 *            dq accumulate over the key blocks in place.
 *
 * A key block is held transposed (KT[d] = the CKV_W keys' d-th element, one
 * vector), so the scores of a row against the block are D FMAs with q[d]
 * broadcast, no horizontal sums; tiles of AB_R rows share each KT load.  The
 * block's dk, dv accumulate transposed too (dKT[d] += q[d] ds), and dq from
 * the key rows (dq += ds_j k_j, AB_CG chunks of D at a time). */

#define AB_MAX_D 256
#define AB_W CKV_W
#if defined(CKIR_AVX512)
#define AB_R 8 /* rows per tile: 2 AB_R score accumulators (32 vector registers) */
#else
#define AB_R 4 /* 16 vector registers */
#endif
#define AB_CG 2     /* chunks of D per dq sweep: AB_R * AB_CG accumulators */
#define AB_ROWS 64  /* rows per item of passes 1 and 3 (a multiple of AB_R) */

/* the q / dout row of a tile's padding rows */
static const float ab_zero_row[AB_MAX_D] __attribute__((aligned(64)));

typedef struct {
  const float *q, *k, *v, *out, *dout;
  float *dq, *dk, *dv;
  int64_t T, H, KV, D, group, stride;
  float scale;
} ab_args;

/* AB_R rows (t, h) of kv head g, flat index i = t*group + (h - g*group) */
typedef struct {
  const float *q[AB_R], *o[AB_R]; /* q and dout rows (ab_zero_row for padding) */
  int64_t row[AB_R];              /* t*H + h, -1 for padding */
  int64_t nv[AB_R];               /* valid keys of the block: min(W, t - j0 + 1), >= 0 */
  float lse[AB_R], delta[AB_R];
} ab_tile;

/* rows [ia, ia + AB_R) of kv head g, those >= iend padding, against keys from j0 */
static void ab_tile_rows(const ab_args *a, int64_t g, int64_t ia, int64_t iend, int64_t j0,
                         ab_tile *tl) {
  int64_t t = ia / a->group, hh = ia % a->group; /* row ia + r: query t, head g*group + hh */
  for (int r = 0; r < AB_R; r++) {
    if (ia + r < iend) {
      const int64_t row = t * a->H + g * a->group + hh;
      tl->q[r] = a->q + row * a->D;
      tl->o[r] = a->dout + row * a->D;
      tl->row[r] = row;
      tl->nv[r] = CKIR_MAX(0, CKIR_MIN(AB_W, t - j0 + 1));
    } else {
      tl->q[r] = tl->o[r] = ab_zero_row;
      tl->row[r] = -1;
      tl->nv[r] = 0;
    }
    tl->lse[r] = tl->delta[r] = 0.0f;
    if (++hh == a->group) hh = 0, t++;
  }
}

/* XT[d*W + l] = x[l*stride + d] for l < nk, 0 for nk <= l < W */
static void ab_transpose(const float *x, int64_t stride, int64_t nk, int64_t D, float *XT) {
  for (int64_t l = 0; l < AB_W; l++) {
    const float *xr = x + l * stride;
    if (l < nk)
      for (int64_t d = 0; d < D; d++) XT[d * AB_W + l] = xr[d];
    else
      for (int64_t d = 0; d < D; d++) XT[d * AB_W + l] = 0.0f;
  }
}

/* acc[r] = sum_d rows[r][d] XT[d] (lanes: the block's keys).  q and dout rows
 * go in separate loops: AB_R row pointers stay in registers. */
CKIR_INLINE void ab_dot_rows(const float *const rows[AB_R], const float *XT, int64_t D,
                             ckv acc[AB_R]) {
  for (int r = 0; r < AB_R; r++) acc[r] = ckv_zero();
  for (int64_t d = 0; d < D; d++) {
    const ckv x = ckv_load(XT + d * AB_W);
    for (int r = 0; r < AB_R; r++) acc[r] = ckv_fma(ckv_set1(rows[r][d]), x, acc[r]);
  }
}

/* XT[d] += sum_r rows[r][d] c[r] */
CKIR_INLINE void ab_outer_rows(const float *const rows[AB_R], const ckv c[AB_R], float *XT,
                               int64_t D) {
  for (int64_t d = 0; d < D; d++) {
    ckv x = ckv_load(XT + d * AB_W);
    for (int r = 0; r < AB_R; r++) x = ckv_fma(ckv_set1(rows[r][d]), c[r], x);
    ckv_store(XT + d * AB_W, x);
  }
}

/* p = exp(scale s - lse) on each row's valid keys (0 elsewhere), ds = scale p (dp - delta) */
CKIR_INLINE void ab_probs(const ab_tile *tl, const float *KT, const float *VT, int64_t D,
                          float scale, ckv p[AB_R], ckv ds[AB_R]) {
  ckv s[AB_R], dp[AB_R];
  ab_dot_rows(tl->q, KT, D, s);
  ab_dot_rows(tl->o, VT, D, dp);
  const ckv vs = ckv_set1(scale);
  for (int r = 0; r < AB_R; r++) {
    const ckv e = ckv_exp(ckv_fms(s[r], vs, ckv_set1(tl->lse[r])));
    p[r] = ckv_keep_n(e, tl->nv[r]);
    ds[r] = ckv_mul(ckv_mul(p[r], vs), ckv_sub(dp[r], ckv_set1(tl->delta[r])));
  }
}

/* the first row index of [i0, i1) in a tile that reaches key j0 (tiles start at i0) */
static int64_t ab_first_tile(int64_t i0, int64_t j0, int64_t group) {
  const int64_t is = CKIR_MAX(i0, j0 * group);
  return i0 + (is - i0) / AB_R * AB_R;
}

/* pass 1: lse of rows [i0, i1) of kv head g, into dq[row * D].  Each row keeps
 * a running max M and sum L per lane (no horizontal operation per block):
 * M' = max(M, s), L' = L e^(M - M') + e^(s - M'); its invalid lanes hold
 * -FLT_MAX (e^0 = 1 leaves L, the new term is masked to 0).  At the end,
 * lse = max(M) + log(sum(L e^(M - max(M)))). */
__attribute__((noinline)) static void ab_lse_item(const ab_args *a, int64_t g, int64_t i0,
                                                  int64_t i1) {
  float KT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  float M[AB_ROWS * AB_W] __attribute__((aligned(64)));
  float L[AB_ROWS * AB_W] __attribute__((aligned(64)));
  const int64_t D = a->D, tlast = (i1 - 1) / a->group;
  const ckv vs = ckv_set1(a->scale);
  for (int64_t i = 0; i < i1 - i0; i++) {
    ckv_store(M + i * AB_W, ckv_set1(-FLT_MAX));
    ckv_store(L + i * AB_W, ckv_zero());
  }
  for (int64_t j0 = 0; j0 <= tlast; j0 += AB_W) {
    const int64_t nk = CKIR_MIN(AB_W, a->T - j0);
    ab_transpose(a->k + j0 * a->stride + g * D, a->stride, nk, D, KT);
    for (int64_t ia = ab_first_tile(i0, j0, a->group); ia < i1; ia += AB_R) {
      ab_tile tl;
      ab_tile_rows(a, g, ia, i1, j0, &tl);
      ckv s[AB_R];
      ab_dot_rows(tl.q, KT, D, s);
      for (int r = 0; r < AB_R; r++) {
        if (tl.nv[r] == 0) continue;
        float *mr = M + (ia + r - i0) * AB_W, *lr = L + (ia + r - i0) * AB_W;
        const ckv sv = ckv_select_n(ckv_mul(s[r], vs), tl.nv[r], -FLT_MAX);
        const ckv m = ckv_load(mr), mnew = ckv_max(m, sv);
        const ckv e = ckv_keep_n(ckv_exp(ckv_sub(sv, mnew)), tl.nv[r]);
        ckv_store(lr, ckv_fma(ckv_load(lr), ckv_exp(ckv_sub(m, mnew)), e));
        ckv_store(mr, mnew);
      }
    }
  }
  ab_tile tl;
  for (int64_t ia = i0; ia < i1; ia += AB_R) {
    ab_tile_rows(a, g, ia, i1, 0, &tl);
    for (int r = 0; r < AB_R && ia + r < i1; r++) {
      const ckv m = ckv_load(M + (ia + r - i0) * AB_W);
      const float mx = ckv_reduce_max(m);
      const ckv l = ckv_mul(ckv_load(L + (ia + r - i0) * AB_W), ckv_exp(ckv_sub(m, ckv_set1(mx))));
      a->dq[tl.row[r] * D] = mx + logf(ckv_reduce_add(l));
    }
  }
}

/* pass 2: dk, dv of keys [j0, j0 + W) of kv head g */
__attribute__((noinline)) static void ab_dkdv_item(const ab_args *a, int64_t g, int64_t j0) {
  float KT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  float VT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  float dKT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  float dVT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  const int64_t D = a->D, nk = CKIR_MIN(AB_W, a->T - j0), off = j0 * a->stride + g * D;
  ab_transpose(a->k + off, a->stride, nk, D, KT);
  ab_transpose(a->v + off, a->stride, nk, D, VT);
  for (int64_t d = 0; d < D; d++) {
    ckv_store(dKT + d * AB_W, ckv_zero());
    ckv_store(dVT + d * AB_W, ckv_zero());
  }
  const int64_t iend = a->T * a->group;
  for (int64_t ia = j0 * a->group; ia < iend; ia += AB_R) {
    ab_tile tl;
    ab_tile_rows(a, g, ia, iend, j0, &tl);
    for (int r = 0; r < AB_R; r++)
      if (tl.row[r] >= 0) {
        tl.lse[r] = a->dq[tl.row[r] * D];
        tl.delta[r] = ckir_dot1(tl.o[r], a->out + tl.row[r] * D, D);
      }
    ckv p[AB_R], ds[AB_R];
    ab_probs(&tl, KT, VT, D, a->scale, p, ds);
    ab_outer_rows(tl.q, ds, dKT, D);
    ab_outer_rows(tl.o, p, dVT, D);
  }
  for (int64_t l = 0; l < nk; l++) {
    float *dkr = a->dk + off + l * a->stride, *dvr = a->dv + off + l * a->stride;
    for (int64_t d = 0; d < D; d++) {
      dkr[d] = dKT[d * AB_W + l];
      dvr[d] = dVT[d * AB_W + l];
    }
  }
}

/* pass 3: dq of rows [i0, i1) of kv head g (their lse read from dq first) */
__attribute__((noinline)) static void ab_dq_item(const ab_args *a, int64_t g, int64_t i0,
                                                 int64_t i1) {
  float KT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  float VT[AB_MAX_D * AB_W] __attribute__((aligned(64)));
  float dsb[AB_R * AB_W] __attribute__((aligned(64)));
  float sink[AB_MAX_D]; /* the dq row of padding rows */
  float lse[AB_ROWS], delta[AB_ROWS];
  const int64_t D = a->D, tlast = (i1 - 1) / a->group;
  memset(sink, 0, sizeof sink);
  for (int64_t ia = i0; ia < i1; ia += AB_R) {
    ab_tile tl;
    ab_tile_rows(a, g, ia, i1, 0, &tl);
    for (int r = 0; r < AB_R && ia + r < i1; r++) {
      float *dqr = a->dq + tl.row[r] * D;
      lse[ia + r - i0] = dqr[0];
      delta[ia + r - i0] = ckir_dot1(tl.o[r], a->out + tl.row[r] * D, D);
      memset(dqr, 0, (size_t)D * sizeof(float));
    }
  }
  for (int64_t j0 = 0; j0 <= tlast; j0 += AB_W) {
    const int64_t nk = CKIR_MIN(AB_W, a->T - j0);
    const float *kb = a->k + j0 * a->stride + g * D;
    ab_transpose(kb, a->stride, nk, D, KT);
    ab_transpose(a->v + j0 * a->stride + g * D, a->stride, nk, D, VT);
    for (int64_t ia = ab_first_tile(i0, j0, a->group); ia < i1; ia += AB_R) {
      ab_tile tl;
      ab_tile_rows(a, g, ia, i1, j0, &tl);
      float *dqr[AB_R];
      int64_t jn = 0;
      for (int r = 0; r < AB_R; r++) {
        if (tl.row[r] >= 0) {
          tl.lse[r] = lse[ia + r - i0];
          tl.delta[r] = delta[ia + r - i0];
          dqr[r] = a->dq + tl.row[r] * D;
        } else {
          dqr[r] = sink;
        }
        jn = CKIR_MAX(jn, tl.nv[r]);
      }
      ckv p[AB_R], ds[AB_R];
      ab_probs(&tl, KT, VT, D, a->scale, p, ds);
      for (int r = 0; r < AB_R; r++) ckv_store(dsb + r * AB_W, ds[r]);
      /* dq_r += sum_j ds_r[j] k_j, AB_CG chunks of D per sweep over the keys */
      for (int64_t c = 0; c < D; c += AB_CG * AB_W) {
        int64_t n[AB_CG];
        ckv acc[AB_R][AB_CG];
        for (int u = 0; u < AB_CG; u++) n[u] = CKIR_MAX(0, CKIR_MIN(AB_W, D - c - u * AB_W));
        for (int r = 0; r < AB_R; r++)
          for (int u = 0; u < AB_CG; u++) acc[r][u] = ckv_load_n(dqr[r] + c + u * AB_W, n[u]);
        for (int64_t j = 0; j < jn; j++) {
          ckv kc[AB_CG];
          for (int u = 0; u < AB_CG; u++) kc[u] = ckv_load_n(kb + j * a->stride + c + u * AB_W, n[u]);
          for (int r = 0; r < AB_R; r++) {
            const ckv b = ckv_set1(dsb[r * AB_W + j]);
            for (int u = 0; u < AB_CG; u++) acc[r][u] = ckv_fma(b, kc[u], acc[r][u]);
          }
        }
        for (int r = 0; r < AB_R; r++)
          for (int u = 0; u < AB_CG; u++) ckv_store_n(dqr[r] + c + u * AB_W, n[u], acc[r][u]);
      }
    }
  }
}

void ckir_attention_bwd_f32(const float *q, const float *k, const float *v, const float *out,
                            const float *dout, float *dq, float *dk, float *dv, int64_t T,
                            int64_t H, int64_t KV, int64_t D) {
  CKIR_REQUIRE(T >= 1 && KV >= 1 && H % KV == 0 && D >= 1 && D <= AB_MAX_D,
               "attention_bwd_f32");
  const ab_args a = {
      .q = q, .k = k, .v = v, .out = out, .dout = dout, .dq = dq, .dk = dk, .dv = dv,
      .T = T, .H = H, .KV = KV, .D = D, .group = H / KV, .stride = KV * D,
      .scale = 1.0f / sqrtf((float)D),
  };
  /* row blocks per kv head (passes 1, 3), key blocks per kv head (pass 2); items
   * are handed out heaviest first (the causal triangle) */
  const int64_t nrb = (T * a.group + AB_ROWS - 1) / AB_ROWS, nkb = (T + AB_W - 1) / AB_W;
  const int64_t nrows = nrb * KV, nkeys = nkb * KV;
#pragma omp parallel if (T * T * H * D >= 2 * CKIR_PAR_MIN_WORK && nrows + nkeys > 2)
  {
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < nrows; it++) {
      const int64_t g = it % KV, b = nrb - 1 - it / KV;
      ab_lse_item(&a, g, b * AB_ROWS, CKIR_MIN(T * a.group, (b + 1) * AB_ROWS));
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < nkeys; it++) ab_dkdv_item(&a, it % KV, it / KV * AB_W);
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < nrows; it++) {
      const int64_t g = it % KV, b = nrb - 1 - it / KV;
      ab_dq_item(&a, g, b * AB_ROWS, CKIR_MIN(T * a.group, (b + 1) * AB_ROWS));
    }
  }
}
