/* ckir runtime: the rotation of rope_f32 (rope.c) and of its backward
 * rope_bwd_f32 (backward_attention.c), defined once (private).
 *
 * HF "rotate_half" convention: pair i of a head is (x[i], x[i + D/2]), rotated
 * by angle = (float)pos * inv_freq(i), inv_freq = 1/powf(theta, (float)(2i)/(float)D),
 * both float32 as HF computes them; cos/sin come from libm (cosf/sinf: correct
 * range reduction for large positions).  `sign` is +1 for the forward rotation
 * and -1 for the backward one: the transpose of a rotation is the rotation by
 * the opposite angle, and negating sin is exact, so both directions use the
 * very same float32 angles.  The table for one token is built in chunks of
 * CKIR_ROPE_CHUNK frequencies on the stack and applied to every head of q and
 * k, so any even D works.  Include after ckir_internal.h.
 *
 * The table depends on the position, D, theta and the sign only, and every
 * layer of a model asks for the same positions: with D <= 2 * CKIR_ROPE_CHUNK
 * each thread keeps the tables of its last CKIR_ROPE_ROWS positions (slot
 * position % CKIR_ROPE_ROWS, keyed by all four), so a prefill's or decode
 * step's later layers reuse the first layer's cosf / sinf / powf values (the
 * same floats: results do not change).  A thread's cache is its own (TLS):
 * models run from several threads at once do not share it.
 */
#ifndef CKIR_ROPE_H
#define CKIR_ROPE_H

#define CKIR_ROPE_CHUNK 64

CKIR_INLINE float ckir_rope_inv_freq(int64_t i, int64_t D, float theta) {
  return 1.0f / powf(theta, (float)(2 * i) / (float)D);
}

/* the scalar twin: x1' = x1 c - x2 s, x2' = x2 c + x1 s with s = sign * sin */
static inline void ckir_rope_rotate_ref(float *q, float *k, int64_t T, int64_t H, int64_t KV,
                                        int64_t D, int64_t P, float theta, float sign) {
  const int64_t half = D / 2;
  for (int64_t t = 0; t < T; t++) {
    const float pos = (float)(P + t);
    for (int64_t i = 0; i < half; i++) {
      const float angle = pos * ckir_rope_inv_freq(i, D, theta);
      const float c = cosf(angle), s = sign * sinf(angle);
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

/* cos and sign * sin of the frequencies [i0, i0 + n) at position pos */
CKIR_INLINE void ckir_rope_table(int64_t pos, int64_t i0, int64_t n, int64_t D, float theta,
                                 float sign, float *c, float *s) {
  for (int64_t i = 0; i < n; i++) {
    const float angle = (float)pos * ckir_rope_inv_freq(i0 + i, D, theta);
    c[i] = cosf(angle);
    s[i] = sign * sinf(angle);
  }
}

#define CKIR_ROPE_ROWS 256
typedef struct {
  int64_t pos, D; /* D == 0: empty */
  float theta, sign;
} ckir_rope_key;
static _Thread_local ckir_rope_key ckir_rope_keys[CKIR_ROPE_ROWS];
static _Thread_local float ckir_rope_cs[CKIR_ROPE_ROWS][2][CKIR_ROPE_CHUNK];

/* this thread's table of position pos (D <= 2 * CKIR_ROPE_CHUNK): cs[0] the
 * cosines, cs[1] the signed sines */
static inline float (*ckir_rope_cached(int64_t pos, int64_t D, float theta,
                                       float sign))[CKIR_ROPE_CHUNK] {
  const int64_t slot = pos % CKIR_ROPE_ROWS;
  ckir_rope_key *key = &ckir_rope_keys[slot];
  float(*cs)[CKIR_ROPE_CHUNK] = ckir_rope_cs[slot];
  if (key->pos != pos || key->D != D || key->theta != theta || key->sign != sign) {
    ckir_rope_table(pos, 0, D / 2, D, theta, sign, cs[0], cs[1]);
    *key = (ckir_rope_key){pos, D, theta, sign};
  }
  return cs;
}

/* token t of a call: every head of q and k rotated */
CKIR_INLINE void ckir_rope_token(float *q, float *k, int64_t t, int64_t H, int64_t KV, int64_t D,
                                 int64_t P, float theta, float sign) {
  const int64_t half = D / 2;
  if (half <= CKIR_ROPE_CHUNK) {
    float(*cs)[CKIR_ROPE_CHUNK] = ckir_rope_cached(P + t, D, theta, sign);
    for (int64_t h = 0; h < H + KV; h++) {
      float *x = h < H ? q + (t * H + h) * D : k + (t * KV + h - H) * D;
      ckir_rope_apply(x, half, 0, half, cs[0], cs[1]);
    }
    return;
  }
  float c[CKIR_ROPE_CHUNK], s[CKIR_ROPE_CHUNK];
  for (int64_t i0 = 0; i0 < half; i0 += CKIR_ROPE_CHUNK) {
    const int64_t n = CKIR_MIN(CKIR_ROPE_CHUNK, half - i0);
    ckir_rope_table(P + t, i0, n, D, theta, sign, c, s);
    for (int64_t h = 0; h < H; h++) ckir_rope_apply(q + (t * H + h) * D, half, i0, n, c, s);
    for (int64_t h = 0; h < KV; h++) ckir_rope_apply(k + (t * KV + h) * D, half, i0, n, c, s);
  }
}

/* The fast path: OpenMP over tokens. */
static inline void ckir_rope_rotate(float *q, float *k, int64_t T, int64_t H, int64_t KV,
                                    int64_t D, int64_t P, float theta, float sign) {
  CKIR_FOR_STATIC(T * (H + KV) * D >= CKIR_PAR_MIN_WORK && T > 1, t, T,
                  ckir_rope_token(q, k, t, H, KV, D, P, theta, sign););
}

#endif /* CKIR_ROPE_H */
