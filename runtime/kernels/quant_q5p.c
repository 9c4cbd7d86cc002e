/* ckir runtime: linear layers and embeddings with Q5_0 / Q5_1 weights in 32-row panels,
 * q5_0p and q5_1p (layouts in ckir_q5panel.h; docs/quantization.md, "q5_0p, q5_1p").
 *
 * Every kernel runs on one per-panel core: 32 rows of w, one panel, against 1 to Q5P_TX
 * rows of x quantized per block of 32 (ckir_internal_quantize_x, exactly as gemv_q5_0 /
 * gemv_q5_1 quantize x).  Per block the core forms each row's exact int32 sum of q * a
 * (q the unsigned 5-bit level) and scales it as quant_q5.c's scalar code does:
 *   q5_0p: acc += (float)(sum q a - 16 sum a) * (d * dx)
 *   q5_1p: acc += ((float)(sum q a) * (d * dx) + m * sx),  sx = dx * sum a
 * in block order, so the portable core equals the row-major reference twins bit for bit
 * and the SIMD cores (the same operations, 16 or 8 rows per vector, no fused
 * multiply-add) equal the portable core.
 *
 * The values in a SIMD core: quad plane 1 + g holds, per row (one 32-bit lane), qs[4g ..
 * 4g + 3]; their low nibbles are elements 4g + j, the high ones 16 + 4g + j.  The fifth
 * bit of element 4g + j is bit 4g + j of the row's qh (quad plane 0): a byte shuffle
 * copies qh byte g / 2 (high nibbles: 2 + g / 2) into the four bytes of each lane, a
 * test against bit 4 (g % 2) + j of byte j gives the bytes that get 0x10.  Each plane is
 * then two vpdpbusd (or vpmaddubsw + vpmaddwd) against the broadcast quads a[4g ..] and
 * a[16 + 4g ..] of each row of x.
 *
 *   gemv_<p> (decode) and gemm_<p> on int8 x (prefill, SIMD builds): the panel driver
 *     (ckir_pdriver.h, quant_pdriver.c) over this core, Q5P_TX rows of x per panel
 *     block load in prefill: row m of y == gemv_<p>(row m of x) bit for bit.  With fp32 x (ckir_runtime_qp_fp32_x, and
 *     scalar builds): the rows dequantized to fp32 on ckir_internal_wgemm, as gemm_q5_0 /
 *     gemm_q5_1 do (the same values, so the same results).
 *   embed_<p>: row n is row n % 32 of its panel, gathered and dequantized.
 *   reference twins: the portable core on the scalar quantization of x, fp32 dequantized
 *     rows summed in double for the GEMM (as ckir_ref_gemm_q5_0 / _q5_1). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_q5panel.h"
#include "ckir_pdriver.h"

#if defined(CKIR_Q512) || defined(CKIR_Q256)
#define Q5P_FAST 1
#else
#define Q5P_FAST 0
#endif
/* rows of x one core call takes */
#define Q5P_TX 4
/* the cores' software prefetch distance (bytes ahead in the panel stream) */
#define Q5P_PFD 2048
/* bytes of x's quantized rows a GEMM thread keeps on its stack at once */
#define Q5P_XB (96 * 1024)
_Static_assert(CKIR_PANEL == 32, "the Q5 panels are 32 rows");

/* bytes of a row-major block, of a panel block, and the offset of the quad planes */
#define Q5P_BYTES(fmt) ((fmt) == CKIR_Q5P_1 ? CKIR_Q5_1_BYTES : CKIR_Q5_0_BYTES)
#define Q5P_PB(fmt) (CKIR_PANEL * Q5P_BYTES(fmt))
#define Q5P_QUADS(fmt) ((fmt) == CKIR_Q5P_1 ? 4 * CKIR_PANEL : 2 * CKIR_PANEL)

/* ---- x ------------------------------------------------------------------------- */

/* one row of x quantized per block of 32: a[K], dx[K/32], and per block c = -16 sum a
 * (q5_0) and sx = dx * sum a (q5_1) */
typedef struct {
  int8_t *a;
  float *dx;
  int32_t *c;
  float *sx;
} q5p_x;

#define Q5P_X_BYTES(K) ((K) + ((K) / CKIR_QK) * 12 + 128)

