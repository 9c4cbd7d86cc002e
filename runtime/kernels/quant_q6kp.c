/* ckir runtime: the SIMD core of the q6_kp panel dtype (ckir_kpanel.h).
 *
 * A q6_kp panel block is 32 rows' Q6_K super-blocks with their bytes permuted so
 * that 32-bit lane r of a 128-byte "quad plane" holds 4 bytes of row r: 64 bytes of
 * f16 d (row r at 2r), then planes g = 0..51 (plane g = bytes 4g .. 4g + 3 of each
 * row's Q6_K block: planes 0..31 ql, 32..47 qh, 48..51 the int8 scales sc[16],
 * sc[4w + j] in byte j of plane 48 + w), plane g in slot s = ckir_kp6_slot(g) at byte
 * 64 + 128s + 4r + j: the slots follow the order in which kp6_block512 (one or two
 * rows of x) reads the planes, so that a decode reads each block in address order.
 * Element e = 128h + 32t + l (h < 2, t < 4, l < 32) of a row has the low 4 bits of
 * nibble t / 2 of ql[64h + 32(t % 2) + l] and the high 2 bits (2t, 2t + 1) of
 * qh[32h + l]; its value is (d sc[e / 16]) (q - 32).
 *
 * So a ql plane 16h + 8(t % 2) + L (one zmm: 16 rows x the 4 elements l = 4L .. 4L
 * + 3) gives the element quads of t (low nibbles) and t + 2 (high nibbles), and the
 * qh plane 32 + 8h + L their high bits: q (0..63, unsigned) of 16 rows x 4 elements
 * per zmm, against a broadcast quad of x's int8 a in one vpdpbusd.  Each 16-element
 * sub-block i of a row (4 quads) accumulates lane-wise from -32 bs[i] (x's sum of
 * the sub-block, the q - 32), and is multiplied by the row's sc[i] (vpmulld; its
 * lane of scale plane 48 + i / 4, sign-extended): int32 lane r ends as the exact
 * S - 32 M of q6_k_dot_scalar (quant_kq.c) for row r.  Then per lane, as the scalar
 * code rounds: acc = acc + (d dx) (float)(S - 32 M), an explicit multiply, multiply,
 * add (no fused multiply-add; the runtime compiles with -std=c11, where GCC does not
 * contract), so every output equals the reference twin's bit for bit, for every
 * number of rows of x (each row of x has its own lanes and the same operations).
 *
 * No horizontal sums and no per-row scale shuffles: the per-row work of the
 * row-major q6_k kernels (its header unpack, scale spreading and fp32 finish) is
 * lane-wise here and shared by 16 (zmm) or 8 (ymm) rows.  AVX-512: 2 lane groups of
 * 16 rows per panel, every broadcast quad of a serving both (1 or 2 rows of x: each
 * plane loaded once per block; 3 or 4 rows: a sub-block at a time, so that the
 * accumulators fit in registers); without VNNI CKIR_DPBUSD512 is vpmaddubsw +
 * vpmaddwd (q <= 63, |a| <= 127: no saturation).  AVX2: 4 lane groups of 8 rows
 * (without VNNI: vpmaddubsw pairs scaled by vpmaddwd, no vpmulld).
 * Scalar builds: the portable core.  The software prefetch (pfd bytes ahead, into
 * L2; AVX2 builds, whose core sweeps a block once per lane group) is spread over the
 * block's steps (docs/performance-log.md, "The q6_kp core", "q6_kp planes in read
 * order"). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_kpanel.h"

#define KP6_BYTES 210
#define KP6_BLOCK (CKIR_PANEL * KP6_BYTES) /* 6720 bytes: 105 cache lines */
/* the byte offset of logical plane g in a panel block (stored in read order) */
#define KP6_PLANE(g) (64 + 128 * ckir_kp6_slot(g))
_Static_assert(64 + 128 * 52 == KP6_BLOCK, "q6_kp panel block: 64 bytes of d + 52 planes");

#if defined(CKIR_Q512) || defined(CKIR_Q256)
/* prefetch (into L2) the k-th of 16 slices (7 lines each) of the panel block at p:
 * spread over a block's steps instead of one burst */
