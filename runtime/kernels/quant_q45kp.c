/* ckir runtime: the SIMD cores of q4_kp and q5_kp, Q4_K / Q5_K super-blocks packed in
 * panels of 32 rows (layout and contract: ckir_kpanel.h; the drivers: quant_kpanels.c).
 * One core serves both formats (kp_core's compile-time flag q5); the q4_kp description
 * comes first, q5_kp's differences after it.
 *
 * A q4_kp panel block (32 rows x one super-block of 256 k, 4608 bytes) holds the rows'
 * f16 d (bytes 0..64), f16 dmin (64..128) and 35 "quad planes" of 128 bytes: 32-bit lane
 * r of plane g is bytes 4 + 4g .. 8 + 4g of row r's Q4_K super-block.  Planes 0, 1, 2
 * are the scale words u0, u1, u2 (kq_scale_min's); plane 3 + 8c + q holds qs[32c + 4q ..
 * 32c + 4q + 4): low nibbles elements 64c + 4q + j (sub-block 2c), high nibbles
 * 64c + 32 + 4q + j (sub-block 2c + 1).
 *
 * One vector of a plane is KP_W rows (16 on zmm, 8 on ymm) x 4 bytes, so one dot
 * instruction multiplies KP_W rows by a broadcast quad of x's int8 a, and every row's
 * integers come out in its own 32-bit lane: no horizontal sum, no per-row shuffle.  Per
 * super-block and row (scalar reference: q4_k_dot_scalar in quant_kq.c):
 *   t_j = sum over sub-block j's 32 elements of q a           (exact integers)
 *   S   = sum_j sc[j] t_j,  M = sum_j m[j] (bs[2j] + bs[2j + 1])
 *   acc = acc + dx * (d * (float)S - dmin * (float)M)         (fp32, no contraction)
 * so every output equals the scalar reference twin's bit for bit, and row i of x gets
 * the same operations in the same order whatever X is (GEMM row m == GEMV of row m).
 *
 * The integers, per KP_W rows:
 *   - with VNNI (AVX512-VNNI, AVX-VNNI): vpdpbusd of the low nibbles (v & 0x0F) and of
 *     the high nibbles in place (v & 0xF0 = 16 q: at most 4 * 240 * 127 per lane, no
 *     saturation in vpdpbusd) accumulate t_2c and 16 t_2c+1 over the chunk's 8 planes in
 *     int32; vpmulld by the lane's scale (sc[j] spread to its dword by a vpshufb) adds
 *     them to S_even and 16 S_odd; S = S_even + (16 S_odd >> 4), exact.
 *   - without: vpmaddubsw of the nibbles (v & 0x0F, v >> 4 & 0x0F) summed in int16 over
 *     the chunk's 8 planes (at most 8 * 2 * 15 * 127 = 30480 < 2^15), then one vpmaddwd
 *     by the scale in both words of the lane gives sc[j] t_j in int32.
 *   - M: m[0..4) and m[4..8) are the bytes of the lane's two dwords mlo, mhi, so M is two
 *     4-byte dot products with x's B_j = bs[2j] + bs[2j + 1] (|B_j| <= 32 * 127), B_j
 *     split as 128 Bh_j + Bl_j (Bl 0..127, Bh -32..31: int8) for vpdpbusd / vpmaddubsw.
 * The scales: sc[0..4) = u0 & 0x3F (bytes), sc[4..8) = (u2 & 0x0F) | (u0 >> 2 & 0x30),
 * m[0..4) = u1 & 0x3F, m[4..8) = (u2 >> 4 & 0x0F) | (u1 >> 2 & 0x30), lane-wise.
 *
 * q5_kp (5632-byte blocks): the same d, dmin and scale planes, then 8 planes of qh
 * (plane 3 + q holds qh[4q .. 4q + 4): bit j of byte 4q + i is the fifth bit of element
 * 4q + i of sub-block j) and the 32 qs planes at 11 ..; level q = nibble | bit << 4 in
 * 0..31 (scalar reference: q5_k_dot_scalar).  Per qs plane vector of chunk c and quad q,
 * the qh vector of quad q is shifted (16-bit lanes) so bit 2c, then bit 2c + 1, lands
 * on bit 4 of its byte, masked and merged under the nibble (one vpternlogd), and both
 * sub-blocks' levels go to the dot instruction as q (no in-place high nibble: 16 q
 * would pass 255).  On zmm with GFNI and VNNI (KP5_SPLIT) one vgf2p8affineqb moves bit
 * 2c alone to bit 4 for the low levels (merged as above), the high nibbles stay in
 * place as q4_kp's, and their fifth bits (bit 2c + 1 alone to bit 4: 16 b) go to a
 * vpdpbusd chain of their own, added at 16x to the chunk's 16 t_odd: no shift at all.
 * In L2, one thread, paired CPU time: the GFNI merge of both levels 1.09x the shifts,
 * the split 1.11x that.  Without VNNI the pairs' int16 sums hold at most 4 planes (4 * 2 *
 * 31 * 127 = 31496 < 2^15), so they are scaled into int32 after planes 3 and 7.
 *
 * Scalar builds: the portable core (quant_kpanels.c). */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_kpanel.h"

