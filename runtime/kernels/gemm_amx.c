/* ckir runtime: prefill GEMMs on AMX tiles (bf16p; q8_0p / q4_1p / q4_0p on int8 x).
 *
 * Where the CPU has AMX-TILE, AMX-BF16 and AMX-INT8 (Intel Sapphire Rapids and
 * later) and Linux grants the process the tile state (arch_prctl
 * ARCH_REQ_XCOMP_PERM), two drivers hand their products to the tiles:
 *
 * bf16p (gemm.c, GEMM_B_BF16P): each thread rounds its rows of x to bf16 once
 * per call (ckir_internal_amx_pack, RNE as vcvtne2ps2bf16, as the vdpbf16ps
 * path rounds them), then every 32 x 32 block of the output accumulates over
 * all of K in four tiles:
 *
 *   tmm0..3  C: rows [0, 16) / [16, 32) x columns [0, 16) / [16, 32), fp32
 *   tmm4, 5  A: 16 rows x 16 pairs of k of the bf16 rows (64-byte rows)
 *   tmm6, 7  B: 16 pairs of k x 16 columns, read in place from the bf16p
 *            panel (its rows are 32 pairs = 128 bytes: a tile is half a row)
 *
 * bf16p already is the layout TDPBF16PS wants for B (a dword holds the pair
 * (k, k + 1) of one column), so weights are read where they lie.  A K whose
 * pairs are not a multiple of 16 ends on a copy of the panel's last rows padded
 * with zeros (the panel itself ends there); the bf16 rows of x are padded with
 * zeros to whole tiles (16 more rows, k to a multiple of 32).
 *
 * q8_0p / q4_1p / q4_0p on int8 x (quant_panels.c qp_gemm_i8): per panel block
 * (32 k), TDPBSSD (q8_0p's int8 quad rows, in place) or TDPBSUD (q4_1p's and
 * q4_0p's nibbles unpacked to bytes) give the block's exact int32 dot products, which each
 * row's fp32 sum takes as gemv_<p> does (ckir_internal_amx_qp_panel, below).
 *
 * Modes (ckir_set_amx): CKIR_AMX_OFF, CKIR_AMX_ON (the hardware, when CPUID,
 * the OS and the permission request allow it) and CKIR_AMX_EMULATE: the same
 * drivers with each tile instruction executed in C as the Intel SDM defines it
 * (tile configuration checked, loads zero-filled past the configured shape,
 * bf16 input denormals as zero and fp32 accumulation rounded to nearest even
 * after each product, int8 sums wrapping in int32), so machines without AMX
 * test everything but the instructions themselves.  The default is ON where it
 * works, unless the environment sets CKIR_AMX=0.  Only builds with
 * CKIR_BF16DOT have the path (SPR has AVX512-BF16, which converts x). */
#define _GNU_SOURCE /* syscall */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckir_internal.h"
#include "ckir_quant.h"

#if defined(CKIR_AMX_BUILD)
#include <pthread.h>

#include "ckir_amx_cpu.h"


/* ---- the emulated tiles (CKIR_AMX_EMULATE), one set per thread ------------- */
typedef struct {
  int configured;
  ckir_amx_cfg cfg;
  uint8_t t[8][16][64];
} amx_emu_state;
static _Thread_local amx_emu_state emu;

static void emu_fault(const char *insn, const char *what) {
  fprintf(stderr, "ckir: AMX emulation: %s: %s\n", insn, what);
  abort();
}

static void emu_config(const ckir_amx_cfg *c) {
  if (c->palette != 1 || c->start_row != 0)
    emu_fault("LDTILECFG", "palette 1, start_row 0 expected");
  for (int i = 0; i < 14; i++)
    if (c->reserved0[i]) emu_fault("LDTILECFG", "reserved bytes must be zero");
  for (int t = 0; t < 16; t++)
    if ((t >= 8 && (c->colsb[t] || c->rows[t])) || c->colsb[t] > 64 || c->rows[t] > 16 ||
        (c->colsb[t] % 4) != 0)
      emu_fault("LDTILECFG", "a tile beyond palette 1's limits");
  emu.cfg = *c;
  emu.configured = 1;
  memset(emu.t, 0, sizeof emu.t);
}