CKIR_INLINE void kp6_prefetch(const uint8_t *p, int k) {
  for (int l = 7 * k; l < 7 * k + 7 && l < KP6_BLOCK / 64; l++)
    __builtin_prefetch(p + 64 * l, 0, 2);
}

/* the element quads of t in a ql plane (P: _mm512 or _mm256): its low nibbles for
 * t < 2, else its high ones (both still to be masked to 4 bits) */
#define KP6_NIB(P, ql, t) ((t) < 2 ? (ql) : P##_srli_epi16(ql, 4))
/* their high bits 2t, 2t + 1 of a qh plane moved to bits 4, 5 (still to be masked) */
#define KP6_HB(P, qh, t)                                                                \
  ((t) == 0 ? P##_slli_epi16(qh, 4) : (t) == 1 ? P##_slli_epi16(qh, 2) : (t) == 2 ? (qh) \
                                                                     : P##_srli_epi16(qh, 2))

/* cb[i][s] = -32 bs[s] of x row i's super-block b: the start of sub-block s's lanes */
CKIR_INLINE void kp6_starts(const ckir_q8k *xs, const int X, int64_t b, int32_t cb[][16]) {
  for (int i = 0; i < X; i++)
    for (int s = 0; s < 16; s++) cb[i][s] = -32 * xs[i].bs[16 * b + s];
}
#endif

#if defined(CKIR_Q512)
/* q (0..63) of 16 rows x 4 elements of t from the nibbles of the ql plane (low for t
 * < 2) and bits 2t, 2t + 1 of the qh plane: (nib & 0x0F) | (hb & 0x30) */
CKIR_INLINE __m512i kp6_q512(__m512i ql, __m512i qh, const int t) {
  const __m512i nib = KP6_NIB(_mm512, ql, t), hb = KP6_HB(_mm512, qh, t);
  /* A | (B & C) on (hb & 0x30, nib, 0x0F): the and's result is the destination */
  return _mm512_ternarylogic_epi32(_mm512_and_si512(hb, _mm512_set1_epi8(0x30)), nib,
                                   _mm512_set1_epi8(0x0F), 0xF8);
}

/* X (1 or 2) rows of x against the panel block pb's two lane groups (16 rows each):
 * T[j][i] += the exact S - 32 M of lane group j's rows (q6_k_dot_scalar's integer).
 * Per (h, u) the quads L = 4u .. 4u + 3 of one qh plane and two ql planes give the 4
 * sub-blocks 8h + 2t + u (t < 4) of every row: each plane loaded once, each broadcast
 * quad of a shared by the two lane groups (4 X x 2 accumulators). */
CKIR_INLINE void kp6_block512(const uint8_t *pb, const int8_t *const *ab, int32_t cb[][16],
                              const int X, __m512i T[][CKIR_KP_TX], int64_t pfd) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
    for (int u = 0; u < 2; u++) {
      if (pfd) /* 16 slices a block, 4 per step (h, u) */
        for (int k = 0; k < 4; k++) kp6_prefetch(pb + pfd, 4 * (2 * h + u) + k);
      __m512i s[2][4][CKIR_KP_TX];
      for (int j = 0; j < 2; j++)
        for (int t = 0; t < 4; t++)
          for (int i = 0; i < X; i++) s[j][t][i] = _mm512_set1_epi32(cb[i][8 * h + 2 * t + u]);
#pragma GCC unroll 4
      for (int L = 4 * u; L < 4 * u + 4; L++) {
        __m512i ql0[2], ql1[2], qh[2];
        for (int j = 0; j < 2; j++) {
          const uint8_t *pg = pb + 64 * j;
          ql0[j] = _mm512_loadu_si512((const void *)(pg + KP6_PLANE(16 * h + L)));
          ql1[j] = _mm512_loadu_si512((const void *)(pg + KP6_PLANE(16 * h + 8 + L)));
          qh[j] = _mm512_loadu_si512((const void *)(pg + KP6_PLANE(32 + 8 * h + L)));
        }
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
          __m512i q[2];
          for (int j = 0; j < 2; j++) q[j] = kp6_q512(t & 1 ? ql1[j] : ql0[j], qh[j], t);
          for (int i = 0; i < X; i++) {
            const __m512i xa = _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab[i] + 128 * h + 32 * t + 4 * L));
            for (int j = 0; j < 2; j++) s[j][t][i] = CKIR_DPBUSD512(s[j][t][i], q[j], xa);
          }
        }
      }
      /* sc[8h + 2t + u] of the rows: byte (2t + u) % 4 of scale plane 48 + 2h + t / 2 */
      for (int j = 0; j < 2; j++) {
        const uint8_t *pg = pb + 64 * j;
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
          const __m512i sp = _mm512_loadu_si512((const void *)(pg + KP6_PLANE(48 + 2 * h + t / 2)));
          const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(sp, 24 - 8 * ((2 * t + u) % 4)), 24);
          for (int i = 0; i < X; i++) T[j][i] = _mm512_add_epi32(T[j][i], _mm512_mullo_epi32(s[j][t][i], sc));
        }
      }
    }
}

