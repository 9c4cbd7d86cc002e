/* ckir runtime: causal multi-head / grouped-query attention over the KV cache.
 *
 * One (query t, head h) pair is one unit of work; pairs are spread over OpenMP
 * threads round-robin (pair = t*H + h, schedule(static, 1)), which balances the
 * causal triangle.  Decode (T = 1) gives each thread one contiguous range of
 * heads instead, so that the heads of a KV group mostly share a thread (and its
 * K and V rows, cold in DRAM at every step); each row prefetches the K and V
 * rows ATTN_PF_KEYS keys ahead.  Cold-cache decode (benchmarks/
 * bench_attention_decode.py, 2 threads, Zen 4, new/old): SmolLM2 heads 9/3
 * 0.877, GPT-2 12/12 0.886, Qwen2 14/2 1.025 (noise).
 *
 * Keys are visited in blocks of CKV_W (16 on AVX-512, 8 on AVX2 and in the
 * scalar build): the block's scores live in registers / a small stack array,
 * the running max and sum are updated once per block (online softmax), and the
 * output accumulator (<= 256 floats) lives on the stack.  No T x T scores.  One
 * body for every ISA (ckir_vec.h), written to keep the FMA pipes fed: a
 * block's scores are CKV_W independent chains (chunks of D outer, keys inner)
 * reduced by one transposing horizontal sum, and p . V runs up to four chunks
 * of D at a time, the last (partial) chunk within its group (AVX2, SmolLM-135M
 * shape, decode at position ~160: attention 1.44 -> 0.89 ms per token against
 * one chain per key, measured with `ckir bench --profile`). */
#include "ckir_internal.h"

#define ATTN_MAX_D 256
#ifndef ATTN_PF_KEYS
#define ATTN_PF_KEYS 64
#endif

/* the key row a partial block reads for its missing keys */
static const float attn_zero_row[ATTN_MAX_D + 16] __attribute__((aligned(64)));

/* ---- reference: two passes (max, then exp-weighted sum), double precision --- */

static void attn_row_ref(const float *qr, const float *kb, const float *vb, int64_t stride,
                         int64_t L, int64_t D, float *out) {
  double scale = 1.0 / sqrt((double)D);
  double mx = -INFINITY;
  for (int64_t j = 0; j < L; j++) {
    double s = 0.0;
    for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
    s *= scale;
    mx = s > mx ? s : mx;
  }
  double acc[ATTN_MAX_D];
  double sum = 0.0;
  for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
  for (int64_t j = 0; j < L; j++) {
    double s = 0.0;
    for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * stride + d];
    double p = exp(s * scale - mx);
    sum += p;
    for (int64_t d = 0; d < D; d++) acc[d] += p * vb[j * stride + d];
  }
  for (int64_t d = 0; d < D; d++) out[d] = (float)(acc[d] / sum);
}

void ckir_ref_attention_f32(const float *q, const float *kcache, const float *vcache, float *out,
                            int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {
  int64_t group = H / KV, stride = KV * D;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      int64_t g = h / group;
      attn_row_ref(q + (t * H + h) * D, kcache + g * D, vcache + g * D, stride, P + t + 1, D,
                   out + (t * H + h) * D);
    }
}

/* ---- one (query, head) row, over ckir_vec.h ------------------------------ */

/* acc[0 .. m chunks) = acc * vcorr + sum_j pj[j] * V row j (nk rows, `stride`
 * apart), m <= 4 independent FMA chains; the m-th chunk has ln lanes. */
CKIR_INLINE void pv_chunks(float *acc, const float *vr, int64_t stride, const float *pj,
                           int64_t nk, ckv vcorr, const int m, int64_t ln) {
  ckv a[4];
  for (int i = 0; i < m; i++) a[i] = ckv_mul(ckv_load(acc + CKV_W * i), vcorr);
  for (int64_t j = 0; j < nk; j++) {
    const ckv pv = ckv_set1(pj[j]);
    const float *v = vr + j * stride;
    for (int i = 0; i + 1 < m; i++) a[i] = ckv_fma(pv, ckv_loadu(v + CKV_W * i), a[i]);
    a[m - 1] = ckv_fma(pv, ckv_load_n(v + CKV_W * (m - 1), ln), a[m - 1]);
  }
  for (int i = 0; i < m; i++) ckv_store(acc + CKV_W * i, a[i]);
}

/* Keys in blocks of CKV_W.  D is cut into nc chunks of CKV_W floats (the last
 * has tl lanes); q (scaled) and the output accumulator live in stack arrays. */
