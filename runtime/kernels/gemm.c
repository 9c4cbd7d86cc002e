/* ckir runtime: blocked matrix products for prefill.
 *
 *   gemm:   y[M,N] = x[M,K] . w[N,K]^T (+ b[N])     (HF linear layers)
 *   matmul: c[M,N] = a[M,K] . b[K,N]   (+ relu)      (kernel-IR op)
 *   ckir_internal_gemm: c = A . B with A stored as a[M,K] or transposed as
 *           a[K,M], B as b[K,N] or w[N,K]        (backward_gemm.c's products)
 *
 * All run one BLIS-style driver.  The right operand is packed into panels of
 * GEMM_NR columns ([kc][NR], "B panels"; for gemm this packing transposes w),
 * the left operand into panels of GEMM_MR rows ([kc][MR], "A panels"), and an
 * MR x NR register-blocked micro-kernel accumulates over a kc-slice:
 *
 *   for jc (nc columns)        pack B slice kc x nc      -> L2
 *     for pc (kc deep)
 *       for ic (MC rows)       pack A slice MC x kc      -> L2
 *         for jr (NR columns)  B micro-panel kc x NR     -> L1
 *           for ir (MR rows)   micro-kernel MR x NR
 *
 * The AVX2 micro-kernel reads A in place (GEMM_PACK_A 0: six row pointers,
 * one broadcast each per k); its MR x KC slice is a few cache lines per row,
 * so packing A only cost time (each thread repacked all of A for every NC
 * block).  A stored transposed (a[K,M]: the weight gradient's dy^T) is always
 * packed: each k contributes MR contiguous floats of one row of a, a copy (the
 * AVX2 build then runs the packed form of its micro-kernel).  The slice depth
 * kc <= KC and block width nc share the B pack's KC x NC floats (see
 * gemm_blocked_: a shallow K takes wider blocks).
 *
 * A call on weights in panels with enough rows for every thread (a prefill's
 * layers) splits M by row ownership (ckir_own_rows): each thread runs every
 * column over the rows the row kernels give it, so activations stay on their
 * core.  A B packed per call (w[N, K], b[K, N], bf16 rows, blocks dequantized)
 * does not: each thread would pack all of it for half the rows (measured
 * 1.05-1.3x slower than the N split at M = 128, 2 threads).  Otherwise
 * threads split N (in whole NR panels) when there are enough columns, else M,
 * into GEMM_CHUNKS chunks per thread handed out dynamically: on a shared host
 * one vCPU is often slower for a while, and a static half-and-half split then
 * waits for it (measured: 2 threads ran at ~1.5x one thread; with 4 chunks per
 * thread and no A packing, 1.05-1.5x faster on the prefill shapes).  Each
 * thread packs B into its own stack buffer (GEMM_STACK_BYTES, below), and A,
 * with an N split, once per call for all its columns into a buffer of its own
 * (gemm_run; with an M split block by block on the stack).  One call can
 * compute up to three outputs of the same A, or the swiglu of two
 * (ckir_internal_gemm_outs: the fused qkv and gate_up).  Partial edges are
 * zero-padded in the packs and written with masks.
 *
 * B may also come pre-packed (b_nk == GEMM_B_PANELS: weights stored as f32p,
 * [K][CKIR_PANEL] panels, see ckir_internal.h): then nothing is packed, the
 * micro-kernel reads the panel in place (B stride CKIR_PANEL; the AVX2 and
 * scalar NR = 16 / 8 take a column slice of it), and the AVX-512 micro-kernel
 * prefetches the next panel's kc-slice into L2, spread over the row tiles that
 * reuse the current one, so the weights stream from memory while it computes
 * (measured with cold weights: 1.05-1.3x over packing at every call); after a
 * block's last panel, the next k-slice's or column block's first (measured on
 * whole prefills: 1.015-1.037x at a slow vCPU placement, 1.00-1.01x at a fast
 * one).
 *
 * With AVX512-BF16 (CKIR_BF16DOT) B may be bf16 w[N, K] times bf16-rounded x
 * (GEMM_B_BF16, below): the same loops over pairs of k, vdpbf16ps in the
 * micro-kernel (kind GEMM_B_BF16, behind gemm_bf16 with M > 32).  bf16p
 * weights (bf16 pairs in f32p's panel order) are read in place the same way
 * (GEMM_B_BF16P: no packing of w; measured 1.05-1.16x over gemm_bf16 on the
 * prefill shapes, Zen 4), or, for fp32 x, widened slice by slice into the B
 * pack (GEMM_B_BF16P_F32).  q8_0p / q4_1p / q4_0p weights (Q8_0 / Q4_1 /
 * Q4_0 blocks in panels) are dequantized block by block straight into the B
 * pack (GEMM_B_Q8_0P / GEMM_B_Q4_1P / GEMM_B_Q4_0P). */
#include <pthread.h>
#include <stdlib.h>

#include "ckir_internal.h"
#include "ckir_quant.h"

#if defined(CKIR_AVX512)
#define GEMM_MR 12
#define GEMM_NR 32
#define GEMM_KC 256
#define GEMM_MC 144
#define GEMM_NC 256
#define GEMM_PACK_A 1
#define GEMM_CHUNKS 1
#elif defined(CKIR_AVX2)
#define GEMM_MR 6
#define GEMM_NR 16
#define GEMM_KC 256
#define GEMM_KC_IN_PLACE 1024
#define GEMM_MC 96
#define GEMM_NC 256
#define GEMM_PACK_A 0
#define GEMM_CHUNKS 4
#else
/* 4x8 keeps the accumulators in 8 SSE registers (4x16 spills: 5x slower) */
#define GEMM_MR 4
#define GEMM_NR 8
#define GEMM_KC 256
#define GEMM_MC 64
#define GEMM_NC 256
#define GEMM_PACK_A 1
#define GEMM_CHUNKS 1
#endif
/* The k-slice depth of weights read in place (f32p, bf16p): no B pack to size,
 * so it may be deeper than GEMM_KC.  On AVX2 (A read in place, 6 x 16 tiles)
 * slices of up to 1024 instead of 256 took the f32p prefill GEMMs of SmolLM2's
 * and Qwen2's shapes to 0.94-0.97 of the time (fewer round trips of the C
 * tiles); on AVX-512 a deeper slice measured no gain (docs/performance-log.md). */
#ifndef GEMM_KC_IN_PLACE
#define GEMM_KC_IN_PLACE GEMM_KC
#endif
/* the packs hold whole panels: MC rows and NC columns must be whole panels */
_Static_assert(GEMM_MC % GEMM_MR == 0, "GEMM_MC must be a multiple of GEMM_MR");
_Static_assert(GEMM_NC % GEMM_NR == 0, "GEMM_NC must be a multiple of GEMM_NR");
/* a micro-panel is a column slice of one f32p panel */
_Static_assert(CKIR_PANEL % GEMM_NR == 0, "CKIR_PANEL must be a multiple of GEMM_NR");
/* B kinds (b_nk): GEMM_B_* in ckir_quant.h */
/* A row tile of mr <= GEMM_MR rows runs the micro-kernel of GEMM_MR, 2/3 or 1/3 of
 * that many rows (the last argument: rows, a constant for which the always-inline
 * kernel drops the other rows' registers and FMAs; a packed A panel keeps its
 * GEMM_MR stride): a tail tile computes few rows it does not store (M = 128 on
 * AVX-512: 128 row slots instead of 132; M = 37: 40 instead of 48). */
#define GEMM_BY_HEIGHT(kernel, mr, ...)                                                 \
  ((mr) > 2 * GEMM_MR / 3 ? kernel(__VA_ARGS__, GEMM_MR)                                 \
   : (mr) > GEMM_MR / 3   ? kernel(__VA_ARGS__, 2 * GEMM_MR / 3)                         \
                          : kernel(__VA_ARGS__, GEMM_MR / 3))
#if defined(CKIR_AVX512) || defined(CKIR_AVX2)
_Static_assert(GEMM_MR % 3 == 0, "GEMM_BY_HEIGHT takes thirds of GEMM_MR");
#endif
/* per-thread stack used by the packed panels (documented in the header) */
#define GEMM_STACK_BYTES ((GEMM_KC * GEMM_NC + GEMM_PACK_A * GEMM_MC * GEMM_KC) * 4)