/* The same sums for 3 or 4 rows of x, one sub-block at a time: its 4 quads' ql and qh
 * planes loaded again for each t, so that the 2 X accumulators stay in registers and
 * each broadcast quad of a still serves both lane groups (the broadcasts, not the
 * plane loads, bound these X; L2-resident, paired: 1.3-1.6x kp6_block512 with one
 * lane group a pass at X = 3, 1.05-1.2x at X = 4). */
CKIR_INLINE void kp6_block512_sb(const uint8_t *pb, const int8_t *const *ab, int32_t cb[][16],
                                 const int X, __m512i T[][CKIR_KP_TX], int64_t pfd) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
      if (pfd) /* 16 slices a block, 2 per step (h, t) */
        kp6_prefetch(pb + pfd, 2 * (4 * h + t)), kp6_prefetch(pb + pfd, 2 * (4 * h + t) + 1);
#pragma GCC unroll 2
      for (int u = 0; u < 2; u++) { /* sub-block 8h + 2t + u */
        const int sb = 8 * h + 2 * t + u;
        __m512i s[2][CKIR_KP_TX];
        for (int i = 0; i < X; i++) s[0][i] = s[1][i] = _mm512_set1_epi32(cb[i][sb]);
#pragma GCC unroll 4
        for (int L = 4 * u; L < 4 * u + 4; L++) {
          __m512i q[2];
          for (int j = 0; j < 2; j++) {
            const uint8_t *pg = pb + 64 * j;
            const __m512i ql = _mm512_loadu_si512((const void *)(pg + KP6_PLANE(16 * h + 8 * (t & 1) + L)));
            const __m512i qh = _mm512_loadu_si512((const void *)(pg + KP6_PLANE(32 + 8 * h + L)));
            q[j] = kp6_q512(ql, qh, t);
          }
          for (int i = 0; i < X; i++) {
            const __m512i xa = _mm512_set1_epi32(ckir_q_ld32((const uint8_t *)ab[i] + 128 * h + 32 * t + 4 * L));
            s[0][i] = CKIR_DPBUSD512(s[0][i], q[0], xa);
            s[1][i] = CKIR_DPBUSD512(s[1][i], q[1], xa);
          }
        }
        for (int j = 0; j < 2; j++) {
          const __m512i sp = _mm512_loadu_si512((const void *)(pb + 64 * j + KP6_PLANE(48 + sb / 4)));
          const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(sp, 24 - 8 * (sb % 4)), 24);
          for (int i = 0; i < X; i++) T[j][i] = _mm512_add_epi32(T[j][i], _mm512_mullo_epi32(s[j][i], sc));
        }
      }
    }
}

