/* ckir runtime: fused linear layers with fp32 weights (targets of --fuse-qkv and
 * --fuse-gate-up).
 *
 *   gemv_qkv_f32, gemv_qkv_bias_f32      q, k, v = x . wq^T, x . wk^T, x . wv^T (+ b)
 *   gemm_qkv_f32, gemm_qkv_bias_f32      the same for M rows of x (prefill)
 *   gemv_gate_up_f32, gemm_gate_up_f32   out = silu(x . wg^T) * (x . wu^T)
 *
 * Decode (and prefill with M <= FUSED_SMALL_M) streams the weights in the
 * dot-product form: blocks of FR weight rows, x stays in L1, and the blocks of
 * all matrices are split statically over the threads of ONE parallel region
 * (the unfused code opens one region per matrix, plus one for swiglu).  The
 * dot products accumulate exactly as gemv.c does, so a fused gemv gives the
 * same bits as the separate gemv_f32 calls.
 *
 * Prefill with larger M: qkv runs the runtime's blocked GEMM once per matrix
 * (each call already splits its columns over the threads); gate_up splits the
 * output into tiles of at most GU_MT x GU_NT, and every tile computes its gate
 * and up blocks with the runtime GEMM into stack buffers and writes
 * silu(gate) * up.  The tiles are spread over the threads; the GEMM called
 * inside a tile then runs on its calling thread (OpenMP nesting is inactive
 * by default), so there is no gate/up buffer and no separate swiglu pass. */
#include "ckir_internal.h"
#include "ckir_fused.h"

#define FR 4 /* weight rows per block (as GEMV_R in gemv.c) */
/* gemm_* with M <= FUSED_SMALL_M use the weight-streaming form (as gemm.c) */
#define FUSED_SMALL_M 8
#define GU_CH 64  /* gate/up rows per work unit of the streaming form */
/* gate_up GEMM tiles: at most GU_MT rows (a multiple of every GEMM_MR: 12, 6, 4)
 * by GU_NT columns (a multiple of every GEMM_NR).  Measured on M = 16..512,
 * N = 1536, K = 576 (2 threads): 144 x 256 runs at the speed of the unfused
 * gemm + gemm + swiglu or faster; 96 x 128 was 10-20 % slower (partial
 * register panels, more packing). */
#ifndef GU_MT
#define GU_MT 144
#endif
#ifndef GU_NT
#define GU_NT 256
#endif

/* ---- dot products ------------------------------------------------------- */

/* out[r] = dot(x, w + r*K) for r < FR */
static inline void dot4(const float *x, const float *w, int64_t K, float out[FR]) {
  const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
#if defined(CKIR_AVX512)
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
         a3 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(),
         b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), x0, a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k), x0, a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k), x0, a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k), x0, a3);
    b0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k + 16), x1, b0);
    b1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k + 16), x1, b1);
    b2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k + 16), x1, b2);
    b3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k + 16), x1, b3);
  }
  for (; k < K; k += 16) {
    const __mmask16 m = ckir_mask16(K - k);
    const __m512 x0 = _mm512_maskz_loadu_ps(m, x + k);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + k), x0, a0);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + k), x0, a1);
    a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + k), x0, a2);
    a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + k), x0, a3);
  }
  out[0] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
  out[1] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
  out[2] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
  out[3] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
#elif defined(CKIR_AVX2)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(),
         b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), x0, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), x0, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), x0, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), x0, a3);
    b0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k + 8), x1, b0);
    b1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k + 8), x1, b1);
    b2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k + 8), x1, b2);
    b3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k + 8), x1, b3);
  }
  for (; k + 8 <= K; k += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + k);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), x0, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), x0, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), x0, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), x0, a3);
  }
  float s0 = ckir_hsum_ps256(_mm256_add_ps(a0, b0)), s1 = ckir_hsum_ps256(_mm256_add_ps(a1, b1)),
        s2 = ckir_hsum_ps256(_mm256_add_ps(a2, b2)), s3 = ckir_hsum_ps256(_mm256_add_ps(a3, b3));
  for (; k < K; k++) {
    s0 += w0[k] * x[k];
    s1 += w1[k] * x[k];
    s2 += w2[k] * x[k];
    s3 += w3[k] * x[k];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
#else
  /* 8 independent lanes per row: auto-vectorisable without reassociation */
  float acc[FR][8] = {{0}};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int l = 0; l < 8; l++) {
      acc[0][l] += w0[k + l] * x[k + l];
      acc[1][l] += w1[k + l] * x[k + l];
      acc[2][l] += w2[k + l] * x[k + l];
      acc[3][l] += w3[k + l] * x[k + l];
    }
  for (int r = 0; r < FR; r++) {
    float s = 0.0f;
    for (int l = 0; l < 8; l++) s += acc[r][l];
    for (int64_t kk = k; kk < K; kk++) s += w[r * K + kk] * x[kk];
    out[r] = s;
  }