/* gemm with M <= GEMM_SMALL_M streams w with the dot-product kernel instead:
 * measured faster than packing up to M = 8 (packing w costs more than the
 * register blocking saves when few rows reuse it) */
#ifndef GEMM_SMALL_M
#define GEMM_SMALL_M 8
#endif

/* ---- reference twins ----------------------------------------------------- */

void ckir_ref_gemm_bias_f32(const float *x, const float *w, const float *b, float *y, int64_t M,
                            int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)x[m * K + k] * w[n * K + k];
      y[m * N + n] = (float)s + (b ? b[n] : 0.0f);
    }
}

void ckir_ref_gemm_f32(const float *x, const float *w, float *y, int64_t M, int64_t N, int64_t K) {
  ckir_ref_gemm_bias_f32(x, w, NULL, y, M, N, K);
}

static void ref_matmul(const float *a, const float *b, float *c, int64_t M, int64_t N, int64_t K,
                       int relu) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)a[m * K + k] * b[k * N + n];
      float v = (float)s;
      c[m * N + n] = relu && v < 0.0f ? 0.0f : v;
    }
}

void ckir_ref_matmul_f32(const float *a, const float *b, float *c, int64_t M, int64_t N,
                         int64_t K) {
  ref_matmul(a, b, c, M, N, K, 0);
}

void ckir_ref_matmul_relu_f32(const float *a, const float *b, float *c, int64_t M, int64_t N,
                              int64_t K) {
  ref_matmul(a, b, c, M, N, K, 1);
}

/* ---- packing ------------------------------------------------------------- */

/* A panels from a transposed A stored as at[K, M]: Ap[p][k][r] = at[k * lda + p*MR + r],
 * rows >= mc are zero.  k outer: each k reads one contiguous run of mc floats. */
static void pack_a_t(const float *at, int64_t lda, int64_t mc, int64_t kc, float *Ap) {
  for (int64_t k = 0; k < kc; k++) {
    const float *src = at + k * lda;
    for (int64_t i0 = 0; i0 < mc; i0 += GEMM_MR) {
      const int64_t mr = CKIR_MIN(GEMM_MR, mc - i0);
      float *dst = Ap + i0 * kc + k * GEMM_MR;
      if (mr == GEMM_MR) {
        memcpy(dst, src + i0, GEMM_MR * sizeof(float));
      } else {
        for (int r = 0; r < GEMM_MR; r++) dst[r] = r < mr ? src[i0 + r] : 0.0f;
      }
    }
  }
}

#if defined(CKIR_AVX512)
/* Transpose the 16x16 block src[r * lds + c] (rows r < nrows, columns c < ncols;
 * the rest read as zero) into dst[c * ldd + r] for c < ncols and the lanes r of
 * store mask sm. */
CKIR_INLINE void transpose16(const float *src, int64_t lds, float *dst, int64_t ldd, int64_t nrows,
                             int64_t ncols, __mmask16 sm) {
  __m512 r[16], t[16];
  const __mmask16 cm = ckir_mask16(ncols);
  for (int i = 0; i < 16; i++)
    r[i] = i < nrows ? _mm512_maskz_loadu_ps(cm, src + i * lds) : _mm512_setzero_ps();
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    __m512d a0 = _mm512_castps_pd(t[4 * i]), a1 = _mm512_castps_pd(t[4 * i + 1]);
    __m512d b0 = _mm512_castps_pd(t[4 * i + 2]), b1 = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, b0));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, b0));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, b1));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, b1));
  }
  /* r[4i + j] now holds, in each 128-bit lane L, column (4L + j) of rows 4i..4i+3 */
  for (int j = 0; j < 4; j++) {
    __m512 a = r[j], b = r[4 + j], c = r[8 + j], d = r[12 + j];
    __m512 ab_lo = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0));
    __m512 ab_hi = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2));
    __m512 cd_lo = _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0));
    __m512 cd_hi = _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2));
    t[j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, _MM_SHUFFLE(2, 0, 2, 0));      /* col j */
    t[4 + j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, _MM_SHUFFLE(3, 1, 3, 1));  /* col 4 + j */
    t[8 + j] = _mm512_shuffle_f32x4(ab_hi, cd_hi, _MM_SHUFFLE(2, 0, 2, 0));  /* col 8 + j */
    t[12 + j] = _mm512_shuffle_f32x4(ab_hi, cd_hi, _MM_SHUFFLE(3, 1, 3, 1)); /* col 12 + j */
  }
  for (int c = 0; c < ncols; c++) _mm512_mask_storeu_ps(dst + c * ldd, sm, t[c]);
}
#endif

#if defined(CKIR_AVX2)
/* Transpose the 8x8 block src[r * lds + c] (rows r < nrows, the rest read as
 * zero) into dst[c * ldd + r]. */
static inline void transpose8(const float *src, int64_t lds, float *dst, int64_t ldd,
                              int64_t nrows) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = i < nrows ? _mm256_loadu_ps(src + i * lds) : _mm256_setzero_ps();
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; i++) {
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  /* r[4i + j] holds, in 128-bit lane L, column (4L + j) of rows 4i..4i+3 */
  for (int j = 0; j < 4; j++) {
    t[j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x20);     /* col j */
    t[4 + j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x31); /* col 4 + j */
  }
  for (int c = 0; c < 8; c++) _mm256_storeu_ps(dst + c * ldd, t[c]);
}
#endif

#if GEMM_PACK_A
/* A panels: Ap[p][k][r] = a[(p*MR + r) * lda + k], rows >= mc are zero. */
static void pack_a(const float *a, int64_t lda, int64_t mc, int64_t kc, float *Ap) {
  for (int64_t i0 = 0; i0 < mc; i0 += GEMM_MR) {
    const int64_t mr = CKIR_MIN(GEMM_MR, mc - i0);
    float *dst = Ap + i0 * kc;
#if defined(CKIR_AVX512)
    /* 16 k at a time: transpose the MR x 16 block, store MR lanes per k */
    for (int64_t k0 = 0; k0 < kc; k0 += 16)
      transpose16(a + i0 * lda + k0, lda, dst + k0 * GEMM_MR, GEMM_MR, mr, CKIR_MIN(16, kc - k0),
                  ckir_mask16(GEMM_MR));
#else
    if (mr == GEMM_MR) {
      for (int64_t k = 0; k < kc; k++)
        for (int r = 0; r < GEMM_MR; r++) dst[k * GEMM_MR + r] = a[(i0 + r) * lda + k];
    } else {
      for (int64_t k = 0; k < kc; k++)
        for (int r = 0; r < GEMM_MR; r++)
          dst[k * GEMM_MR + r] = r < mr ? a[(i0 + r) * lda + k] : 0.0f;
    }
#endif
  }
}
#endif

#if defined(CKIR_BF16DOT)
/* A panels of bf16 pairs from fp32 a: Ap[p][k2][r] holds bf16(a[i][2 k2]) in its
 * low and bf16(a[i][2 k2 + 1]) in its high 16 bits (i = p*MR + r; rounded to
 * nearest even by vcvtne2ps2bf16); rows >= mc are zero.  kc counts pairs: 16
 * pairs (32 floats) of each row are converted, then the MR x 16 block of pairs
 * is transposed as pack_a transposes floats. */
static void pack_a_bf16(const float *a, int64_t lda, int64_t mc, int64_t kc, float *Ap) {
  float t[16 * 16] __attribute__((aligned(64)));
  for (int64_t i0 = 0; i0 < mc; i0 += GEMM_MR) {
    const int64_t mr = CKIR_MIN(GEMM_MR, mc - i0);
    float *dst = Ap + i0 * kc;
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int64_t kk = CKIR_MIN(16, kc - k0);
      const __mmask16 lo = ckir_mask16(CKIR_MIN(16, 2 * kk));
      const __mmask16 hi = ckir_mask16(CKIR_MAX(0, 2 * kk - 16));
      for (int64_t r = 0; r < mr; r++) {
        const float *src = a + (i0 + r) * lda + 2 * k0;
        const __m512bh p = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + 16),
                                               _mm512_maskz_loadu_ps(lo, src));
        _mm512_store_ps(t + r * 16, _mm512_castsi512_ps((__m512i)p));
      }
      transpose16(t, 16, dst + k0 * GEMM_MR, GEMM_MR, mr, kk, ckir_mask16(GEMM_MR));
    }
  }
}
#endif

