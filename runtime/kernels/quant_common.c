/* ckir runtime: pieces shared by the bf16 and quantized-weight kernels.
 *
 *  - f16 -> fp32 conversion (block scales);
 *  - the q8 activation quantizer used by every gemv_<q>;
 *  - ckir_internal_wgemm, the fp32 GEMM over weights converted panel by panel
 *    (gemm_bf16, gemm_<q>).
 *
 * wgemm with M > CKIR_WGEMM_SMALL_M runs on gemm.c's blocked driver
 * (kind GEMM_B_ROWS: 32-row panels converted, packed, and gemm's 12x32 /
 * 6x16 micro-kernel).  For small M, the dot-product form: threads take panels of WG_NP rows of w, two at a time (dynamic: a
 * thread slowed by the host takes fewer).  For each panel and
 * each slice of WG_KC columns, the rows are converted to fp32 into a stack
 * buffer (16 KiB, stays in L1), then every group of WG_MR rows of x meets every
 * group of 4 panel rows in a register-blocked dot-product micro-kernel (one
 * accumulator vector per (x row, w row) pair, reduced once per slice), written
 * once over ckir_vec.h; only the register blocking WG_MR is per ISA.  So each
 * weight is converted once per call, whatever M is, and the FMAs run on fp32
 * data from L1. */
#include "ckir_internal.h"
#include "ckir_quant.h"

/* ---- f16 ---------------------------------------------------------------- */

float ckir_internal_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: man * 2^-24, exact in fp32 */
    float f = (float)man * 5.9604644775390625e-8f;
    memcpy(&bits, &f, sizeof bits);
    bits |= sign;
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* ---- activation quantizer ------------------------------------------------ */

void ckir_internal_quantize_x_ref(const float *x, int64_t K, int8_t *a, float *dx) {
  for (int64_t b = 0; b < K / CKIR_QK; b++) {
    const float *xb = x + b * CKIR_QK;
    float amax = 0.0f;
    for (int j = 0; j < CKIR_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
    float d = amax / 127.0f;
    dx[b] = d;
    for (int j = 0; j < CKIR_QK; j++)
      a[b * CKIR_QK + j] = d == 0.0f ? 0 : (int8_t)lrintf(xb[j] / d);
  }
}

void ckir_internal_quantize_x(const float *x, int64_t K, int8_t *a, float *dx) {
#if defined(CKIR_AVX512) && defined(__AVX512BW__)
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < K / CKIR_QK; b++) {
    __m512 x0 = _mm512_loadu_ps(x + b * CKIR_QK), x1 = _mm512_loadu_ps(x + b * CKIR_QK + 16);
    float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_and_ps(x0, absmask), _mm512_and_ps(x1, absmask)));
    float d = amax / 127.0f;
    dx[b] = d;
    if (d == 0.0f) {
      memset(a + b * CKIR_QK, 0, CKIR_QK);
      continue;
    }
    __m512 dv = _mm512_set1_ps(d);
    __m512i q0 = _mm512_cvtps_epi32(_mm512_div_ps(x0, dv));
    __m512i q1 = _mm512_cvtps_epi32(_mm512_div_ps(x1, dv));
    _mm_storeu_si128((__m128i *)(a + b * CKIR_QK), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(a + b * CKIR_QK + 16), _mm512_cvtsepi32_epi8(q1));
  }
#elif defined(CKIR_AVX512) || defined(CKIR_AVX2)
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < K / CKIR_QK; b++) {
    const float *xb = x + b * CKIR_QK;
    __m256 v[4], m;
    for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(xb + 8 * i);
    m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                      _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
    float amax = ckir_hmax_ps256(m);
    float d = amax / 127.0f;
    dx[b] = d;
    if (d == 0.0f) {
      memset(a + b * CKIR_QK, 0, CKIR_QK);
      continue;
    }
    __m256 dv = _mm256_set1_ps(d);
    __m256i q[4];
    for (int i = 0; i < 4; i++) q[i] = _mm256_cvtps_epi32(_mm256_div_ps(v[i], dv));
    /* packs interleave 128-bit lanes: [0 1 4 5 | 2 3 6 7] words, fix with a dword permute */
    __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i bytes = _mm256_packs_epi16(w01, w23);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(a + b * CKIR_QK), bytes);
  }