#endif
}

/* dot(x, w) of one row */
static inline float dot1(const float *x, const float *w, int64_t K) {
#if defined(CKIR_AVX512)
  __m512 a = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = ckir_mask16(K - k);
    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + k), _mm512_maskz_loadu_ps(m, x + k), a);
  }
  return _mm512_reduce_add_ps(a);
#elif defined(CKIR_AVX2)
  __m256 a = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a);
  float s = ckir_hsum_ps256(a);
  for (; k < K; k++) s += w[k] * x[k];
  return s;
#else
  float acc[8] = {0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int l = 0; l < 8; l++) acc[l] += w[k + l] * x[k + l];
  float s = 0.0f;
  for (int l = 0; l < 8; l++) s += acc[l];
  for (; k < K; k++) s += w[k] * x[k];
  return s;
#endif
}

/* out[r] = dot(x, w + r*K) for r < n: blocks of FR rows, then single rows */
static inline void rows_dot(const float *x, const float *w, int64_t n, int64_t K, float *out) {
  int64_t r = 0;
  for (; r + FR <= n; r += FR) dot4(x, w + r * K, K, out + r);
  for (; r < n; r++) out[r] = dot1(x, w + r * K, K);
}

/* out[i] = g[i] / (1 + e^-g[i]) * u[i] (the swiglu of elementwise.c) */
static void silu_mul_span(const float *g, const float *u, float *out, int64_t n) {
  int64_t i = 0;
#if defined(CKIR_AVX512)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i < n; i += 16) {
    const __mmask16 m = ckir_mask16(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
    const __m512 e = ckir_exp_ps512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), uv));
  }
#elif defined(CKIR_AVX2)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
    const __m256 e = ckir_exp_ps256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), uv));
  }
