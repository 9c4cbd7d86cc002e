/* ckir runtime: the driver of the panel formats run on a per-panel core (ckir_pdriver.h):
 * the decode GEMVs (plain, fused qkv, fused gate_up) and the int8-x prefill GEMMs of
 * q4_kp / q6_kp (quant_kpanels.c) and q5_0p / q5_1p (quant_q5p.c). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_pdriver.h"

#define PD_TX_MAX 8      /* the most rows of x a core takes */
#define PD_BLOCK_MAX 256 /* the longest block (d->block) */

CKIR_INLINE int64_t pd_panels(int64_t N) { return (N + CKIR_PANEL - 1) / CKIR_PANEL; }

/* the panels of the call's matrices in one sequence, and the rows of w they hold */
static int64_t pd_sequence(const ckir_pseg *segs, int nseg, int gate_up, int64_t *rows) {
  int64_t P = 0;
  *rows = 0;
  for (int i = 0; i < (gate_up ? 1 : nseg); i++) {
    P += pd_panels(segs[i].N);
    *rows += segs[i].N * (gate_up ? 2 : 1);
  }
  return P;
}

/* the matrix of the sequence's panel c (of the nm whose panels form it), and *p that
 * panel's index in it */
static const ckir_pseg *pd_panel_of(const ckir_pseg *segs, int nm, int64_t c, int64_t *p) {
  int i = 0;
  while (i < nm - 1 && c >= pd_panels(segs[i].N)) c -= pd_panels(segs[i++].N);
  *p = c;
  return &segs[i];
}

/* the X rows of x (each with row stride ys in y) meet panel p of segment sg: o holds
 * the core's outputs, u the up panel's (gate_up) */
static void pd_store(const ckir_pseg *sg, const ckir_pseg *up, int64_t p, const float *o,
                     const float *u, int X, int64_t m0) {
  const int64_t c0 = p * CKIR_PANEL, nc = CKIR_MIN(CKIR_PANEL, sg->N - c0);
  for (int j = 0; j < X; j++) {
    float *yr = sg->y + (m0 + j) * sg->N;
    if (up)
      ckir_internal_silu_mul(o + j * CKIR_PANEL, u + j * CKIR_PANEL, yr + c0, nc);
    else
      for (int64_t c = 0; c < nc; c++)
        yr[c0 + c] = o[j * CKIR_PANEL + c] + (sg->b ? sg->b[c0 + c] : 0.0f);
  }
}

void ckir_internal_pdrv_gemv(const ckir_pdrv *d, const float *x, const ckir_pseg *segs, int nseg,
                             int gate_up, int64_t K, int ref) {
  const int64_t nb = K / d->block;
  const int nm = gate_up ? 1 : nseg; /* the matrices whose panels form the sequence */
  int64_t rows;
  const int64_t P = pd_sequence(segs, nseg, gate_up, &rows);
  uint8_t buf[d->x_bytes(K)];
  _Alignas(16) uint8_t xs[d->x_size];
  d->prep(x, K, buf, ref, xs);
  /* items claimed (CKIR_CLAIMED_ITEMS: each thread streams its own range forward, then
   * takes items left at the back of the others'): panel c of the sequence, or for
   * gate_up the CKIR_GU_PANELS gate panels from c * CKIR_GU_PANELS, then their up panels */
  const int64_t ch = gate_up ? CKIR_GU_PANELS : 1;
  CKIR_CLAIMED_ITEMS(!ref && rows * K >= CKIR_GEMV_PAR_MIN && P > 1, (P + ch - 1) / ch, c, fresh, {
    if (!gate_up) {
      int64_t q;
      const ckir_pseg *sg = pd_panel_of(segs, nm, c, &q);
      const int64_t pbytes = d->panel_bytes(sg->fmt, K);
      /* a new stream: its first lines, before the core's own prefetch runs ahead */
      if ((fresh || q == 0) && !ref) ckir_q_prefetch(sg->w + q * pbytes, CKIR_MIN(d->pfd, pbytes));
      float o[CKIR_PANEL];
      d->run(sg->fmt, ref, sg->w + q * pbytes, nb, xs, 1, d->pfd, o);
      pd_store(sg, NULL, q, o, NULL, 1, 0);
    } else {
      const int64_t q0 = c * ch, n = CKIR_MIN(ch, P - q0);
      float o[CKIR_GU_PANELS * CKIR_PANEL], u[CKIR_GU_PANELS * CKIR_PANEL];
      for (int h = 0; h < 2; h++) {
        const int64_t pbytes = d->panel_bytes(segs[h].fmt, K);
        const uint8_t *w = segs[h].w + q0 * pbytes;
        if (!ref) ckir_q_prefetch(w, CKIR_MIN(d->pfd, pbytes));
        for (int64_t j = 0; j < n; j++)
          d->run(segs[h].fmt, ref, w + j * pbytes, nb, xs, 1, d->pfd, (h ? u : o) + j * CKIR_PANEL);
      }
      for (int64_t j = 0; j < n; j++)
        pd_store(&segs[0], &segs[1], q0 + j, o + j * CKIR_PANEL, u + j * CKIR_PANEL, 1, 0);
    }
  });
}