/* bytes of a panel block: 4608 (q4_kp), 5632 (q5_kp) */
#define KP_BLOCK(q5) (CKIR_PANEL * ((q5) ? 176 : CKIR_Q4_K_BYTES))
#define KP_PLANE (4 * CKIR_PANEL) /* bytes of one quad plane */
#define KP_PLANES 128             /* byte of plane 0 (after d, dmin) */
#define KP_QPLANE(q5) ((q5) ? 11 : 3) /* plane of qs[0..4) */
#define KP_HPLANE 3                   /* q5_kp: plane of qh[0..4) */

#if defined(CKIR_Q512) || defined(CKIR_Q256)
#if defined(CKIR_Q512)
typedef __m512i kpv;
typedef __m512 kpf;
#define KP_W 16
#define kpv_ld(p) _mm512_loadu_si512((const void *)(p))
#define kpv_set1 _mm512_set1_epi32
#define kpv_set1_16 _mm512_set1_epi16
#define kpv_set1_8 _mm512_set1_epi8
#define kpv_zero _mm512_setzero_si512
#define kpv_and _mm512_and_si512
#define kpv_add32 _mm512_add_epi32
#define kpv_add16 _mm512_add_epi16
#define kpv_mul32 _mm512_mullo_epi32
#define kpv_srli16 _mm512_srli_epi16
#define kpv_slli16 _mm512_slli_epi16
#define kpv_srli32 _mm512_srli_epi32
#define kpv_srai32 _mm512_srai_epi32
#define kpv_slli32 _mm512_slli_epi32
#define kpv_shufb _mm512_shuffle_epi8
#define kpv_madd _mm512_madd_epi16
#define kpv_maddubs _mm512_maddubs_epi16
#define kpv_ctl(x) _mm512_broadcast_i32x4(x)
/* the bits of a where c is set, of b where it is clear */
#define kpv_sel(c, a, b) _mm512_ternarylogic_epi32((a), (b), (c), 0xE4)
#define kpf_zero _mm512_setzero_ps
#define kpf_set1 _mm512_set1_ps
#define kpf_cvt _mm512_cvtepi32_ps
#define kpf_mul _mm512_mul_ps
#define kpf_sub _mm512_sub_ps
#define kpf_add _mm512_add_ps
#define kpf_ldh(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define kpf_st _mm512_storeu_ps
#if defined(__AVX512VNNI__)
#define KP_VNNI 1
#define kpv_dpbusd _mm512_dpbusd_epi32
#endif
#if defined(__GFNI__)
#define kpv_gf(x, m) _mm512_gf2p8affine_epi64_epi8((x), (m), 0)
#define kpv_set1_64 _mm512_set1_epi64
#if defined(KP_VNNI)
#define KP5_SPLIT 1 /* q5_kp's high levels split: kp_levels5_split */
#endif
#endif
#else
typedef __m256i kpv;
typedef __m256 kpf;
#define KP_W 8
#define kpv_ld(p) _mm256_loadu_si256((const __m256i *)(p))
#define kpv_set1 _mm256_set1_epi32
#define kpv_set1_16 _mm256_set1_epi16
#define kpv_set1_8 _mm256_set1_epi8
#define kpv_zero _mm256_setzero_si256
#define kpv_and _mm256_and_si256
#define kpv_add32 _mm256_add_epi32
#define kpv_add16 _mm256_add_epi16
#define kpv_mul32 _mm256_mullo_epi32
#define kpv_srli16 _mm256_srli_epi16
#define kpv_slli16 _mm256_slli_epi16
#define kpv_srli32 _mm256_srli_epi32
#define kpv_srai32 _mm256_srai_epi32
#define kpv_slli32 _mm256_slli_epi32
#define kpv_shufb _mm256_shuffle_epi8
#define kpv_madd _mm256_madd_epi16
#define kpv_maddubs _mm256_maddubs_epi16
#define kpv_ctl(x) _mm256_broadcastsi128_si256(x)
#define kpv_sel(c, a, b) _mm256_or_si256(_mm256_and_si256((c), (a)), _mm256_andnot_si256((c), (b)))
#define kpf_zero _mm256_setzero_ps
#define kpf_set1 _mm256_set1_ps
#define kpf_cvt _mm256_cvtepi32_ps
#define kpf_mul _mm256_mul_ps
#define kpf_sub _mm256_sub_ps
#define kpf_add _mm256_add_ps
#define kpf_ldh(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define kpf_st _mm256_storeu_ps
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define KP_VNNI 1
#define kpv_dpbusd CKIR_DPBUSD256
#endif
#endif
#ifndef KP5_SPLIT
#define KP5_SPLIT 0
#endif
#define KP_G (CKIR_PANEL / KP_W) /* lane groups per panel */
/* lane groups a pass of kp_core (sharing x's broadcasts): all of them at X = 1, two at
 * X = 2, one at X = 3, 4 (registers; measured, docs/performance-log.md) */