CKIR_INLINE void kp6_core512(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, const int X,
                             int64_t pfd, float *out) {
  __m512 acc[2][CKIR_KP_TX];
  for (int i = 0; i < X; i++) acc[0][i] = acc[1][i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *pb = panel + b * KP6_BLOCK;
    int32_t cb[CKIR_KP_TX][16];
    kp6_starts(xs, X, b, cb);
    const int8_t *ab[CKIR_KP_TX];
    for (int i = 0; i < X; i++) ab[i] = xs[i].a + 256 * b;
    __m512i T[2][CKIR_KP_TX]; /* S - 32 M per row, as q6_k_dot_scalar forms it */
    for (int i = 0; i < X; i++) T[0][i] = T[1][i] = _mm512_setzero_si512();
    if (X <= 2)
      kp6_block512(pb, ab, cb, X, T, pfd);
    else
      kp6_block512_sb(pb, ab, cb, X, T, pfd);
    for (int g = 0; g < 2; g++) { /* rows 16g .. 16g + 15 */
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32 * g)));
      for (int i = 0; i < X; i++) {
        const __m512 ddx = _mm512_mul_ps(d, _mm512_set1_ps(xs[i].dx[b]));
        acc[g][i] = _mm512_add_ps(acc[g][i], _mm512_mul_ps(ddx, _mm512_cvtepi32_ps(T[g][i])));
      }
    }
  }
  for (int i = 0; i < X; i++) {
    _mm512_storeu_ps(out + i * CKIR_PANEL, acc[0][i]);
    _mm512_storeu_ps(out + i * CKIR_PANEL + 16, acc[1][i]);
  }
}
#define KP6_CORE kp6_core512

#elif defined(CKIR_Q256)
/* q of 8 rows x 4 elements of t, as kp6_q512 */
CKIR_INLINE __m256i kp6_q256(__m256i ql, __m256i qh, const int t) {
  const __m256i nib = KP6_NIB(_mm256, ql, t), hb = KP6_HB(_mm256, qh, t);
  return _mm256_or_si256(_mm256_and_si256(nib, _mm256_set1_epi8(0x0F)),
                         _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
}

#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
/* With a ymm vpdpbusd: X rows of x against lane group g (8 rows) of panel block pb,
 * as kp6_block512 with one lane group: T[i] += the exact S - 32 M of those rows */
CKIR_INLINE void kp6_block256(const uint8_t *pb, int g, const ckir_q8k *xs, int64_t b,
                              const int X, __m256i *T, int64_t pfd) {
  const uint8_t *pg = pb + 32 * g;
  int32_t cb[CKIR_KP_TX][16];
  kp6_starts(xs, X, b, cb);
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
    for (int u = 0; u < 2; u++) {
      /* 16 slices a block: one per step (h, u) of each of the 4 lane groups */
      if (pfd) kp6_prefetch(pb + pfd, 4 * g + 2 * h + u);
      __m256i s[4][CKIR_KP_TX];
      for (int t = 0; t < 4; t++)
        for (int i = 0; i < X; i++) s[t][i] = _mm256_set1_epi32(cb[i][8 * h + 2 * t + u]);
#pragma GCC unroll 4
      for (int L = 4 * u; L < 4 * u + 4; L++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(16 * h + L)));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(16 * h + 8 + L)));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(32 + 8 * h + L)));
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
          const __m256i q = kp6_q256(t & 1 ? ql1 : ql0, qh, t);
          for (int i = 0; i < X; i++)
            s[t][i] = CKIR_DPBUSD256(s[t][i], q, _mm256_set1_epi32(ckir_q_ld32((const uint8_t *)xs[i].a + 256 * b + 128 * h + 32 * t + 4 * L)));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < 4; t++) {
        const __m256i sp = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(48 + 2 * h + t / 2)));
        const __m256i sc = _mm256_srai_epi32(_mm256_slli_epi32(sp, 24 - 8 * ((2 * t + u) % 4)), 24);
        for (int i = 0; i < X; i++) T[i] = _mm256_add_epi32(T[i], _mm256_mullo_epi32(s[t][i], sc));
      }
    }
}
#else
/* AVX2 alone (no vpdpbusd: CKIR_DPBUSD256 would be 3 instructions a quad and the
 * scales a vpmulld): the products of two quads as int16 pairs by vpmaddubsw (at most
 * 2 * 63 * 127 = 16002 a word), added (32004), then vpmaddwd by the rows' sc[i] held
 * in both words of each lane: sc[i] times those 8 products' sum, exact in int32.  T
 * starts at -32 M = -32 sum_i sc[i] bs[i], by vpmaddwd of the scale planes' words
 * (sc[4w], sc[4w + 2]) and (sc[4w + 1], sc[4w + 3]) with x's pairs (bs[4w], bs[4w +
 * 2]) and (bs[4w + 1], bs[4w + 3]): the same integer S - 32 M as the vpdpbusd path.
 * One row of x: per (h, u) each plane loaded once, the int16 pairs of the 4 t kept
 * apart; more rows: a sub-block at a time (planes re-loaded per t) so that the X
 * accumulators fit in the 16 ymm registers.  L2-resident, this machine's AVX2 build,
 * paired against the vpdpbusd emulation (best of 7, thread CPU time): 1.13x (X = 1),
 * 1.10x (X = 2), 1.22x (X = 3), 1.27x (X = 4). */