void ckir_internal_pdrv_gemm_i8(const ckir_pdrv *d, const float *x, int64_t M, int64_t K,
                                const ckir_pseg *segs, int nseg, int gate_up) {
  const int64_t nb = K / d->block, xb = d->x_bytes(K);
  const int tx = d->tx;
  const int64_t mt = CKIR_MIN(M, CKIR_MAX(tx, d->xb / xb / tx * tx));
  const int nm = gate_up ? 1 : nseg; /* the matrices whose panels form the sequence */
  int64_t rows;
  const int64_t P = pd_sequence(segs, nseg, gate_up, &rows);
  const int par = M * rows * K >= CKIR_GEMV_PAR_MIN && P > 1 && !ckir_in_parallel();
  /* the panels of each tile of mt rows of x claimed (ckir_claim_next), one set of
   * shares per tile: a thread done with its share of a tile takes panels from the
   * back of the others' shares of it, then goes on to the next tile */
  const int64_t tiles = (M + mt - 1) / mt;
  const int slots = par ? CKIR_MIN(ckir_get_num_threads(), CKIR_CLAIM_SLOTS) : 1;
  ckir_claim claims[tiles * slots];
  for (int64_t i = 0; i < tiles; i++) ckir_claims_init(claims + i * slots, slots, P);
#pragma omp parallel if (par)
  {
    int t, nt;
    ckir_team(&t, &nt);
    uint8_t buf[mt * xb];
    _Alignas(16) uint8_t xs[mt * d->x_size];
    for (int64_t i = 0; i < tiles; i++) {
      ckir_claim *ci = claims + i * slots;
      int64_t c = ckir_claim_next(ci, slots, t % slots);
      if (c < 0) continue; /* the tile is done: no need of its rows of x */
      const int64_t m0 = i * mt, mr = CKIR_MIN(mt, M - m0);
      for (int64_t r = 0; r < mr; r++)
        d->prep(x + (m0 + r) * K, K, buf + r * xb, 0, xs + r * d->x_size);
      for (; c >= 0; c = ckir_claim_next(ci, slots, t % slots)) {
        int64_t p;
        const ckir_pseg *sg = pd_panel_of(segs, nm, c, &p), *up = gate_up ? &segs[1] : NULL;
        const uint8_t *wp = sg->w + p * d->panel_bytes(sg->fmt, K);
        const uint8_t *wu = up ? up->w + p * d->panel_bytes(up->fmt, K) : NULL;
        for (int64_t r = 0; r < mr; r += tx) {
          const int X = (int)CKIR_MIN(tx, mr - r);
          float o[PD_TX_MAX * CKIR_PANEL], u[PD_TX_MAX * CKIR_PANEL];
          d->run(sg->fmt, 0, wp, nb, xs + r * d->x_size, X, 0, o);
          if (up) d->run(up->fmt, 0, wu, nb, xs + r * d->x_size, X, 0, u);
          pd_store(sg, up, p, o, u, X, m0 + r);
        }
      }
    }
  }
}

/* ---- the entry points the formats share ----------------------------------------- */

#if defined(CKIR_Q512) || defined(CKIR_Q256)
#define PD_I8 1 /* a SIMD build: the cores take int8 x in prefill too */
#else
#define PD_I8 0
#endif
int ckir_internal_pdrv_i8_now(void) { return PD_I8 && !ckir_internal_qp_fp32_x_on(); }

void ckir_internal_pdrv_gemv_one(const ckir_pdrv *d, const float *x, const uint8_t *w,
                                 const float *b, float *y, int64_t N, int64_t K, int fmt, int ref,
                                 const char *what) {
  (void)what; /* CKIR_REQUIRE may compile to nothing */
  CKIR_REQUIRE(N >= 1 && K >= d->block && K % d->block == 0 && K <= d->max_k, what);
  const ckir_pseg seg = {w, b, y, N, fmt};
  ckir_internal_pdrv_gemv(d, x, &seg, 1, 0, K, ref);
}

