/* ckir runtime: the rotation of rope_f32 (rope.c) and of its backward
 * rope_bwd_f32 (backward_attention.c), defined once (private).
 *
 * HF "rotate_half" convention over the first R dims of each head (R = D unless
 * the rotary embedding is partial; dims [R, D) pass through unchanged): pair i
 * of a head is (x[i], x[i + R/2]), rotated by angle = (float)pos * inv_freq(i)
 * and scaled by mscale (cos and sin both: HF's attention_scaling), float32 as
 * HF computes them; cos/sin come from libm (cosf/sinf: correct range reduction
 * for large positions).
 *
 * inv_freq(i) is one formula for every kind of RoPE scaling; the compiler
 * reduces a graph.rope's rope_type and its parameters to its coefficients
 * (passes/lowering/op_params.py), so C knows no scaling type:
 *
 *   b = 1 / powf(theta, (float)(2i) / (float)R)          (the unscaled frequency)
 *   m = clamp(ramp_w * b + ramp_i * i + ramp_0, 0, 1)     (1: keep b, 0: b / factor)
 *   inv_freq(i) = b * ((1 - m) / factor + m)              (just b when factor == 1)
 *
 * linear scaling is m = 0, llama3's smoothing a ramp over b (ramp_w), YaRN's a
 * ramp over the pair index (ramp_i).
 *
 * A table of per-pair divisors ext[R/2] (LongRoPE's factors; rope_ext_f32 and
 * rope_ext_bwd_f32, factor = 1, no ramp) replaces the scaling:
 *
 *   inv_freq(i) = 1 / (ext[i] * powf(theta, (float)(2i) / (float)R))
 *
 * `sign` is +1 for the forward rotation and -1 for the backward one: the
 * transpose of a (scaled) rotation is the same scaled rotation by the opposite
 * angle, and negating sin is exact, so both directions use the very same
 * float32 angles.  The table for one token is built in chunks of
 * CKIR_ROPE_CHUNK frequencies on the stack and applied to every head of q and
 * k, so any even R works.  Include after ckir_internal.h.
 *
 * The table depends on the position, the parameters and the sign only, and
 * every layer of a model asks for the same positions: with R <= 2 *
 * CKIR_ROPE_CHUNK each thread keeps the tables of its last CKIR_ROPE_ROWS
 * positions (slot position % CKIR_ROPE_ROWS, keyed by all of them), so a
 * prefill's or decode step's later layers reuse the first layer's cosf / sinf /
 * powf values (the same floats: results do not change).  A thread's cache is
 * its own (TLS): models run from several threads at once do not share it.
 */
#ifndef CKIR_ROPE_H
#define CKIR_ROPE_H

#define CKIR_ROPE_CHUNK 64

/* what a table depends on besides the position */
typedef struct {
  int64_t D, R; /* head dim, rotated dims (even, <= D); D == 0: an empty cache slot */
  float theta, factor, ramp_w, ramp_i, ramp_0, mscale, sign;
  const float *ext; /* per-pair divisors [R/2], or NULL */
} ckir_rope_cfg;

static inline ckir_rope_cfg ckir_rope_make_cfg(int64_t D, float theta, int64_t R, float factor,
                                               float ramp_w, float ramp_i, float ramp_0,
                                               float mscale, float sign) {
  return (ckir_rope_cfg){D, R, theta, factor, ramp_w, ramp_i, ramp_0, mscale, sign, NULL};
}

/* the configuration of rope_ext_f32 / rope_ext_bwd_f32: divisors ext[R/2] */
static inline ckir_rope_cfg ckir_rope_make_ext_cfg(int64_t D, float theta, int64_t R, float mscale,
                                                   const float *ext, float sign) {
  ckir_rope_cfg cfg = ckir_rope_make_cfg(D, theta, R, 1.0f, 0.0f, 0.0f, 0.0f, mscale, sign);
  cfg.ext = ext;
  return cfg;
}