static void attn_row(const float *qr, const float *kb, const float *vb, int64_t stride, int64_t L,
                     int64_t D, float *out) {
  float qs[ATTN_MAX_D + CKV_W] __attribute__((aligned(64)));
  float acc[ATTN_MAX_D + CKV_W] __attribute__((aligned(64)));
  float pj[CKV_W] __attribute__((aligned(64)));
  const int64_t nc = (D + CKV_W - 1) / CKV_W, tl = D - (nc - 1) * CKV_W;
  const ckv vscale = ckv_set1(1.0f / sqrtf((float)D));
  for (int64_t c = 0; c < nc; c++) {
    const int64_t n = c + 1 < nc ? CKV_W : tl;
    ckv_store(qs + CKV_W * c, ckv_mul(ckv_load_n(qr + CKV_W * c, n), vscale));
    ckv_store(acc + CKV_W * c, ckv_zero());
  }
  float mrun = -INFINITY, lrun = 0.0f;
  for (int64_t j0 = 0; j0 < L; j0 += CKV_W) {
    const int64_t nk = CKIR_MIN(CKV_W, L - j0);
    /* the K and V rows ATTN_PF_KEYS keys ahead, into L1 */
    for (int64_t j = j0 + ATTN_PF_KEYS; j < CKIR_MIN(j0 + ATTN_PF_KEYS + CKV_W, L); j++)
      for (int64_t d = 0; d < D; d += 16) {
        __builtin_prefetch(kb + j * stride + d, 0, 3);
        __builtin_prefetch(vb + j * stride + d, 0, 3);
      }
    /* the block's scores, key j's in lane j (lanes >= nk: -inf for the max, 0
     * after exp): keys inner, chunks outer, CKV_W independent FMA chains in
     * registers, then one transposing reduction. */
    const float *kr = kb + j0 * stride;
    /* key rows of the block; a partial block's missing keys read a row of
     * zeros, so it runs the same CKV_W chains (in registers) and its extra
     * lanes are masked to -inf below */
    const float *row[CKV_W];
    for (int j = 0; j < CKV_W; j++) row[j] = j < nk ? kr + j * stride : attn_zero_row;
    ckv part[CKV_W];
    for (int j = 0; j < CKV_W; j++) part[j] = ckv_zero();
    for (int64_t c = 0; c + 1 < nc; c++) {
      const ckv qc = ckv_load(qs + CKV_W * c);
      for (int j = 0; j < CKV_W; j++) part[j] = ckv_fma(qc, ckv_loadu(row[j] + CKV_W * c), part[j]);
    }
    const ckv ql = ckv_load(qs + CKV_W * (nc - 1));
    for (int j = 0; j < CKV_W; j++)
      part[j] = ckv_fma(ql, ckv_load_n(row[j] + CKV_W * (nc - 1), tl), part[j]);
    const ckv s = ckv_select_n(ckv_reduce_add_w(part), nk, -INFINITY);
    const float bmax = ckv_reduce_max(s), mnew = bmax > mrun ? bmax : mrun;
    const ckv p = ckv_keep_n(ckv_exp(ckv_sub(s, ckv_set1(mnew))), nk);
    const float corr = expf(mrun - mnew);
    lrun = lrun * corr + ckv_reduce_add(p);
    mrun = mnew;
    ckv_store(pj, p);
    const ckv vcorr = ckv_set1(corr);
    /* acc += p . V: up to four chunks at a time (independent FMA chains), keys
     * inner; the last chunk (tl lanes) joins the last group */
    const float *vr = vb + j0 * stride;
    for (int64_t c = 0; c < nc; c += 4) {
      const int64_t ln = c + 4 >= nc ? tl : CKV_W; /* lanes of the group's last chunk */
      float *ac = acc + CKV_W * c;
      switch (CKIR_MIN(4, nc - c)) {
      case 4: pv_chunks(ac, vr + CKV_W * c, stride, pj, nk, vcorr, 4, ln); break;
      case 3: pv_chunks(ac, vr + CKV_W * c, stride, pj, nk, vcorr, 3, ln); break;
      case 2: pv_chunks(ac, vr + CKV_W * c, stride, pj, nk, vcorr, 2, ln); break;
      default: pv_chunks(ac, vr + CKV_W * c, stride, pj, nk, vcorr, 1, ln); break;
      }
    }
  }
  const ckv inv = ckv_set1(1.0f / lrun);
  for (int64_t c = 0; c < nc; c++)
    ckv_store_n(out + CKV_W * c, c + 1 < nc ? CKV_W : tl, ckv_mul(ckv_load(acc + CKV_W * c), inv));
}

void ckir_attention_f32(const float *q, const float *kcache, const float *vcache, float *out,
                        int64_t T, int64_t P, int64_t H, int64_t KV, int64_t D) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && KV >= 1 && H % KV == 0 && D >= 1 && D <= ATTN_MAX_D,
               "attention_f32");
  const int64_t group = H / KV, stride = KV * D, pairs = T * H;
  /* work ~ pairs * context * D; stay serial for tiny calls */
  const int par = pairs * (P + T) * D >= CKIR_PAR_MIN_WORK && pairs > 1;
  if (T == 1) {
    /* decode: one contiguous range of heads per thread, so the heads of one KV
     * group mostly share a thread and its K and V rows come from DRAM once */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t h = 0; h < H; h++) {
      const int64_t g = h / group;
      attn_row(q + h * D, kcache + g * D, vcache + g * D, stride, P + 1, D, out + h * D);
    }
    return;
  }
#pragma omp parallel for schedule(static, 1) if (par)
  for (int64_t pr = 0; pr < pairs; pr++) {
    const int64_t t = pr / H, h = pr % H, g = h / group;
    attn_row(q + pr * D, kcache + g * D, vcache + g * D, stride, P + t + 1, D, out + pr * D);
  }
}
