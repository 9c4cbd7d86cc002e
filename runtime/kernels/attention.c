/* ckir runtime: causal multi-head / grouped-query attention over the KV cache.
 *
 * Prefill (T > 1): a unit of work is a block of CKV_W consecutive query rows of
 * one head, the rows in the lanes of a vector (attn_prefill_block): a key's
 * scores for all the rows are D FMAs of a broadcast K element against q^T, and
 * the online softmax runs lane-wise per chunk of 32 keys, so neither the
 * horizontal sums of a dot product per (row, key) nor a row's own max /
 * rescale bookkeeping remain.  Each thread runs the units of its own rows
 * (ckir_own_rows: the rows the norms and GEMMs give it, so q and the output
 * stay on its core), the longest rows first, then takes what is left of the
 * other threads' one unit at a time (the causal triangle: later rows have
 * more keys).  Against one (row, head) pair per unit
 * (Zen 4, 2 threads, SmolLM2 / Qwen2 / GPT-2 heads): 0.44-0.54 of the time at
 * T = 128, 0.34-0.44 at T = 512 (110-159 GFLOP/s).
 *
 * Decode (T = 1) splits the cached positions instead: each thread runs every
 * head over one contiguous range of positions, so it reads one sequential
 * stream of whole cache rows (cold in DRAM at every step: the weights streamed
 * through the caches since this layer's last one), and the threads' partial
 * rows are merged per head (split-K decoding).  Cold-cache decode
 * (benchmarks/bench_attention_decode.py, 2 threads, Zen 4, position 160,
 * new/old time against one head range per thread with online blocks of 16
 * keys): SmolLM2 heads 9/3 0.81, Qwen2 14/2 0.76, GPT-2 12/12 0.87.
 *
 * Decode rows (and the rows of the many-heads fallback) visit their keys in
 * chunks of ATTN_CHUNK: the chunk's scores (blocks of
 * CKV_W keys, each block CKV_W independent FMA chains over chunks of D reduced
 * by one transposing horizontal sum) go to a small stack array, then one max,
 * one exp pass, one rescale of the running accumulator (online softmax across
 * chunks) and one p . V pass of up to four chunks of D at a time (independent
 * FMA chains; the last, partial chunk of D joins the last group).  No T x T
 * scores; the accumulator (<= 256 floats a row) lives on the stack.  One body
 * for every ISA (ckir_vec.h).  Chunks instead of online blocks of CKV_W keys
 * (the max, the rescale and a scalar exp once per 64 keys, not per 16): prefill
 * attention (T = 128, Zen 4, 2 threads, warm) 0.80 of the time.
 *
 * attention_q8_0 runs the same bodies over a Q8_0 KV cache (kv_store_q8_0,
 * kernels/kv_q8_0.c: a head's D values are ceil(D / 32) blocks of 34 bytes,
 * the last zero-padded where D % 32 != 0; a cache row is KV of them): each
 * chunk of keys a body visits (ATTN_CHUNK in decode, ATTN_PF_CHUNK in prefill)
 * is dequantized per KV head into fp32 rows of ceil(D / 32) * 32 floats on the
 * stack (attn_fetch), read from L1 by the fp32 score and p . V code, which
 * read D lanes of each.  Decode reads 34 / 128 of the fp32 cache's bytes
 * (times ceil(D / 32) * 32 / D with padding); the dequantization is D
 * conversions per key against the group's D FMAs per query head.  The
 * kernels take DB = ceil(D / 32), the blocks of a head, as a parameter (the
 * registry's extents count the padding through it) and check it.
 *
 * attention_ext_f32 / attention_ext_q8_0 (graph.attention with scale_dim, softcap or
 * a sliding window; attention_ext.c holds the f32 one's entry and backward) run the
 * same bodies (attn_opts): their own score scale, the scores soft-capped (softcap
 * tanh(s / softcap), per score, before any max) and each row's keys from its window's
 * first one: decode splits the window's positions between threads, a prefill block
 * masks the keys before each row's window as it masks those after its position. */
#include <float.h>
#include "ckir_internal.h"
#include "ckir_quant.h"

#define ATTN_MAX_D 256
/* keys scored before a row's running state is updated (one max, one rescale,
 * one p . V pass per chunk); a multiple of CKV_W */
#ifndef ATTN_CHUNK
#define ATTN_CHUNK 64
#endif

/* the key row a partial block reads for its missing keys */
static const float attn_zero_row[ATTN_MAX_D + 16] __attribute__((aligned(64)));

/* Where the K and V rows come from: fp32 rows `stride` floats apart (k, v), or
 * (kq set) Q8_0 rows `qrow` bytes apart (kq, vq).  attn_head moves it to the
 * first value of KV head g. */
typedef struct {
  const float *k, *v;
  int64_t stride;
  const uint8_t *kq, *vq;
  int64_t qrow;
} attn_src;