/* the argument checks of rope_f32 and rope_bwd_f32 */
#define CKIR_ROPE_REQUIRE(D, R, P, theta, factor, mscale, name)                                  \
  CKIR_REQUIRE((R) >= 2 && (R) % 2 == 0 && (R) <= (D) && (P) >= 0 && (theta) > 0.0f &&          \
                   (factor) > 0.0f && (mscale) > 0.0f,                                          \
               name)

/* the argument checks of rope_ext_f32 and rope_ext_bwd_f32 */
static inline void ckir_rope_require_ext(int64_t D, int64_t R, int64_t P, float theta,
                                         float mscale, const float *ext, const char *name) {
  CKIR_ROPE_REQUIRE(D, R, P, theta, 1.0f, mscale, name);
  CKIR_REQUIRE(ext != NULL, name);
  for (int64_t i = 0; i < R / 2; i++) CKIR_REQUIRE(ext[i] > 0.0f, name);
}

/* equal scalars and both with or both without a divisor table (the cache compares
 * the tables' contents: ckir_rope_cached) */
static inline int ckir_rope_cfg_eq(const ckir_rope_cfg *a, const ckir_rope_cfg *b) {
  return (a->ext == NULL) == (b->ext == NULL) && a->D == b->D && a->R == b->R &&
         a->theta == b->theta && a->factor == b->factor &&
         a->ramp_w == b->ramp_w && a->ramp_i == b->ramp_i && a->ramp_0 == b->ramp_0 &&
         a->mscale == b->mscale && a->sign == b->sign;
}

CKIR_INLINE float ckir_rope_inv_freq(int64_t i, const ckir_rope_cfg *cfg) {
  if (cfg->ext != NULL)
    return 1.0f / (cfg->ext[i] * powf(cfg->theta, (float)(2 * i) / (float)cfg->R));
  const float b = 1.0f / powf(cfg->theta, (float)(2 * i) / (float)cfg->R);
  if (cfg->factor == 1.0f) return b;
  float m = cfg->ramp_w * b + cfg->ramp_i * (float)i + cfg->ramp_0;
  m = m < 0.0f ? 0.0f : (m > 1.0f ? 1.0f : m);
  return b * ((1.0f - m) / cfg->factor + m);
}

/* the scalar twin: x1' = x1 c - x2 s, x2' = x2 c + x1 s with c = mscale cos,
 * s = sign mscale sin */