/* sc[sb] of the 8 rows in both words of each lane: byte sb % 4 of each dword of scale
 * plane 48 + sb / 4 moved to the high byte of both words, shifted down (signed) */
/* the int16 words (lo, hi) of one 32-bit lane */
CKIR_INLINE int32_t kp6_pair(int16_t lo, int16_t hi) {
  return (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
}

CKIR_INLINE __m256i kp6_sc_words(const uint8_t *pg, const int sb) {
  const int k = sb % 4;
  const __m256i ctl = _mm256_setr_epi8(
      -1, k, -1, k, -1, 4 + k, -1, 4 + k, -1, 8 + k, -1, 8 + k, -1, 12 + k, -1, 12 + k,
      -1, k, -1, k, -1, 4 + k, -1, 4 + k, -1, 8 + k, -1, 8 + k, -1, 12 + k, -1, 12 + k);
  const __m256i sp = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(48 + sb / 4)));
  return _mm256_srai_epi16(_mm256_shuffle_epi8(sp, ctl), 8);
}

CKIR_INLINE void kp6_block256(const uint8_t *pb, int g, const ckir_q8k *xs, int64_t b,
                              const int X, __m256i *T, int64_t pfd) {
  const uint8_t *pg = pb + 32 * g;
  const uint8_t *ab[CKIR_KP_TX];
  for (int i = 0; i < X; i++) ab[i] = (const uint8_t *)xs[i].a + 256 * b;
  /* T = -32 M */
  for (int w = 0; w < 4; w++) {
    const __m256i sp = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(48 + w)));
    const __m256i e0 = _mm256_srai_epi16(_mm256_slli_epi16(sp, 8), 8); /* sc[4w], sc[4w + 2] */
    const __m256i e1 = _mm256_srai_epi16(sp, 8);                       /* sc[4w + 1], sc[4w + 3] */
    for (int i = 0; i < X; i++) {
      const int16_t *bs = xs[i].bs + 16 * b + 4 * w;
      const __m256i m = _mm256_add_epi32(_mm256_madd_epi16(e0, _mm256_set1_epi32(kp6_pair(bs[0], bs[2]))),
                                         _mm256_madd_epi16(e1, _mm256_set1_epi32(kp6_pair(bs[1], bs[3]))));
      T[i] = _mm256_sub_epi32(T[i], _mm256_slli_epi32(m, 5));
    }
  }
  if (X == 1) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
      for (int u = 0; u < 2; u++) {
        /* 16 slices a block: two per step (h, u) of every other lane group */
        if (pfd && !(g & 1))
          kp6_prefetch(pb + pfd, 8 * (g >> 1) + 4 * h + 2 * u),
              kp6_prefetch(pb + pfd, 8 * (g >> 1) + 4 * h + 2 * u + 1);
        __m256i sc[4];
        for (int t = 0; t < 4; t++) sc[t] = kp6_sc_words(pg, 8 * h + 2 * t + u);
#pragma GCC unroll 2
        for (int L = 4 * u; L < 4 * u + 4; L += 2) {
          __m256i p[4];
#pragma GCC unroll 2
          for (int v = 0; v < 2; v++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(16 * h + L + v)));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(16 * h + 8 + L + v)));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(32 + 8 * h + L + v)));
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
              const __m256i q = kp6_q256(t & 1 ? ql1 : ql0, qh, t);
              const __m256i m = _mm256_maddubs_epi16(
                  q, _mm256_set1_epi32(ckir_q_ld32(ab[0] + 128 * h + 32 * t + 4 * (L + v))));
              p[t] = v ? _mm256_add_epi16(p[t], m) : m;
            }
          }
          for (int t = 0; t < 4; t++) T[0] = _mm256_add_epi32(T[0], _mm256_madd_epi16(p[t], sc[t]));
        }
      }
    return;
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
      /* 16 slices a block: one per step (h, t) of every other lane group */
      if (pfd && !(g & 1)) kp6_prefetch(pb + pfd, 8 * (g >> 1) + 4 * h + t);