CKIR_INLINE attn_src attn_src_f32(const float *k, const float *v, int64_t stride) {
  return (attn_src){k, v, stride, NULL, NULL, 0};
}

/* Q8_0 blocks of a head of D values (the last zero-padded), and the floats
 * they dequantize to */
#define ATTN_QBLK(D) (((D) + CKIR_QK - 1) / CKIR_QK)
#define ATTN_QPAD(D) (ATTN_QBLK(D) * CKIR_QK)

CKIR_INLINE attn_src attn_src_q8_0(const uint8_t *k, const uint8_t *v, int64_t KV, int64_t D) {
  return (attn_src){NULL, NULL, 0, k, v, KV * ATTN_QBLK(D) * CKIR_Q8_0_BYTES};
}

CKIR_INLINE attn_src attn_head(attn_src s, int64_t g, int64_t D) {
  if (s.kq) {
    s.kq += g * ATTN_QBLK(D) * CKIR_Q8_0_BYTES;
    s.vq += g * ATTN_QBLK(D) * CKIR_Q8_0_BYTES;
  } else {
    s.k += g * D;
    s.v += g * D;
  }
  return s;
}

/* K and V rows [j, j + n) of one head (s from attn_head) as fp32 rows *st floats
 * apart: in the cache (fp32), or dequantized into kbuf / vbuf (n rows of
 * ATTN_QPAD(D) floats, the padding's zeros included) */
CKIR_INLINE void attn_fetch(attn_src s, int64_t j, int64_t n, int64_t D, float *kbuf, float *vbuf,
                            const float **k, const float **v, int64_t *st) {
  if (!s.kq) {
    *k = s.k + j * s.stride;
    *v = s.v + j * s.stride;
    *st = s.stride;
    return;
  }
  const int64_t dp = ATTN_QPAD(D);
  for (int64_t i = 0; i < n; i++) {
    ckir_internal_q8_0_deq(s.kq + (j + i) * s.qrow, ATTN_QBLK(D), kbuf + i * dp);
    ckir_internal_q8_0_deq(s.vq + (j + i) * s.qrow, ATTN_QBLK(D), vbuf + i * dp);
  }
  *k = kbuf;
  *v = vbuf;
  *st = dp;
}

/* value d of K (which 0) or V (1) row j of one head, for the reference */
static double attn_ref_at(attn_src s, int which, int64_t j, int64_t d) {
  if (!s.kq) return (which ? s.v : s.k)[j * s.stride + d];
  const uint8_t *b = (which ? s.vq : s.kq) + j * s.qrow + d / CKIR_QK * CKIR_Q8_0_BYTES;
  uint16_t h;
  memcpy(&h, b, sizeof h);
  return (double)ckir_internal_f16_to_f32(h) * (double)((const int8_t *)b)[2 + d % CKIR_QK];
}

/* ---- reference: two passes (max, then exp-weighted sum), double precision --- */

/* the score of key j: scale q.k, soft-capped when softcap > 0 */
static double attn_ref_score(const float *qr, attn_src kv, int64_t j, int64_t D, double scale,
                             double softcap) {
  double s = 0.0;
  for (int64_t d = 0; d < D; d++) s += (double)qr[d] * attn_ref_at(kv, 0, j, d);
  s *= scale;
  return softcap > 0.0 ? softcap * tanh(s / softcap) : s;
}

/* one row over keys j0 .. L - 1 */
static void attn_row_ref(const float *qr, attn_src kv, int64_t j0, int64_t L, int64_t D,
                         double scale, double softcap, float *out) {
  double mx = -INFINITY;
  for (int64_t j = j0; j < L; j++) {
    const double s = attn_ref_score(qr, kv, j, D, scale, softcap);
    mx = s > mx ? s : mx;
  }
  double acc[ATTN_MAX_D];
  double sum = 0.0;
  for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
  for (int64_t j = j0; j < L; j++) {
    double p = exp(attn_ref_score(qr, kv, j, D, scale, softcap) - mx);
    sum += p;
    for (int64_t d = 0; d < D; d++) acc[d] += p * attn_ref_at(kv, 1, j, d);
  }
  for (int64_t d = 0; d < D; d++) out[d] = (float)(acc[d] / sum);
}