static inline void ckir_rope_rotate_ref(float *q, float *k, int64_t T, int64_t H, int64_t KV,
                                        int64_t P, const ckir_rope_cfg *cfg) {
  const int64_t D = cfg->D, half = cfg->R / 2;
  for (int64_t t = 0; t < T; t++) {
    const float pos = (float)(P + t);
    for (int64_t i = 0; i < half; i++) {
      const float angle = pos * ckir_rope_inv_freq(i, cfg);
      const float c = cfg->mscale * cosf(angle), s = cfg->sign * (cfg->mscale * sinf(angle));
      for (int64_t h = 0; h < H + KV; h++) {
        float *x = h < H ? q + t * H * D + h * D : k + t * KV * D + (h - H) * D;
        const float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

/* Rotate one head's pairs [i0, i0 + n) with the tables c, s (n <= CKIR_ROPE_CHUNK). */
CKIR_INLINE void ckir_rope_apply(float *x, int64_t half, int64_t i0, int64_t n, const float *c,
                                 const float *s) {
  float *a = x + i0, *b = x + half + i0;
  int64_t i = 0;
  CKV_LOOP(i, n, ln, {
    const ckv x1 = ckv_load_n(a + i, ln), x2 = ckv_load_n(b + i, ln);
    const ckv vc = ckv_load_n(c + i, ln), vs = ckv_load_n(s + i, ln);
    ckv_store_n(a + i, ln, ckv_fms(x1, vc, ckv_mul(x2, vs)));
    ckv_store_n(b + i, ln, ckv_fma(x2, vc, ckv_mul(x1, vs)));
  });
}

/* mscale cos and sign mscale sin of the frequencies [i0, i0 + n) at position pos */
CKIR_INLINE void ckir_rope_table(int64_t pos, int64_t i0, int64_t n, const ckir_rope_cfg *cfg,
                                 float *c, float *s) {
  for (int64_t i = 0; i < n; i++) {
    const float angle = (float)pos * ckir_rope_inv_freq(i0 + i, cfg);
    c[i] = cfg->mscale * cosf(angle);
    s[i] = cfg->sign * (cfg->mscale * sinf(angle));
  }
}

#define CKIR_ROPE_ROWS 256
typedef struct {
  int64_t pos;
  ckir_rope_cfg cfg;            /* cfg.D == 0: empty; cfg.ext points at ext below */
  float ext[CKIR_ROPE_CHUNK];   /* a copy of the caller's divisors (cfg.ext != NULL) */
} ckir_rope_key;
static _Thread_local ckir_rope_key ckir_rope_keys[CKIR_ROPE_ROWS];
static _Thread_local float ckir_rope_cs[CKIR_ROPE_ROWS][2][CKIR_ROPE_CHUNK];

/* this thread's table of position pos (R <= 2 * CKIR_ROPE_CHUNK): cs[0] the
 * (scaled) cosines, cs[1] the signed (scaled) sines */
static inline float (*ckir_rope_cached(int64_t pos, const ckir_rope_cfg *cfg))[CKIR_ROPE_CHUNK] {
  const int64_t slot = pos % CKIR_ROPE_ROWS;
  ckir_rope_key *key = &ckir_rope_keys[slot];
  float(*cs)[CKIR_ROPE_CHUNK] = ckir_rope_cs[slot];
  const size_t ext_bytes = (size_t)(cfg->R / 2) * sizeof(float);
  if (key->pos != pos || !ckir_rope_cfg_eq(&key->cfg, cfg) ||
      (cfg->ext != NULL && memcmp(key->ext, cfg->ext, ext_bytes) != 0)) {
    ckir_rope_table(pos, 0, cfg->R / 2, cfg, cs[0], cs[1]);
    key->pos = pos;
    key->cfg = *cfg;
    if (cfg->ext != NULL) {
      memcpy(key->ext, cfg->ext, ext_bytes);
      key->cfg.ext = key->ext;
    }
  }
  return cs;
}

/* token t of a call: every head of q and k rotated */
CKIR_INLINE void ckir_rope_token(float *q, float *k, int64_t t, int64_t H, int64_t KV, int64_t P,
                                 const ckir_rope_cfg *cfg) {
  const int64_t D = cfg->D, half = cfg->R / 2;
  if (half <= CKIR_ROPE_CHUNK) {
    float(*cs)[CKIR_ROPE_CHUNK] = ckir_rope_cached(P + t, cfg);
    for (int64_t h = 0; h < H + KV; h++) {
      float *x = h < H ? q + (t * H + h) * D : k + (t * KV + h - H) * D;
      ckir_rope_apply(x, half, 0, half, cs[0], cs[1]);
    }
    return;
  }
  float c[CKIR_ROPE_CHUNK], s[CKIR_ROPE_CHUNK];
  for (int64_t i0 = 0; i0 < half; i0 += CKIR_ROPE_CHUNK) {
    const int64_t n = CKIR_MIN(CKIR_ROPE_CHUNK, half - i0);
    ckir_rope_table(P + t, i0, n, cfg, c, s);
    for (int64_t h = 0; h < H; h++) ckir_rope_apply(q + (t * H + h) * D, half, i0, n, c, s);
    for (int64_t h = 0; h < KV; h++) ckir_rope_apply(k + (t * KV + h) * D, half, i0, n, c, s);
  }
}

/* The fast path: OpenMP over tokens. */
static inline void ckir_rope_rotate(float *q, float *k, int64_t T, int64_t H, int64_t KV,
                                    int64_t P, const ckir_rope_cfg *cfg) {
  CKIR_FOR_STATIC(T * (H + KV) * cfg->D >= CKIR_PAR_MIN_WORK && T > 1, t, T,
                  ckir_rope_token(q, k, t, H, KV, P, cfg););
}

#endif /* CKIR_ROPE_H */