static q5p_x q5p_prepare(const float *x, int64_t K, uint8_t *buf, int ref) {
  const int64_t nb = K / CKIR_QK;
  q5p_x s;
  s.a = CKIR_ALIGN64(buf);
  s.dx = (float *)(s.a + K);
  s.c = (int32_t *)(s.dx + nb);
  s.sx = (float *)(s.c + nb);
  if (ref)
    ckir_internal_quantize_x_ref(x, K, s.a, s.dx);
  else
    ckir_internal_quantize_x(x, K, s.a, s.dx);
  for (int64_t b = 0; b < nb; b++) {
    int32_t t = 0;
    for (int j = 0; j < CKIR_QK; j++) t += s.a[b * CKIR_QK + j];
    s.c[b] = -16 * t;
    s.sx[b] = s.dx[b] * (float)t;
  }
  return s;
}

/* ---- the layout ------------------------------------------------------------------ */

/* the row-major block of row r of a panel block of fmt (the inverse permutation) */
CKIR_INLINE void q5p_block(int fmt, const uint8_t *pb, int r, uint8_t *blk) {
  const int nf = fmt == CKIR_Q5P_1 ? 2 : 1;
  for (int f = 0; f < nf; f++) memcpy(blk + 2 * f, pb + 2 * CKIR_PANEL * f + 2 * r, 2);
  for (int g = 0; g < 5; g++)
    memcpy(blk + 2 * nf + 4 * g, pb + 2 * CKIR_PANEL * nf + 4 * CKIR_PANEL * g + 4 * r, 4);
}

/* level j (0..31) of the block whose qh is at p (qs at p + 4) */
CKIR_INLINE int q5p_level(const uint8_t *p, int j) {
  const uint32_t h = (uint32_t)ckir_q_ld32(p);
  const uint8_t b = p[4 + (j & 15)];
  return (j < 16 ? (b & 0x0F) : (b >> 4)) | (int)(((h >> j) & 1u) << 4);
}

/* the 32 values of a row-major block of fmt, as quant_q5.c dequantizes them */
static void q5p_deq1(int fmt, const uint8_t *blk, float *dst) {
  const float d = ckir_internal_f16_to_f32(ckir_q_ld16(blk));
  if (fmt == CKIR_Q5P_1) {
    const float m = ckir_internal_f16_to_f32(ckir_q_ld16(blk + 2));
    for (int j = 0; j < CKIR_QK; j++) dst[j] = (float)q5p_level(blk + 4, j) * d + m;
  } else {
    for (int j = 0; j < CKIR_QK; j++) dst[j] = (float)(q5p_level(blk + 2, j) - 16) * d;
  }
}

/* bytes of one panel of fmt at K */
CKIR_INLINE int64_t q5p_panel_bytes(int fmt, int64_t K) { return K / CKIR_QK * Q5P_PB(fmt); }

/* the 32 values of row n, block b of a [N, K] matrix of fmt */
static void q5p_values(int fmt, const uint8_t *w, int64_t n, int64_t b, int64_t K, float *v) {
  uint8_t blk[CKIR_Q5_1_BYTES];
  const uint8_t *pb = w + (n / CKIR_PANEL) * q5p_panel_bytes(fmt, K) + b * Q5P_PB(fmt);
  q5p_block(fmt, pb, (int)(n % CKIR_PANEL), blk);
  q5p_deq1(fmt, blk, v);
}

/* ---- the cores ------------------------------------------------------------------- */

/* out[i * 32 + r] = row r of the panel . x_i (i < X), the portable way: each row's block
 * gathered, then quant_q5.c's scalar sum */
static void q5p_core_portable(int fmt, const uint8_t *panel, int64_t nb, const q5p_x *xs, int X,
                              float *out) {
  const int64_t pbb = Q5P_PB(fmt);
  const int hm = fmt == CKIR_Q5P_1, qh = hm ? 4 : 2;
  for (int r = 0; r < CKIR_PANEL; r++) {
    float acc[Q5P_TX] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; b++) {
      uint8_t blk[CKIR_Q5_1_BYTES];
      q5p_block(fmt, panel + b * pbb, r, blk);
      const float d = ckir_internal_f16_to_f32(ckir_q_ld16(blk));
      const float m = hm ? ckir_internal_f16_to_f32(ckir_q_ld16(blk + 2)) : 0.0f;
      for (int i = 0; i < X; i++) {
        const int8_t *ab = xs[i].a + b * CKIR_QK;
        int32_t is = 0;
        for (int j = 0; j < CKIR_QK; j++) is += q5p_level(blk + qh, j) * ab[j];
        if (hm)
          acc[i] += (float)is * (d * xs[i].dx[b]) + m * xs[i].sx[b];
        else
          acc[i] += (float)(is + xs[i].c[b]) * (d * xs[i].dx[b]);
      }
    }
    for (int i = 0; i < X; i++) out[i * CKIR_PANEL + r] = acc[i];
  }
}

