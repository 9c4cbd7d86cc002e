/* ckir benchmark probes: memory read bandwidth and fp32 FMA peak of this machine.
 *
 * Built by tools/bandwidth.py with the system cc (-O2 -march=native -fopenmp)
 * into its own shared library; the model libraries never link it.
 *
 *   ckb_buffer_new(bytes)            page-aligned buffer, every page written
 *   ckb_read(buf, bytes, threads)    seconds to read the buffer once with
 *                                    `threads` OpenMP threads (each thread one
 *                                    contiguous share, `streams` sequential
 *                                    streams per thread, widest vector loads)
 *   ckb_fma(threads, iters)          seconds for threads x iters x CKB_ACC
 *                                    independent vector FMAs (see ckb_fma_flops)
 *   ckb_bf16dot(threads, iters)      the same with vdpbf16ps (zmm: 32 products
 *                                    and 32 sums each, see ckb_bf16dot_flops);
 *                                    -1 without AVX512-BF16
 *   ckb_int8dot(threads, iters)      the same with vpdpbusd (zmm: 64 int8
 *                                    products and 64 sums each), or without
 *                                    AVX512-VNNI vpmaddubsw (ymm: 32 products
 *                                    and 16 sums each, AVX2); see
 *                                    ckb_int8dot_ops and ckb_int8dot_insn;
 *                                    -1 without either
 *   ckb_amx(threads, iters, int8)    the same with tdpbf16ps / tdpbssd on AMX
 *                                    tiles (ckb_amx_ops); -1 without AMX
 */
#define _DEFAULT_SOURCE
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *ckb_buffer_new(int64_t bytes, int huge) {
  const size_t align = (size_t)2 << 20;
  size_t n = ((size_t)bytes + align - 1) / align * align;
  float *p = aligned_alloc(align, n);
  if (!p) return NULL;
#ifdef MADV_HUGEPAGE
  madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
  (void)huge;
#endif
  /* real (not zero-page) memory: write every float */
  int64_t count = (int64_t)(n / sizeof(float));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; i++) p[i] = (float)(i & 1023) * 0.25f;
  return p;
}

void ckb_buffer_free(void *p) { free(p); }

/* sum of one stream [lo, hi) of floats; hi - lo is a multiple of 64 */
static float sum_range(const float *p, int64_t lo, int64_t hi) {
#if defined(__AVX512F__)
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = lo; i < hi; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#elif defined(__AVX2__)
  __m256 a[8];
  for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
  for (int64_t i = lo; i < hi; i += 64)
    for (int j = 0; j < 8; j++) a[j] = _mm256_add_ps(a[j], _mm256_load_ps(p + i + 8 * j));
  float out[8], s = 0.0f;
  for (int j = 1; j < 8; j++) a[0] = _mm256_add_ps(a[0], a[j]);
  _mm256_storeu_ps(out, a[0]);
  for (int j = 0; j < 8; j++) s += out[j];
  return s;
#else
  float a[16] = {0};
  for (int64_t i = lo; i < hi; i += 16)
    for (int j = 0; j < 16; j++) a[j] += p[i + j];
  float s = 0.0f;
  for (int j = 0; j < 16; j++) s += a[j];
  return s;
#endif
}

/* two interleaved streams of one thread's share (the halves of [lo, hi)) */
static float sum_two(const float *p, int64_t lo, int64_t hi) {
  int64_t half = (hi - lo) / 2 / 64 * 64;
  float s = 0.0f;
  for (int64_t i = 0; i < half; i += 1024) {
    int64_t n = half - i < 1024 ? half - i : 1024;
    s += sum_range(p, lo + i, lo + i + n);
    s += sum_range(p, lo + half + i, lo + half + i + n);
  }
  return s + sum_range(p, lo + 2 * half, hi);
}

volatile float ckb_sink;

double ckb_read(const void *buf, int64_t bytes, int threads, int streams) {
  const float *p = buf;
  int64_t n = bytes / (int64_t)sizeof(float) / 64 * 64;
  float total = 0.0f;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t share = (n / nt + 63) / 64 * 64;
    int64_t lo = t * share < n ? t * share : n;
    int64_t hi = lo + share < n ? lo + share : n;
    total += streams >= 2 ? sum_two(p, lo, hi) : sum_range(p, lo, hi);
  }
  double dt = now() - t0;
  ckb_sink = total;
  return dt;
}

/* ---- FMA peak --------------------------------------------------------------------- */

/* independent accumulator chains: enough to cover FMA latency x pipes (4-5 x 2)
 * and few enough to stay in registers with the two constants -- AVX2 has only
 * 16 ymm registers, and 16 chains there spill and halve the measured peak */
#if defined(__AVX512F__)
#define CKB_ACC 16
#else
#define CKB_ACC 12
#endif