/* B panels from w[N, K] (transposing): Bp[p][k][n] = w[(p*NR + n) * ldw + k]. */
static void pack_b_nk(const float *w, int64_t ldw, int64_t nc, int64_t kc, float *Bp) {
  for (int64_t j0 = 0; j0 < nc; j0 += GEMM_NR) {
    const int64_t nr = CKIR_MIN(GEMM_NR, nc - j0);
    float *dst = Bp + j0 * kc;
#if defined(CKIR_AVX512)
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int64_t kk = CKIR_MIN(16, kc - k0);
      for (int64_t h = 0; h < GEMM_NR; h += 16)
        transpose16(w + (j0 + h) * ldw + k0, ldw, dst + k0 * GEMM_NR + h, GEMM_NR,
                    CKIR_MAX(0, CKIR_MIN(16, nr - h)), kk, 0xFFFF);
    }
#elif defined(CKIR_AVX2)
    int64_t k0 = 0;
    for (; k0 + 8 <= kc; k0 += 8)
      for (int64_t h = 0; h < GEMM_NR; h += 8)
        transpose8(w + (j0 + h) * ldw + k0, ldw, dst + k0 * GEMM_NR + h, GEMM_NR,
                   CKIR_MAX(0, CKIR_MIN(8, nr - h)));
    for (; k0 < kc; k0++)
      for (int n = 0; n < GEMM_NR; n++)
        dst[k0 * GEMM_NR + n] = n < nr ? w[(j0 + n) * ldw + k0] : 0.0f;
#else
    for (int64_t k = 0; k < kc; k++)
      for (int n = 0; n < GEMM_NR; n++)
        dst[k * GEMM_NR + n] = n < nr ? w[(j0 + n) * ldw + k] : 0.0f;
#endif
  }
}

/* B panels from bf16p panels (the whole matrix, K elements a row): Bp[p][k][n]
 * = fp32 of element (col + p*NR + n, pc + k).  pc and kc are even (slices are
 * multiples of 8, K is even); a micro-panel is a column slice of one panel, so
 * it reads NR columns of it (rows past N are zeros in the panel). */
static void pack_b_bf16p(const float *B, int64_t K, int64_t col, int64_t nc, int64_t pc,
                         int64_t kc, float *Bp) {
  for (int64_t j0 = 0; j0 < nc; j0 += GEMM_NR) {
    const int64_t c = col + j0;
    const uint32_t *src = (const uint32_t *)B + ((c / CKIR_PANEL) * (K / 2) + pc / 2) * CKIR_PANEL +
                          c % CKIR_PANEL;
    float *dst = Bp + j0 * kc;
    for (int64_t k = 0; k < kc; k += 2, src += CKIR_PANEL, dst += 2 * GEMM_NR)
      for (int64_t n = 0; n < GEMM_NR; n += CKV_W) {
        ckv lo, hi;
        ckv_load_bf16_pairs(src + n, &lo, &hi);
        ckv_storeu(dst + n, lo);
        ckv_storeu(dst + GEMM_NR + n, hi);
      }
  }
}

/* B panels from block panels of format fmt (the whole matrix, K elements a
 * row): Bp[p][k][n] = the value of element (col + p*NR + n, pc + k); pc and kc
 * are multiples of 32.  A micro-panel is a column slice of one panel (rows past
 * N are zero in the panel). */
static void pack_b_qp(const float *B, int64_t K, int64_t col, int64_t nc, int64_t pc, int64_t kc,
                      int fmt, float *Bp) {
  const int64_t nb = K / CKIR_QK, bb = CKIR_QP_BLOCK(fmt);
  for (int64_t j0 = 0; j0 < nc; j0 += GEMM_NR) {
    const int64_t c = col + j0;
    const uint8_t *pp = (const uint8_t *)B + (c / CKIR_PANEL) * nb * bb;
    for (int64_t k0 = 0; k0 < kc; k0 += CKIR_QK) {
      const uint8_t *pb = pp + (pc + k0) / CKIR_QK * bb;
      float *dst = Bp + j0 * kc + k0 * GEMM_NR;
      ckir_internal_qp_deq(pb, c % CKIR_PANEL, GEMM_NR, dst, GEMM_NR, fmt);
    }
  }
}

/* B panels from b[K, N] (copying rows): Bp[p][k][n] = b[k * ldb + p*NR + n].
 * k outer: each k reads one contiguous run of nc floats (a stream the hardware
 * prefetcher follows; panel-outer order strides down the rows of b). */
static void pack_b_kn(const float *b, int64_t ldb, int64_t nc, int64_t kc, float *Bp) {
  const int64_t nfull = nc / GEMM_NR * GEMM_NR;
  for (int64_t k = 0; k < kc; k++) {
    const float *src = b + k * ldb;
    for (int64_t j0 = 0; j0 < nfull; j0 += GEMM_NR)
      memcpy(Bp + j0 * kc + k * GEMM_NR, src + j0, GEMM_NR * sizeof(float));
    if (nfull < nc) {
      float *dst = Bp + nfull * kc + k * GEMM_NR;
      for (int n = 0; n < GEMM_NR; n++) dst[n] = nfull + n < nc ? src[nfull + n] : 0.0f;
    }
  }
}

/* ---- micro-kernels --------------------------------------------------------
 * c[r, n] (+)= sum_k Ap[k*MR + r] * Bp[k*NR + n] for r < mr, n < nr.
 * first: overwrite C (adding bias when non-NULL); else accumulate into C.
 * last && relu: clamp at zero.
 *
 * Each first asks for its C tile (mr rows of NR floats) to be fetched for
 * writing while its k loop runs: with a shallow K (the weight gradient reduces
 * over the tokens) every tile is a fresh output whose cache misses would
 * otherwise stall the final stores (measured: linear_bwd_weight ~1.2x faster,
 * forward gemm unchanged). */
CKIR_INLINE void prefetch_c(float *C, int64_t ldc, int64_t mr) {
  for (int64_t r = 0; r < mr; r++)
    for (int64_t n = 0; n < GEMM_NR + 15; n += 16)
      __builtin_prefetch(C + r * ldc + CKIR_MIN(n, GEMM_NR - 1), 1, 3);
}

#if defined(CKIR_AVX512)
#if defined(CKIR_BF16DOT)
/* x += a . b over the bf16 pairs of each lane (bf16), or fp32 x += a * b */
#define GEMM_FMA(bf16, x, a, b)                                                          \
  ((bf16) ? _mm512_dpbf16_ps((x), (__m512bh)_mm512_castps_si512(a),                   \
                             (__m512bh)_mm512_castps_si512(b))                          \
          : _mm512_fmadd_ps((a), (b), (x)))
#else
#define GEMM_FMA(bf16, x, a, b) _mm512_fmadd_ps((a), (b), (x))
#endif
/* bs: B's step per k (GEMM_NR = CKIR_PANEL here, packed or pre-packed alike);
 * pf: npf cache lines from pf (one per k) are prefetched into L2; bf16: Ap and
 * Bp hold bf16 pairs and k counts pairs (GEMM_B_BF16) */