#if defined(CKIR_Q512)
/* 16 rows (H = 0: rows 0..15, 1: 16..31) of the panel against X rows of x, accumulated
 * in acc[i] */
CKIR_INLINE void q5p_half512(const uint8_t *panel, int64_t nb, const q5p_x *xs, const int X,
                             const int hm, const int H, int64_t pfd, __m512 *acc) {
  const int64_t pbb = hm ? Q5P_PB(CKIR_Q5P_1) : Q5P_PB(CKIR_Q5P_0);
  const int quads = hm ? 4 * CKIR_PANEL : 2 * CKIR_PANEL;
  /* byte j of each lane <- qh byte s of that lane (s = 0..3) */
  __m512i sel[4];
  for (int s = 0; s < 4; s++)
    sel[s] = _mm512_add_epi8(_mm512_set1_epi8((char)s),
                             _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0));
  const __m512i bit0 = _mm512_set1_epi32(0x08040201), bit1 = _mm512_set1_epi32((int)0x80402010);
  const __m512i lo4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *pb = panel + b * pbb;
    if (pfd) {
      __builtin_prefetch((const char *)pb + pfd, 0, 3);
      __builtin_prefetch((const char *)pb + pfd + 64, 0, 3);
    }
    const __m512i qh = _mm512_loadu_si512((const void *)(pb + quads + 64 * H));
    __m512i is[Q5P_TX];
    for (int i = 0; i < X; i++) is[i] = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++) {
      const __m512i qs = _mm512_loadu_si512((const void *)(pb + quads + 128 * (g + 1) + 64 * H));
      const __m512i bits = (g & 1) ? bit1 : bit0;
      const __mmask64 kl = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, sel[g >> 1]), bits);
      const __mmask64 kh = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, sel[2 + (g >> 1)]), bits);
      const __m512i vl = _mm512_and_si512(qs, lo4);
      const __m512i lo = _mm512_mask_add_epi8(vl, kl, vl, b16);
      const __m512i vh = _mm512_and_si512(_mm512_srli_epi16(qs, 4), lo4);
      const __m512i hi = _mm512_mask_add_epi8(vh, kh, vh, b16);
      for (int i = 0; i < X; i++) {
        const int8_t *ab = xs[i].a + b * CKIR_QK;
        is[i] = CKIR_DPBUSD512(is[i], lo, _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab + 4 * g)));
        is[i] = CKIR_DPBUSD512(is[i], hi,
                               _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab + 16 + 4 * g)));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32 * H)));
    if (hm) {
      const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 64 + 32 * H)));
      for (int i = 0; i < X; i++) {
        const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(is[i]),
                                       _mm512_mul_ps(d, _mm512_set1_ps(xs[i].dx[b])));
        acc[i] = _mm512_add_ps(acc[i], _mm512_add_ps(t, _mm512_mul_ps(m, _mm512_set1_ps(xs[i].sx[b]))));
      }
    } else {
      for (int i = 0; i < X; i++) {
        const __m512i t = _mm512_add_epi32(is[i], _mm512_set1_epi32(xs[i].c[b]));
        acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_cvtepi32_ps(t),
                                                     _mm512_mul_ps(d, _mm512_set1_ps(xs[i].dx[b]))));
      }
    }
  }
}