/* flops of one ckb_fma(threads, iters) call */
double ckb_fma_flops(int threads, int64_t iters) {
#if defined(__AVX512F__)
  const double lanes = 16;
#elif defined(__AVX2__)
  const double lanes = 8;
#else
  const double lanes = 1;
#endif
  return 2.0 * lanes * CKB_ACC * (double)iters * threads;
}

/* CKB_ACC independent chains, written out so that they stay in registers */
#if CKB_ACC == 16
#define CKB_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
  X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#else
#define CKB_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#endif

/* CKB_ACC independent chains: INIT(j) declares chain j, STEP(j) advances it, iters
 * times; then s, a VEC from ZERO, gathers them with SUM(j) */
#define CKB_RUN_CHAINS(INIT, STEP, VEC, ZERO, SUM) \
  CKB_CHAINS(INIT)                                  \
  for (int64_t i = 0; i < iters; i++) {             \
    CKB_CHAINS(STEP)                                \
  }                                                 \
  VEC s = ZERO;                                     \
  CKB_CHAINS(SUM)

double ckb_fma(int threads, int64_t iters) {
  float total = 0.0f;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
#if defined(__AVX512F__)
#define CKB_VEC __m512
#define CKB_SET1 _mm512_set1_ps
#define CKB_FMA _mm512_fmadd_ps
#define CKB_ADD _mm512_add_ps
#elif defined(__AVX2__)
#define CKB_VEC __m256
#define CKB_SET1 _mm256_set1_ps
#define CKB_FMA _mm256_fmadd_ps
#define CKB_ADD _mm256_add_ps
#endif
#if defined(CKB_VEC)
    const CKB_VEC a = CKB_SET1(0.999999f), b = CKB_SET1(1e-7f);
#define CKB_INIT(j) CKB_VEC c##j = CKB_SET1(1.0f + (float)(j));
#define CKB_STEP(j) c##j = CKB_FMA(c##j, a, b);
#define CKB_SUM(j) s = CKB_ADD(s, c##j);
    CKB_RUN_CHAINS(CKB_INIT, CKB_STEP, CKB_VEC, CKB_SET1(0.0f), CKB_SUM)
    float lanes[sizeof(CKB_VEC) / sizeof(float)];
    memcpy(lanes, &s, sizeof lanes);
    for (size_t j = 0; j < sizeof lanes / sizeof(float); j++) total += lanes[j];
#else
    float acc[CKB_ACC];
    for (int j = 0; j < CKB_ACC; j++) acc[j] = 1.0f + (float)j;
    for (int64_t i = 0; i < iters; i++)
      for (int j = 0; j < CKB_ACC; j++) acc[j] = acc[j] * 0.999999f + 1e-7f;
    for (int j = 0; j < CKB_ACC; j++) total += acc[j];
#endif
  }
  double dt = now() - t0;
  ckb_sink = total;
  return dt;
}

/* flops of one ckb_bf16dot(threads, iters) call: 64 per zmm vdpbf16ps */
double ckb_bf16dot_flops(int threads, int64_t iters) {
  return 64.0 * CKB_ACC * (double)iters * threads;
}

double ckb_bf16dot(int threads, int64_t iters) {
#if defined(__AVX512BF16__)
  float total = 0.0f;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    /* bf16 pairs (1.0, 1e-3 ish): the sums grow slowly, no overflow */
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803a83);
    const __m512bh b = (__m512bh)_mm512_set1_epi32(0x3a833a83);
#define CKB_DINIT(j) __m512 d##j = _mm512_set1_ps((float)(j));
#define CKB_DSTEP(j) d##j = _mm512_dpbf16_ps(d##j, a, b);
#define CKB_DSUM(j) s = _mm512_add_ps(s, d##j);
    CKB_RUN_CHAINS(CKB_DINIT, CKB_DSTEP, __m512, _mm512_setzero_ps(), CKB_DSUM)
    total += _mm512_reduce_add_ps(s);
  }
  double dt = now() - t0;
  ckb_sink = total;
  return dt;
#else
  (void)threads, (void)iters;
  return -1.0;
#endif
}

/* the int8 product without VNNI: vpmaddubsw on the widest vectors */
#if !defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define CKB_MVEC __m512i
#define CKB_MSET1 _mm512_set1_epi16
#define CKB_MSET1B _mm512_set1_epi8
#define CKB_MADDUBS _mm512_maddubs_epi16
#define CKB_MADD16 _mm512_add_epi16
#elif !defined(__AVX512VNNI__) && defined(__AVX2__)
#define CKB_MVEC __m256i
#define CKB_MSET1 _mm256_set1_epi16
#define CKB_MSET1B _mm256_set1_epi8
#define CKB_MADDUBS _mm256_maddubs_epi16
#define CKB_MADD16 _mm256_add_epi16
#endif

/* operations of one ckb_int8dot(threads, iters) call, counted as FLOPs are (2
 * per int8 product: the product and its sum): 64 products per zmm vpdpbusd, one
 * per byte of a vpmaddubsw */
