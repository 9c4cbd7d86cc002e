/* ckir runtime: row microkernels shared by several kernel sources (private).
 *
 * Static inline functions over the vector layer (ckir_vec.h), one definition
 * each, so that kernels promised to give the same bits as a chain of others
 * (fused_linear.c = gemv_f32 calls, fused_norm.c = add_f32 + rmsnorm_f32) run
 * the very same code:
 *
 *   ckir_row_sumsq    sum of v^2 over a row, v = a or a + b (optionally stored)
 *   ckir_row_scale    out = ((x - shift) * r) * gamma (+ beta)
 *   ckir_dot4         CKIR_ROWS_R = 4 dot products x . w_r (gemv, fused qkv/gate_up)
 *   ckir_dot4_x2      the same 4 rows of w against two rows of x (small-M gemm)
 *   ckir_dot1         one dot product (the rows left over by ckir_dot4)
 *   ckir_row_max      max over a row (softmax, cross-entropy forward and backward)
 *   ckir_row_exp_sum  sum of exp(x - mx) over a row, optionally storing the terms
 *
 * Include after ckir_internal.h.
 */
#ifndef CKIR_ROWS_H
#define CKIR_ROWS_H

#define CKIR_ROWS_R 4 /* rows of w per ckir_dot4 block */

CKIR_INLINE float ckir_row_max(const float *x, int64_t n) {
  ckv m = ckv_set1(-INFINITY);
  int64_t i = 0;
  CKV_LOOP(i, n, ln, m = ckv_max(m, ckv_load_n_or(x + i, ln, -INFINITY)););
  return ckv_reduce_max(m);
}

/* Returns sum(exp(x - mx)); when out != NULL also stores exp(x - mx) there (out may be x). */
CKIR_INLINE float ckir_row_exp_sum(const float *x, float *out, int64_t n, float mx) {
  const ckv vm = ckv_set1(mx);
  ckv acc = ckv_zero();
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv e = ckv_keep_n(ckv_exp(ckv_sub(ckv_load_n(x + i, ln), vm)), ln);
    acc = ckv_add(acc, e);
    if (out) ckv_store_n(out + i, ln, e);
  });
  return ckv_reduce_add(acc);
}

/* sum of v[e]^2 for e < E, v = a + b (v = a when b is NULL); v is written to s
 * unless s is NULL.  Two accumulators over pairs of vectors, the rest (whole and
 * partial vectors) into the first, one reduction at the end. */
CKIR_INLINE float ckir_row_sumsq(const float *a, const float *b, float *s, int64_t E) {
  ckv a0 = ckv_zero(), a1 = ckv_zero();
  int64_t e = 0;
  for (; e + 2 * CKV_W <= E; e += 2 * CKV_W) {
    ckv v0 = ckv_loadu(a + e), v1 = ckv_loadu(a + e + CKV_W);
    if (b) {
      v0 = ckv_add(v0, ckv_loadu(b + e));
      v1 = ckv_add(v1, ckv_loadu(b + e + CKV_W));
    }
    if (s) {
      ckv_storeu(s + e, v0);
      ckv_storeu(s + e + CKV_W, v1);
    }
    a0 = ckv_fma(v0, v0, a0);
    a1 = ckv_fma(v1, v1, a1);
  }
  CKV_LOOP(e, E, ln, {
    ckv v = ckv_load_n(a + e, ln);
    if (b) v = ckv_add(v, ckv_load_n(b + e, ln));
    if (s) ckv_store_n(s + e, ln, v);
    a0 = ckv_fma(v, v, a0);
  });
  return ckv_reduce_add(ckv_add(a0, a1));
}

/* out[e] = ((x[e] - shift) * r) * gamma[e] (+ beta[e] when beta != NULL) */
CKIR_INLINE void ckir_row_scale(const float *x, const float *gamma, const float *beta, float *out,
                                int64_t E, float shift, float r) {
  const ckv vs = ckv_set1(shift), vr = ckv_set1(r);
  int64_t e = 0;
  CKV_LOOP(e, E, ln, {
    ckv v = ckv_mul(ckv_mul(ckv_sub(ckv_load_n(x + e, ln), vs), vr), ckv_load_n(gamma + e, ln));
    if (beta) v = ckv_add(v, ckv_load_n(beta + e, ln));
    ckv_store_n(out + e, ln, v);
  });
}