CKIR_INLINE void q5p_core_simd(int fmt, const uint8_t *panel, int64_t nb, const q5p_x *xs, int X,
                               int64_t pfd, float *out) {
  for (int H = 0; H < 2; H++) {
    __m512 acc[Q5P_TX];
    for (int i = 0; i < Q5P_TX; i++) acc[i] = _mm512_setzero_ps();
    if (fmt == CKIR_Q5P_1)
      q5p_half512(panel, nb, xs, X, 1, H, pfd, acc);
    else
      q5p_half512(panel, nb, xs, X, 0, H, pfd, acc);
    for (int i = 0; i < X; i++) _mm512_storeu_ps(out + i * CKIR_PANEL + 16 * H, acc[i]);
  }
}
#elif defined(CKIR_Q256)
/* 8 rows (Q = 0..3: rows 8Q ..) of the panel against X rows of x, accumulated in acc[i] */
CKIR_INLINE void q5p_quarter256(const uint8_t *panel, int64_t nb, const q5p_x *xs, const int X,
                                const int hm, const int Q, int64_t pfd, __m256 *acc) {
  const int64_t pbb = hm ? Q5P_PB(CKIR_Q5P_1) : Q5P_PB(CKIR_Q5P_0);
  const int quads = hm ? 4 * CKIR_PANEL : 2 * CKIR_PANEL;
  __m256i sel[4];
  for (int s = 0; s < 4; s++)
    sel[s] = _mm256_add_epi8(_mm256_set1_epi8((char)s),
                             _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0,
                                               0x04040404, 0x08080808, 0x0C0C0C0C));
  const __m256i bit0 = _mm256_set1_epi32(0x08040201), bit1 = _mm256_set1_epi32((int)0x80402010);
  const __m256i lo4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *pb = panel + b * pbb;
    if (pfd && Q == 0) {
      __builtin_prefetch((const char *)pb + pfd, 0, 3);
      __builtin_prefetch((const char *)pb + pfd + 64, 0, 3);
    }
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(pb + quads + 32 * Q));
    __m256i is[Q5P_TX];
    for (int i = 0; i < X; i++) is[i] = _mm256_setzero_si256();
    for (int g = 0; g < 4; g++) {
      const __m256i qs = _mm256_loadu_si256((const __m256i *)(pb + quads + 128 * (g + 1) + 32 * Q));
      const __m256i bits = (g & 1) ? bit1 : bit0;
      const __m256i tl = _mm256_and_si256(_mm256_shuffle_epi8(qh, sel[g >> 1]), bits);
      const __m256i th = _mm256_and_si256(_mm256_shuffle_epi8(qh, sel[2 + (g >> 1)]), bits);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(qs, lo4),
                                         _mm256_and_si256(_mm256_cmpeq_epi8(tl, bits), b16));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), lo4),
                                         _mm256_and_si256(_mm256_cmpeq_epi8(th, bits), b16));
      for (int i = 0; i < X; i++) {
        const uint8_t *ab = (const uint8_t *)(xs[i].a + b * CKIR_QK);
        is[i] = CKIR_DPBUSD256(is[i], lo, _mm256_set1_epi32(ckir_q_ld32(ab + 4 * g)));
        is[i] = CKIR_DPBUSD256(is[i], hi, _mm256_set1_epi32(ckir_q_ld32(ab + 16 + 4 * g)));
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16 * Q)));
    if (hm) {
      const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 64 + 16 * Q)));
      for (int i = 0; i < X; i++) {
        const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(is[i]),
                                       _mm256_mul_ps(d, _mm256_set1_ps(xs[i].dx[b])));
        acc[i] = _mm256_add_ps(acc[i], _mm256_add_ps(t, _mm256_mul_ps(m, _mm256_set1_ps(xs[i].sx[b]))));
      }
    } else {
      for (int i = 0; i < X; i++) {
        const __m256i t = _mm256_add_epi32(is[i], _mm256_set1_epi32(xs[i].c[b]));
        acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(_mm256_cvtepi32_ps(t),
                                                     _mm256_mul_ps(d, _mm256_set1_ps(xs[i].dx[b]))));
      }
    }
  }
}

CKIR_INLINE void q5p_core_simd(int fmt, const uint8_t *panel, int64_t nb, const q5p_x *xs, int X,
                               int64_t pfd, float *out) {
  for (int Q = 0; Q < 4; Q++) {
    __m256 acc[Q5P_TX];
    for (int i = 0; i < Q5P_TX; i++) acc[i] = _mm256_setzero_ps();
    if (fmt == CKIR_Q5P_1)
      q5p_quarter256(panel, nb, xs, X, 1, Q, pfd, acc);
    else
      q5p_quarter256(panel, nb, xs, X, 0, Q, pfd, acc);
    for (int i = 0; i < X; i++) _mm256_storeu_ps(out + i * CKIR_PANEL + 8 * Q, acc[i]);
  }
}
#endif