static void emu_check(int t) {
  if (!emu.configured) emu_fault("a tile instruction", "before LDTILECFG");
  if (!emu.cfg.rows[t] || !emu.cfg.colsb[t])
    emu_fault("a tile instruction", "a tile the configuration leaves empty");
}

/* TILELOADD: rows and bytes past the configuration are zero */
static void emu_load(int t, const void *p, int64_t stride) {
  emu_check(t);
  memset(emu.t[t], 0, sizeof emu.t[t]);
  for (int r = 0; r < emu.cfg.rows[t]; r++)
    memcpy(emu.t[t][r], (const uint8_t *)p + r * stride, emu.cfg.colsb[t]);
}

static void emu_store(int t, void *p, int64_t stride) {
  emu_check(t);
  for (int r = 0; r < emu.cfg.rows[t]; r++)
    memcpy((uint8_t *)p + r * stride, emu.t[t][r], emu.cfg.colsb[t]);
}

static void emu_zero(int t) {
  emu_check(t);
  memset(emu.t[t], 0, sizeof emu.t[t]);
}

/* a bf16 as fp32, denormals as zero */
static float emu_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)((h & 0x7F80) ? h : (h & 0x8000)) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* the configuration, after the checks of a dot product c += a . b (insn): three
 * configured tiles whose shapes match (b's rows are a's dwords) */
static const ckir_amx_cfg *emu_dp_check(int c, int a, int b, const char *insn) {
  emu_check(c), emu_check(a), emu_check(b);
  const ckir_amx_cfg *g = &emu.cfg;
  if (g->colsb[a] / 4 != g->rows[b] || g->rows[c] != g->rows[a] || g->colsb[c] != g->colsb[b])
    emu_fault(insn, "tile shapes do not match");
  return g;
}

/* TDPBF16PS c, a, b: c[m][n] += sum over pairs k of a[m].pair[k] . b[k].pair[n],
 * each product added in fp32 (RNE), denormal results flushed */
static void emu_dpbf16ps(int c, int a, int b) {
  const ckir_amx_cfg *g = emu_dp_check(c, a, b, "TDPBF16PS");
  for (int m = 0; m < g->rows[c]; m++)
    for (int n = 0; n < g->colsb[c] / 4; n++) {
      float acc;
      memcpy(&acc, emu.t[c][m] + 4 * n, 4);
      for (int k = 0; k < g->colsb[a] / 4; k++) {
        uint16_t av[2], bv[2];
        memcpy(av, emu.t[a][m] + 4 * k, 4);
        memcpy(bv, emu.t[b][k] + 4 * n, 4);
        for (int i = 0; i < 2; i++) {
          acc += emu_bf16(av[i]) * emu_bf16(bv[i]);
          if (fabsf(acc) < 1.17549435e-38f) acc = copysignf(0.0f, acc);
        }
      }
      memcpy(emu.t[c][m] + 4 * n, &acc, 4);
    }
}

/* TDPBSSD / TDPBSUD c, a, b: c[m][n] += sum over k of a[m].byte[k] .
 * b[k / 4].byte[4 n + k % 4] in int32 (wrapping), a signed, b signed (bs) or
 * unsigned */
static void emu_dpb(int c, int a, int b, int bs) {
  const ckir_amx_cfg *g = emu_dp_check(c, a, b, bs ? "TDPBSSD" : "TDPBSUD");
  for (int m = 0; m < g->rows[c]; m++)
    for (int n = 0; n < g->colsb[c] / 4; n++) {
      uint32_t acc;
      memcpy(&acc, emu.t[c][m] + 4 * n, 4);
      for (int k = 0; k < g->colsb[a]; k++) {
        const int32_t x = (int8_t)emu.t[a][m][k];
        const uint8_t wb = emu.t[b][k / 4][4 * n + k % 4];
        acc += (uint32_t)(x * (bs ? (int32_t)(int8_t)wb : (int32_t)wb));
      }
      memcpy(emu.t[c][m] + 4 * n, &acc, 4);
    }
}

/* ---- the tile operations of both modes (emu: a constant of each caller) ----
 * The hardware forms are inline asm whose memory operands the compiler does not
 * see: a load sits between compiler barriers, so the stores that wrote its
 * buffer are done before it and the stores that rewrite the buffer (the next
 * panel's tail copy, the next block's unpacked nibbles) come after it. */
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")
/* EMU where emu_ (the emulated tiles), else HW */
#define AMX_EMU_OR(emu_, EMU, HW) \
  do {                            \
    if (emu_) {                   \
      EMU;                        \
    } else {                      \
      HW;                         \
    }                             \
  } while (0)
