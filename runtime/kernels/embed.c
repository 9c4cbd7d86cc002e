/* ckir runtime: token embedding, learned position embedding, KV-cache store. */
#include "ckir_internal.h"

/* ---- embed_f32 ---------------------------------------------------------- */

void ckir_ref_embed_f32(const int32_t *tokens, const float *table, float *out, int64_t T,
                        int64_t E) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t e = 0; e < E; e++) out[t * E + e] = table[(int64_t)tokens[t] * E + e];
}

void ckir_embed_f32(const int32_t *tokens, const float *table, float *out, int64_t T,
                    int64_t E) {
  /* A row copy is what every ISA path does best: memcpy is already vectorised. */
  for (int64_t t = 0; t < T; t++)
    memcpy(out + t * E, table + (int64_t)tokens[t] * E, (size_t)E * sizeof(float));
}

/* ---- pos_embed_add_f32 -------------------------------------------------- */

void ckir_ref_pos_embed_add_f32(const float *wpe, float *x, int64_t T, int64_t E, int64_t P) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t e = 0; e < E; e++) x[t * E + e] += wpe[(P + t) * E + e];
}

void ckir_pos_embed_add_f32(const float *wpe, float *x, int64_t T, int64_t E, int64_t P) {
  /* The rows [P, P+T) of wpe and x are both contiguous blocks of T*E floats. */
  ckir_add_f32(x, wpe + P * E, x, T * E);
}

/* ---- kv_store_f32 ------------------------------------------------------- */

void ckir_ref_kv_store_f32(const float *k, const float *v, float *kcache, float *vcache,
                           int64_t T, int64_t P, int64_t KVD) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < KVD; j++) {
      kcache[(P + t) * KVD + j] = k[t * KVD + j];
      vcache[(P + t) * KVD + j] = v[t * KVD + j];
    }
}

void ckir_kv_store_f32(const float *k, const float *v, float *kcache, float *vcache, int64_t T,
                       int64_t P, int64_t KVD) {
  size_t bytes = (size_t)(T * KVD) * sizeof(float);
  memmove(kcache + P * KVD, k, bytes);
  memmove(vcache + P * KVD, v, bytes);
}