/* the first key a query at position pos sees (window 0: key 0) */
CKIR_INLINE int64_t attn_first_key(int64_t pos, int64_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/* What a row's scores are: scale q.k, soft-capped (softcap tanh(s / softcap)) when
 * softcap > 0, over the keys from attn_first_key(pos, window) to pos.  Plain attention:
 * {1 / sqrt(D), 0, 0}. */
typedef struct {
  float scale, softcap;
  int64_t window;
} attn_opts;

CKIR_INLINE attn_opts attn_plain(int64_t D) {
  return (attn_opts){1.0f / sqrtf((float)D), 0.0f, 0};
}

/* sc[0 .. n) soft-capped (o.softcap > 0) */
CKIR_INLINE void attn_cap(float *sc, int64_t n, attn_opts o) {
  if (o.softcap > 0.0f)
    for (int64_t j = 0; j < n; j++) sc[j] = o.softcap * tanhf(sc[j] / o.softcap);
}

static void attn_ref(const float *q, attn_src kv, float *out, int64_t T, int64_t P, int64_t H,
                     int64_t KV, int64_t D, double scale, double softcap, int64_t window) {
  int64_t group = H / KV;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++)
      attn_row_ref(q + (t * H + h) * D, attn_head(kv, h / group, D), attn_first_key(P + t, window),
                   P + t + 1, D, scale, softcap, out + (t * H + h) * D);
}