#else
  ckir_internal_quantize_x_ref(x, K, a, dx);
#endif
}

/* ---- wgemm: fp32 GEMM over converted weight panels ----------------------- */

#ifndef WG_NP
#define WG_NP 16  /* rows of w per panel (per thread work unit) */
#endif
#ifndef WG_KC
#define WG_KC 256 /* columns per slice; a multiple of 32 */
#endif
#define WG_NR 4   /* panel rows per micro-tile */
#if defined(CKIR_AVX2)
#define WG_MR 3 /* 12 accumulators + 3 x rows + 1 panel row: the 16 ymm registers */
#else
#define WG_MR 4 /* AVX-512: 16 accumulators, reduced by one 16-way transposing sum */
#endif

/* out[i*WG_NR + j] = dot(x row i, panel row j) over kc columns, i < mr, j < 4.
 * Panel rows are WG_KC floats apart and zero-padded up to a multiple of 16.
 * One accumulator vector per (x row, panel row) pair, reduced once: when the
 * WG_MR x WG_NR accumulators are exactly CKV_W (AVX-512: 16) by one transposing
 * sum into out, else pair by pair. */
CKIR_INLINE void wg_tile(const float *x, int64_t ldx, const float *p, int64_t kc, float *out,
                         const int mr) {
  ckv acc[WG_MR][WG_NR];
  for (int i = 0; i < WG_MR; i++)
    for (int j = 0; j < WG_NR; j++) acc[i][j] = ckv_zero();
  int64_t k = 0;
  for (; k + CKV_W <= kc; k += CKV_W) {
    ckv xv[WG_MR];
    for (int i = 0; i < mr; i++) {
      xv[i] = ckv_loadu(x + i * ldx + k);
      CKV_PIN(xv[i]); /* keep the operands in registers: GCC folds a load into every FMA */
    }
    for (int j = 0; j < WG_NR; j++) {
      ckv wv = ckv_load(p + j * WG_KC + k);
      CKV_PIN(wv);
      for (int i = 0; i < mr; i++) acc[i][j] = ckv_fma(xv[i], wv, acc[i][j]);
    }
  }
  if (k < kc) {
    ckv xv[WG_MR];
    for (int i = 0; i < mr; i++) xv[i] = ckv_load_n(x + i * ldx + k, kc - k);
    for (int j = 0; j < WG_NR; j++) {
      const ckv wv = ckv_load(p + j * WG_KC + k); /* zero-padded */
      for (int i = 0; i < mr; i++) acc[i][j] = ckv_fma(xv[i], wv, acc[i][j]);
    }
  }
#if WG_MR * WG_NR == CKV_W
  ckv v[CKV_W];
  for (int i = 0; i < WG_MR; i++)
    for (int j = 0; j < WG_NR; j++) v[i * WG_NR + j] = i < mr ? acc[i][j] : ckv_zero();
  ckv_storeu(out, ckv_reduce_add_w(v));
#else
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < WG_NR; j++) out[i * WG_NR + j] = ckv_reduce_add(acc[i][j]);
#endif
}

static void wg_tile_any(const float *x, int64_t ldx, const float *p, int64_t kc, float *out,
                        int mr) {
  switch (mr) {
    case 1: wg_tile(x, ldx, p, kc, out, 1); break;
    case 2: wg_tile(x, ldx, p, kc, out, 2); break;
#if WG_MR >= 3
    case 3: wg_tile(x, ldx, p, kc, out, 3); break;
#endif
#if WG_MR >= 4
    case 4: wg_tile(x, ldx, p, kc, out, 4); break;
#endif
    default: break;
  }
}

/* the dot-product form: small M (the blocked driver's packing costs more than
 * its register blocking saves when few rows reuse a panel) */