#define AMX_LOAD(emu_, t, p, s) \
  AMX_EMU_OR(emu_, emu_load(t, p, s), AMX_BARRIER(); _tile_loadd(t, p, s); AMX_BARRIER())
#define AMX_STORE(emu_, t, p, s) AMX_EMU_OR(emu_, emu_store(t, p, s), _tile_stored(t, p, s))
#define AMX_ZERO(emu_, t) AMX_EMU_OR(emu_, emu_zero(t), _tile_zero(t))
#define AMX_DP(emu_, c, a, b) AMX_EMU_OR(emu_, emu_dpbf16ps(c, a, b), _tile_dpbf16ps(c, a, b))
/* c += a . b on int8: a signed; b signed (bs, TDPBSSD) or unsigned (TDPBSUD) */
#define AMX_DPB(emu_, c, a, b, bs) \
  AMX_EMU_OR(emu_, emu_dpb(c, a, b, bs), if (bs) _tile_dpbssd(c, a, b); else _tile_dpbsud(c, a, b))

static void amx_config(int emu_mode, const ckir_amx_cfg *c) {
  if (emu_mode) {
    emu_config(c);
  } else {
    ckir_amx_load_config(c);
  }
}

static void amx_release(int emu_mode) {
  if (emu_mode)
    emu.configured = 0;
  else
    ckir_amx_release();
}

/* ---- detection and the mode ---------------------------------------------- */

static int amx_hw;
static _Atomic int amx_mode = -1; /* -1: not decided yet */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* the default mode: ON where the hardware works; CKIR_AMX=0 turns it off,
 * CKIR_AMX=emulate emulates the tiles (a whole test suite on the AMX path) */
static void amx_detect(void) {
  amx_hw = ckir_amx_cpu_usable();
  const char *env = getenv("CKIR_AMX");
  int mode = amx_hw ? CKIR_AMX_ON : CKIR_AMX_OFF;
  if (env && strcmp(env, "0") == 0) mode = CKIR_AMX_OFF;
  if (env && strcmp(env, "emulate") == 0) mode = CKIR_AMX_EMULATE;
  int expected = -1;
  atomic_compare_exchange_strong(&amx_mode, &expected, mode);
}

int ckir_internal_amx(void) {
  int m = atomic_load_explicit(&amx_mode, memory_order_relaxed);
  if (m < 0) {
    pthread_once(&amx_once, amx_detect);
    m = atomic_load(&amx_mode);
  }
  return m;
}

int ckir_set_amx(int mode) {
  pthread_once(&amx_once, amx_detect);
  const int m = mode == CKIR_AMX_EMULATE ? CKIR_AMX_EMULATE
                : mode == CKIR_AMX_ON && amx_hw ? CKIR_AMX_ON
                                                : CKIR_AMX_OFF;
  atomic_store(&amx_mode, m);
  return m;
}

static atomic_long amx_calls;

long ckir_runtime_amx_calls(void) { return atomic_load(&amx_calls); }

/* ---- x as bf16 rows ------------------------------------------------------ */

int64_t ckir_internal_amx_ld(int64_t K2) { return (K2 + 15) / 16 * 32; }

size_t ckir_internal_amx_pack_bytes(int64_t M, int64_t K2) {
  return (size_t)((M + 15) / 16 * 16 + 16) * (size_t)ckir_internal_amx_ld(K2) * 2;
}