#endif
  for (; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- qkv ------------------------------------------------------------------ */

typedef struct {
  const float *w; /* [N, K] */
  const float *b; /* [N] or NULL */
  float *y;       /* [M, N] */
  int64_t N;
} fl_lin;

/* y_i[m, :] = x[m, :] . w_i^T (+ b_i) for the three matrices, M rows of x, in one
 * parallel region over the blocks of FR rows of all matrices. */
static void lin3_rows(const float *x, int64_t M, const fl_lin L[3], int64_t K) {
  int64_t nb[3], total = 0, rows = 0;
  for (int i = 0; i < 3; i++) {
    nb[i] = (L[i].N + FR - 1) / FR;
    total += nb[i];
    rows += L[i].N;
  }
#pragma omp parallel for schedule(static) if (M * rows * K >= 8 * CKIR_PAR_MIN_WORK && total > 1)
  for (int64_t blk = 0; blk < total; blk++) {
    int i = 0;
    int64_t j = blk;
    while (j >= nb[i]) j -= nb[i++];
    const fl_lin *l = &L[i];
    const int64_t n0 = j * FR, nr = CKIR_MIN(FR, l->N - n0);
    for (int64_t m = 0; m < M; m++) {
      float o[FR];
      rows_dot(x + m * K, l->w + n0 * K, nr, K, o);
      float *y = l->y + m * l->N + n0;
      for (int64_t r = 0; r < nr; r++) y[r] = o[r] + (l->b ? l->b[n0 + r] : 0.0f);
    }
  }
}

static void qkv(const float *x, const float *wq, const float *wk, const float *wv,
                const float *bq, const float *bk, const float *bv, float *q, float *k, float *v,
                int64_t M, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {
  CKIR_REQUIRE(M >= 1 && Nq >= 1 && Nk >= 1 && Nv >= 1 && K >= 1, "qkv_f32");
  if (M <= FUSED_SMALL_M) {
    const fl_lin L[3] = {{wq, bq, q, Nq}, {wk, bk, k, Nk}, {wv, bv, v, Nv}};
    lin3_rows(x, M, L, K);
  } else if (bq) {
    ckir_gemm_bias_f32(x, wq, bq, q, M, Nq, K);
    ckir_gemm_bias_f32(x, wk, bk, k, M, Nk, K);
    ckir_gemm_bias_f32(x, wv, bv, v, M, Nv, K);
  } else {
    ckir_gemm_f32(x, wq, q, M, Nq, K);
    ckir_gemm_f32(x, wk, k, M, Nk, K);
    ckir_gemm_f32(x, wv, v, M, Nv, K);
  }
}

void ckir_gemv_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                       float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,
                       int64_t K) {
  qkv(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_gemv_qkv_bias_f32(const float *x, const float *wq, const float *wk, const float *wv,
                            const float *bq, const float *bk, const float *bv, float *q,
                            float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {
  qkv(x, wq, wk, wv, bq, bk, bv, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_gemm_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                       float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,
                       int64_t Nv, int64_t K) {
  qkv(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, K);
}

void ckir_gemm_qkv_bias_f32(const float *x, const float *wq, const float *wk, const float *wv,
                            const float *bq, const float *bk, const float *bv, float *q,
                            float *k, float *v, int64_t M, int64_t Nq, int64_t Nk, int64_t Nv,
                            int64_t K) {
  qkv(x, wq, wk, wv, bq, bk, bv, q, k, v, M, Nq, Nk, Nv, K);
}

/* ---- gate_up -------------------------------------------------------------- */

/* streaming form: chunks of GU_CH rows of wg and wu per work unit */
static void gate_up_rows(const float *x, int64_t M, const float *wg, const float *wu, float *out,
                         int64_t N, int64_t K) {
  const int64_t nch = (N + GU_CH - 1) / GU_CH;
#pragma omp parallel for schedule(static) if (2 * M * N * K >= 8 * CKIR_PAR_MIN_WORK && nch > 1)
  for (int64_t c = 0; c < nch; c++) {
    const int64_t n0 = c * GU_CH, nr = CKIR_MIN(GU_CH, N - n0);
    for (int64_t m = 0; m < M; m++) {
      float g[GU_CH], u[GU_CH];
      rows_dot(x + m * K, wg + n0 * K, nr, K, g);
      rows_dot(x + m * K, wu + n0 * K, nr, K, u);
      silu_mul_span(g, u, out + m * N + n0, nr);
    }
  }
}

void ckir_gemv_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                           int64_t N, int64_t K) {
  CKIR_REQUIRE(N >= 1 && K >= 1, "gemv_gate_up_f32");
  gate_up_rows(x, 1, wg, wu, out, N, K);
}

void ckir_internal_gate_up_tiles(const float *x, const void *wg, const void *wu,
                                 int64_t row_bytes, ckir_fused_gemm_fn gemm, float *out,
                                 int64_t M, int64_t N, int64_t K) {
  /* row tiles of about equal size (whole 12-row register panels, at most
   * GU_MT rows); tiles ordered column-major (tiles of one weight block run
   * back to back) and handed out one at a time, so a thread that the host
   * slows down takes fewer tiles */
  int64_t mtiles = (M + GU_MT - 1) / GU_MT;
  const int64_t mrows = ((M + mtiles - 1) / mtiles + 11) / 12 * 12;
  mtiles = (M + mrows - 1) / mrows;
  const int64_t ntiles = (N + GU_NT - 1) / GU_NT, tiles = mtiles * ntiles;
#pragma omp parallel for schedule(dynamic, 1) if (tiles > 1)
  for (int64_t t = 0; t < tiles; t++) {
    const int64_t m0 = (t % mtiles) * mrows, n0 = (t / mtiles) * GU_NT;
    const int64_t mc = CKIR_MIN(mrows, M - m0), nc = CKIR_MIN(GU_NT, N - n0);
    float g[GU_MT * GU_NT] __attribute__((aligned(64)));
    float u[GU_MT * GU_NT] __attribute__((aligned(64)));
    gemm(x + m0 * K, (const uint8_t *)wg + n0 * row_bytes, g, mc, nc, K);
    gemm(x + m0 * K, (const uint8_t *)wu + n0 * row_bytes, u, mc, nc, K);
    for (int64_t i = 0; i < mc; i++)
      silu_mul_span(g + i * nc, u + i * nc, out + (m0 + i) * N + n0, nc);
  }
}

void ckir_internal_silu_mul(const float *g, const float *u, float *out, int64_t n) {
  silu_mul_span(g, u, out, n);
}

static void gemm_f32_w(const float *x, const void *w, float *y, int64_t M, int64_t N, int64_t K) {
  ckir_gemm_f32(x, (const float *)w, y, M, N, K);
}

void ckir_gemm_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                           int64_t M, int64_t N, int64_t K) {
  CKIR_REQUIRE(M >= 1 && N >= 1 && K >= 1, "gemm_gate_up_f32");
  if (M <= FUSED_SMALL_M)
    gate_up_rows(x, M, wg, wu, out, N, K);
  else
    ckir_internal_gate_up_tiles(x, wg, wu, K * (int64_t)sizeof(float), gemm_f32_w, out, M, N, K);
}

/* ---- reference twins ------------------------------------------------------ */

static void ref_linear(const float *x, const float *w, const float *b, float *y, int64_t M,
                       int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t kk = 0; kk < K; kk++) s += (double)x[m * K + kk] * w[n * K + kk];
      y[m * N + n] = (float)s + (b ? b[n] : 0.0f);
    }
}

void ckir_ref_gemm_qkv_bias_f32(const float *x, const float *wq, const float *wk,
                                const float *wv, const float *bq, const float *bk,
                                const float *bv, float *q, float *k, float *v, int64_t M,
                                int64_t Nq, int64_t Nk, int64_t Nv, int64_t K) {
  ref_linear(x, wq, bq, q, M, Nq, K);
  ref_linear(x, wk, bk, k, M, Nk, K);
  ref_linear(x, wv, bv, v, M, Nv, K);
}

void ckir_ref_gemm_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                           float *q, float *k, float *v, int64_t M, int64_t Nq, int64_t Nk,
                           int64_t Nv, int64_t K) {
  ckir_ref_gemm_qkv_bias_f32(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, M, Nq, Nk, Nv, K);
}