void ckir_internal_pdrv_gemv_qkv(const ckir_pdrv *d, const float *x, const uint8_t *const w[3],
                                 const float *const b[3], float *const y[3], const int64_t N[3],
                                 int64_t K, const int fmt[3], const char *what) {
  (void)what;
  CKIR_REQUIRE(K % d->block == 0 && K <= d->max_k, what);
  const ckir_pseg segs[3] = {{w[0], b[0], y[0], N[0], fmt[0]},
                             {w[1], b[1], y[1], N[1], fmt[1]},
                             {w[2], b[2], y[2], N[2], fmt[2]}};
  ckir_internal_pdrv_gemv(d, x, segs, 3, 0, K, 0);
}

void ckir_internal_pdrv_gemv_gate_up(const ckir_pdrv *d, const float *x, const uint8_t *wg,
                                     const uint8_t *wu, float *out, int64_t N, int64_t K, int fmt,
                                     const char *what) {
  (void)what;
  CKIR_REQUIRE(K % d->block == 0 && K <= d->max_k, what);
  const ckir_pseg segs[2] = {{wg, NULL, out, N, fmt}, {wu, NULL, NULL, N, fmt}};
  ckir_internal_pdrv_gemv(d, x, segs, 2, 1, K, 0);
}

void ckir_internal_pdrv_gemm_one(const ckir_pdrv *d, const float *x, const uint8_t *w,
                                 const float *b, float *y, int64_t M, int64_t N, int64_t K, int fmt,
                                 ckir_wrow_fn row, const char *what) {
  (void)what;
  CKIR_REQUIRE(M >= 1 && N >= 1 && K >= d->block && K % d->block == 0, what);
  const ckir_pseg seg = {w, b, y, N, fmt};
  if (ckir_internal_pdrv_i8_now() && K <= d->max_k)
    ckir_internal_pdrv_gemm_i8(d, x, M, K, &seg, 1, 0);
  else
    ckir_internal_wgemm(x, w, row, b, y, M, N, K);
}

int ckir_internal_pdrv_gemm_qkv(const ckir_pdrv *d, const float *x, const uint8_t *const w[3],
                                const float *const b[3], float *const y[3], const int64_t N[3],
                                int64_t M, int64_t K, const int fmt[3]) {
  if (!ckir_internal_pdrv_i8_now() || K > d->max_k) return 0;
  const ckir_pseg segs[3] = {{w[0], b[0], y[0], N[0], fmt[0]},
                             {w[1], b[1], y[1], N[1], fmt[1]},
                             {w[2], b[2], y[2], N[2], fmt[2]}};
  ckir_internal_pdrv_gemm_i8(d, x, M, K, segs, 3, 0);
  return 1;
}

int ckir_internal_pdrv_gemm_gate_up(const ckir_pdrv *d, const float *x, const uint8_t *wg,
                                    const uint8_t *wu, float *out, int64_t M, int64_t N, int64_t K,
                                    int fmt) {
  if (!ckir_internal_pdrv_i8_now() || K > d->max_k) return 0;
  const ckir_pseg segs[2] = {{wg, NULL, out, N, fmt}, {wu, NULL, NULL, N, fmt}};
  ckir_internal_pdrv_gemm_i8(d, x, M, K, segs, 2, 1);
  return 1;
}

void ckir_internal_pdrv_wrow(const ckir_pdrv *d, int fmt, const void *w, int64_t K, int64_t n,
                             int64_t k0, int64_t kc, float *dst) {
  float tmp[PD_BLOCK_MAX];
  for (int64_t k = k0; k < k0 + kc;) {
    const int64_t b = k / d->block, off = k - b * d->block;
    const int64_t take = CKIR_MIN(d->block - off, k0 + kc - k);
    d->values(fmt, (const uint8_t *)w, n, b, K, tmp);
    memcpy(dst + (k - k0), tmp + off, (size_t)take * sizeof(float));
    k += take;
  }
}

void ckir_internal_pdrv_embed(const ckir_pdrv *d, int fmt, const int32_t *tokens,
                              const uint8_t *table, float *out, int64_t T, int64_t E, int par,
                              const char *what) {
  (void)what;
  CKIR_REQUIRE(T >= 1 && E >= d->block && E % d->block == 0, what);
  const int64_t nb = E / d->block;
#pragma omp parallel for schedule(static) if (par && T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)
  for (int64_t t = 0; t < T; t++)
    for (int64_t b = 0; b < nb; b++) d->values(fmt, table, tokens[t], b, E, out + t * E + b * d->block);
}