void ckir_internal_amx_pack(const float *a, int64_t lda, int64_t M, int64_t K2, uint16_t *p) {
  const int64_t ld = ckir_internal_amx_ld(K2), rows = (M + 15) / 16 * 16 + 16;
  for (int64_t r = 0; r < rows; r++) {
    uint16_t *dst = p + r * ld;
    if (r >= M) {
      memset(dst, 0, (size_t)ld * 2);
      continue;
    }
    const float *src = a + r * lda;
    for (int64_t k = 0; k < ld; k += 32) {
      const int64_t n = CKIR_MAX(0, CKIR_MIN(32, 2 * K2 - k));
      const __m512 lo = _mm512_maskz_loadu_ps(ckir_mask16(CKIR_MIN(16, n)), src + k);
      const __m512 hi = _mm512_maskz_loadu_ps(ckir_mask16(CKIR_MAX(0, n - 16)), src + k + 16);
      _mm512_storeu_si512((void *)(dst + k), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

/* ---- the product ---------------------------------------------------------- */

/* One block: rows [0, 16) (two: [0, 32)) of a (bf16 rows, ld elements apart)
 * times the 32 columns of the panel at b over nfull steps of 16 pairs, then
 * the padded tail at bt when tail; C tiles stored to ct[32][32]. */
CKIR_INLINE void amx_block(const uint16_t *a, int64_t ld, const uint32_t *b, int64_t nfull,
                           const uint32_t *bt, int tail, int two, float *ct, const int emu_) {
  const int64_t bs = CKIR_PANEL * 4, as = ld * 2; /* row strides, bytes */
  AMX_ZERO(emu_, 0);
  AMX_ZERO(emu_, 1);
  if (two) {
    AMX_ZERO(emu_, 2);
    AMX_ZERO(emu_, 3);
  }
  for (int64_t s = 0; s < nfull + (tail ? 1 : 0); s++) {
    const uint32_t *bp = s < nfull ? b + s * 16 * CKIR_PANEL : bt;
    AMX_LOAD(emu_, 6, bp, bs);
    AMX_LOAD(emu_, 7, bp + 16, bs);
    AMX_LOAD(emu_, 4, a + s * 32, as);
    AMX_DP(emu_, 0, 4, 6);
    AMX_DP(emu_, 1, 4, 7);
    if (two) {
      AMX_LOAD(emu_, 5, a + 16 * ld + s * 32, as);
      AMX_DP(emu_, 2, 5, 6);
      AMX_DP(emu_, 3, 5, 7);
    }
  }
  AMX_STORE(emu_, 0, ct, 128);
  AMX_STORE(emu_, 1, ct + 16, 128);
  if (two) {
    AMX_STORE(emu_, 2, ct + 16 * 32, 128);
    AMX_STORE(emu_, 3, ct + 16 * 32 + 16, 128);
  }
}

/* y[r][0, nn) = src[r][0, nn) (+ bias[0, nn)) for r < rows; src rows are 32
 * floats, 64-byte aligned (a block of the tiles' results) */
static void amx_store_rows(const float *src, int64_t rows, const float *bias, int64_t nn, float *y,
                           int64_t ldy) {
  const __mmask16 m0 = ckir_mask16(nn), m1 = ckir_mask16(CKIR_MAX(0, nn - 16));
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; r++) {
    const float *sr = src + r * 32;
    _mm512_mask_storeu_ps(y + r * ldy, m0, _mm512_add_ps(_mm512_load_ps(sr), b0));
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_add_ps(_mm512_load_ps(sr + 16), b1));
  }
}

CKIR_INLINE void amx_gemm_(const uint16_t *p, int64_t M, const float *B, int64_t K2, int64_t col,
                           int64_t N, const float *bias, float *C, int64_t ldc, const int emu_) {
  const int64_t ld = ckir_internal_amx_ld(K2), nfull = K2 / 16, rest = K2 % 16;
  const ckir_amx_cfg cfg = ckir_amx_cfg_make(64, 16);
  uint32_t bt[16 * CKIR_PANEL] __attribute__((aligned(64)));
  float ct[32 * 32] __attribute__((aligned(64)));
  amx_config(emu_, &cfg);
  for (int64_t j = 0; j < N; j += CKIR_PANEL) {
    const int64_t c = col + j, nr = CKIR_MIN(CKIR_PANEL, N - j);
    const uint32_t *panel = (const uint32_t *)B + c / CKIR_PANEL * K2 * CKIR_PANEL;
    if (rest) {
      memcpy(bt, panel + nfull * 16 * CKIR_PANEL, (size_t)rest * CKIR_PANEL * 4);
      memset(bt + rest * CKIR_PANEL, 0, (size_t)(16 - rest) * CKIR_PANEL * 4);
    }
    for (int64_t i = 0; i < M; i += 32) {
      const int64_t mr = CKIR_MIN(32, M - i);
      amx_block(p + i * ld, ld, panel, nfull, bt, rest != 0, mr > 16, ct, emu_);
      amx_store_rows(ct, mr, bias ? bias + j : NULL, nr, C + i * ldc + j, ldc);
    }
  }
  amx_release(emu_);
}

static void amx_gemm_hw(const uint16_t *p, int64_t M, const float *B, int64_t K2, int64_t col,
                        int64_t N, const float *bias, float *C, int64_t ldc) {
  amx_gemm_(p, M, B, K2, col, N, bias, C, ldc, 0);
}

static void amx_gemm_emu(const uint16_t *p, int64_t M, const float *B, int64_t K2, int64_t col,
                         int64_t N, const float *bias, float *C, int64_t ldc) {
  amx_gemm_(p, M, B, K2, col, N, bias, C, ldc, 1);
}

void ckir_internal_amx_gemm(int mode, const uint16_t *p, int64_t M, const float *B, int64_t K2,
                            int64_t col, int64_t N, const float *bias, float *C, int64_t ldc) {
  atomic_fetch_add_explicit(&amx_calls, 1, memory_order_relaxed);
  if (mode == CKIR_AMX_EMULATE)
    amx_gemm_emu(p, M, B, K2, col, N, bias, C, ldc);
  else
    amx_gemm_hw(p, M, B, K2, col, N, bias, C, ldc);
}

/* ---- int8 x times q8_0p / q4_1p / q4_0p panels ---------------------------- */

/* One panel block's 32 x 32 int32 dot products come out of the tiles per 32
 * rows of x (TDPBSSD on q8_0p's int8, TDPBSUD on q4_1p's / q4_0p's nibbles
 * unpacked to bytes; q4_0p's then minus 8 sum(a) of the block, as its vpdpbusd
 * start value), and each row's fp32 sum takes them exactly as gemv_<p> and the
 * vpdpbusd GEMM do (quant_panels.c qp_i8_tile: the same int32, the same fmas in
 * the same block order), so every row is bit for bit gemv_<p>'s.  The B tiles
 * of a block stay loaded while every 32 rows pass. */
CKIR_INLINE void amx_qp_panel_(const int8_t *a, int64_t K, const float *dx, const float *sx,
                               const int32_t *cb, int64_t R, const uint8_t *pp, const int fmt,
                               const float *b, float *y, int64_t ldy, int64_t nn, const int emu_) {
  const int64_t nb = K / CKIR_QK, bb = CKIR_QP_BLOCK(fmt);
  const int nib = fmt != CKIR_QP_Q8_0, has_m = fmt == CKIR_QP_Q4_1;
  const ckir_amx_cfg cfg = ckir_amx_cfg_make(32, 8);
  float f[CKIR_AMX_QP_ROWS * CKIR_PANEL] __attribute__((aligned(64)));
  int32_t st[32 * 32] __attribute__((aligned(64)));
  uint8_t bq[8 * 4 * CKIR_PANEL] __attribute__((aligned(64))); /* nibble quads as bytes */
  for (int64_t i = 0; i < R * CKIR_PANEL; i += 16) _mm512_store_ps(f + i, _mm512_setzero_ps());
  amx_config(emu_, &cfg);
  for (int64_t bk = 0; bk < nb; bk++) {
    const uint8_t *pb = pp + bk * bb;
    const uint8_t *q = pb + CKIR_QP_QS(fmt); /* q8_0p: 8 quad rows after the scales */
    if (nib) {
      /* group g's low nibbles are quad row g (k = 4 g + j), its high ones 4 + g */
      const __m512i low = _mm512_set1_epi8(0x0F);
      for (int g = 0; g < 4; g++)
        for (int h = 0; h < 4 * CKIR_PANEL; h += 64) {
          const __m512i v = _mm512_loadu_si512(q + g * 4 * CKIR_PANEL + h);
          _mm512_store_si512(bq + g * 4 * CKIR_PANEL + h, _mm512_and_si512(v, low));
          _mm512_store_si512(bq + (g + 4) * 4 * CKIR_PANEL + h,
                             _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
        }
      q = bq;
    }
    AMX_LOAD(emu_, 6, q, 4 * CKIR_PANEL);
    AMX_LOAD(emu_, 7, q + 64, 4 * CKIR_PANEL);
    const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
    const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32)));
    __m512 m0 = _mm512_setzero_ps(), m1 = m0;
    if (has_m) {
      m0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 2 * CKIR_PANEL)));
      m1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 2 * CKIR_PANEL + 32)));
    }
    for (int64_t i = 0; i < R; i += 32) {
      const int two = R - i > 16;
      AMX_ZERO(emu_, 0);
      AMX_ZERO(emu_, 1);
      AMX_LOAD(emu_, 4, a + i * K + bk * CKIR_QK, K);
      AMX_DPB(emu_, 0, 4, 6, !nib);
      AMX_DPB(emu_, 1, 4, 7, !nib);
      AMX_STORE(emu_, 0, st, 128);
      AMX_STORE(emu_, 1, st + 16, 128);
      if (two) {
        AMX_ZERO(emu_, 2);
        AMX_ZERO(emu_, 3);
        AMX_LOAD(emu_, 5, a + (i + 16) * K + bk * CKIR_QK, K);
        AMX_DPB(emu_, 2, 5, 6, !nib);
        AMX_DPB(emu_, 3, 5, 7, !nib);
        AMX_STORE(emu_, 2, st + 16 * 32, 128);
        AMX_STORE(emu_, 3, st + 16 * 32 + 16, 128);
      }
      for (int64_t r = 0; r < CKIR_MIN(32, R - i); r++) {
        const int64_t row = i + r;
        float *fr = f + row * CKIR_PANEL;
        const __m512 vx = _mm512_set1_ps(dx[row * nb + bk]);
        /* q4_0p: d (nib - 8) summed as the vpdpbusd path does, from -8 sum(a) */
        const __m512i c = _mm512_set1_epi32(fmt == CKIR_QP_Q4_0 ? cb[row * nb + bk] / 16 : 0);
        const __m512 s0 = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(st + r * 32), c));
        const __m512 s1 =
            _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(st + r * 32 + 16), c));
        __m512 f0 = _mm512_load_ps(fr), f1 = _mm512_load_ps(fr + 16);
        if (has_m) {
          const __m512 vs = _mm512_set1_ps(sx[row * nb + bk]);
          f0 = _mm512_fmadd_ps(s0, _mm512_mul_ps(d0, vx), _mm512_fmadd_ps(m0, vs, f0));
          f1 = _mm512_fmadd_ps(s1, _mm512_mul_ps(d1, vx), _mm512_fmadd_ps(m1, vs, f1));
        } else {
          f0 = _mm512_fmadd_ps(s0, _mm512_mul_ps(d0, vx), f0);
          f1 = _mm512_fmadd_ps(s1, _mm512_mul_ps(d1, vx), f1);
        }
        _mm512_store_ps(fr, f0);
        _mm512_store_ps(fr + 16, f1);
      }
    }
  }
  amx_release(emu_);
  amx_store_rows(f, R, b, nn, y, ldy);
}