#define KP_HG1 KP_G
#define KP_HG2 2
#define KP_HG34 1

/* x's B_j = bs[2j] + bs[2j + 1] of one super-block (bs: its 16 sums of 16 a) as four
 * int8 quads: q[0] = Bl[0..4), q[1] = Bl[4..8), q[2] = Bh[0..4), q[3] = Bh[4..8), where
 * B_j = 128 Bh_j + Bl_j, Bl_j in 0..127 (|B_j| <= 4064: Bh_j in -32..31) */
CKIR_INLINE void kp_bsplit(const int16_t *bs, int32_t q[4]) {
  const __m128i one = _mm_set1_epi16(1), low7 = _mm_set1_epi32(127);
  const __m128i b0 = _mm_madd_epi16(_mm_loadu_si128((const __m128i *)bs), one);
  const __m128i b1 = _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(bs + 8)), one);
  const __m128i lo = _mm_packs_epi32(_mm_and_si128(b0, low7), _mm_and_si128(b1, low7));
  const __m128i hi = _mm_packs_epi32(_mm_srai_epi32(b0, 7), _mm_srai_epi32(b1, 7));
  _mm_storeu_si128((__m128i *)q, _mm_packs_epi16(lo, hi));
}

/* vpshufb control spreading byte j of every dword to the dword (VNNI: the scale for
 * vpmulld) or to both words of it (else: the scale for vpmaddwd) */
CKIR_INLINE kpv kp_spread(int j) {
#if defined(KP_VNNI)
  return kpv_ctl(_mm_setr_epi8(j, -1, -1, -1, 4 + j, -1, -1, -1, 8 + j, -1, -1, -1, 12 + j, -1, -1, -1));
#else
  return kpv_ctl(_mm_setr_epi8(j, -1, j, -1, 4 + j, -1, 4 + j, -1, 8 + j, -1, 8 + j, -1, 12 + j, -1,
                               12 + j, -1));
#endif
}

/* sc[0..4) and sc[4..8) (bytes of each lane's two dwords) of the lane group at plane 0 gp */
CKIR_INLINE void kp_scales(const uint8_t *gp, kpv *lo, kpv *hi) {
  const kpv low6 = kpv_set1_8(0x3F), nib = kpv_set1_8(0x0F);
  const kpv u0 = kpv_ld(gp), u2 = kpv_ld(gp + 2 * KP_PLANE);
  *lo = kpv_and(u0, low6);
  *hi = kpv_and(kpv_sel(nib, u2, kpv_srli32(u0, 2)), low6);
}

/* t plus the products of a plane vector's nibbles `nib` with the broadcast quad a4 of x,
 * summed per lane (VNNI: the 4 of each row, into int32; else pairs, into int16) */
CKIR_INLINE kpv kp_acc(kpv t, kpv nib, kpv a4) {
#if defined(KP_VNNI)
  return kpv_dpbusd(t, nib, a4);
#else
  return kpv_add16(t, kpv_maddubs(nib, a4));
#endif
}