#pragma GCC unroll 2
      for (int u = 0; u < 2; u++) {
        const __m256i sc = kp6_sc_words(pg, 8 * h + 2 * t + u);
#pragma GCC unroll 2
        for (int L = 4 * u; L < 4 * u + 4; L += 2) {
          __m256i q[2];
          for (int v = 0; v < 2; v++) {
            const __m256i ql = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(16 * h + 8 * (t & 1) + L + v)));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(pg + KP6_PLANE(32 + 8 * h + L + v)));
            q[v] = kp6_q256(ql, qh, t);
          }
          for (int i = 0; i < X; i++) {
            const uint8_t *a = ab[i] + 128 * h + 32 * t + 4 * L;
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], _mm256_set1_epi32(ckir_q_ld32(a))),
                                               _mm256_maddubs_epi16(q[1], _mm256_set1_epi32(ckir_q_ld32(a + 4))));
            T[i] = _mm256_add_epi32(T[i], _mm256_madd_epi16(p, sc));
          }
        }
      }
    }
}
#endif

CKIR_INLINE void kp6_core256(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, const int X,
                             int64_t pfd, float *out) {
  float acc[CKIR_KP_TX][CKIR_PANEL];
  for (int i = 0; i < X; i++) memset(acc[i], 0, sizeof acc[i]);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *pb = panel + b * KP6_BLOCK;
    for (int g = 0; g < 4; g++) { /* rows 8g .. 8g + 7: bytes 32g .. 32g + 31 of each plane */
      __m256i T[CKIR_KP_TX]; /* S - 32 M per row, as q6_k_dot_scalar forms it */
      for (int i = 0; i < X; i++) T[i] = _mm256_setzero_si256();
      kp6_block256(pb, g, xs, b, X, T, pfd);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16 * g)));
      for (int i = 0; i < X; i++) {
        const __m256 ddx = _mm256_mul_ps(d, _mm256_set1_ps(xs[i].dx[b]));
        const __m256 prev = _mm256_loadu_ps(acc[i] + 8 * g);
        _mm256_storeu_ps(acc[i] + 8 * g, _mm256_add_ps(prev, _mm256_mul_ps(ddx, _mm256_cvtepi32_ps(T[i]))));
      }
    }
  }
  for (int i = 0; i < X; i++) memcpy(out + i * CKIR_PANEL, acc[i], sizeof acc[i]);
}
#define KP6_CORE kp6_core256
#endif

void ckir_internal_core_q6_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out) {
#if defined(KP6_CORE)
  /* X as a constant in each instance: the per-row vectors stay in registers */
  switch (X) {
    case 1: KP6_CORE(panel, nb, xs, 1, pfd, out); break;
    case 2: KP6_CORE(panel, nb, xs, 2, pfd, out); break;
    case 3: KP6_CORE(panel, nb, xs, 3, pfd, out); break;
    default: KP6_CORE(panel, nb, xs, 4, pfd, out); break;
  }
#else
  (void)pfd;
  ckir_internal_core_kp_portable(CKIR_KP_Q6, panel, nb, xs, X, out);
#endif
}