void ckir_ref_attention_f32(const float *q, const float *kcache, const float *vcache, float *out,
                            int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {
  attn_ref(q, attn_src_f32(kcache, vcache, KV * D), out, T, P, H, KV, D, 1.0 / sqrt((double)D),
           0.0, 0);
}

void ckir_ref_attention_q8_0(const float *q, const uint8_t *kcache, const uint8_t *vcache,
                             float *out, int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D,
                             int64_t DB) {
  (void)DB;
  attn_ref(q, attn_src_q8_0(kcache, vcache, KV, D), out, T, P, H, KV, D, 1.0 / sqrt((double)D),
           0.0, 0);
}

void ckir_ref_attention_ext_q8_0(const float *q, const uint8_t *kcache, const uint8_t *vcache,
                                 float *out, int64_t T, int64_t P, int64_t H, int64_t KV,
                                 int64_t D, int64_t DB, float scale, float softcap,
                                 int64_t window) {
  (void)DB;
  attn_ref(q, attn_src_q8_0(kcache, vcache, KV, D), out, T, P, H, KV, D, scale, softcap, window);
}

/* ---- one (query, head) row, over ckir_vec.h ------------------------------ */

/* acc[0 .. m chunks) = acc * vcorr + sum_j pj[j * ps] * V row j (nk rows,
 * `stride` apart), m <= 4 independent FMA chains; the m-th chunk has ln lanes. */
CKIR_INLINE void pv_chunks(float *acc, const float *vr, int64_t stride, const float *pj,
                           int64_t ps, int64_t nk, ckv vcorr, const int m, int64_t ln) {
  ckv a[4];
  for (int i = 0; i < m; i++) a[i] = ckv_mul(ckv_load(acc + CKV_W * i), vcorr);
  for (int64_t j = 0; j < nk; j++) {
    const ckv pv = ckv_set1(pj[j * ps]);
    const float *v = vr + j * stride;
    for (int i = 0; i + 1 < m; i++) a[i] = ckv_fma(pv, ckv_loadu(v + CKV_W * i), a[i]);
    a[m - 1] = ckv_fma(pv, ckv_load_n(v + CKV_W * (m - 1), ln), a[m - 1]);
  }
  for (int i = 0; i < m; i++) ckv_store(acc + CKV_W * i, a[i]);
}

/* D cut into nc chunks of CKV_W floats, the last one of tl lanes */
typedef struct {
  int64_t D, nc, tl;
} attn_dims;

/* acc (a row's D) = acc * vcorr + p . V over nk keys (p[j * ps]), the chunks of D
 * four at a time */
CKIR_INLINE void attn_pv(float *acc, const float *vr, int64_t stride, const float *p, int64_t ps,
                         int64_t nk, attn_dims dd, ckv vcorr) {
  for (int64_t c = 0; c < dd.nc; c += 4) {
    const int64_t ln = c + 4 >= dd.nc ? dd.tl : CKV_W;
    float *ac = acc + CKV_W * c;
    switch (CKIR_MIN(4, dd.nc - c)) {
    case 4: pv_chunks(ac, vr + CKV_W * c, stride, p, ps, nk, vcorr, 4, ln); break;
    case 3: pv_chunks(ac, vr + CKV_W * c, stride, p, ps, nk, vcorr, 3, ln); break;
    case 2: pv_chunks(ac, vr + CKV_W * c, stride, p, ps, nk, vcorr, 2, ln); break;
    default: pv_chunks(ac, vr + CKV_W * c, stride, p, ps, nk, vcorr, 1, ln); break;
    }
  }
}

CKIR_INLINE attn_dims attn_dims_of(int64_t D) {
  const int64_t nc = (D + CKV_W - 1) / CKV_W;
  return (attn_dims){D, nc, D - (nc - 1) * CKV_W};
}

/* a row's running state: q times the score scale (qs), the output accumulator
 * (acc), the running max (m) and sum of exp (l) */
CKIR_INLINE void attn_start_scaled(const float *qr, attn_dims dd, float scale, float *qs,
                                   float *acc, float *m, float *l) {
  const ckv vscale = ckv_set1(scale);
  for (int64_t c = 0; c < dd.nc; c++) {
    const int64_t n = c + 1 < dd.nc ? CKV_W : dd.tl;
    ckv_store(qs + CKV_W * c, ckv_mul(ckv_load_n(qr + CKV_W * c, n), vscale));
    ckv_store(acc + CKV_W * c, ckv_zero());
  }
  *m = -INFINITY;
  *l = 0.0f;
}

/* prefetch the K and V rows of keys [j, j + n) (all `stride` floats of each
 * row from kb / vb on: a head's D, or every KV head's) into L1 */
CKIR_INLINE void attn_prefetch(const float *kb, const float *vb, int64_t stride, int64_t j,
                               int64_t n, int64_t len) {
  for (int64_t i = j; i < j + n; i++)
    for (int64_t d = 0; d < len; d += 16) {
      __builtin_prefetch(kb + i * stride + d, 0, 3);
      __builtin_prefetch(vb + i * stride + d, 0, 3);
    }
}

/* the scores of nk keys (rows from kr, `stride` floats apart) against qs,
 * into sc[0 .. nk) (sc holds whole blocks: its lanes past nk are written too) */
CKIR_INLINE void attn_scores(const float *qs, const float *kr, int64_t stride, int64_t nk,
                             attn_dims dd, float *sc) {
  const int64_t nc = dd.nc, tl = dd.tl;
  for (int64_t j0 = 0; j0 < nk; j0 += CKV_W) {
    const float *row[CKV_W];
    for (int j = 0; j < CKV_W; j++) row[j] = j0 + j < nk ? kr + (j0 + j) * stride : attn_zero_row;
    ckv part[CKV_W];
    for (int j = 0; j < CKV_W; j++) part[j] = ckv_zero();
    for (int64_t c = 0; c + 1 < nc; c++) {
      const ckv qc = ckv_load(qs + CKV_W * c);
      for (int j = 0; j < CKV_W; j++) part[j] = ckv_fma(qc, ckv_loadu(row[j] + CKV_W * c), part[j]);
    }
    const ckv ql = ckv_load(qs + CKV_W * (nc - 1));
    for (int j = 0; j < CKV_W; j++)
      part[j] = ckv_fma(ql, ckv_load_n(row[j] + CKV_W * (nc - 1), tl), part[j]);
    ckv_store(sc + j0, ckv_reduce_add_w(part));
  }
}

/* A chunk of nk keys whose scores are sc[0 .. nk) (overwritten by their
 * exp) and V rows vr into a row's running state: one max, one rescale of acc
 * and one p . V pass for the whole chunk. */
CKIR_INLINE void attn_chunk(float *sc, const float *vr, int64_t stride, int64_t nk, attn_dims dd,
                            float *acc, float *m, float *l) {
  ckv vm = ckv_set1(-INFINITY);
  for (int64_t j = 0; j < nk; j += CKV_W)
    vm = ckv_max(vm, ckv_select_n(ckv_load(sc + j), CKIR_MIN(CKV_W, nk - j), -INFINITY));
  const float cmax = ckv_reduce_max(vm), mnew = cmax > *m ? cmax : *m;
  const ckv vmn = ckv_set1(mnew);
  ckv vs = ckv_zero();
  for (int64_t j = 0; j < nk; j += CKV_W) {
    const ckv p = ckv_keep_n(ckv_exp(ckv_sub(ckv_load(sc + j), vmn)), CKIR_MIN(CKV_W, nk - j));
    ckv_store(sc + j, p);
    vs = ckv_add(vs, p);
  }
  const float corr = expf(*m - mnew);
  *l = *l * corr + ckv_reduce_add(vs);
  *m = mnew;
  attn_pv(acc, vr, stride, sc, 1, nk, dd, ckv_set1(corr));
}

/* out = acc / l */
CKIR_INLINE void attn_finish(const float *acc, float l, attn_dims dd, float *out) {
  const ckv inv = ckv_set1(1.0f / l);
  for (int64_t c = 0; c < dd.nc; c++)
    ckv_store_n(out + CKV_W * c, c + 1 < dd.nc ? CKV_W : dd.tl,
                ckv_mul(ckv_load(acc + CKV_W * c), inv));
}

/* One (query, head) row over keys j_first .. L - 1 of one head (kv from
 * attn_head), in chunks of ATTN_CHUNK, its scores as o says. */
static void attn_ext_row(const float *qr, attn_src kv, int64_t j_first, int64_t L, int64_t D,
                         attn_opts o, float *out) {
  float qs[ATTN_MAX_D + CKV_W] __attribute__((aligned(64)));
  float acc[ATTN_MAX_D + CKV_W] __attribute__((aligned(64)));
  float sc[ATTN_CHUNK] __attribute__((aligned(64)));
  float kbuf[kv.kq ? ATTN_CHUNK * ATTN_QPAD(D) : 1], vbuf[kv.kq ? ATTN_CHUNK * ATTN_QPAD(D) : 1];
  const attn_dims dd = attn_dims_of(D);
  float m, l;
  attn_start_scaled(qr, dd, o.scale, qs, acc, &m, &l);
  for (int64_t j0 = j_first; j0 < L; j0 += ATTN_CHUNK) {
    const int64_t nk = CKIR_MIN(ATTN_CHUNK, L - j0), pf = j0 + ATTN_CHUNK;
    if (!kv.kq)
      attn_prefetch(kv.k, kv.v, kv.stride, pf, CKIR_MAX(0, CKIR_MIN(ATTN_CHUNK, L - pf)), D);
    const float *kr, *vr;
    int64_t st;
    attn_fetch(kv, j0, nk, D, kbuf, vbuf, &kr, &vr, &st);
    attn_scores(qs, kr, st, nk, dd, sc);
    attn_cap(sc, nk, o);
    attn_chunk(sc, vr, st, nk, dd, acc, &m, &l);
  }
  attn_finish(acc, l, dd, out);
}

/* ---- prefill: CKV_W query rows of one head at a time ---------------------- */

#define ATTN_PF_CHUNK 32 /* keys per online-softmax step of a row block */

/* nq <= CKV_W consecutive query rows of one head (row r at qr + r * qs, at
 * position p0 + r: it sees keys attn_first_key(p0 + r, o.window) .. p0 + r) with the
 * rows in the lanes of a vector: qt[d] holds q[r][d] * o.scale in lane r, so the
 * scores of one key for every row are D FMAs of a broadcast K element against qt[d]
 * (no horizontal sums, 4 keys in flight), and the online softmax (max, exp, rescale,
 * sum) runs lane-wise over a chunk of keys, its per-row bookkeeping shared by the
 * block.
 * Scores are soft-capped first (o.softcap > 0); keys past a row's position, and
 * before its window, get -inf (the rows of a block end at most CKV_W - 1 positions
 * apart).  p . V then runs row by row over the chunk's keys of that row (p strided
 * by CKV_W). */
static void attn_prefill_block(const float *qr, int64_t qs, int64_t nq, attn_src kv, int64_t p0,
                               int64_t D, attn_opts o, float *out, int64_t os) {
  const attn_dims dd = attn_dims_of(D);
  const int64_t W = dd.nc * CKV_W;
  float qt[ATTN_MAX_D * CKV_W] __attribute__((aligned(64)));
  float acc[CKV_W * (ATTN_MAX_D + CKV_W)] __attribute__((aligned(64)));
  float pt[ATTN_PF_CHUNK * CKV_W] __attribute__((aligned(64)));
  float vec[CKV_W] __attribute__((aligned(64)));
  float kbuf[kv.kq ? ATTN_PF_CHUNK * ATTN_QPAD(D) : 1];
  float vbuf[kv.kq ? ATTN_PF_CHUNK * ATTN_QPAD(D) : 1];
  /* lanes r of neg + (CKV_W - k): -inf where r < k, else 0 (ckv_exp takes -inf
   * to 0, or to 2^-126 where it clamps, a weight below every rounding here) */
  float neg[2 * CKV_W];
  for (int i = 0; i < 2 * CKV_W; i++) neg[i] = i < CKV_W ? -INFINITY : 0.0f;
  /* lanes r of negt + CKV_W - c with c in [1, CKV_W): -inf where r >= c (the rows
   * whose window starts after the key) */
  float negt[2 * CKV_W];
  for (int i = 0; i < 2 * CKV_W; i++) negt[i] = i < CKV_W ? 0.0f : -INFINITY;
  for (int64_t d = 0; d < D; d++)
    for (int64_t r = 0; r < CKV_W; r++)
      qt[d * CKV_W + r] = r < nq ? qr[r * qs + d] * o.scale : 0.0f;
  for (int64_t r = 0; r < nq; r++)
    for (int64_t c = 0; c < dd.nc; c++) ckv_store(acc + r * W + CKV_W * c, ckv_zero());
  /* the running max starts finite: a window can leave a row no key in a whole chunk,
   * whose scores are all -inf (its exp(-inf - -FLT_MAX) is 0, not NaN) */
  ckv m = ckv_set1(-FLT_MAX), l = ckv_zero();
  const int64_t L = p0 + nq;
  for (int64_t j0 = attn_first_key(p0, o.window); j0 < L; j0 += ATTN_PF_CHUNK) {
    const int64_t nk = CKIR_MIN(ATTN_PF_CHUNK, L - j0);
    const float *kch, *vch;
    int64_t st;
    attn_fetch(kv, j0, nk, D, kbuf, vbuf, &kch, &vch, &st);
    ckv cm = ckv_set1(-INFINITY);
    for (int64_t j = 0; j < nk; j += 4) {
      const int64_t n4 = CKIR_MIN(4, nk - j);
      const float *k[4];
      for (int i = 0; i < 4; i++) k[i] = kch + (j + (i < n4 ? i : 0)) * st;
      ckv s[4] = {ckv_zero(), ckv_zero(), ckv_zero(), ckv_zero()};
      for (int64_t d = 0; d < D; d++) {
        const ckv qd = ckv_load(qt + d * CKV_W);
        for (int i = 0; i < 4; i++) s[i] = ckv_fma(ckv_set1(k[i][d]), qd, s[i]);
      }
      for (int64_t i = 0; i < n4; i++) {
        const int64_t key = j0 + j + i, left = key - p0 + o.window;
        ckv si = s[i];
        if (o.softcap > 0.0f) { /* before the masks: the cap of -inf is finite */
          ckv_store(vec, si);
          attn_cap(vec, CKV_W, o);
          si = ckv_load(vec);
        }
        if (key > p0) si = ckv_add(si, ckv_loadu(neg + CKV_W - (key - p0)));
        if (o.window > 0 && left < CKV_W) si = ckv_add(si, ckv_loadu(negt + CKV_W - left));
        ckv_store(pt + (j + i) * CKV_W, si);
        cm = ckv_max(cm, si);
      }
    }
    const ckv mnew = ckv_max(m, cm);
    ckv ls = ckv_zero();
    for (int64_t j = 0; j < nk; j++) {
      const ckv p = ckv_exp(ckv_sub(ckv_load(pt + j * CKV_W), mnew));
      ckv_store(pt + j * CKV_W, p);
      ls = ckv_add(ls, p);
    }
    const ckv corr = ckv_exp(ckv_sub(m, mnew)); /* the first chunk: exp(-inf), 0 x 0 */
    l = ckv_fma(l, corr, ls);
    m = mnew;
    ckv_store(vec, corr);
    for (int64_t r = 0; r < nq; r++) {
      /* the row's keys in this chunk, [lo, hi); none: nothing to add, and its lane's
       * max did not move (corr exactly 1) */
      const int64_t hi = CKIR_MIN(nk, p0 + r + 1 - j0);
      const int64_t lo = CKIR_MAX(0, attn_first_key(p0 + r, o.window) - j0);
      if (hi > lo)
        attn_pv(acc + r * W, vch + lo * st, st, pt + lo * CKV_W + r, CKV_W, hi - lo, dd,
                ckv_set1(vec[r]));
    }
  }
  ckv_store(vec, l);
  for (int64_t r = 0; r < nq; r++) attn_finish(acc + r * W, vec[r], dd, out + r * os);
}

/* ---- decode: the cached positions split between threads ------------------ */

/* Decode reads every cached K and V row once per call, cold: the whole
 * model's weights streamed through the caches since this layer's last step.
 * So each thread takes one contiguous range of positions and runs every head
 * over it: all KV heads of a position are adjacent in the cache, so a thread
 * reads one sequential stream of whole rows, and each row once for all the
 * heads of its group.  Each thread's partial rows (running max m, sum l,
 * accumulator) are then merged per head, the heads split between the threads
 * (split-K decoding). */
#define ATTN_SPLIT_MAX 16
#define ATTN_DEC_MAX_HD 4096 /* H * D of the split path (per-thread state on the stack) */
#define ATTN_DEC_MAX_H 256

typedef struct {
  const float *acc[ATTN_SPLIT_MAX]; /* each part's H accumulators, W floats apart */
  float m[ATTN_SPLIT_MAX][ATTN_DEC_MAX_H], l[ATTN_SPLIT_MAX][ATTN_DEC_MAX_H];
} attn_parts;

/* part s of n: its share of the L keys (whole blocks of CKV_W), every head;
 * then (n > 1: after a barrier) the merge of heads [H * s / n, H * (s + 1) / n)
 * from every part into out */
static void attn_decode_part(const float *q, attn_src kv, float *out, int64_t L, int64_t H,
                             int64_t KV, int64_t D, attn_opts o, int s, int n,
                             attn_parts *parts) {
  const attn_dims dd = attn_dims_of(D);
  const int64_t W = dd.nc * CKV_W, group = H / KV, stride = KV * D;
  float qs[H * W + CKV_W], acc[H * W + CKV_W]; /* VLAs, vector-aligned below */
  float kbuf[kv.kq ? ATTN_CHUNK * ATTN_QPAD(D) : 1];
  float vbuf[kv.kq ? ATTN_CHUNK * ATTN_QPAD(D) : 1];
  const uintptr_t va = sizeof(float) * CKV_W;
  float *qsa = (float *)(((uintptr_t)qs + va - 1) & ~(va - 1));
  float *acca = (float *)(((uintptr_t)acc + va - 1) & ~(va - 1));
  float *m = parts->m[s], *l = parts->l[s];
  for (int64_t h = 0; h < H; h++)
    attn_start_scaled(q + h * D, dd, o.scale, qsa + h * W, acca + h * W, &m[h], &l[h]);
  const int64_t jf = attn_first_key(L - 1, o.window), nblk = (L - jf + CKV_W - 1) / CKV_W;
  const int64_t j0 = jf + nblk * s / n * CKV_W;
  const int64_t j1 = CKIR_MIN(L, jf + nblk * (s + 1) / n * CKV_W);
  float sc[ATTN_CHUNK] __attribute__((aligned(64)));
  if (!kv.kq) attn_prefetch(kv.k, kv.v, stride, j0, CKIR_MIN(ATTN_CHUNK, j1 - j0), stride);
  for (int64_t jc = j0; jc < j1; jc += ATTN_CHUNK) {
    const int64_t nk = CKIR_MIN(ATTN_CHUNK, j1 - jc), next = jc + ATTN_CHUNK;
    /* the next chunk's rows (every KV head), one slice of them per head */
    const int64_t pn = CKIR_MAX(0, CKIR_MIN(ATTN_CHUNK, j1 - next)), per = (pn + H - 1) / H;
    for (int64_t g = 0; g < KV; g++) {
      const float *kr, *vr;
      int64_t st;
      attn_fetch(attn_head(kv, g, D), jc, nk, D, kbuf, vbuf, &kr, &vr, &st);
      for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const int64_t ph = CKIR_MAX(0, CKIR_MIN(per, pn - h * per));
        if (!kv.kq) attn_prefetch(kv.k, kv.v, stride, next + h * per, ph, stride);
        attn_scores(qsa + h * W, kr, st, nk, dd, sc);
        attn_cap(sc, nk, o);
        attn_chunk(sc, vr, st, nk, dd, acca + h * W, &m[h], &l[h]);
      }
    }
  }
  if (n == 1) {
    for (int64_t h = 0; h < H; h++) attn_finish(acca + h * W, l[h], dd, out + h * D);
    return;
  }
  parts->acc[s] = acca;
#pragma omp barrier
  for (int64_t h = H * s / n; h < H * (s + 1) / n; h++) {
    float mx = -INFINITY, sum = 0.0f;
    for (int t = 0; t < n; t++) mx = parts->m[t][h] > mx ? parts->m[t][h] : mx;
    ckv o[ATTN_MAX_D / CKV_W + 1];
    for (int64_t c = 0; c < dd.nc; c++) o[c] = ckv_zero();
    for (int t = 0; t < n; t++) {
      const float w = parts->l[t][h] > 0.0f ? expf(parts->m[t][h] - mx) : 0.0f;
      sum += parts->l[t][h] * w;
      const ckv vw = ckv_set1(w);
      for (int64_t c = 0; c < dd.nc; c++)
        o[c] = ckv_fma(vw, ckv_load(parts->acc[t] + h * W + CKV_W * c), o[c]);
    }
    const ckv inv = ckv_set1(1.0f / sum);
    for (int64_t c = 0; c < dd.nc; c++)
      ckv_store_n(out + h * D + CKV_W * c, c + 1 < dd.nc ? CKV_W : dd.tl, ckv_mul(o[c], inv));
  }
  /* the other parts read acca until the region's closing barrier */
}

