/* ckir runtime: the Q8_0 KV cache's store (compile option --kv-dtype q8_0).
 *
 * kv_store_q8_0 quantizes the T new K and V rows (KVD values each: KVD / D
 * heads of head_dim D) into cache rows P .. P + T - 1.  Each head's D values
 * are ceil(D / 32) Q8_0 blocks (34 bytes: f16 d, int8 q[32]; value = d * q),
 * the last one zero-padded where D % 32 != 0 (head_dim 40: two blocks, the
 * second holding 8 values and 24 zeros), so a cache row is KVD / D * DB
 * blocks, DB = ceil(D / 32) (a parameter, checked: the registry's extents
 * count the padding through it).  Each block is the format of ckir's Q8_0 weights and of
 * ckir.quant.quantize_q8_0, bit for bit: d = max|x| / 127 in fp32, stored
 * rounded to nearest even as f16; q = round-half-away(x * (1 / d)) with the
 * fp32 d (0 for an all-zero block).  One row per decode step: a few hundred
 * values, so one scalar body serves every ISA (the compiler vectorises the
 * max and the products).  The attention kernels that read the blocks are
 * attention_q8_0 (kernels/attention.c). */
#include "ckir_internal.h"
#include "ckir_quant.h"

/* fp32 -> IEEE half bits, round to nearest even (overflow to infinity) */
static uint16_t kvq_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
  if (ax >= 0x477FF000u) /* rounds to >= 65520: infinity */
    return (uint16_t)(sign | 0x7C00u);
  if (ax < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
    if (ax < 0x33000000u) return (uint16_t)sign; /* below 2^-25: rounds to zero */
    const uint32_t e = ax >> 23, man = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e; /* 14..24: value = man * 2^(e - 150) */
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((ax >> 13) - (112u << 10)); /* rebias the exponent 127 -> 15 */
  const uint32_t rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

/* one head's D values of x into ceil(D / 32) Q8_0 blocks at dst, the last
 * block's missing values zeros */
static void kvq_quantize_head(const float *x, int64_t D, uint8_t *dst) {
  for (int64_t b = 0; b * CKIR_QK < D; b++) {
    float xb[CKIR_QK];
    const int64_t n = CKIR_MIN(CKIR_QK, D - b * CKIR_QK);
    for (int j = 0; j < CKIR_QK; j++) xb[j] = j < n ? x[b * CKIR_QK + j] : 0.0f;
    uint8_t *o = dst + b * CKIR_Q8_0_BYTES;
    float amax = 0.0f;
    for (int j = 0; j < CKIR_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = kvq_f32_to_f16(d);
    memcpy(o, &h, sizeof h);
    int8_t *q = (int8_t *)(o + 2);
    for (int j = 0; j < CKIR_QK; j++) q[j] = (int8_t)roundf(xb[j] * id);
  }
}

static void kvq_store(const float *k, const float *v, uint8_t *kcache, uint8_t *vcache, int64_t T,
                      int64_t P, int64_t KVD, int64_t D) {
  const int64_t head = (D + CKIR_QK - 1) / CKIR_QK * CKIR_Q8_0_BYTES, KV = KVD / D;
  const int64_t row = KV * head;
  for (int64_t t = 0; t < T; t++)
    for (int64_t g = 0; g < KV; g++) {
      kvq_quantize_head(k + t * KVD + g * D, D, kcache + (P + t) * row + g * head);
      kvq_quantize_head(v + t * KVD + g * D, D, vcache + (P + t) * row + g * head);
    }
}

void ckir_kv_store_q8_0(const float *k, const float *v, uint8_t *kcache, uint8_t *vcache,
                        int64_t T, int64_t P, int64_t KVD, int64_t D, int64_t DB) {
  CKIR_REQUIRE(T >= 1 && P >= 0 && D >= 1 && KVD >= D && KVD % D == 0 &&
                   DB == (D + CKIR_QK - 1) / CKIR_QK,
               "kv_store_q8_0");
  kvq_store(k, v, kcache, vcache, T, P, KVD, D);
}

void ckir_ref_kv_store_q8_0(const float *k, const float *v, uint8_t *kcache, uint8_t *vcache,
                            int64_t T, int64_t P, int64_t KVD, int64_t D, int64_t DB) {
  (void)DB;
  kvq_store(k, v, kcache, vcache, T, P, KVD, D);
}