double ckb_int8dot_ops(int threads, int64_t iters) {
#if defined(__AVX512VNNI__)
  return 128.0 * CKB_ACC * (double)iters * threads;
#elif defined(CKB_MVEC)
  return 2.0 * sizeof(CKB_MVEC) * CKB_ACC * (double)iters * threads;
#else
  (void)threads, (void)iters;
  return 0.0;
#endif
}

/* the instruction ckb_int8dot times ("" when none) */
const char *ckb_int8dot_insn(void) {
#if defined(__AVX512VNNI__)
  return "vpdpbusd";
#elif defined(CKB_MVEC)
  return "vpmaddubsw";
#else
  return "";
#endif
}

/* seconds of CKB_ACC independent vpdpbusd (or vpmaddubsw) chains per thread,
 * iters steps; -1 where this build has neither */
double ckb_int8dot(int threads, int64_t iters) {
#if defined(CKB_MVEC)
  int64_t total = 0;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    /* each step multiplies the chain's own bytes (unsigned) by 1 and sums the
     * pairs with saturation: no overflow, and nothing a compiler can hoist */
    const CKB_MVEC b = CKB_MSET1B(1);
#define CKB_WINIT(j) CKB_MVEC w##j = CKB_MSET1((short)(j + 1));
#define CKB_WSTEP(j) w##j = CKB_MADDUBS(w##j, b);
#define CKB_WSUM(j) s = CKB_MADD16(s, w##j);
    CKB_RUN_CHAINS(CKB_WINIT, CKB_WSTEP, CKB_MVEC, CKB_MSET1(0), CKB_WSUM)
    int16_t lanes[sizeof(CKB_MVEC) / 2];
    memcpy(lanes, &s, sizeof lanes);
    for (size_t j = 0; j < sizeof lanes / 2; j++) total += lanes[j];
  }
  double dt = now() - t0;
  ckb_sink = (float)total;
  return dt;
#elif defined(__AVX512VNNI__)
  int64_t total = 0;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    /* small bytes: the int32 sums grow by 4 * 3 * 2 per lane and step, no overflow */
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(2);
#define CKB_IINIT(j) __m512i i##j = _mm512_set1_epi32(j);
#define CKB_ISTEP(j) i##j = _mm512_dpbusd_epi32(i##j, a, b);
#define CKB_ISUM(j) s = _mm512_add_epi32(s, i##j);
    CKB_RUN_CHAINS(CKB_IINIT, CKB_ISTEP, __m512i, _mm512_setzero_si512(), CKB_ISUM)
    total += _mm512_reduce_add_epi32(s);
  }
  double dt = now() - t0;
  ckb_sink = (float)total;
  return dt;
#else
  (void)threads, (void)iters;
  return -1.0;
#endif
}

/* ---- AMX tiles (Intel Sapphire Rapids and later) -------------------------------
 * ckb_amx(threads, iters, int8): seconds for threads x iters x 4 independent
 * tdpbf16ps (int8: tdpbssd) on full tiles (16 x 16 fp32 / int32 outputs, 32 bf16
 * or 64 int8 products each; see ckb_amx_ops), the tile peak the runtime's AMX
 * GEMMs (gemm_amx.c) run against; -1 where the CPU (AMX-TILE, -BF16, -INT8,
 * palette 1 at 16 x 64 bytes) or the OS (XCR0, arch_prctl) lacks it.  The
 * tile instructions are inline assembly, as in the runtime: any x86-64 build
 * has them, only a CPU with AMX runs them. */
#if defined(__x86_64__) && defined(__AVX512F__)
#include "../kernels/ckir_amx_cpu.h"

double ckb_amx_ops(int threads, int64_t iters, int int8) {
  return (int8 ? 32768.0 : 16384.0) * 4.0 * (double)iters * threads;
}

double ckb_amx(int threads, int64_t iters, int int8) {
  if (!ckir_amx_cpu_usable()) return -1.0;
  float total = 0.0f;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    static const uint8_t zero[16 * 64] __attribute__((aligned(64)));
    int32_t out[16 * 16] __attribute__((aligned(64)));
    const ckir_amx_cfg cfg = ckir_amx_cfg_make(64, 16); /* every tile 16 x 64 bytes */
    ckir_amx_load_config(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zero, 64);
    _tile_loadd(5, zero, 64);
    _tile_loadd(6, zero, 64);
    _tile_loadd(7, zero, 64);
    if (int8) {
      for (int64_t i = 0; i < iters; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
      }
    } else {
      for (int64_t i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    _tile_stored(0, out, 64);
    ckir_amx_release();
    total += (float)out[0];
  }
  double dt = now() - t0;
  ckb_sink = total;
  return dt;
}
#else
double ckb_amx_ops(int threads, int64_t iters, int int8) {
  (void)threads, (void)iters, (void)int8;
  return 0.0;
}

double ckb_amx(int threads, int64_t iters, int int8) {
  (void)threads, (void)iters, (void)int8;
  return -1.0;
}
#endif