static void attn_decode(const float *q, attn_src kv, float *out, int64_t L, int64_t H, int64_t KV,
                        int64_t D, attn_opts o, int par) {
  attn_parts parts;
  int n = 1;
#ifdef _OPENMP
  if (par) n = omp_get_max_threads();
#endif
  const int64_t span = L - attn_first_key(L - 1, o.window);
  n = (int)CKIR_MIN(CKIR_MIN(n, ATTN_SPLIT_MAX), CKIR_MAX(1, span / (4 * CKV_W)));
  if (n == 1) {
    attn_decode_part(q, kv, out, L, H, KV, D, o, 0, 1, &parts);
    return;
  }
#pragma omp parallel num_threads(n)
  {
    int s, nt;
    ckir_team(&s, &nt);
    attn_decode_part(q, kv, out, L, H, KV, D, o, s, nt, &parts);
  }
}

/* a thread's rows of a prefill, and the next of their units to run (taken by
 * any thread) */
typedef struct {
  int64_t r0, r1;
  int64_t next;
  char pad[64 - 3 * sizeof(int64_t)];
} attn_queue;

/* the units of rows [r0, r1), longest rows first: all of them, or those a
 * shared counter hands out one at a time */
static void attn_prefill_rows(const float *q, attn_src kv, float *out, int64_t r0, int64_t r1,
                              int64_t P, int64_t H, int64_t group, int64_t D, attn_opts o,
                              int64_t *next) {
  const int64_t nblk = (r1 - r0 + CKV_W - 1) / CKV_W, units = nblk * H;
  for (int64_t i = 0;; i++) {
    int64_t u = i;
    if (next) {
#pragma omp atomic capture
      u = (*next)++;
    }
    if (u >= units) return;
    const int64_t b = nblk - 1 - u / H, h = u % H, g = h / group, t0 = r0 + b * CKV_W;
    attn_prefill_block(q + (t0 * H + h) * D, H * D, CKIR_MIN(CKV_W, r1 - t0), attn_head(kv, g, D),
                       P + t0, D, o, out + (t0 * H + h) * D, H * D);
  }
}