/* the low nibbles of v (as q) and its high nibbles (VNNI: as 16 q, in place) */
CKIR_INLINE void kp_nibbles(kpv v, kpv *lo, kpv *hi) {
  *lo = kpv_and(v, kpv_set1_8(0x0F));
#if defined(KP_VNNI)
  *hi = kpv_and(v, kpv_set1_8((char)0xF0));
#else
  *hi = kpv_and(kpv_srli16(v, 4), kpv_set1_8(0x0F));
#endif
}

/* q5_kp: the levels of a qs plane vector v with the fifth bits in h (its qh plane
 * vector) for chunk c: lo = low nibble | bit 2c << 4, hi = high nibble | bit 2c + 1 << 4
 * (the shifts are 16-bit: a bit crossing into the neighbour byte lands outside bit 4) */
CKIR_INLINE kpv kp_bit4(kpv h, const int from) {
  const kpv b = from < 4 ? kpv_slli16(h, 4 - from) : from > 4 ? kpv_srli16(h, from - 4) : h;
  return kpv_and(b, kpv_set1_8(0x10));
}
CKIR_INLINE void kp_levels5(kpv v, kpv h, const int c, kpv *lo, kpv *hi) {
  const kpv nib = kpv_set1_8(0x0F);
#if defined(CKIR_Q512)
  *lo = kpv_sel(nib, v, kp_bit4(h, 2 * c));
  *hi = kpv_sel(nib, kpv_srli16(v, 4), kp_bit4(h, 2 * c + 1));
#else /* no vpternlogd: and + or (the bit alone at 4) rather than the 3-op select */
  *lo = _mm256_or_si256(kpv_and(v, nib), kp_bit4(h, 2 * c));
  *hi = _mm256_or_si256(kpv_and(kpv_srli16(v, 4), nib), kp_bit4(h, 2 * c + 1));
#endif
}
#if KP5_SPLIT
/* the same with GFNI and VNNI: lo as above, the high nibbles in place (16 q, as q4_kp)
 * and their fifth bits apart as 16 b.  vgf2p8affineqb: bit i of a result byte = parity
 * of (matrix byte 7 - i) & the byte, so matrix byte 3 = 1 << k moves bit k alone to 4. */
CKIR_INLINE void kp_levels5_split(kpv v, kpv h, const int c, kpv *lo, kpv *hi, kpv *hb) {
  *lo = kpv_sel(kpv_set1_8(0x0F), v, kpv_gf(h, kpv_set1_64((int64_t)(1u << (2 * c)) << 24)));
  *hi = kpv_and(v, kpv_set1_8((char)0xF0));
  *hb = kpv_gf(h, kpv_set1_64((int64_t)(1u << (2 * c + 1)) << 24));
}
#endif

/* S (exact int32, per lane) of HG lane groups from h0 of one panel block against X rows
 * of x (ab: their super-block's a).  The planes are read in address order (chunk c, then
 * group q, then lane group); the HG lane groups share the broadcasts of x. */
CKIR_INLINE void kp_sums(const uint8_t *blk, int h0, const int HG, const int8_t *const *ab,
                         const int X, const int q5, kpv S[][CKIR_KP_TX]) {
  kpv sc_lo[KP_G], sc_hi[KP_G], se[KP_G][CKIR_KP_TX], so[KP_G][CKIR_KP_TX];
  for (int g = 0; g < HG; g++) {
    kp_scales(blk + KP_PLANES + 4 * KP_W * (h0 + g), &sc_lo[g], &sc_hi[g]);
    for (int i = 0; i < X; i++) se[g][i] = so[g][i] = kpv_zero();
  }
  const uint8_t *p0 = blk + KP_PLANES + KP_QPLANE(q5) * KP_PLANE + 4 * KP_W * h0;
  const uint8_t *ph = blk + KP_PLANES + KP_HPLANE * KP_PLANE + 4 * KP_W * h0;
  for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles), 2c + 1 (high) */
    kpv te[KP_G][CKIR_KP_TX], to[KP_G][CKIR_KP_TX];
#if KP5_SPLIT
    kpv tb[KP_G][CKIR_KP_TX];
    for (int g = 0; g < HG; g++)
      for (int i = 0; i < X; i++) tb[g][i] = kpv_zero();
