/* Generic model support: open weights.bin, allocate the state arena, run a
 * mode with argument checks, verify canaries.  Model-specific data comes from
 * the ckir_model_desc that every generated model.c defines. */
#define _GNU_SOURCE /* MAP_POPULATE */
#include "ckir_model.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void fill_canary(uint8_t *p) {
  uint32_t w = CKIR_CANARY_WORD;
  for (int i = 0; i < CKIR_CANARY_BYTES; i += 4) memcpy(p + i, &w, 4);
}

static int canary_ok(const uint8_t *p) {
  uint32_t w = CKIR_CANARY_WORD, v;
  for (int i = 0; i < CKIR_CANARY_BYTES; i += 4) {
    memcpy(&v, p + i, 4);
    if (v != w) return 0;
  }
  return 1;
}

static ckir_model *fail(ckir_model *m, int *err, int code) {
  if (err) *err = code;
  if (m) {
    if (m->mapping) munmap(m->mapping, m->mapping_bytes);
    free(m->state);
    free(m);
  }
  return NULL;
}

ckir_model *ckir_model_open_desc(const ckir_model_desc *d, const char *path, int *err) {
  ckir_model *m = calloc(1, sizeof *m);
  if (!m) return fail(NULL, err, CKIR_ERR_NOMEM);
  m->desc = d;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return fail(m, err, CKIR_ERR_IO);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return fail(m, err, CKIR_ERR_IO);
  }
  size_t want = (size_t)CKIR_WEIGHTS_HEADER_BYTES + (size_t)d->weights_bytes;
  if ((size_t)st.st_size != want) {
    close(fd);
    return fail(m, err, CKIR_ERR_FORMAT);
  }
  /* MAP_PRIVATE: read-only use in inference, copy-on-write if ever written.
   * MAP_POPULATE (Linux) reads the file in now, so the first token does not
   * pay a page fault per 4 KiB of weights. */
  int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
  flags |= MAP_POPULATE;
#endif
  void *map = mmap(NULL, want, PROT_READ | PROT_WRITE, flags, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return fail(m, err, CKIR_ERR_IO);
  m->mapping = map;
  m->mapping_bytes = want;
  const uint8_t *h = map;
  uint32_t version;
  uint64_t hash, bytes;
  memcpy(&version, h + 8, 4);
  memcpy(&hash, h + 16, 8);
  memcpy(&bytes, h + 24, 8);
  if (memcmp(h, CKIR_WEIGHTS_MAGIC, 8) != 0 || version != CKIR_WEIGHTS_VERSION ||
      bytes != (uint64_t)d->weights_bytes)
    return fail(m, err, CKIR_ERR_FORMAT);
  if (hash != d->layout_hash) return fail(m, err, CKIR_ERR_LAYOUT);
  m->weights = (uint8_t *)map + CKIR_WEIGHTS_HEADER_BYTES;
  size_t state_bytes = d->state_bytes > 0 ? (size_t)d->state_bytes : (size_t)d->align;
  size_t align = d->align < 64 ? 64 : (size_t)d->align;
  state_bytes = (state_bytes + align - 1) / align * align;
  m->state = aligned_alloc(align, state_bytes);
  if (!m->state) return fail(m, err, CKIR_ERR_NOMEM);
  memset(m->state, 0, state_bytes);
  for (int64_t i = 0; i < d->n_slots; i++) {
    const ckir_slot_desc *s = &d->slots[i];
    if (s->canary >= 0 && s->arena == 1) fill_canary(m->state + s->canary);
  }
  if (err) *err = CKIR_OK;
  return m;
}

int ckir_model_check_canaries(ckir_model *m) {
  const ckir_model_desc *d = m->desc;
  for (int64_t i = 0; i < d->n_slots; i++) {
    const ckir_slot_desc *s = &d->slots[i];
    if (s->canary < 0) continue;
    const uint8_t *base = s->arena == 0 ? m->weights : m->state;
    if (!canary_ok(base + s->canary)) {
      snprintf(m->error, sizeof m->error,
               "canary after slot '%s' (%s arena, offset %lld, size %lld) was overwritten",
               s->name, s->arena == 0 ? "weights" : "state", (long long)s->offset,
               (long long)s->size);
      return (int)i;
    }
  }
  return -1;
}

int ckir_model_run(ckir_model *m, const ckir_mode_desc *mode, const int32_t *tokens, int64_t n) {
  const ckir_model_desc *d = m->desc;
  if (!mode->run) {
    snprintf(m->error, sizeof m->error, "mode %s was not compiled into model %s", mode->name,
             d->name);
    return CKIR_ERR_MODE;
  }
  if (n < 1 || n > mode->tokens_rows || m->pos + n > d->max_context) {
    snprintf(m->error, sizeof m->error,
             "%s of %lld tokens at position %lld does not fit (max %lld per call, "
             "max_context %lld)",
             mode->name, (long long)n, (long long)m->pos, (long long)mode->tokens_rows,
             (long long)d->max_context);
    return CKIR_ERR_CONTEXT;
  }
  for (int64_t i = 0; i < n; i++) {
    if (tokens[i] < 0 || (mode->token_bound > 0 && tokens[i] >= mode->token_bound)) {
      snprintf(m->error, sizeof m->error, "token %d at index %lld is outside [0, %lld)",
               (int)tokens[i], (long long)i, (long long)mode->token_bound);
      return CKIR_ERR_TOKEN;
    }
  }
  memcpy(m->state + mode->tokens_offset, tokens, (size_t)n * sizeof(int32_t));
  int rc = mode->run(m, n);
  if (rc != CKIR_OK) return rc;
  m->pos += n;
  /* a one-row output of a many-row mode holds the last token's logits only */
  m->last_rows = mode->logits_rows < mode->tokens_rows ? mode->logits_rows : n;
  m->last_logits = mode->logits_offset;
  m->error[0] = 0;
  return CKIR_OK;
}

void ckir_model_close(ckir_model *m) {
  if (!m) return;
  if (m->mapping) munmap(m->mapping, m->mapping_bytes);
  free(m->state);
  free(m);
}