CKIR_INLINE void ukernel_512_(int64_t kc, const float *restrict Ap, const float *restrict Bp,
                              float *restrict C, int64_t ldc, int64_t mr, int64_t nr, int first,
                              int last, const float *bias, int relu, const float *pf,
                              int64_t npf, const int bf16, const int rows) {
  (void)bf16; /* without CKIR_BF16DOT, GEMM_FMA ignores it */
  prefetch_c(C, ldc, mr);
  __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),
         c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),
         c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),
         c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),
         c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(),
         c71 = _mm512_setzero_ps(), c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps(),
         c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps(), ca0 = _mm512_setzero_ps(),
         ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k++) {
    if (k < npf) _mm_prefetch((const char *)(pf + 16 * k), _MM_HINT_T1);
    const __m512 b0 = _mm512_loadu_ps(Bp), b1 = _mm512_loadu_ps(Bp + 16);
    __m512 a;
#define CKIR_FMA_ROW(r, x0, x1)          \
  if (r < rows) {                        \
    a = _mm512_set1_ps(Ap[r]);           \
    x0 = GEMM_FMA(bf16, x0, a, b0);      \
    x1 = GEMM_FMA(bf16, x1, a, b1);      \
  }
    CKIR_FMA_ROW(0, c00, c01)
    CKIR_FMA_ROW(1, c10, c11)
    CKIR_FMA_ROW(2, c20, c21)
    CKIR_FMA_ROW(3, c30, c31)
    CKIR_FMA_ROW(4, c40, c41)
    CKIR_FMA_ROW(5, c50, c51)
    CKIR_FMA_ROW(6, c60, c61)
    CKIR_FMA_ROW(7, c70, c71)
    CKIR_FMA_ROW(8, c80, c81)
    CKIR_FMA_ROW(9, c90, c91)
    CKIR_FMA_ROW(10, ca0, ca1)
    CKIR_FMA_ROW(11, cb0, cb1)
#undef CKIR_FMA_ROW
    Ap += GEMM_MR;
    Bp += GEMM_NR;
  }
  const __mmask16 m0 = ckir_mask16(nr), m1 = ckir_mask16(nr > 16 ? nr - 16 : 0);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (first && bias) {
    bias0 = _mm512_maskz_loadu_ps(m0, bias);
    bias1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
  const __m512 zero = _mm512_setzero_ps();
#define CKIR_STORE_ROW(r, x0, x1)                                              \
  if (r < rows && r < mr) {                                                    \
    float *cr = C + (r) * ldc;                                                 \
    if (first) {                                                               \
      x0 = _mm512_add_ps(x0, bias0);                                           \
      x1 = _mm512_add_ps(x1, bias1);                                           \
    } else {                                                                   \
      x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));                   \
      x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));              \
    }                                                                          \
    if (last && relu) {                                                        \
      x0 = _mm512_max_ps(x0, zero);                                            \
      x1 = _mm512_max_ps(x1, zero);                                            \
    }                                                                          \
    _mm512_mask_storeu_ps(cr, m0, x0);                                         \
    _mm512_mask_storeu_ps(cr + 16, m1, x1);                                    \
  }
  CKIR_STORE_ROW(0, c00, c01)
  CKIR_STORE_ROW(1, c10, c11)
  CKIR_STORE_ROW(2, c20, c21)
  CKIR_STORE_ROW(3, c30, c31)
  CKIR_STORE_ROW(4, c40, c41)
  CKIR_STORE_ROW(5, c50, c51)
  CKIR_STORE_ROW(6, c60, c61)
  CKIR_STORE_ROW(7, c70, c71)
  CKIR_STORE_ROW(8, c80, c81)
  CKIR_STORE_ROW(9, c90, c91)
  CKIR_STORE_ROW(10, ca0, ca1)
  CKIR_STORE_ROW(11, cb0, cb1)
#undef CKIR_STORE_ROW
}
#undef GEMM_FMA

/* A tile of mr rows runs the kernel of 12, 8 or 4 rows (GEMM_BY_HEIGHT) */
CKIR_INLINE void ukernel_512(int64_t kc, const float *restrict Ap, const float *restrict Bp,
                             float *restrict C, int64_t ldc, int64_t mr, int64_t nr, int first,
                             int last, const float *bias, int relu, const float *pf, int64_t npf,
                             const int bf16) {
  GEMM_BY_HEIGHT(ukernel_512_, mr, kc, Ap, Bp, C, ldc, mr, nr, first, last, bias, relu, pf, npf,
                 bf16);
}

static void ukernel(int64_t kc, const float *restrict Ap, int64_t lda, const float *restrict Bp,
                    int64_t bs, float *restrict C, int64_t ldc, int64_t mr, int64_t nr, int first,
                    int last, const float *bias, int relu, const float *pf, int64_t npf) {
  (void)lda; /* Ap is a packed panel */
  (void)bs;  /* == GEMM_NR */
  ukernel_512(kc, Ap, Bp, C, ldc, mr, nr, first, last, bias, relu, pf, npf, 0);
}

#if defined(CKIR_BF16DOT)
static void ukernel_bf16(int64_t kc, const float *restrict Ap, const float *restrict Bp,
                         float *restrict C, int64_t ldc, int64_t mr, int64_t nr, int first,
                         int last, const float *bias, const float *pf, int64_t npf) {
  ukernel_512(kc, Ap, Bp, C, ldc, mr, nr, first, last, bias, 0, pf, npf, 1);
}
#endif
#elif defined(CKIR_AVX2)
/* packed == 0 reads A in place (GEMM_PACK_A == 0): row r at A + r * lda; rows
 * >= mr alias row mr - 1 (computed, never stored), so nothing past A is read.
 * packed == 1 reads a packed panel (transposed A): row r at A + r, step MR. */
CKIR_INLINE void ukernel_avx2_(int64_t kc, const float *restrict A, int64_t lda,
                               const float *restrict Bp, int64_t bs, float *restrict C,
                               int64_t ldc, int64_t mr, int64_t nr, int first, int last,
                               const float *bias, int relu, const int packed, const int rows) {
  const int64_t ks = packed ? GEMM_MR : 1; /* step of k in A */
#define CKIR_AROW(r) (packed ? A + (r) : A + CKIR_MIN(r, mr - 1) * lda)
  const float *a0 = A, *a1 = CKIR_AROW(1), *a2 = CKIR_AROW(2), *a3 = CKIR_AROW(3),
              *a4 = CKIR_AROW(4), *a5 = CKIR_AROW(5);
#undef CKIR_AROW
  prefetch_c(C, ldc, mr);
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
         c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
         c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
         c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; k++) {
    const __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8);
    __m256 a;
#define CKIR_FMA_ROW(r, ar, x0, x1)       \
  if (r < rows) {                         \
    a = _mm256_broadcast_ss(ar + k * ks); \
    x0 = _mm256_fmadd_ps(a, b0, x0);      \
    x1 = _mm256_fmadd_ps(a, b1, x1);      \
  }
    CKIR_FMA_ROW(0, a0, c00, c01)
    CKIR_FMA_ROW(1, a1, c10, c11)
    CKIR_FMA_ROW(2, a2, c20, c21)
    CKIR_FMA_ROW(3, a3, c30, c31)
    CKIR_FMA_ROW(4, a4, c40, c41)
    CKIR_FMA_ROW(5, a5, c50, c51)
#undef CKIR_FMA_ROW
    Bp += bs;
  }
  /* vector epilogue: lane masks for the nr valid columns (maskload reads 0 elsewhere) */
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr), lane);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr - 8), lane);
  /* a whole tile (nr == 16, all but a matrix's last panel) loads and stores C
   * plainly: vmaskmovps is microcoded on AMD (a store of it costs many cycles;
   * masked C loads and stores took 6-8 % of the time of SmolLM2's prefill GEMMs) */
  const int full = nr == GEMM_NR;
  __m256 bias0 = _mm256_setzero_ps(), bias1 = _mm256_setzero_ps();
  if (first && bias) {
    bias0 = full ? _mm256_loadu_ps(bias) : _mm256_maskload_ps(bias, m0);
    bias1 = full ? _mm256_loadu_ps(bias + 8) : _mm256_maskload_ps(bias + 8, m1);
  }
  const __m256 zero = _mm256_setzero_ps();