#endif
    for (int g = 0; g < HG; g++)
      for (int i = 0; i < X; i++) te[g][i] = to[g][i] = kpv_zero();
    for (int q = 0; q < 8; q++) {
      kpv al[CKIR_KP_TX], ah[CKIR_KP_TX];
      for (int i = 0; i < X; i++) {
        al[i] = kpv_set1(ckir_q_ld32((const uint8_t *)ab[i] + 64 * c + 4 * q));
        ah[i] = kpv_set1(ckir_q_ld32((const uint8_t *)ab[i] + 64 * c + 32 + 4 * q));
      }
      for (int g = 0; g < HG; g++) {
        kpv lo, hi;
        const kpv v = kpv_ld(p0 + (8 * c + q) * KP_PLANE + 4 * KP_W * g);
#if KP5_SPLIT
        if (q5) { /* tb: 16 times the fifth bits' sum of products */
          kpv hb;
          kp_levels5_split(v, kpv_ld(ph + q * KP_PLANE + 4 * KP_W * g), c, &lo, &hi, &hb);
          for (int i = 0; i < X; i++) tb[g][i] = kp_acc(tb[g][i], hb, ah[i]);
        } else
#else
        if (q5)
          kp_levels5(v, kpv_ld(ph + q * KP_PLANE + 4 * KP_W * g), c, &lo, &hi);
        else
#endif
          kp_nibbles(v, &lo, &hi);
        for (int i = 0; i < X; i++) {
          te[g][i] = kp_acc(te[g][i], lo, al[i]);
          to[g][i] = kp_acc(to[g][i], hi, ah[i]);
        }
      }
#if !defined(KP_VNNI)
      if (q5 && q == 3) { /* the int16 pair sums of 4 planes into int32 (header) */
        for (int g = 0; g < HG; g++) {
          const kpv scw = c < 2 ? sc_lo[g] : sc_hi[g];
          const kpv s0 = kpv_shufb(scw, kp_spread(2 * c % 4));
          const kpv s1 = kpv_shufb(scw, kp_spread(2 * c % 4 + 1));
          for (int i = 0; i < X; i++) {
            se[g][i] = kpv_add32(se[g][i], kpv_madd(te[g][i], s0));
            so[g][i] = kpv_add32(so[g][i], kpv_madd(to[g][i], s1));
            te[g][i] = to[g][i] = kpv_zero();
          }
        }
      }
#endif
    }
    for (int g = 0; g < HG; g++) {
      const kpv scw = c < 2 ? sc_lo[g] : sc_hi[g];
      const kpv s0 = kpv_shufb(scw, kp_spread(2 * c % 4)), s1 = kpv_shufb(scw, kp_spread(2 * c % 4 + 1));
      for (int i = 0; i < X; i++) {
#if KP5_SPLIT
        if (q5) /* 16 t_odd = 16 (nibbles' sum) + 256 (fifth bits' sum) */
          to[g][i] = kpv_add32(to[g][i], kpv_slli32(tb[g][i], 4));
#endif
#if defined(KP_VNNI)
        se[g][i] = kpv_add32(se[g][i], kpv_mul32(te[g][i], s0));
        so[g][i] = kpv_add32(so[g][i], kpv_mul32(to[g][i], s1));
#else
        se[g][i] = kpv_add32(se[g][i], kpv_madd(te[g][i], s0));
        so[g][i] = kpv_add32(so[g][i], kpv_madd(to[g][i], s1));
#endif
      }
    }
  }
  for (int g = 0; g < HG; g++)
    for (int i = 0; i < X; i++)
#if defined(KP_VNNI)
      /* so holds 16 S_odd (the high nibbles in place), or S_odd (q5_kp, no GFNI) */
      S[g][i] = kpv_add32(se[g][i], q5 && !KP5_SPLIT ? so[g][i] : kpv_srai32(so[g][i], 4));
#else
      S[g][i] = kpv_add32(se[g][i], so[g][i]);
#endif
}