/* one core call: the SIMD core, or the portable one (ref, and scalar builds) */
CKIR_INLINE void q5p_run(int fmt, int ref, const uint8_t *panel, int64_t nb, const q5p_x *xs,
                         int X, int64_t pfd, float *out) {
#if Q5P_FAST
  if (!ref) {
    q5p_core_simd(fmt, panel, nb, xs, X, pfd, out);
    return;
  }
#else
  (void)pfd;
  (void)ref;
#endif
  q5p_core_portable(fmt, panel, nb, xs, X, out);
}

/* ---- gemv, gemm on int8 x: the panel driver (quant_pdriver.c) ---------------------- */

static int64_t q5p_drv_panel_bytes(int fmt, int64_t K) { return q5p_panel_bytes(fmt, K); }
static int64_t q5p_drv_x_bytes(int64_t K) { return Q5P_X_BYTES(K); }
static void q5p_drv_prep(const float *x, int64_t K, uint8_t *buf, int ref, void *xs) {
  *(q5p_x *)xs = q5p_prepare(x, K, buf, ref);
}
static void q5p_drv_run(int fmt, int ref, const uint8_t *panel, int64_t nb, const void *xs, int X,
                        int64_t pfd, float *out) {
  q5p_run(fmt, ref, panel, nb, (const q5p_x *)xs, X, pfd, out);
}
static const ckir_pdrv Q5P_DRV = {.block = CKIR_QK,
                                  .panel_bytes = q5p_drv_panel_bytes,
                                  .x_bytes = q5p_drv_x_bytes,
                                  .x_size = sizeof(q5p_x),
                                  .prep = q5p_drv_prep,
                                  .run = q5p_drv_run,
                                  .tx = Q5P_TX,
                                  .pfd = Q5P_PFD,
                                  .xb = Q5P_XB,
                                  .values = q5p_values,
                                  .max_k = CKIR_QUANT_MAX_K};

void ckir_internal_gemv_qkv_q5p(const float *x, const uint8_t *const w[3],
                               const float *const b[3], float *const y[3], const int64_t N[3],
                               int64_t K, int fmt) {
  const int fmts[3] = {fmt, fmt, fmt};
  ckir_internal_pdrv_gemv_qkv(&Q5P_DRV, x, w, b, y, N, K, fmts, "gemv_qkv (Q5 panels)");
}

void ckir_internal_gemv_gate_up_q5p(const float *x, const uint8_t *wg, const uint8_t *wu,
                                   float *out, int64_t N, int64_t K, int fmt) {
  ckir_internal_pdrv_gemv_gate_up(&Q5P_DRV, x, wg, wu, out, N, K, fmt,
                                  "gemv_gate_up (Q5 panels)");
}

/* ---- gemm ---------------------------------------------------------------------- */

/* columns [k0, k0 + kc) of row n (whole blocks dequantized) */
#define Q5P_WROW(D, FMT)                                                                \
  static void D##_wrow(const void *w, int64_t K, int64_t n, int64_t k0, int64_t kc,     \
                       float *dst) {                                                    \
    ckir_internal_pdrv_wrow(&Q5P_DRV, FMT, w, K, n, k0, kc, dst);                       \
  }
Q5P_WROW(q5_0p, CKIR_Q5P_0)
Q5P_WROW(q5_1p, CKIR_Q5P_1)

CKIR_INLINE ckir_wrow_fn q5p_wrow(int fmt) {
  return fmt == CKIR_Q5P_1 ? q5_1p_wrow : q5_0p_wrow;
}

void ckir_internal_gemm_q5p_f32x(const float *x, const uint8_t *w, const float *b, float *y,
                                 int64_t M, int64_t N, int64_t K, int fmt) {
  ckir_internal_wgemm(x, w, q5p_wrow(fmt), b, y, M, N, K);
}

int ckir_internal_gemm_qkv_q5p(const float *x, const uint8_t *const w[3], const float *const b[3],
                              float *const y[3], const int64_t N[3], int64_t M, int64_t K,
                              int fmt) {
  const int fmts[3] = {fmt, fmt, fmt};
  return ckir_internal_pdrv_gemm_qkv(&Q5P_DRV, x, w, b, y, N, M, K, fmts);
}