#define CKIR_STORE_ROW(r, x0, x1)                                                \
  if (r < rows && r < mr) {                                                      \
    float *cr = C + (r) * ldc;                                                   \
    if (first) {                                                                 \
      x0 = _mm256_add_ps(x0, bias0);                                             \
      x1 = _mm256_add_ps(x1, bias1);                                             \
    } else if (full) {                                                           \
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(cr));                               \
      x1 = _mm256_add_ps(x1, _mm256_loadu_ps(cr + 8));                           \
    } else {                                                                     \
      x0 = _mm256_add_ps(x0, _mm256_maskload_ps(cr, m0));                        \
      x1 = _mm256_add_ps(x1, _mm256_maskload_ps(cr + 8, m1));                    \
    }                                                                            \
    if (last && relu) {                                                          \
      x0 = _mm256_max_ps(x0, zero);                                              \
      x1 = _mm256_max_ps(x1, zero);                                              \
    }                                                                            \
    if (full) {                                                                  \
      _mm256_storeu_ps(cr, x0);                                                  \
      _mm256_storeu_ps(cr + 8, x1);                                              \
    } else {                                                                     \
      _mm256_maskstore_ps(cr, m0, x0);                                           \
      _mm256_maskstore_ps(cr + 8, m1, x1);                                       \
    }                                                                            \
  }
  CKIR_STORE_ROW(0, c00, c01)
  CKIR_STORE_ROW(1, c10, c11)
  CKIR_STORE_ROW(2, c20, c21)
  CKIR_STORE_ROW(3, c30, c31)
  CKIR_STORE_ROW(4, c40, c41)
  CKIR_STORE_ROW(5, c50, c51)
#undef CKIR_STORE_ROW
}

/* A tile of mr rows runs the kernel of 6, 4 or 2 rows (GEMM_BY_HEIGHT) */
CKIR_INLINE void ukernel_avx2(int64_t kc, const float *restrict A, int64_t lda,
                              const float *restrict Bp, int64_t bs, float *restrict C, int64_t ldc,
                              int64_t mr, int64_t nr, int first, int last, const float *bias,
                              int relu, const int packed) {
  GEMM_BY_HEIGHT(ukernel_avx2_, mr, kc, A, lda, Bp, bs, C, ldc, mr, nr, first, last, bias, relu,
                 packed);
}

static void ukernel(int64_t kc, const float *restrict A, int64_t lda, const float *restrict Bp,
                    int64_t bs, float *restrict C, int64_t ldc, int64_t mr, int64_t nr, int first,
                    int last, const float *bias, int relu, const float *pf, int64_t npf) {
  /* no software prefetch: measured no gain on AVX2 (docs/performance-log.md) */
  (void)pf, (void)npf;
  ukernel_avx2(kc, A, lda, Bp, bs, C, ldc, mr, nr, first, last, bias, relu, 0);
}

static void ukernel_packed(int64_t kc, const float *restrict Ap, int64_t lda,
                           const float *restrict Bp, int64_t bs, float *restrict C, int64_t ldc,
                           int64_t mr, int64_t nr, int first, int last, const float *bias,
                           int relu, const float *pf, int64_t npf) {
  (void)pf, (void)npf;
  ukernel_avx2(kc, Ap, lda, Bp, bs, C, ldc, mr, nr, first, last, bias, relu, 1);
}
#else
static void ukernel(int64_t kc, const float *restrict Ap, int64_t lda, const float *restrict Bp,
                    int64_t bs, float *restrict C, int64_t ldc, int64_t mr, int64_t nr, int first,
                    int last, const float *bias, int relu, const float *pf, int64_t npf) {
  (void)lda, (void)pf, (void)npf; /* Ap is a packed panel; no software prefetch */
  prefetch_c(C, ldc, mr);
  float acc[GEMM_MR][GEMM_NR];
  for (int r = 0; r < GEMM_MR; r++)
    for (int n = 0; n < GEMM_NR; n++) acc[r][n] = 0.0f;
  for (int64_t k = 0; k < kc; k++) {
    for (int r = 0; r < GEMM_MR; r++) {
      const float a = Ap[k * GEMM_MR + r];
      for (int n = 0; n < GEMM_NR; n++) acc[r][n] += a * Bp[k * bs + n];
    }
  }
  for (int64_t r = 0; r < mr; r++) {
    float *cr = C + r * ldc;
    for (int64_t n = 0; n < nr; n++) {
      float v = acc[r][n] + (first ? (bias ? bias[n] : 0.0f) : cr[n]);
      cr[n] = last && relu && v < 0.0f ? 0.0f : v;
    }
  }
}
#endif

#if !defined(CKIR_AVX2)
/* the AVX-512 and scalar micro-kernels always read packed A panels */
#define ukernel_packed ukernel
#endif

/* ---- driver -------------------------------------------------------------- */

/* the block panel format (CKIR_QP_*) of B kind b_nk, or -1 */
static int gemm_qp_fmt(int b_nk) {
  return b_nk == GEMM_B_Q8_0P   ? CKIR_QP_Q8_0
         : b_nk == GEMM_B_Q4_1P ? CKIR_QP_Q4_1
         : b_nk == GEMM_B_Q4_0P ? CKIR_QP_Q4_0
                                : -1;
}

/* whether B is read in place (f32p floats or bf16p pairs in panels): nothing
 * of B is packed per call */
static int gemm_b_in_place(int b_nk) { return b_nk == GEMM_B_PANELS || b_nk == GEMM_B_BF16P; }

/* K in slices of equal depth (<= GEMM_KC, or GEMM_KC_IN_PLACE for weights read
 * in place; a multiple of 8, of 32 for the block
 * formats, which convert whole blocks): no short last slice whose C round trip
 * costs as much as a full one.  The depth depends on K and the B kind alone, so
 * each C element sums its terms in the same order whatever share of N or M a
 * thread gets: results do not depend on the thread count. */
static int64_t gemm_kstep(int64_t K, int b_nk) {
  const int64_t kmax = gemm_b_in_place(b_nk) ? GEMM_KC_IN_PLACE : GEMM_KC;
  const int64_t nslices = (K + kmax - 1) / kmax;
  const int64_t kq = b_nk == GEMM_B_ROWS || gemm_qp_fmt(b_nk) >= 0 ? 32 : 8;
  return CKIR_MIN(kmax, ((K + nslices - 1) / nslices + kq - 1) / kq * kq);
}

/* whether B kind b_nk multiplies bf16 pairs (the driver's K counts pairs; A is
 * fp32, 2 K floats a row) */
static int gemm_bf16_pairs(int b_nk) {
#if defined(CKIR_BF16DOT)
  return b_nk == GEMM_B_BF16 || b_nk == GEMM_B_BF16P;
#else
  (void)b_nk;
  return 0;
#endif
}

/* whether the micro-kernel reads A from packed panels */
static int gemm_packs_a(int a_t, int b_nk) { return GEMM_PACK_A || a_t || gemm_bf16_pairs(b_nk); }

/* The A panels of rows [0, mc) and k [pc, pc + kc) of A (A(i, k) at A[i * lda +
 * k], with a_t at A[k * lda + i]; bf16 pairs: k counts pairs) into Ap. */
static void pack_a_any(const float *A, int64_t lda, int a_t, int bf, int64_t mc, int64_t pc,
                       int64_t kc, float *Ap) {
  (void)bf;
  if (a_t)
    pack_a_t(A + pc * lda, lda, mc, kc, Ap);
#if defined(CKIR_BF16DOT)
  else if (bf)
    pack_a_bf16(A + 2 * pc, lda, mc, kc, Ap);
#endif
#if GEMM_PACK_A
  else
    pack_a(A + pc, lda, mc, kc, Ap);
#endif
}

/* A thread's pack of A, once per call for all its columns (see gemm_run):
 * slice pc (k from pc, kc deep) of row r (a multiple of GEMM_MR) at
 * p + pc * rows + r * kc, rows = the packed rows rounded up to GEMM_MR. */
typedef struct {
  const float *p;
  int64_t rows;
  int amx; /* CKIR_AMX_ON / _EMULATE: p holds gemm_amx.c's bf16 rows instead */
} gemm_apk;

/* One thread's share: C[0:M, 0:N] of the product.  A(i, k) is A[i * lda + k],
 * or with a_t (A stored transposed) A[k * lda + i].  b_nk == 1: B is w[N, K]
 * (gemm); 0: B is b[K, N] (matmul); GEMM_B_PANELS: B is the whole f32p matrix
 * (ldb = K) and C's column 0 is its column bcol (a multiple of GEMM_NR);
 * GEMM_B_ROWS: B is the whole weight matrix, its rows read through `row`, and
 * C's column 0 its row bcol.  A is read from the thread's pack apk (from its
 * row arow) when apk.p is set, else packed block by block into Ap when the
 * micro-kernel reads packed panels; Bp is the caller's B pack.  a_t is a
 * constant in each caller (gemm_blocked, gemm_blocked_t). */