/* attention over the cache rows kv (fp32 or Q8_0), its scores as o says: decode or
 * prefill */
static void attn_run(const float *q, attn_src kv, float *out, int64_t T, int64_t P, int64_t H,
                     int64_t KV, int64_t D, attn_opts o) {
  const int64_t group = H / KV, pairs = T * H;
  /* work ~ pairs * keys * D; stay serial for tiny calls */
  const int64_t span = o.window > 0 ? CKIR_MIN(o.window, P + T) : P + T;
  const int par = pairs * span * D >= CKIR_PAR_MIN_WORK && pairs > 1;
  if (T == 1 && H * D <= ATTN_DEC_MAX_HD && H <= ATTN_DEC_MAX_H) {
    attn_decode(q, kv, out, P + 1, H, KV, D, o, par);
    return;
  }
  if (T == 1) {
    /* decode of many heads: one contiguous range of heads per thread, so the
     * heads of one KV group mostly share a thread and its K and V rows come
     * from DRAM once */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t h = 0; h < H; h++)
      attn_ext_row(q + h * D, attn_head(kv, h / group, D), attn_first_key(P, o.window), P + 1, D,
                   o, out + h * D);
    return;
  }
  /* prefill: units of CKV_W rows of one head, the longest (last) rows first.
   * Each thread runs the units of its own rows (ckir_own_rows), then helps
   * with what is left of the others' (the causal mask gives later rows more
   * keys, so the owner of the first rows is done first). */
  if (!par) {
    attn_prefill_rows(q, kv, out, 0, T, P, H, group, D, o, NULL);
    return;
  }
  int nt = 1;