/* M (exact int32, per lane) of lane group h against x's B quads bq (kp_bsplit) */
CKIR_INLINE kpv kp_mins(const uint8_t *blk, int h, const int32_t bq[4]) {
  const kpv low6 = kpv_set1_8(0x3F), nib = kpv_set1_8(0x0F);
  const uint8_t *gp = blk + KP_PLANES + 4 * KP_W * h;
  const kpv u1 = kpv_ld(gp + KP_PLANE), u2 = kpv_ld(gp + 2 * KP_PLANE);
  const kpv m_lo = kpv_and(u1, low6);
  const kpv m_hi = kpv_and(kpv_sel(nib, kpv_srli32(u2, 4), kpv_srli32(u1, 2)), low6);
  const kpv bl0 = kpv_set1(bq[0]), bl1 = kpv_set1(bq[1]);
  const kpv bh0 = kpv_set1(bq[2]), bh1 = kpv_set1(bq[3]);
#if defined(KP_VNNI)
  const kpv ml = kpv_dpbusd(kpv_dpbusd(kpv_zero(), m_lo, bl0), m_hi, bl1);
  const kpv mh = kpv_dpbusd(kpv_dpbusd(kpv_zero(), m_lo, bh0), m_hi, bh1);
  return kpv_add32(ml, kpv_slli32(mh, 7));
#else
  /* int16 pairs: at most 2 * 2 * 63 * 127 = 32004 */
  const kpv ml = kpv_add16(kpv_maddubs(m_lo, bl0), kpv_maddubs(m_hi, bl1));
  const kpv mh = kpv_add16(kpv_maddubs(m_lo, bh0), kpv_maddubs(m_hi, bh1));
  return kpv_add32(kpv_madd(ml, kpv_set1_16(1)), kpv_madd(mh, kpv_set1_16(128)));
#endif
}

/* the panel against X rows of x (ckir_kpanel.h's contract), HG lane groups a pass */
CKIR_INLINE void kp_core(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, const int X,
                         const int HG, const int q5, int64_t pfd, float *out) {
  kpf acc[KP_G][CKIR_KP_TX];
  for (int h = 0; h < KP_G; h++)
    for (int i = 0; i < X; i++) acc[h][i] = kpf_zero();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = panel + b * KP_BLOCK(q5);
    if (pfd)
      for (int o = 0; o < KP_BLOCK(q5); o += 64) __builtin_prefetch(blk + pfd + o, 0, 2);
    int32_t bq[CKIR_KP_TX][4];
    const int8_t *ab[CKIR_KP_TX];
    for (int i = 0; i < X; i++) {
      kp_bsplit(xs[i].bs + b * 16, bq[i]);
      ab[i] = xs[i].a + b * CKIR_QK_K;
    }
    for (int h0 = 0; h0 < KP_G; h0 += HG) {
      kpv S[KP_G][CKIR_KP_TX];
      kp_sums(blk, h0, HG, ab, X, q5, S);
      for (int g = 0; g < HG; g++) {
        const int h = h0 + g;
        const kpf d = kpf_ldh(blk + 2 * KP_W * h);
        const kpf dmin = kpf_ldh(blk + 2 * CKIR_PANEL + 2 * KP_W * h);
        for (int i = 0; i < X; i++) {
          const kpv M = kp_mins(blk, h, bq[i]);
          /* dx * (d * S - dmin * M), each product and the difference rounded */
          const kpf t = kpf_sub(kpf_mul(d, kpf_cvt(S[g][i])), kpf_mul(dmin, kpf_cvt(M)));
          acc[h][i] = kpf_add(acc[h][i], kpf_mul(kpf_set1(xs[i].dx[b]), t));
        }
      }
    }
  }
  for (int i = 0; i < X; i++)
    for (int h = 0; h < KP_G; h++) kpf_st(out + i * CKIR_PANEL + KP_W * h, acc[h][i]);
}

/* kp_core for the format (q5: q5_kp) with the X of the call, compile-time in each */
CKIR_INLINE void kp_core_x(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                           const int q5, int64_t pfd, float *out) {
  switch (X) {
    case 1: kp_core(panel, nb, xs, 1, KP_HG1, q5, pfd, out); break;
    case 2: kp_core(panel, nb, xs, 2, KP_HG2, q5, pfd, out); break;
    case 3: kp_core(panel, nb, xs, 3, KP_HG34, q5, pfd, out); break;
    default: kp_core(panel, nb, xs, 4, KP_HG34, q5, pfd, out); break;
  }
}

void ckir_internal_core_q4_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out) {
  kp_core_x(panel, nb, xs, X, 0, pfd, out);
}

void ckir_internal_core_q5_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out) {
  kp_core_x(panel, nb, xs, X, 1, pfd, out);
}
#else
void ckir_internal_core_q4_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out) {
  (void)pfd;
  ckir_internal_core_kp_portable(CKIR_KP_Q4, panel, nb, xs, X, out);
}

void ckir_internal_core_q5_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out) {
  (void)pfd;
  ckir_internal_core_kp_portable(CKIR_KP_Q5, panel, nb, xs, X, out);
}
#endif