void ckir_ref_gemv_qkv_bias_f32(const float *x, const float *wq, const float *wk,
                                const float *wv, const float *bq, const float *bk,
                                const float *bv, float *q, float *k, float *v, int64_t Nq,
                                int64_t Nk, int64_t Nv, int64_t K) {
  ckir_ref_gemm_qkv_bias_f32(x, wq, wk, wv, bq, bk, bv, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_ref_gemv_qkv_f32(const float *x, const float *wq, const float *wk, const float *wv,
                           float *q, float *k, float *v, int64_t Nq, int64_t Nk, int64_t Nv,
                           int64_t K) {
  ckir_ref_gemm_qkv_bias_f32(x, wq, wk, wv, NULL, NULL, NULL, q, k, v, 1, Nq, Nk, Nv, K);
}

void ckir_ref_gemm_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                               int64_t M, int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double sg = 0.0, su = 0.0;
      for (int64_t kk = 0; kk < K; kk++) {
        sg += (double)x[m * K + kk] * wg[n * K + kk];
        su += (double)x[m * K + kk] * wu[n * K + kk];
      }
      const float g = (float)sg, u = (float)su;
      out[m * N + n] = g / (1.0f + expf(-g)) * u;
    }
}

void ckir_ref_gemv_gate_up_f32(const float *x, const float *wg, const float *wu, float *out,
                               int64_t N, int64_t K) {
  ckir_ref_gemm_gate_up_f32(x, wg, wu, out, 1, N, K);
}