int ckir_internal_gemm_gate_up_q5p(const float *x, const uint8_t *wg, const uint8_t *wu, float *out,
                                  int64_t M, int64_t N, int64_t K, int fmt) {
  return ckir_internal_pdrv_gemm_gate_up(&Q5P_DRV, x, wg, wu, out, M, N, K, fmt);
}

/* x . row n the way gemv_<p>'s reference twin computes it (x quantized by the scalar
 * code, the portable core's sum), and in double against the dequantized row (the GEMM's
 * reference) */
static float q5p_gemv_row_ref(const float *x, const uint8_t *w, int64_t n, int64_t K, int fmt) {
  uint8_t buf[Q5P_X_BYTES(K)];
  const q5p_x s = q5p_prepare(x, K, buf, 1);
  float o[CKIR_PANEL];
  q5p_core_portable(fmt, w + (n / CKIR_PANEL) * q5p_panel_bytes(fmt, K), K / CKIR_QK, &s, 1, o);
  return o[n % CKIR_PANEL];
}

static double q5p_gemm_row_ref(const float *x, const uint8_t *w, int64_t n, int64_t K, int fmt) {
  double acc = 0.0;
  float v[CKIR_QK];
  for (int64_t b = 0; b < K / CKIR_QK; b++) {
    q5p_values(fmt, w, n, b, K, v);
    for (int j = 0; j < CKIR_QK; j++) acc += (double)x[b * CKIR_QK + j] * v[j];
  }
  return acc;
}

/* ---- the public kernels of each dtype -------------------------------------------- */

#define Q5P_KERNELS(D, FMT)                                                                   \
  CKIR_GEMV_PAIR(D, uint8_t,                                                                  \
    ckir_internal_pdrv_gemv_one(&Q5P_DRV, x, w, b, y, N, K, FMT, 0, "gemv_" #D))              \
  CKIR_REF_GEMV_PAIR(D, uint8_t,                                                              \
    ckir_internal_pdrv_gemv_one(&Q5P_DRV, x, w, b, y, N, K, FMT, 1, "gemv_" #D))              \
  CKIR_GEMM_PAIR(D, uint8_t, ckir_internal_pdrv_gemm_one(&Q5P_DRV, x, w, b, y, M, N, K, FMT,  \
                                                        D##_wrow, "gemm_" #D))                \
  CKIR_REF_GEMM_PAIR(D, uint8_t, {                                                            \
    for (int64_t m = 0; m < M; m++)                                                           \
      for (int64_t n = 0; n < N; n++)                                                         \
        y[m * N + n] = (float)q5p_gemm_row_ref(x + m * K, w, n, K, FMT) + (b ? b[n] : 0.0f);  \
  })                                                                                          \
  /* on fp32 x gemm.c's driver (as gemm_q5_0's); none on int8 x (the fused GEMMs take      \
   * ckir_internal_gemm_*_q5p then) */                                                        \
  ckir_wread ckir_internal_wread_##D(int64_t M, int64_t K) {                                  \
    (void)K;                                                                                  \
    if (!Q5P_FAST) return ckir_internal_wread_rows(M, D##_wrow);                              \
    return ckir_internal_pdrv_i8_now() ? (ckir_wread){GEMM_B_NONE, NULL} : ckir_internal_wread_rows(M, D##_wrow); \
  }                                                                                           \
  void ckir_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T,     \
                      int64_t E) {                                                            \
    ckir_internal_pdrv_embed(&Q5P_DRV, FMT, tokens, table, out, T, E, 1, "embed_" #D);        \
  }                                                                                           \
  void ckir_ref_embed_##D(const int32_t *tokens, const uint8_t *table, float *out, int64_t T, \
                          int64_t E) {                                                        \
    ckir_internal_pdrv_embed(&Q5P_DRV, FMT, tokens, table, out, T, E, 0, "embed_" #D);        \
  }                                                                                           \
  float ckir_internal_ref_gemv_row_##D(const float *x, const uint8_t *w, int64_t n, int64_t K) { \
    return q5p_gemv_row_ref(x, w, n, K, FMT);                                                 \
  }                                                                                           \
  float ckir_internal_ref_gemm_row_##D(const float *x, const uint8_t *w, int64_t n, int64_t K) { \
    return (float)q5p_gemm_row_ref(x, w, n, K, FMT);                                          \
  }

Q5P_KERNELS(q5_0p, CKIR_Q5P_0)
Q5P_KERNELS(q5_1p, CKIR_Q5P_1)