static void amx_qp_panel_hw(const int8_t *a, int64_t K, const float *dx, const float *sx,
                            const int32_t *cb, int64_t R, const uint8_t *pp, int fmt,
                            const float *b, float *y, int64_t ldy, int64_t nn) {
  amx_qp_panel_(a, K, dx, sx, cb, R, pp, fmt, b, y, ldy, nn, 0);
}

static void amx_qp_panel_emu(const int8_t *a, int64_t K, const float *dx, const float *sx,
                             const int32_t *cb, int64_t R, const uint8_t *pp, int fmt,
                             const float *b, float *y, int64_t ldy, int64_t nn) {
  amx_qp_panel_(a, K, dx, sx, cb, R, pp, fmt, b, y, ldy, nn, 1);
}

void ckir_internal_amx_qp_panel(int mode, const int8_t *a, int64_t K, const float *dx,
                                const float *sx, const int32_t *cb, int64_t R, const uint8_t *pp,
                                int fmt, const float *b, float *y, int64_t ldy, int64_t nn) {
  atomic_fetch_add_explicit(&amx_calls, 1, memory_order_relaxed);
  if (mode == CKIR_AMX_EMULATE)
    amx_qp_panel_emu(a, K, dx, sx, cb, R, pp, fmt, b, y, ldy, nn);
  else
    amx_qp_panel_hw(a, K, dx, sx, cb, R, pp, fmt, b, y, ldy, nn);
}

#else /* no AMX path in this build */

int ckir_set_amx(int mode) {
  (void)mode;
  return CKIR_AMX_OFF;
}

long ckir_runtime_amx_calls(void) { return 0; }

#endif

int ckir_runtime_amx(void) {
#if defined(CKIR_AMX_BUILD)
  return ckir_internal_amx();
#else
  return CKIR_AMX_OFF;
#endif
}