CKIR_INLINE void gemm_blocked_(const float *A, int64_t lda, const int a_t, const float *B,
                               int64_t ldb, int b_nk, int64_t bcol, ckir_wrow_fn row,
                               const float *bias, float *C, int64_t ldc, int64_t M, int64_t N,
                               int64_t K, int relu, gemm_apk apk, int64_t arow,
                               float *restrict Ap, float *restrict Bp) {
  /* panels: B is read in place (f32p floats, or bf16p pairs) */
  const int panels = gemm_b_in_place(b_nk), rows = b_nk == GEMM_B_ROWS;
  const int packed_a = gemm_packs_a(a_t, b_nk);
  const int bf = gemm_bf16_pairs(b_nk);
  const int qp = gemm_qp_fmt(b_nk); /* block panels: their format, else -1 */
  const int64_t kstep = gemm_kstep(K, b_nk);
  /* Column blocks of equal width (whole panels), as wide as the B pack's
   * GEMM_KC * GEMM_NC floats allow at this depth: a shallow K (the weight
   * gradient's 128 tokens) takes wider blocks, so A is packed fewer times
   * (measured: linear_bwd_weight 1.05-1.2x on its thread shares). */
  const int64_t ncmax = CKIR_MAX(GEMM_NR, GEMM_KC * GEMM_NC / kstep / GEMM_NR * GEMM_NR);
  const int64_t nblocks = (N + ncmax - 1) / ncmax;
  const int64_t ncstep = ((N + nblocks - 1) / nblocks + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
  for (int64_t jc = 0; jc < N; jc += ncstep) {
    const int64_t nc = CKIR_MIN(ncstep, N - jc);
    for (int64_t pc = 0; pc < K; pc += kstep) {
      const int64_t kc = CKIR_MIN(kstep, K - pc);
      const int first = pc == 0, last = pc + kc >= K;
      if (panels)
        ; /* B is read in place */
      else if (rows)
        for (int64_t j0 = 0; j0 < nc; j0 += GEMM_NR) {
          /* this panel's rows in fp32, [nr][kc], then packed as gemm's w */
          float wr[GEMM_NR * GEMM_KC] __attribute__((aligned(64)));
          const int64_t nr = CKIR_MIN(GEMM_NR, nc - j0);
          for (int64_t r = 0; r < nr; r++) row(B, K, bcol + jc + j0 + r, pc, kc, wr + r * kc);
          pack_b_nk(wr, kc, nr, kc, Bp + j0 * kc);
        }
      else if (b_nk == GEMM_B_BF16P_F32)
        pack_b_bf16p(B, ldb, bcol + jc, nc, pc, kc, Bp);
      else if (qp >= 0)
        pack_b_qp(B, ldb, bcol + jc, nc, pc, kc, qp, Bp);
      else if (b_nk)
        pack_b_nk(B + jc * ldb + pc, ldb, nc, kc, Bp);
      else
        pack_b_kn(B + pc * ldb + jc, ldb, nc, kc, Bp);
      for (int64_t ic = 0; ic < M; ic += GEMM_MC) {
        const int64_t mc = CKIR_MIN(GEMM_MC, M - ic);
        const float *ap = Ap;
        if (apk.p)
          ap = apk.p + pc * apk.rows + (arow + ic) * kc;
        else if (packed_a)
          pack_a_any(a_t ? A + ic : A + ic * lda, lda, a_t, bf, mc, pc, kc, Ap);
        /* the row tiles of this block share one B micro-panel: with panels,
         * each prefetches its part of the next panel's kc-slice (2 lines a k) */
        const int64_t tiles = (mc + GEMM_MR - 1) / GEMM_MR;
        const int64_t npf = panels ? (2 * kc + tiles - 1) / tiles : 0;
        for (int64_t jr = 0; jr < nc; jr += GEMM_NR) {
          const int64_t nr = CKIR_MIN(GEMM_NR, nc - jr);
          const float *bj = bias ? bias + jc + jr : NULL;
          const int64_t col = bcol + jc + jr; /* panels: B's column */
          const float *bp = panels ? B + (col / CKIR_PANEL * ldb + pc) * CKIR_PANEL +
                                         col % CKIR_PANEL
                                   : Bp + jr * kc;
          const int64_t bs = panels ? CKIR_PANEL : GEMM_NR;
          /* the next micro-panel to stream, if this thread reads one: the
           * next panel of this k-slice, else the first of the next slice or
           * column block */
          const float *next = NULL;
          if (panels) {
            const int64_t c0 = bcol + jc, c1 = c0 + ncstep;
            if (jr + GEMM_NR < nc)
              next = bp + ldb * CKIR_PANEL;
            else if (pc + kc < K)
              next = B + (c0 / CKIR_PANEL * ldb + pc + kc) * CKIR_PANEL + c0 % CKIR_PANEL;
            else if (jc + ncstep < N)
              next = B + c1 / CKIR_PANEL * ldb * CKIR_PANEL + c1 % CKIR_PANEL;
          }
          for (int64_t ir = 0; ir < mc; ir += GEMM_MR) {
            float *c = C + (ic + ir) * ldc + jc + jr;
            const int64_t mr = CKIR_MIN(GEMM_MR, mc - ir);
            const float *pf = next ? next + ir / GEMM_MR * npf * 16 : NULL;
            const int64_t np = next ? CKIR_MAX(0, CKIR_MIN(npf, 2 * kc - ir / GEMM_MR * npf)) : 0;
#if defined(CKIR_BF16DOT)
            if (bf)
              ukernel_bf16(kc, ap + ir * kc, bp, c, ldc, mr, nr, first, last, bj, pf, np);
            else
#endif
            if (packed_a)
              ukernel_packed(kc, ap + ir * kc, lda, bp, bs, c, ldc, mr, nr, first, last, bj, relu,
                             pf, np);
            else
              ukernel(kc, A + (ic + ir) * lda + pc, lda, bp, bs, c, ldc, mr, nr, first, last, bj,
                      relu, pf, np);
          }
        }
      }
    }
  }
}

static void gemm_blocked(const float *A, int64_t lda, const float *B, int64_t ldb, int b_nk,
                         int64_t bcol, ckir_wrow_fn row, const float *bias, float *C, int64_t ldc,
                         int64_t M, int64_t N, int64_t K, int relu, gemm_apk apk, int64_t arow) {
  float Bp[GEMM_KC * GEMM_NC] __attribute__((aligned(64)));
#if GEMM_PACK_A
  float Ap[GEMM_MC * GEMM_KC] __attribute__((aligned(64)));
#else
  float *Ap = NULL; /* A is read in place */
#endif
  gemm_blocked_(A, lda, 0, B, ldb, b_nk, bcol, row, bias, C, ldc, M, N, K, relu, apk, arow, Ap,
                Bp);
}

/* A stored transposed: at[K, M] (lda >= M between rows of at) */
static void gemm_blocked_t(const float *At, int64_t lda, const float *B, int64_t ldb, int b_nk,
                           float *C, int64_t ldc, int64_t M, int64_t N, int64_t K, gemm_apk apk,
                           int64_t arow) {
  float Bp[GEMM_KC * GEMM_NC] __attribute__((aligned(64)));
  float Ap[GEMM_MC * GEMM_KC] __attribute__((aligned(64)));
  gemm_blocked_(At, lda, 1, B, ldb, b_nk, 0, NULL, NULL, C, ldc, M, N, K, 0, apk, arow, Ap, Bp);
}

/* One output of a call: C[M, N] (row stride N) = A . B (+ bias), B of the call's kind */
typedef struct {
  const float *B;
  const float *bias;
  float *C;
  int64_t N;
} gemm_out;

/* A's rows [m0, m1) (M rows in all) times the columns [n0, n1) of output o,
 * written to C (element (m0, n0) of the product; row stride ldc).  apk: the
 * thread's pack of A, holding row m0 at its row arow (or none). */
static void gemm_part(const float *A, int a_t, int b_nk, ckir_wrow_fn row, const gemm_out *o,
                      float *C, int64_t ldc, int64_t M, int64_t K, int relu, int64_t m0,
                      int64_t m1, int64_t n0, int64_t n1, gemm_apk apk, int64_t arow) {
  const float *B = o->B;
  const int64_t ldb = b_nk ? K : o->N;
  /* bf16 pairs: K counts pairs */
  const int64_t lda = gemm_bf16_pairs(b_nk) ? 2 * K : K;
  /* panels, rows: the whole matrix, addressed from column n0 by gemm_blocked_ */
  const int whole = b_nk == GEMM_B_PANELS || b_nk == GEMM_B_ROWS || b_nk == GEMM_B_BF16P ||
                    b_nk == GEMM_B_BF16P_F32 || gemm_qp_fmt(b_nk) >= 0;
  const float *Bt = whole ? B : b_nk ? B + n0 * K : B + n0;
  const float *bt = o->bias ? o->bias + n0 : NULL;
#if defined(CKIR_AMX_BUILD)
  if (apk.amx) {
    const uint16_t *p = (const uint16_t *)apk.p + arow * ckir_internal_amx_ld(K);
    ckir_internal_amx_gemm(apk.amx, p, m1 - m0, B, K, n0, n1 - n0, bt, C, ldc);
    return;
  }
#endif
  if (a_t)
    gemm_blocked_t(A + m0, M, Bt, ldb, b_nk, C, ldc, m1 - m0, n1 - n0, K, apk, arow);
  else
    gemm_blocked(A + m0 * lda, lda, Bt, ldb, b_nk, n0, row, bt, C, ldc, m1 - m0, n1 - n0, K, relu,
                 apk, arow);
}

/* ---- the per-thread pack of A ----------------------------------------------
 * Each thread's buffer (grown when a call needs more, freed at thread exit;
 * the key is deleted when the library is unloaded, so a thread that outlives
 * it does not call into unmapped code, and its buffer is then leaked); NULL
 * when it cannot be had (the thread then packs A block by block). */
typedef struct {
  float *p;
  size_t n;
} apk_buf;
static pthread_key_t apk_key;
static pthread_once_t apk_once = PTHREAD_ONCE_INIT;
static int apk_key_ok;

static void apk_free(void *v) {
  apk_buf *b = v;
  free(b->p);
  free(b);
}

static void apk_init(void) { apk_key_ok = pthread_key_create(&apk_key, apk_free) == 0; }

__attribute__((destructor)) static void apk_fini(void) {
  if (apk_key_ok) pthread_key_delete(apk_key);
}

static float *apk_get(size_t floats) {
  pthread_once(&apk_once, apk_init);
  if (!apk_key_ok) return NULL;
  apk_buf *b = pthread_getspecific(apk_key);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b || pthread_setspecific(apk_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (b->n < floats) {
    free(b->p);
    b->p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    b->n = b->p ? floats : 0;
  }
  return b->p;
}

/* The calling thread's pack of rows [0, M) of A (lda floats apart, K pairs) as
 * bf16 rows for the AMX tiles of mode amx (gemm_amx.c), into apk (its p and
 * amx); apk is left as it is when amx is off or the buffer cannot be had (the
 * driver then runs its own kernels). */
static void gemm_amx_pack(int amx, const float *A, int64_t lda, int64_t M, int64_t K,
                          gemm_apk *apk) {
#if defined(CKIR_AMX_BUILD)
  float *pk = amx ? apk_get((ckir_internal_amx_pack_bytes(M, K) + 3) / 4) : NULL;
  if (pk) {
    ckir_internal_amx_pack(A, lda, M, K, (uint16_t *)pk);
    apk->p = pk;
    apk->amx = amx;
  }
#else
  (void)amx, (void)A, (void)lda, (void)M, (void)K, (void)apk;
#endif
}

/* Rows of A packed at once (a multiple of GEMM_MC, at least one block): a
 * thread's pack of a row block is GEMM_APK_BYTES at most, so it stays in L2 /
 * L3 while the thread runs its columns over it; longer inputs run in row
 * blocks, each streaming the weights again (>= GEMM_MC rows reuse each weight). */
#ifndef GEMM_APK_BYTES
#define GEMM_APK_BYTES (2 << 20)
#endif

/* Row ownership (ckir_own_rows): a call on panels with at least GEMM_OWN_ROWS
 * rows a thread splits M as the row kernels do (ckir_own_split), each running
 * every column over its own rows, so only the weights (read-only) are shared
 * between the cores.  An N split reads all of x on every core and writes half
 * of each output row on each. */
#ifndef GEMM_OWN_ROWS
#define GEMM_OWN_ROWS (4 * GEMM_MR)
#endif

/* gate_up tiles: at most GEMM_MC rows by GEMM_GU_NT columns, gate and up into
 * stack buffers, then silu(gate) * up into the output */
#define GEMM_GU_NT 256
_Static_assert(GEMM_GU_NT % GEMM_NR == 0, "gate_up tiles are whole panels");

/* The products of A with the n outputs' B (all of kind b_nk), or with gate_up
 * the swiglu of A's products with o[0].B (gate) and o[1].B (up) into o[0].C,
 * on one parallel region.  K is the driver's (pairs for bf16 pairs).
 *
 * Threads split M by row ownership when B is read in place (panels), each
 * thread gets GEMM_OWN_ROWS rows and the weights fit the L3 (each thread then
 * runs this function on its rows: inside a parallel region it runs on the
 * calling thread), else N (in whole panels, of all outputs in sequence) when
 * there are enough columns, else M (one output).  With an N split and a
 * micro-kernel that reads packed A, each thread packs A once per call (per row
 * block) into its own buffer, whatever number of outputs, column blocks and
 * chunks it then runs over it.  One pack shared by the threads was measured slower: its lines
 * move between the cores' caches at every call (docs/performance-log.md). */
static void gemm_run(const float *A, int a_t, int b_nk, ckir_wrow_fn row, const gemm_out *o,
                     int n, int gate_up, int64_t M, int64_t K, int relu) {
  int64_t ntot = 0, npanels = 0;
  for (int i = 0; i < (gate_up ? 1 : n); i++) {
    ntot += o[i].N;
    npanels += (o[i].N + GEMM_NR - 1) / GEMM_NR;
  }
  int nt = 1;
#ifdef _OPENMP
  /* inside a caller's parallel region the call runs on its thread */
  if ((double)M * ntot * K * (gate_up ? 2 : 1) >= 64.0 * CKIR_PAR_MIN_WORK && !omp_in_parallel())
    nt = omp_get_max_threads();
#endif
  const int64_t mpanels = (M + GEMM_MR - 1) / GEMM_MR;
  const int bf = gemm_bf16_pairs(b_nk);
  const int64_t lda = a_t ? M : bf ? 2 * K : K;
  /* bytes of the weights: 4 a k (an f32, or a pair of bf16) */
  const double wbytes = 4.0 * (double)(ntot * (gate_up ? 2 : 1)) * (double)K;
  if (!a_t && gemm_b_in_place(b_nk) && ckir_own_split(M, nt, GEMM_OWN_ROWS, wbytes)) {
#pragma omp parallel num_threads(nt)
    {
      int64_t r0, r1;
      ckir_own_rows(M, &r0, &r1);
      gemm_out own[3];
      for (int i = 0; i < n; i++) {
        own[i] = o[i];
        if (own[i].C) own[i].C += r0 * o[i].N;
      }
      /* inside the region, the call on rows [r0, r1) runs on this thread */
      if (r1 > r0) gemm_run(A + r0 * lda, 0, b_nk, row, own, n, gate_up, r1 - r0, K, relu);
    }
    return;
  }
  /* bf16p on AMX tiles: each thread packs its rows of A as bf16 rows (gemm_amx.c) */
  int amx = 0;
#if defined(CKIR_AMX_BUILD)
  if (b_nk == GEMM_B_BF16P && !a_t) amx = ckir_internal_amx();
#endif
  int split_n = n > 1 || gate_up || npanels >= 2 * nt || npanels >= mpanels;
  /* a transposed A is always packed, all of it by every thread of an N split:
   * when it is the larger operand (the weight gradient of a wide layer,
   * dy^T[N, tokens]), split its rows instead, so each chunk packs only its own
   * rows of A (and the small B again) */
  if (a_t && n == 1 && !gate_up && M > ntot && mpanels >= 2 * nt) split_n = 0;
  if (!split_n) {
    if (nt > mpanels) nt = (int)mpanels;
    const int64_t chunks = CKIR_MIN(mpanels, (int64_t)nt * GEMM_CHUNKS);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int64_t c = 0; c < chunks; c++) {
      const int64_t m0 = mpanels * c / chunks * GEMM_MR;
      const int64_t m1 = CKIR_MIN(M, mpanels * (c + 1) / chunks * GEMM_MR);
      if (m1 > m0) {
        gemm_apk apk = {NULL, 0, 0};
        gemm_amx_pack(amx, A + m0 * lda, lda, m1 - m0, K, &apk);
        gemm_part(A, a_t, b_nk, row, o, o->C + m0 * o->N, o->N, M, K, relu, m0, m1, 0, o->N, apk,
                  0);
      }
    }
    return;
  }
  const int64_t kstep = gemm_kstep(K, b_nk);
  /* row blocks of the threads' packs */
  const int64_t rb = CKIR_MAX(GEMM_MC, GEMM_APK_BYTES / (K * (int64_t)sizeof(float)) / GEMM_MC *
                                           GEMM_MC);
  const int64_t rblock = CKIR_MIN(rb, M);
  const size_t pk_rows = (size_t)((rblock + GEMM_MR - 1) / GEMM_MR * GEMM_MR);
  const int packs = gemm_packs_a(a_t, b_nk);
  /* work units: panels of the outputs in sequence, or gate_up tiles */
  const int64_t gu_cols = gate_up ? (o[0].N + GEMM_GU_NT - 1) / GEMM_GU_NT : 0;
  if (nt > 1 && !gate_up && nt > npanels) nt = (int)npanels;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *pk = amx ? NULL : packs ? apk_get(pk_rows * (size_t)K) : NULL;
    for (int64_t r0 = 0; r0 < M; r0 += rblock) {
      const int64_t mb = CKIR_MIN(rblock, M - r0);
      gemm_apk apk = {pk, (mb + GEMM_MR - 1) / GEMM_MR * GEMM_MR, 0};
      if (amx)
        gemm_amx_pack(amx, A + r0 * lda, lda, mb, K, &apk);
      else if (pk)
        for (int64_t pc = 0; pc < K; pc += kstep)
          for (int64_t ic = 0; ic < mb; ic += GEMM_MC) {
            const int64_t kc = CKIR_MIN(kstep, K - pc), mc = CKIR_MIN(GEMM_MC, mb - ic);
            const int64_t i = r0 + ic; /* A's row */
            pack_a_any(a_t ? A + i : A + i * lda, lda, a_t, bf, mc, pc, kc,
                       pk + pc * apk.rows + ic * kc);
          }
      if (gate_up) {
        /* row tiles of about equal height (whole GEMM_MR panels, <= GEMM_MC) */
        const int64_t mtiles = (mb + GEMM_MC - 1) / GEMM_MC;
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t t = 0; t < mtiles * gu_cols; t++) {
          const int64_t i = t % mtiles, n0 = t / mtiles * GEMM_GU_NT;
          const int64_t pb = apk.rows / GEMM_MR; /* row panels of the block */
          const int64_t m0 = pb * i / mtiles * GEMM_MR;
          const int64_t m1 = i + 1 == mtiles ? mb : pb * (i + 1) / mtiles * GEMM_MR;
          const int64_t nc = CKIR_MIN(GEMM_GU_NT, o[0].N - n0);
          float g[GEMM_MC * GEMM_GU_NT] __attribute__((aligned(64)));
          float u[GEMM_MC * GEMM_GU_NT] __attribute__((aligned(64)));
          gemm_part(A, a_t, b_nk, row, &o[0], g, nc, M, K, 0, r0 + m0, r0 + m1, n0, n0 + nc, apk,
                    m0);
          gemm_part(A, a_t, b_nk, row, &o[1], u, nc, M, K, 0, r0 + m0, r0 + m1, n0, n0 + nc, apk,
                    m0);
          for (int64_t r = 0; r < m1 - m0; r++)
            ckir_internal_silu_mul(g + r * nc, u + r * nc, o[0].C + (r0 + m0 + r) * o[0].N + n0,
                                   nc);
        }
      } else {
        const int64_t chunks = CKIR_MIN(npanels, (int64_t)nt * GEMM_CHUNKS);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t c = 0; c < chunks; c++) {
          /* panels [p0, p1) of the outputs in sequence */
          const int64_t p0 = npanels * c / chunks, p1 = npanels * (c + 1) / chunks;
          int64_t base = 0;
          for (int j = 0; j < n; j++) {
            const int64_t np = (o[j].N + GEMM_NR - 1) / GEMM_NR;
            const int64_t q0 = CKIR_MAX(p0, base) - base, q1 = CKIR_MIN(p1, base + np) - base;
            if (q1 > q0) {
              const int64_t n0 = q0 * GEMM_NR, n1 = CKIR_MIN(o[j].N, q1 * GEMM_NR);
              gemm_part(A, a_t, b_nk, row, &o[j], o[j].C + r0 * o[j].N + n0, o[j].N, M, K, relu,
                        r0, r0 + mb, n0, n1, apk, 0);
            }
            base += np;
          }
        }
      }
    }
  }
}