#ifdef _OPENMP
  nt = omp_get_max_threads();
#endif
  attn_queue qs[nt];
#pragma omp parallel num_threads(nt)
  {
    int t, n;
    ckir_team(&t, &n);
    ckir_own_rows(T, &qs[t].r0, &qs[t].r1);
    qs[t].next = 0;
#pragma omp barrier
    for (int k = 0; k < n; k++) { /* its own rows, then the others' */
      attn_queue *qq = &qs[(t + k) % n];
      attn_prefill_rows(q, kv, out, qq->r0, qq->r1, P, H, group, D, o, &qq->next);
    }
  }
}

void ckir_attention_f32(const float *q, const float *kcache, const float *vcache, float *out,
                        int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && KV >= 1 && H % KV == 0 && D >= 1 && D <= ATTN_MAX_D,
               "attention_f32");
  attn_run(q, attn_src_f32(kcache, vcache, KV * D), out, T, P, H, KV, D, attn_plain(D));
}

void ckir_internal_attention_ext_f32(const float *q, const float *kcache, const float *vcache,
                                     float *out, int64_t T, int64_t P, int64_t H, int64_t KV,
                                     int64_t D, float scale, float softcap, int64_t window) {
  attn_run(q, attn_src_f32(kcache, vcache, KV * D), out, T, P, H, KV, D,
           (attn_opts){scale, softcap, window});
}

void ckir_attention_q8_0(const float *q, const uint8_t *kcache, const uint8_t *vcache, float *out,
                         int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D, int64_t DB) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && KV >= 1 && H % KV == 0 && D >= 1 && D <= ATTN_MAX_D &&
                   DB == ATTN_QBLK(D),
               "attention_q8_0");
  attn_run(q, attn_src_q8_0(kcache, vcache, KV, D), out, T, P, H, KV, D, attn_plain(D));
}

void ckir_attention_ext_q8_0(const float *q, const uint8_t *kcache, const uint8_t *vcache,
                             float *out, int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D,
                             int64_t DB, float scale, float softcap, int64_t window) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && KV >= 1 && H % KV == 0 && D >= 1 && D <= ATTN_MAX_D &&
                   DB == ATTN_QBLK(D) && softcap >= 0.0f && window >= 0,
               "attention_ext_q8_0");
  attn_run(q, attn_src_q8_0(kcache, vcache, KV, D), out, T, P, H, KV, D,
           (attn_opts){scale, softcap, window});
}
