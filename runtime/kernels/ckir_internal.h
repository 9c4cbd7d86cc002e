/* ckir runtime: private helpers shared by the kernel sources (not installed).
 *
 * ISA selection happens at BUILD time.  Every kernel source tests
 *   CKIR_AVX512  (defined when __AVX512F__ is on and CKIR_FORCE_SCALAR is off)
 *   CKIR_AVX2    (defined when __AVX2__ && __FMA__ are on, no AVX-512, no force-scalar)
 * and otherwise uses its portable scalar path.
 */
#ifndef CKIR_INTERNAL_H
#define CKIR_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ckir_runtime.h"

#if defined(__AVX512F__) && !defined(CKIR_FORCE_SCALAR)
#define CKIR_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && !defined(CKIR_FORCE_SCALAR)
#define CKIR_AVX2 1
#endif

#if defined(CKIR_AVX512) || defined(CKIR_AVX2)
#include <immintrin.h>
#endif

/* CKIR_BF16DOT: an AVX-512 build for a CPU with AVX512-BF16.  The bf16-weight
 * GEMMs with M > CKIR_WGEMM_SMALL_M rows and an even K then multiply x rounded
 * to bf16 by the bf16 weights with vdpbf16ps (gemm.c, read kind GEMM_B_BF16),
 * at twice the fp32 FMA rate on Zen 4, instead of converting the weights to
 * fp32.  ckir_runtime_bf16_dot() reports it. */
#if defined(CKIR_AVX512) && defined(__AVX512BF16__)
#define CKIR_BF16DOT 1
#endif

/* CKIR_AMX_BUILD: a CKIR_BF16DOT build for x86-64, which has gemm_amx.c's
 * prefill GEMMs on AMX tiles, bf16p and q8_0p / q4_1p on int8 x (run where the
 * CPU and the OS have them, or emulated; ckir_set_amx). */
#if defined(CKIR_BF16DOT) && defined(__x86_64__)
#define CKIR_AMX_BUILD 1
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#define CKIR_INLINE static inline __attribute__((always_inline))

/* Debug builds (-DCKIR_DEBUG) check documented kernel constraints and abort
 * with a message naming the kernel; release builds trust the caller. */
#ifdef CKIR_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define CKIR_REQUIRE(cond, kernel)                                                   \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "ckir: %s: constraint violated: %s\n", kernel, #cond);         \
      abort();                                                                       \
    }                                                                                \
  } while (0)
#else
#define CKIR_REQUIRE(cond, kernel) ((void)0)
#endif
#define CKIR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CKIR_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Work (in "element operations") below which a kernel stays single-threaded:
 * an OpenMP fork/join costs a few microseconds. */
#define CKIR_PAR_MIN_WORK 32768

/* for (int64_t i = 0; i < n; i++) { body }, split statically over the threads
 * when par, else on the calling thread without entering an OpenMP region: one
 * whose `if` is false still costs ~0.3 us (a decode step runs ~90 of these
 * row kernels on one row).  The body may hold commas. */
#define CKIR_FOR_STATIC(par, i, n, ...)                                               \
  do {                                                                                \
    if (par) {                                                                        \
      _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < (n); i++) { \
        __VA_ARGS__                                                                   \
      }                                                                               \
    } else {                                                                          \
      for (int64_t i = 0; i < (n); i++) {                                             \
        __VA_ARGS__                                                                   \
      }                                                                               \
    }                                                                                 \
  } while (0)

/* The calling thread's number and its team's size (0 and 1 outside a
 * parallel region, or without OpenMP). */
static inline void ckir_team(int *t, int *n) {
#ifdef _OPENMP
  *t = omp_get_thread_num();
  *n = omp_get_num_threads();
#else
  *t = 0;
  *n = 1;
#endif
}

/* The calling thread's contiguous share [lo, hi) of n work items (a static
 * split by thread number). */