void ckir_internal_gemm_outs(const float *x, ckir_wread r, const ckir_gemm_out *o, int n,
                             int gate_up, int64_t M, int64_t K) {
  CKIR_REQUIRE(n >= 1 && n <= 3 && (!gate_up || n == 2) && r.kind != GEMM_B_NONE,
               "gemm_outs");
  gemm_out g[3];
  for (int i = 0; i < 3; i++)
    g[i] = i < n ? (gemm_out){(const float *)o[i].w, o[i].b, o[i].y, o[i].N} : (gemm_out){0};
  gemm_run(x, 0, r.kind, r.row, g, n, gate_up, M, gemm_bf16_pairs(r.kind) ? K / 2 : K, 0);
}

ckir_wread ckir_internal_wread_f32(int64_t M, int64_t K) {
  (void)K;
  return (ckir_wread){M <= GEMM_SMALL_M ? GEMM_B_NONE : GEMM_B_NK, NULL};
}

static void gemm_driver(const float *A, int a_t, const float *B, int b_nk, ckir_wrow_fn row,
                        const float *bias, float *C, int64_t M, int64_t N, int64_t K, int relu) {
  const gemm_out o = {B, bias, C, N};
  gemm_run(A, a_t, b_nk, row, &o, 1, 0, M, K, relu);
}