/* out[r] = dot(x, w + r*K) for r < 4: two accumulators per row over pairs of
 * vectors (x stays in registers, four sequential streams of w), the rest into
 * the first. */
CKIR_INLINE void ckir_dot4(const float *x, const float *w, int64_t K, float out[CKIR_ROWS_R]) {
  const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
  ckv a0 = ckv_zero(), a1 = ckv_zero(), a2 = ckv_zero(), a3 = ckv_zero();
  ckv b0 = ckv_zero(), b1 = ckv_zero(), b2 = ckv_zero(), b3 = ckv_zero();
  int64_t k = 0;
  for (; k + 2 * CKV_W <= K; k += 2 * CKV_W) {
    const ckv x0 = ckv_loadu(x + k), x1 = ckv_loadu(x + k + CKV_W);
    a0 = ckv_fma(ckv_loadu(w0 + k), x0, a0);
    a1 = ckv_fma(ckv_loadu(w1 + k), x0, a1);
    a2 = ckv_fma(ckv_loadu(w2 + k), x0, a2);
    a3 = ckv_fma(ckv_loadu(w3 + k), x0, a3);
    b0 = ckv_fma(ckv_loadu(w0 + k + CKV_W), x1, b0);
    b1 = ckv_fma(ckv_loadu(w1 + k + CKV_W), x1, b1);
    b2 = ckv_fma(ckv_loadu(w2 + k + CKV_W), x1, b2);
    b3 = ckv_fma(ckv_loadu(w3 + k + CKV_W), x1, b3);
  }
  CKV_LOOP(k, K, ln, {
    const ckv x0 = ckv_load_n(x + k, ln);
    a0 = ckv_fma(ckv_load_n(w0 + k, ln), x0, a0);
    a1 = ckv_fma(ckv_load_n(w1 + k, ln), x0, a1);
    a2 = ckv_fma(ckv_load_n(w2 + k, ln), x0, a2);
    a3 = ckv_fma(ckv_load_n(w3 + k, ln), x0, a3);
  });
  out[0] = ckv_reduce_add(ckv_add(a0, b0));
  out[1] = ckv_reduce_add(ckv_add(a1, b1));
  out[2] = ckv_reduce_add(ckv_add(a2, b2));
  out[3] = ckv_reduce_add(ckv_add(a3, b3));
}

/* Two rows of x against the same 4 rows of w: each w load feeds two FMAs. */
CKIR_INLINE void ckir_dot4_x2(const float *x0, const float *x1, const float *w, int64_t K,
                              float out0[CKIR_ROWS_R], float out1[CKIR_ROWS_R]) {
  const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
  ckv a0 = ckv_zero(), a1 = ckv_zero(), a2 = ckv_zero(), a3 = ckv_zero();
  ckv b0 = ckv_zero(), b1 = ckv_zero(), b2 = ckv_zero(), b3 = ckv_zero();
  int64_t k = 0;
  CKV_LOOP(k, K, ln, {
    const ckv u = ckv_load_n(x0 + k, ln), v = ckv_load_n(x1 + k, ln);
    ckv r = ckv_load_n(w0 + k, ln);
    a0 = ckv_fma(r, u, a0);
    b0 = ckv_fma(r, v, b0);
    r = ckv_load_n(w1 + k, ln);
    a1 = ckv_fma(r, u, a1);
    b1 = ckv_fma(r, v, b1);
    r = ckv_load_n(w2 + k, ln);
    a2 = ckv_fma(r, u, a2);
    b2 = ckv_fma(r, v, b2);
    r = ckv_load_n(w3 + k, ln);
    a3 = ckv_fma(r, u, a3);
    b3 = ckv_fma(r, v, b3);
  });
  out0[0] = ckv_reduce_add(a0), out0[1] = ckv_reduce_add(a1);
  out0[2] = ckv_reduce_add(a2), out0[3] = ckv_reduce_add(a3);
  out1[0] = ckv_reduce_add(b0), out1[1] = ckv_reduce_add(b1);
  out1[2] = ckv_reduce_add(b2), out1[3] = ckv_reduce_add(b3);
}

/* dot(x, w) of one row */
CKIR_INLINE float ckir_dot1(const float *x, const float *w, int64_t K) {
  ckv a = ckv_zero();
  int64_t k = 0;
  CKV_LOOP(k, K, ln, a = ckv_fma(ckv_load_n(w + k, ln), ckv_load_n(x + k, ln), a););
  return ckv_reduce_add(a);
}

#endif /* CKIR_ROWS_H */