static inline void ckir_thread_share(int64_t n, int64_t *lo, int64_t *hi) {
  int t, nt;
  ckir_team(&t, &nt);
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

/* Whether the calling thread is inside an active parallel region */
static inline int ckir_in_parallel(void) {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return 0;
#endif
}

/* Work claiming: a split of n items between the threads of a region that balances
 * itself.  Slot t holds thread t's contiguous share (as ckir_thread_share gives it),
 * front and back packed in one word on its own cache line; its owner claims the share
 * from the front, one item at a time, in order (its reads stay one forward stream),
 * and a thread whose share is done claims what is left of the others' from their
 * backs.  Every claim is one compare-and-swap on that word, so each item is claimed
 * exactly once and the items' results do not depend on which thread computed them.
 * A thread that the host slows down then costs its partner no wait at the end of
 * the call: with the static split, the two halves of the decode GEMVs ended 16 % of
 * their time apart on 2 vCPUs of a shared host (docs/performance-log.md, "Decode
 * GEMVs: claimed panels"). */
#define CKIR_CLAIM_SLOTS 64
typedef struct {
  _Alignas(64) int64_t fb; /* front in the low 32 bits, back in the high 32 */
} ckir_claim;

/* the shares of n items (n < 2^31) in slots 0 .. slots - 1, before the region whose
 * threads claim them: a slot whose thread the region lacks is claimed by the others */
static inline void ckir_claims_init(ckir_claim *c, int slots, int64_t n) {
  for (int t = 0; t < slots; t++)
    c[t].fb = (n * t / slots) | ((n * (t + 1) / slots) << 32);
}

/* the next item for thread t: its own share's front, else another share's back
 * (slots t + 1, t + 2, ...); -1 when every item is claimed */
static inline int64_t ckir_claim_next(ckir_claim *c, int slots, int t) {
  for (int k = 0; k < slots; k++) {
    ckir_claim *s = &c[(t + k) % slots];
    int64_t v = __atomic_load_n(&s->fb, __ATOMIC_RELAXED);
    for (;;) {
      const int64_t f = v & 0xffffffff, b = v >> 32;
      if (f >= b) break;
      const int64_t nv = k == 0 ? v + 1 : v - ((int64_t)1 << 32);
      if (__atomic_compare_exchange_n(&s->fb, &v, nv, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return k == 0 ? f : b - 1;
    }
  }
  return -1;
}

/* The body once per thread of a new region, item `it` running over the items of n
 * that the thread claims (ckir_claim_next; `fresh` is 1 where the item does not follow
 * the thread's previous one), when par; else once on the calling thread with every
 * item in order, and never a region nested in a caller's active one (as
 * CKIR_SHARED_RANGE). */
#define CKIR_CLAIMED_ITEMS(par, n, it, fresh, ...)                                    \
  do {                                                                                \
    const int64_t n_ = (n);                                                           \
    if ((par) && !ckir_in_parallel()) {                                               \
      const int slots_ = CKIR_MIN(ckir_get_num_threads(), CKIR_CLAIM_SLOTS);          \
      ckir_claim claims_[CKIR_CLAIM_SLOTS];                                           \
      ckir_claims_init(claims_, slots_, n_);                                          \
      _Pragma("omp parallel") {                                                       \
        int t_, nt_;                                                                  \
        ckir_team(&t_, &nt_);                                                         \
        int64_t it, prev_ = -2;                                                       \
        while ((it = ckir_claim_next(claims_, slots_, t_ % slots_)) >= 0) {           \
          const int fresh = it != prev_ + 1;                                          \
          prev_ = it;                                                                 \
          __VA_ARGS__                                                                 \
        }                                                                             \
      }                                                                               \
    } else {                                                                          \
      for (int64_t it = 0; it < n_; it++) {                                           \
        const int fresh = it == 0;                                                    \
        __VA_ARGS__                                                                   \
      }                                                                               \
    }                                                                                 \
  } while (0)

/* The body once per thread of a new region with [lo, hi) the thread's share of
 * `total` items when par, else once on the calling thread with all of them,
 * and never a region nested in a caller's active one: the fused decode kernels
 * call the GEMVs from theirs, and a nested region costs ~0.6 us a call
 * (measured).  The body may hold commas, not preprocessor lines. */
#define CKIR_SHARED_RANGE(par, total, lo, hi, ...)                      \
  do {                                                                  \
    if ((par) && !ckir_in_parallel()) {                                 \
      _Pragma("omp parallel") {                                         \
        int64_t lo, hi;                                                 \
        ckir_thread_share((total), &lo, &hi);                           \
        __VA_ARGS__                                                     \
      }                                                                 \
    } else {                                                            \
      const int64_t lo = 0, hi = (total);                               \
      __VA_ARGS__                                                       \
    }                                                                   \
  } while (0)

/* Row ownership.  The row kernels (norms, rope, embed) split their T rows
 * with `omp parallel for schedule(static)` (the element-wise ones static chunks
 * of the same halves), so in a prefill each thread writes, and reads back, the
 * same rows of every activation.  A kernel that splits rows by ckir_own_rows
 * keeps to that split: [*r0, *r1) are the rows of T the same static schedule
 * gives the calling thread (empty when none); every thread of the team must
 * call it.  Activations then stay in the cache of the core that owns their
 * rows: lines that both cores hold make every later write to them an
 * invalidation across cores (docs/runtime.md, "Row ownership"). */
static inline void ckir_own_rows(int64_t T, int64_t *r0, int64_t *r1) {
  int64_t lo = T, hi = 0;
#ifdef _OPENMP
#pragma omp for schedule(static) nowait
#endif
  for (int64_t t = 0; t < T; t++) {
    lo = CKIR_MIN(lo, t);
    hi = t + 1;
  }
  *r0 = lo;
  *r1 = CKIR_MAX(lo, hi);
}

/* Whether a GEMM of M rows over wbytes of weights, on nt threads, splits its
 * rows by ownership (each thread all columns of its own rows): when every
 * thread gets at least min_rows rows and the weights, which every thread then
 * reads, fit the L3 (CKIR_OWN_B_BYTES).  Larger weights (an LM head) split
 * their columns: each core streams half of them from DRAM. */
#ifndef CKIR_OWN_B_BYTES
#define CKIR_OWN_B_BYTES (32 << 20)
#endif
static inline int ckir_own_split(int64_t M, int nt, int64_t min_rows, double wbytes) {
  return nt > 1 && M >= nt * min_rows && wbytes <= CKIR_OWN_B_BYTES;
}

/* Constants of the exp approximation: e^x = 2^n * e^r, n = round(x*log2(e)),
 * r = x - n*ln2 (Cody-Waite two-constant split), e^r by a degree-7 Taylor
 * polynomial on |r| <= ln2/2 (truncation error < 5e-9 relative). */
#define CKIR_LOG2E 1.44269504088896341f
#define CKIR_LN2_HI 0.693359375f
#define CKIR_LN2_LO -2.12194440e-4f
#define CKIR_EXP_C2 (1.0f / 2.0f)
#define CKIR_EXP_C3 (1.0f / 6.0f)
#define CKIR_EXP_C4 (1.0f / 24.0f)
#define CKIR_EXP_C5 (1.0f / 120.0f)
#define CKIR_EXP_C6 (1.0f / 720.0f)
#define CKIR_EXP_C7 (1.0f / 5040.0f)

#if defined(CKIR_AVX512)
/* Lane i of the result is the horizontal sum of v[i] (16 inputs). */
CKIR_INLINE __m512 ckir_hsum16_ps512(const __m512 v[16]) {
  __m512 s1[8], s2[4], s3[2];
  for (int i = 0; i < 8; i++) {
    __m512 a = v[2 * i], b = v[2 * i + 1];
    s1[i] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  }
  for (int i = 0; i < 4; i++) {
    __m512 a = s1[2 * i], b = s1[2 * i + 1];
    s2[i] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int i = 0; i < 2; i++) {
    __m512 a = s2[2 * i], b = s2[2 * i + 1];
    s3[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  __m512 r = _mm512_add_ps(_mm512_shuffle_f32x4(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return r;
}

/* Mask with the low n (0..16) lanes set. */
CKIR_INLINE __mmask16 ckir_mask16(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}
#endif /* CKIR_AVX512 */

#if defined(CKIR_AVX512) || defined(CKIR_AVX2)
CKIR_INLINE float ckir_hsum_ps256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Lane i of the result is the horizontal sum of v[i] (8 inputs). */
CKIR_INLINE __m256 ckir_hsum8_ps256(const __m256 v[8]) {
  /* per 128-bit lane, hadd pairs then quads: u0 = [s0 s1 s2 s3 | s0' s1' s2' s3'] (lo/hi halves) */
  __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

CKIR_INLINE float ckir_hmax_ps256(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Lane mask for AVX2 masked loads/stores: low n (0..8) lanes set. */
CKIR_INLINE __m256i ckir_mask8(int64_t n) {
  static const int32_t tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  if (n > 8) n = 8;
  return _mm256_loadu_si256((const __m256i *)(tbl + 8 - n));
}
#endif

#include "ckir_vec.h"

/* y[m, n] = x[m, :] . w[n, :] (+ b[n] when b != NULL) for m < M, n < N: the
 * dot-product (weight-streaming) form used by gemv (M = 1) and by gemm for
 * small M.  Defined in gemv.c; OpenMP over blocks of rows of w. */
void ckir_internal_dot_rows(const float *x, int64_t M, const float *w, const float *b, float *y,
                            int64_t N, int64_t K);

/* c[M, N] = A . B (overwritten; c aliases neither) on gemm.c's blocked driver,
 * OpenMP over the output (never over K).  A is a[M, K], or with a_t its
 * transpose stored as a[K, M]; B is b[K, N], or with b_nk its transpose
 * stored as w[N, K].  Used by the linear-layer backward (backward_gemm.c). */
void ckir_internal_gemm(const float *a, int a_t, const float *b, int b_nk, float *c, int64_t M,
                        int64_t N, int64_t K);

/* Weights pre-packed in GEMM panels (weight dtype f32p, the same on every ISA):
 * a [N, K] matrix is ceil(N / CKIR_PANEL) panels of [K][CKIR_PANEL] floats,
 * element (n, k) at ((n / CKIR_PANEL) * K + k) * CKIR_PANEL + n % CKIR_PANEL, rows
 * >= N zero.  Rows r0 .. of a matrix with r0 % CKIR_PANEL == 0 start at float
 * r0 * K, so a whole-panel slice of rows is addressed like a row-major one. */
#define CKIR_PANEL 32
#define CKIR_PANEL_AT(w, n, k, K) \
  ((w)[(((n) / CKIR_PANEL) * (K) + (k)) * CKIR_PANEL + (n) % CKIR_PANEL])

/* bf16 weights in GEMM panels (weight dtype bf16p, K even): the panels of
 * f32p with each float replaced by a 32-bit pair of bf16, k = 2j in the low and
 * k = 2j + 1 in the high half: element (n, k) is the uint16_t at
 * ((((n / CKIR_PANEL) * (K / 2) + k / 2) * CKIR_PANEL + n % CKIR_PANEL) * 2 + k % 2),
 * rows >= N zero.  As pairs, a bf16p matrix is the f32p layout of an
 * [N, K / 2] matrix: rows r0 .. with r0 % CKIR_PANEL == 0 start at uint16_t r0 * K. */
#define CKIR_PANEL_BF16_AT(w, n, k, K)                                                 \
  ((w)[((((n) / CKIR_PANEL) * ((K) / 2) + (k) / 2) * CKIR_PANEL + (n) % CKIR_PANEL) * 2 + \
       (k) % 2])

/* x[K] . row n of an f32p / bf16p matrix in double, k order (panels.c): the
 * reference twins' rows, also those of the fused kernels */
float ckir_internal_ref_row_f32p(const float *x, const float *w, int64_t n, int64_t K);
float ckir_internal_ref_row_bf16p(const float *x, const uint16_t *w, int64_t n, int64_t K);

/* Q8_0 blocks in GEMM panels (weight dtype q8_0p, K % 32 == 0): panel p (rows
 * CKIR_PANEL * p ..) is K / 32 panel blocks of CKIR_PANEL * 34 bytes, block b
 * holding the CKIR_PANEL f16 scales d[row, b] (2 * CKIR_PANEL bytes, row order),
 * then 8 quad rows i of 4 * CKIR_PANEL bytes: byte 4 r + j of quad row i is
 * q[row r, k = 32 b + 4 i + j] (int8).  Rows >= N have d = 0, q = 0.  Panel p
 * starts at byte p * CKIR_PANEL * (K / 32) * 34: a whole-panel slice of rows is
 * addressed like row-major q8_0. */
#define CKIR_Q8P_BLOCK (CKIR_PANEL * 34)

/* Q4_1 blocks in GEMM panels (weight dtype q4_1p, K % 32 == 0): panel blocks of
 * CKIR_PANEL * 20 bytes: the CKIR_PANEL f16 d, the CKIR_PANEL f16 m, then 4
 * groups g of 4 * CKIR_PANEL bytes: byte 4 r + j of group g is qs[row r, 4 g + j]
 * of the row's Q4_1 block (low nibble k = 4 g + j, high nibble k = 16 + 4 g + j).
 * Rows >= N are zero; panels start at byte p * CKIR_PANEL * (K / 32) * 20. */
#define CKIR_Q41P_BLOCK (CKIR_PANEL * 20)

/* Q4_0 blocks in GEMM panels (weight dtype q4_0p, K % 32 == 0): q4_1p's panel
 * blocks without the m: CKIR_PANEL * 18 bytes, the CKIR_PANEL f16 d, then the 4
 * nibble groups as in q4_1p (a value is d * (nib - 8)).  Panels start at byte
 * p * CKIR_PANEL * (K / 32) * 18. */
#define CKIR_Q40P_BLOCK (CKIR_PANEL * 18)

/* The block panel formats: the `fmt` argument of the internal functions below
 * (quant_panels.c, gemm.c, gemm_amx.c), and the bytes of one panel block */
#define CKIR_QP_Q8_0 0
#define CKIR_QP_Q4_1 1
#define CKIR_QP_Q4_0 2
/* the formats of the fp32 / bf16 panels f32p and bf16p (panels.c) in the fused kernels'
 * hooks ckir_internal_*_pp, which take the same arguments as the block panels' _qp */
#define CKIR_PP_F32 0
#define CKIR_PP_BF16 1
#define CKIR_QP_BLOCK(fmt)                                                                 \
  ((fmt) == CKIR_QP_Q4_1 ? CKIR_Q41P_BLOCK : (fmt) == CKIR_QP_Q4_0 ? CKIR_Q40P_BLOCK : CKIR_Q8P_BLOCK)
/* the offset of a panel block's quant bytes (after its 32 d, and q4_1p's 32 m) */
#define CKIR_QP_QS(fmt) ((fmt) == CKIR_QP_Q4_1 ? 4 * CKIR_PANEL : 2 * CKIR_PANEL)

/* y[M, N] = x[M, K] . W^T (+ b) with W in block panels of format fmt
 * on fp32 x, whatever ckir_runtime_qp_fp32_x says (quant_panels.c): M <=
 * QP_SMALL_M streams the panels, larger M runs gemm.c's driver, each kc-slice
 * of a panel dequantized into the B pack */
void ckir_internal_gemm_qp_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                int64_t M, int64_t N, int64_t K, int fmt);
/* dst[k * ld + n] = the value of row r0 + n (n < nr, a multiple of the vector width
 * that stays inside the panel) at k < 32 of the panel block pb of format fmt
 * (quant_panels.c) */
void ckir_internal_qp_deq(const uint8_t *pb, int64_t r0, int64_t nr, float *dst, int64_t ld,
                          int fmt);
/* x[K] . row n of a q8_0p / q4_1p / q4_0p matrix as gemv_<p> computes it (x
 * quantized, scalar) and as gemm_<p> does (fp32 x, double sum): the fused kernels'
 * reference rows */
float ckir_internal_ref_gemv_row_q8_0p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q8_0p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemv_row_q4_1p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q4_1p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemv_row_q4_0p(const float *x, const uint8_t *w, int64_t n, int64_t K);
float ckir_internal_ref_gemm_row_q4_0p(const float *x, const uint8_t *w, int64_t n, int64_t K);

/* attention_ext_f32's forward (attention.c): the attention bodies with a score scale,
 * soft-capping (softcap > 0) and a sliding window (window > 0) */
void ckir_internal_attention_ext_f32(const float *q, const float *kcache, const float *vcache,
                                     float *out, int64_t T, int64_t P, int64_t H, int64_t KV,
                                     int64_t D, float scale, float softcap, int64_t window);
/* out[i] = g[i] / (1 + e^-g[i]) * u[i] over one span, on the calling thread (the
 * body of swiglu_f32; elementwise.c).  Used by the fused gate_up kernels. */
void ckir_internal_silu_mul(const float *g, const float *u, float *out, int64_t n);
/* The decode GEMVs of qkv and gate_up on block panels of format fmt: x
 * quantized once for the three matrices (the two), each panel computed as
 * gemv_<p> computes it (quant_panels.c) */
void ckir_internal_gemv_qkv_qp(const float *x, const uint8_t *const w[3], const float *const b[3],
                               float *const y[3], const int64_t N[3], int64_t K, int fmt);
void ckir_internal_gemv_gate_up_qp(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt);
/* The block panel fused GEMMs on int8 x (quant_panels.c): x quantized once for
 * the three matrices / the gate and up pair, each row as gemm_<p> computes it;
 * return 0 where the runtime has no int8 GEMM (the caller takes the generic path). */
int ckir_internal_gemm_qkv_qp(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt);
int ckir_internal_gemm_gate_up_qp(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt);
/* the same hooks for f32p / bf16p (panels.c): the decode GEMVs on the panel driver (x
 * taken as it is), the fp32-x GEMM, and no fused GEMM of their own (0) */
void ckir_internal_gemv_qkv_pp(const float *x, const uint8_t *const w[3], const float *const b[3],
                               float *const y[3], const int64_t N[3], int64_t K, int fmt);
void ckir_internal_gemv_gate_up_pp(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt);
void ckir_internal_gemm_pp_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                int64_t M, int64_t N, int64_t K, int fmt);
int ckir_internal_gemm_qkv_pp(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt);
int ckir_internal_gemm_gate_up_pp(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt);

#if defined(CKIR_AMX_BUILD)
/* gemm_amx.c: the AMX mode in effect (CKIR_AMX_*, decided on first use); x's
 * rows [0, M) as bf16 rows for the tiles (K2 pairs of k a row of a, lda floats
 * apart; ld = ckir_internal_amx_ld(K2) elements between rows, padded with zeros
 * to whole tiles and 16 rows more: ckir_internal_amx_pack_bytes); and the
 * product of M rows of such a pack with the columns [col, col + N) of the whole
 * bf16p matrix B (K2 pairs a row), plus bias[0, N), into C (ldc floats between
 * rows), with the tiles of mode (CKIR_AMX_ON or CKIR_AMX_EMULATE) */
int ckir_internal_amx(void);
int64_t ckir_internal_amx_ld(int64_t K2);
size_t ckir_internal_amx_pack_bytes(int64_t M, int64_t K2);
void ckir_internal_amx_pack(const float *a, int64_t lda, int64_t M, int64_t K2, uint16_t *p);
void ckir_internal_amx_gemm(int mode, const uint16_t *p, int64_t M, const float *B, int64_t K2,
                            int64_t col, int64_t N, const float *bias, float *C, int64_t ldc);
/* rows [0, R) (R <= CKIR_AMX_QP_ROWS) of x quantized per block of 32 (a: int8
 * rows K apart, readable up to R rounded up to 16 rows; dx, sx, cb: [R][K / 32]
 * block scales, dx * sums and -128 * sums, quant_panels.c qp_quantize_x) times
 * the panel pp of a matrix in block panels of format fmt, plus b[0, nn) when b,
 * into columns [0, nn) of y (ldy floats between rows): each row bit for bit as
 * gemv_<p> computes it, on the tiles of mode */
#define CKIR_AMX_QP_ROWS 128
void ckir_internal_amx_qp_panel(int mode, const int8_t *a, int64_t K, const float *dx,
                                const float *sx, const int32_t *cb, int64_t R, const uint8_t *pp,
                                int fmt, const float *b, float *y, int64_t ldy, int64_t nn);
#endif

/* ---- the public entry points of a weight dtype ---------------------------------
 * CKIR_GEMV_PAIR / CKIR_GEMM_PAIR(D, WT, BODY) define ckir_gemv_D and
 * ckir_gemv_bias_D (ckir_gemm_D and ckir_gemm_bias_D) for weights of type WT:
 * both run BODY, one statement over the parameters x, w, b, y, N, K (and M),
 * with b NULL in the plain one; CKIR_REF_GEMV_PAIR / CKIR_REF_GEMM_PAIR the
 * same for the reference twins ckir_ref_*.  CKIR_EMBED_BLOCKS(D, DEQ, BYTES)
 * defines ckir_embed_D for a table of CKIR_QK-value blocks of BYTES bytes: row
 * tokens[t] (E / CKIR_QK blocks) through DEQ(blocks, nb, out) to fp32.
 * CKIR_BLOCK_ROWS(D, DEQ, BYTES) defines the row reader of such weights for
 * ckir_internal_wgemm (static D_wrow) and ckir_internal_wread_D. */
#define CKIR_GEMV_PAIR_(P, D, WT, BODY)                                                    \
  void P##gemv_##D(const float *x, const WT *w, float *y, int64_t N, int64_t K) {          \
    const float *const b = NULL;                                                            \
    BODY;                                                                                   \
  }                                                                                         \
  void P##gemv_bias_##D(const float *x, const WT *w, const float *b, float *y, int64_t N,  \
                        int64_t K) {                                                        \
    BODY;                                                                                   \
  }
#define CKIR_GEMM_PAIR_(P, D, WT, BODY)                                                    \
  void P##gemm_##D(const float *x, const WT *w, float *y, int64_t M, int64_t N, int64_t K) { \
    const float *const b = NULL;                                                            \
    BODY;                                                                                   \
  }                                                                                         \
  void P##gemm_bias_##D(const float *x, const WT *w, const float *b, float *y, int64_t M,  \
                        int64_t N, int64_t K) {                                             \
    BODY;                                                                                   \
  }
#define CKIR_GEMV_PAIR(D, WT, BODY) CKIR_GEMV_PAIR_(ckir_, D, WT, BODY)
#define CKIR_GEMM_PAIR(D, WT, BODY) CKIR_GEMM_PAIR_(ckir_, D, WT, BODY)
#define CKIR_REF_GEMV_PAIR(D, WT, BODY) CKIR_GEMV_PAIR_(ckir_ref_, D, WT, BODY)
#define CKIR_REF_GEMM_PAIR(D, WT, BODY) CKIR_GEMM_PAIR_(ckir_ref_, D, WT, BODY)
#define CKIR_EMBED_BLOCKS(D, DEQ, BYTES)                                                   \
  void ckir_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,  \
                      int64_t E) {                                                          \
    const int64_t nb = E / CKIR_QK;                                                         \
    _Pragma("omp parallel for schedule(static) if (T * E >= 4 * CKIR_PAR_MIN_WORK && T > 1)") \
    for (int64_t t = 0; t < T; t++)                                                         \
      DEQ(table + (int64_t)tokens[t] * nb * (BYTES), nb, out + t * E);                      \
  }
#define CKIR_BLOCK_ROWS(D, DEQ, BYTES)                                                     \
  static void D##_wrow(const void *w, int64_t K, int64_t n, int64_t k0, int64_t kc,        \
                       float *dst) {                                                        \
    const uint8_t *row = (const uint8_t *)w + n * (K / CKIR_QK * (BYTES));                  \
    DEQ(row + k0 / CKIR_QK * (BYTES), kc / CKIR_QK, dst);                                   \
  }                                                                                         \
  ckir_wread ckir_internal_wread_##D(int64_t M, int64_t K) {                                \
    (void)K;                                                                                \
    return ckir_internal_wread_rows(M, D##_wrow);                                           \
  }

#endif /* CKIR_INTERNAL_H */