void ckir_internal_gemm(const float *a, int a_t, const float *b, int b_nk, float *c, int64_t M,
                        int64_t N, int64_t K) {
  gemm_driver(a, a_t, b, b_nk, NULL, NULL, c, M, N, K, 0);
}

/* ---- public kernels -------------------------------------------------------- */

CKIR_INLINE void gemm_f32_impl(const float *x, const float *w, const float *b, float *y,
                               int64_t M, int64_t N, int64_t K) {
  if (ckir_internal_wread_f32(M, K).kind == GEMM_B_NONE)
    ckir_internal_dot_rows(x, M, w, b, y, N, K);
  else
    gemm_driver(x, 0, w, 1, NULL, b, y, M, N, K, 0);
}

CKIR_GEMM_PAIR(f32, float, gemm_f32_impl(x, w, b, y, M, N, K))

void ckir_matmul_f32(const float *a, const float *b, float *c, int64_t M, int64_t N, int64_t K) {
  gemm_driver(a, 0, b, 0, NULL, NULL, c, M, N, K, 0);
}

void ckir_matmul_relu_f32(const float *a, const float *b, float *c, int64_t M, int64_t N,
                          int64_t K) {
  gemm_driver(a, 0, b, 0, NULL, NULL, c, M, N, K, 1);
}