static void wgemm_dot(const float *x, const void *w, ckir_wrow_fn row, const float *b, float *y,
                      int64_t M, int64_t N, int64_t K) {
  int64_t npanels = (N + WG_NP - 1) / WG_NP;
#pragma omp parallel for schedule(dynamic, 2) if (M * N * K >= 8 * CKIR_PAR_MIN_WORK && npanels > 1)
  for (int64_t pi = 0; pi < npanels; pi++) {
    _Alignas(64) float panel[WG_NP * WG_KC];
    int64_t n0 = pi * WG_NP, nn = CKIR_MIN(WG_NP, N - n0);
    int64_t nn4 = (nn + WG_NR - 1) / WG_NR * WG_NR;
    for (int64_t k0 = 0; k0 < K; k0 += WG_KC) {
      int64_t kc = CKIR_MIN(WG_KC, K - k0), kcp = (kc + 15) / 16 * 16;
      for (int64_t r = 0; r < nn; r++) {
        row(w, K, n0 + r, k0, kc, panel + r * WG_KC);
        for (int64_t k = kc; k < kcp; k++) panel[r * WG_KC + k] = 0.0f;
      }
      for (int64_t r = nn; r < nn4; r++) memset(panel + r * WG_KC, 0, (size_t)kcp * sizeof(float));
      for (int64_t m0 = 0; m0 < M; m0 += WG_MR) {
        int mr = (int)CKIR_MIN(WG_MR, M - m0);
        for (int64_t j0 = 0; j0 < nn; j0 += WG_NR) {
          float out[WG_MR * WG_NR];
          wg_tile_any(x + m0 * K + k0, K, panel + j0 * WG_KC, kc, out, mr);
          int64_t nr = CKIR_MIN(WG_NR, nn - j0);
          for (int i = 0; i < mr; i++) {
            float *yr = y + (m0 + i) * N + n0 + j0;
            if (k0 == 0)
              for (int64_t j = 0; j < nr; j++) yr[j] = out[i * WG_NR + j] + (b ? b[n0 + j0 + j] : 0.0f);
            else
              for (int64_t j = 0; j < nr; j++) yr[j] += out[i * WG_NR + j];
          }
        }
      }
    }
  }
}

ckir_wread ckir_internal_wread_rows(int64_t M, ckir_wrow_fn row) {
  return (ckir_wread){M <= CKIR_WGEMM_SMALL_M ? GEMM_B_NONE : GEMM_B_ROWS, row};
}

void ckir_internal_wgemm(const float *x, const void *w, ckir_wrow_fn row, const float *b,
                         float *y, int64_t M, int64_t N, int64_t K) {
  const ckir_wread r = ckir_internal_wread_rows(M, row);
  if (r.kind == GEMM_B_NONE)
    wgemm_dot(x, w, row, b, y, M, N, K);
  else
    ckir_internal_gemm_outs(x, r, &(ckir_gemm_out){w, b, y, N}, 1, 0, M, K);
}

void ckir_internal_ref_block_gemm(const float *x, const uint8_t *w, const float *b, float *y,
                                  int64_t M, int64_t N, int64_t K, ckir_block_deq_ref_fn deq,
                                  int64_t bytes, int has_m) {
  const int64_t nb = K / CKIR_QK;
  float v[CKIR_QK];
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double acc = 0.0;
      for (int64_t k = 0; k < nb; k++) {
        deq(w + (n * nb + k) * bytes, 1, has_m, v);
        for (int j = 0; j < CKIR_QK; j++) acc += (double)x[m * K + k * CKIR_QK + j] * v[j];
      }
      y[m * N + n] = (float)acc + (b ? b[n] : 0.0f);
    }
}

void ckir_internal_ref_block_embed(const int32_t *tokens, const uint8_t *table, float *out,
                                   int64_t T, int64_t E, ckir_block_deq_ref_fn deq,
                                   int64_t bytes, int has_m) {
  const int64_t nb = E / CKIR_QK;
  for (int64_t t = 0; t < T; t++) deq(table + (int64_t)tokens[t] * nb * bytes, nb, has_m, out + t * E);
}
