/* Generic model support: open weights.bin, allocate the state arena, run a
 * mode with argument checks, verify canaries.  Model-specific data comes from
 * the ckir_model_desc that every generated model.c defines. */
#define _GNU_SOURCE /* MADV_HUGEPAGE, MAP_ANONYMOUS */
#include "ckir_model.h"
#include "ckir_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <math.h>
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

/* Both arenas live in anonymous memory with transparent huge pages requested
 * (decision 22 in docs/architecture.md): a decode step streams every weight
 * once, and with 4 KiB pages that stream crosses a page, and often a TLB
 * miss, every 4 KiB (SmolLM-135M decode 1.09x the file mapping's rate, 1.2x
 * anonymous 4 KiB pages'; Zen 4, docs/performance-log.md). The kernel
 * falls back to small pages where it has no huge page to give; arenas below
 * CKIR_HUGE_MIN keep small pages (the TLB covers them, and a huge page would
 * round a tiny arena up to 2 MiB of memory). */
#define CKIR_HUGE_PAGE ((size_t)2 << 20)
#define CKIR_HUGE_MIN (4 * CKIR_HUGE_PAGE)

/* `bytes` of zeroed anonymous memory, aligned to a huge page; the mapping to
 * unmap is [result, result + *mapped). */
static uint8_t *arena_alloc(size_t bytes, size_t *mapped) {
  if (bytes == 0) bytes = 1;
  const size_t size = (bytes + CKIR_HUGE_PAGE - 1) & ~(CKIR_HUGE_PAGE - 1);
  uint8_t *r = mmap(NULL, size + CKIR_HUGE_PAGE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED) return NULL;
  uint8_t *at =
      (uint8_t *)(((uintptr_t)r + CKIR_HUGE_PAGE - 1) & ~(uintptr_t)(CKIR_HUGE_PAGE - 1));
  if (at > r) munmap(r, (size_t)(at - r)); /* the unaligned head and tail */
  if (at + size < r + size + CKIR_HUGE_PAGE)
    munmap(at + size, (size_t)(r + size + CKIR_HUGE_PAGE - (at + size)));
#ifdef MADV_HUGEPAGE
  if (size >= CKIR_HUGE_MIN) (void)madvise(at, size, MADV_HUGEPAGE); /* advice only */
#endif
  *mapped = size;
  return at;
}

/* read all of fd's `bytes` into dst; 0 on success */
static int read_all(int fd, uint8_t *dst, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = read(fd, dst + done, bytes - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

static ckir_model *fail(ckir_model *m, int *err, int code) {
  if (err) *err = code;
  ckir_model_close(m); /* what was mapped so far */
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
  /* the header first: a weights.bin of another build is refused by its fingerprint
   * (CKIR_ERR_LAYOUT) whatever its size, before anything is allocated */
  uint8_t h[CKIR_WEIGHTS_HEADER_BYTES];
  if (read_all(fd, h, sizeof h) != 0) {
    close(fd);
    return fail(m, err, (size_t)st.st_size < sizeof h ? CKIR_ERR_FORMAT : CKIR_ERR_IO);
  }
  uint32_t version;
  uint64_t hash, bytes;
  memcpy(&version, h + 8, 4);
  memcpy(&hash, h + 16, 8);
  memcpy(&bytes, h + 24, 8);
  int bad = 0;
  if (memcmp(h, CKIR_WEIGHTS_MAGIC, 8) != 0 || version != CKIR_WEIGHTS_VERSION)
    bad = CKIR_ERR_FORMAT;
  else if (hash != d->fingerprint)
    bad = CKIR_ERR_LAYOUT;
  else if (bytes != (uint64_t)d->weights_bytes ||
           (size_t)st.st_size != (size_t)CKIR_WEIGHTS_HEADER_BYTES + (size_t)d->weights_bytes)
    bad = CKIR_ERR_FORMAT;
  if (bad) {
    close(fd);
    return fail(m, err, bad);
  }
  /* the whole file is read now, so the first token pays no page faults (and
   * training writes this copy, never the file) */
  m->weights = arena_alloc((size_t)d->weights_bytes, &m->weights_mapped);
  const int rd = m->weights ? read_all(fd, m->weights, (size_t)d->weights_bytes) : 0;
  close(fd);
  if (!m->weights) return fail(m, err, CKIR_ERR_NOMEM);
  if (rd != 0) return fail(m, err, CKIR_ERR_IO);
  size_t state_bytes = d->state_bytes > 0 ? (size_t)d->state_bytes : (size_t)d->align;
  size_t align = d->align < 64 ? 64 : (size_t)d->align;
  state_bytes = (state_bytes + align - 1) / align * align;
  if (align > CKIR_HUGE_PAGE) return fail(m, err, CKIR_ERR_FORMAT);
  m->state = arena_alloc(state_bytes, &m->state_mapped);
  if (!m->state) return fail(m, err, CKIR_ERR_NOMEM);
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

/* The checks of a step of n tokens and the copy of the tokens into the mode's io buffer. */
static int step_begin(ckir_model *m, const ckir_mode_desc *mode, const int32_t *tokens, int64_t n) {
  const ckir_model_desc *d = m->desc;
  m->phase_mode = NULL; /* a new step ends any step run phase by phase */
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
  /* tokens may already be in place (ckir_<mode>_in_arena: written through the manifest) */
  uint8_t *dst = m->state + mode->tokens_offset;
  if ((const uint8_t *)tokens != dst) memcpy(dst, tokens, (size_t)n * sizeof(int32_t));
  return CKIR_OK;
}

/* Runs fn (a whole step or one phase of it) with the model's int8-prefill choice. */
static int step_run(ckir_model *m, ckir_mode_fn fn, int64_t n) {
  const int fp32_x = ckir_runtime_qp_fp32_x(m->fp32_x); /* this thread, for this call */
  int rc = fn(m, n);
  ckir_runtime_qp_fp32_x(fp32_x);
  return rc;
}

/* After the last call of a step: the tokens are in the KV cache, the logits in place. */
static void step_end(ckir_model *m, const ckir_mode_desc *mode, int64_t n) {
  m->pos += n;
  /* a one-row output of a many-row mode holds the last token's logits only */
  m->last_rows = mode->logits_rows < mode->tokens_rows ? mode->logits_rows : n;
  m->last_logits = mode->logits_offset;
  m->error[0] = 0;
}

int ckir_model_run(ckir_model *m, const ckir_mode_desc *mode, const int32_t *tokens, int64_t n) {
  int rc = step_begin(m, mode, tokens, n);
  if (rc != CKIR_OK) return rc;
  rc = step_run(m, mode->run, n);
  if (rc != CKIR_OK) return rc;
  step_end(m, mode, n);
  return CKIR_OK;
}

int ckir_model_phase_begin(ckir_model *m, const ckir_mode_desc *mode, const int32_t *tokens,
                           int64_t n, ckir_mode_fn prologue) {
  int rc = step_begin(m, mode, tokens, n);
  if (rc == CKIR_OK && prologue) rc = step_run(m, prologue, n);
  if (rc != CKIR_OK) return rc;
  m->phase_mode = mode;
  m->phase_rows = n;
  m->phase_next = 0;
  m->error[0] = 0;
  return CKIR_OK;
}

/* The step begun by ckir_<mode>_prologue is this mode's, and `what` may run now. */
static int phase_check(ckir_model *m, const ckir_mode_desc *mode, const char *what,
                       int64_t layer, int64_t expected) {
  if (m->phase_mode != mode) {
    snprintf(m->error, sizeof m->error,
             "%s %s: no %s step is running (call ckir_%s_prologue first)", mode->name, what,
             mode->name, mode->name);
    return CKIR_ERR_ARG;
  }
  if (layer != expected) {
    snprintf(m->error, sizeof m->error, "%s %s: the next phase is %s %lld", mode->name, what,
             expected < m->desc->n_layers ? "layer" : "the epilogue, after layer",
             (long long)(expected < m->desc->n_layers ? expected : expected - 1));
    return CKIR_ERR_ARG;
  }
  return CKIR_OK;
}

int ckir_model_phase_layer(ckir_model *m, const ckir_mode_desc *mode, int64_t i,
                           const ckir_mode_fn *layers) {
  char what[48];
  snprintf(what, sizeof what, "layer %lld", (long long)i);
  if (i < 0 || i >= m->desc->n_layers) {
    snprintf(m->error, sizeof m->error, "%s %s: the model has layers 0 to %lld", mode->name,
             what, (long long)m->desc->n_layers - 1);
    return CKIR_ERR_ARG;
  }
  int rc = phase_check(m, mode, what, i, m->phase_next);
  if (rc == CKIR_OK) rc = step_run(m, layers[i], m->phase_rows);
  if (rc != CKIR_OK) return rc;
  m->phase_next = i + 1;
  return CKIR_OK;
}

int ckir_model_phase_end(ckir_model *m, const ckir_mode_desc *mode, ckir_mode_fn epilogue) {
  int rc = phase_check(m, mode, "epilogue", m->desc->n_layers, m->phase_next);
  if (rc == CKIR_OK && epilogue) rc = step_run(m, epilogue, m->phase_rows);
  if (rc != CKIR_OK) return rc;
  m->phase_mode = NULL;
  step_end(m, mode, m->phase_rows);
  return CKIR_OK;
}

int ckir_model_set_int8_prefill(ckir_model *m, int on) {
  m->fp32_x = !on;
  return on && ckir_runtime_qp_int8_gemm() != 0;
}

int64_t ckir_model_copy_f32(const ckir_model *m, int arena, int64_t offset, int64_t n,
                            float *dst) {
  const int64_t size = arena == 0 ? m->desc->weights_bytes : m->desc->state_bytes;
  if ((arena != 0 && arena != 1) || offset < 0 || n < 0 ||
      n > (size - offset) / (int64_t)sizeof(float) || (n > 0 && !dst))
    return -1;
  const float *src = (const float *)((arena == 0 ? m->weights : m->state) + offset);
  int64_t bad = 0;
  /* one pass: the copy and the test of the exponent bits (all ones: Inf or NaN),
   * split over the threads (the destination's first touch, too) */
#pragma omp parallel for schedule(static) reduction(+ : bad) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, src + i, sizeof u);
    memcpy(dst + i, &u, sizeof u);
    bad += (u & 0x7F800000u) == 0x7F800000u;
  }
  return bad;
}

int64_t ckir_model_copy_logits(const ckir_model *m, float *dst) {
  return ckir_model_copy_f32(m, 1, m->last_logits, m->last_rows * m->desc->vocab, dst);
}

static int no_training(ckir_model *m) {
  snprintf(m->error, sizeof m->error,
           "model %s was not compiled for training (compile with --modes ...,backward)",
           m->desc->name);
  return CKIR_ERR_MODE;
}

static int check_ids(ckir_model *m, const char *what, const int32_t *ids, int64_t n,
                     int64_t bound) {
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || (bound > 0 && ids[i] >= bound)) {
      snprintf(m->error, sizeof m->error, "%s id %d at index %lld is outside [0, %lld)", what,
               (int)ids[i], (long long)i, (long long)bound);
      return CKIR_ERR_TOKEN;
    }
  }
  return CKIR_OK;
}

/* The checks of a training step of n tokens and the copy of tokens and targets into
 * their io buffers (skipped where they are in place already). */
static int train_begin(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t n) {
  const ckir_train_desc *t = &m->desc->train;
  m->phase_mode = NULL; /* its activations may share slots with a step run phase by phase */
  if (!t->backward) return no_training(m);
  if (n < 1 || n > t->rows) {
    snprintf(m->error, sizeof m->error,
             "a training sequence of %lld tokens does not fit (1 to %lld tokens)", (long long)n,
             (long long)t->rows);
    return CKIR_ERR_CONTEXT;
  }
  int rc = check_ids(m, "token", tokens, n, t->token_bound);
  if (rc == CKIR_OK) rc = check_ids(m, "target", targets, n, t->token_bound);
  if (rc != CKIR_OK) return rc;
  uint8_t *tok = m->state + t->tokens_offset, *tgt = m->state + t->targets_offset;
  if ((const uint8_t *)tokens != tok) memcpy(tok, tokens, (size_t)n * sizeof(int32_t));
  if ((const uint8_t *)targets != tgt) memcpy(tgt, targets, (size_t)n * sizeof(int32_t));
  return CKIR_OK;
}

/* After the last phase of a training step: the loss, checked finite. */
static int train_end(ckir_model *m, float *loss) {
  float value;
  memcpy(&value, m->state + m->desc->train.loss_offset, sizeof value);
  if (loss) *loss = value;
  if (!isfinite(value)) {
    snprintf(m->error, sizeof m->error, "the loss is %s at step %lld", isnan(value) ? "NaN" : "infinite",
             (long long)(m->step + 1));
    return CKIR_ERR_NONFINITE;
  }
  m->error[0] = 0;
  return CKIR_OK;
}

int ckir_model_backward(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t n,
                        float *loss) {
  int rc = train_begin(m, tokens, targets, n);
  if (rc != CKIR_OK) return rc;
  rc = m->desc->train.backward(m, n);
  if (rc != CKIR_OK) return rc;
  return train_end(m, loss);
}

/* The marker of a training step run phase by phase (m->phase_mode). */
static const ckir_mode_desc train_phases = {.name = "backward"};

/* What stage s of a training step run phase by phase is, in words ("layer 2", "grad
 * epilogue", ...): 0 prologue, 1..L layers, L+1 epilogue, L+2 grad epilogue, L+3..2L+2
 * grad layers L-1..0, 2L+3 grad prologue. */
static void stage_name(char *buf, size_t size, int64_t s, int64_t layers) {
  if (s <= 0) snprintf(buf, size, "prologue");
  else if (s <= layers) snprintf(buf, size, "layer %lld", (long long)(s - 1));
  else if (s == layers + 1) snprintf(buf, size, "epilogue");
  else if (s == layers + 2) snprintf(buf, size, "grad epilogue");
  else if (s <= 2 * layers + 2) snprintf(buf, size, "grad layer %lld", (long long)(2 * layers + 2 - s));
  else snprintf(buf, size, "grad prologue");
}

int ckir_model_train_phase_begin(ckir_model *m, const int32_t *tokens, const int32_t *targets,
                                 int64_t n, const ckir_mode_fn *stages) {
  int rc = train_begin(m, tokens, targets, n);
  if (rc == CKIR_OK && stages[0]) rc = step_run(m, stages[0], n);
  if (rc != CKIR_OK) return rc;
  m->phase_mode = &train_phases;
  m->phase_rows = n;
  m->phase_next = 1;
  m->error[0] = 0;
  return CKIR_OK;
}

int ckir_model_train_phase(ckir_model *m, int kind, int64_t i, const ckir_mode_fn *stages,
                           float *loss) {
  const int64_t layers = m->desc->n_layers, last = 2 * layers + 3;
  int64_t stage = kind == CKIR_PHASE_LAYER        ? 1 + i
                  : kind == CKIR_PHASE_EPILOGUE   ? layers + 1
                  : kind == CKIR_PHASE_GRAD_EPILOGUE ? layers + 2
                  : kind == CKIR_PHASE_GRAD_LAYER ? 2 * layers + 2 - i
                                                  : last;
  char what[48], next[48];
  stage_name(what, sizeof what, stage, layers);
  if ((kind == CKIR_PHASE_LAYER || kind == CKIR_PHASE_GRAD_LAYER) && (i < 0 || i >= layers)) {
    snprintf(m->error, sizeof m->error, "backward %slayer %lld: the model has layers 0 to %lld",
             kind == CKIR_PHASE_GRAD_LAYER ? "grad " : "", (long long)i, (long long)layers - 1);
    return CKIR_ERR_ARG;
  }
  if (m->phase_mode != &train_phases) {
    snprintf(m->error, sizeof m->error,
             "backward %s: no backward step is running (call ckir_backward_prologue first)",
             what);
    return CKIR_ERR_ARG;
  }
  if (stage != m->phase_next) {
    stage_name(next, sizeof next, m->phase_next, layers);
    snprintf(m->error, sizeof m->error, "backward %s: the next phase is %s", what, next);
    return CKIR_ERR_ARG;
  }
  int rc = stages[stage] ? step_run(m, stages[stage], m->phase_rows) : CKIR_OK;
  if (rc != CKIR_OK) return rc;
  m->phase_next = stage + 1;
  if (stage == last) m->phase_mode = NULL; /* the grad prologue ends the step */
  if (stage == layers + 1 || stage == last) return train_end(m, loss); /* the loss is in */
  m->error[0] = 0;
  return CKIR_OK;
}

int ckir_model_optimize(ckir_model *m, float lr) {
  const ckir_train_desc *t = &m->desc->train;
  if (!t->optimize) return no_training(m);
  if (!(lr > 0.0f) || !isfinite(lr)) {
    snprintf(m->error, sizeof m->error, "the learning rate must be a finite number > 0, got %g",
             (double)lr);
    return CKIR_ERR_ARG;
  }
  m->phase_mode = NULL; /* ends a step run phase by phase */
  m->lr = lr;
  m->step += 1; /* AdamW's step is 1-based */
  int rc = t->optimize(m, 0);
  float sumsq;
  memcpy(&sumsq, m->state + t->sumsq_offset, sizeof sumsq);
  if (rc == CKIR_OK && !isfinite(sumsq)) {
    /* clip_coef is NaN, and adamw_f32 leaves every weight and moment alone */
    snprintf(m->error, sizeof m->error, "the gradient norm is not finite at step %lld; weights unchanged",
             (long long)m->step);
    rc = CKIR_ERR_NONFINITE;
  }
  if (rc != CKIR_OK) {
    m->step -= 1;
    return rc;
  }
  m->pos = 0; /* the KV cache holds keys and values of the old weights */
  m->last_rows = 0;
  m->error[0] = 0;
  return CKIR_OK;
}

void ckir_model_close(ckir_model *m) {
  if (!m) return;
  if (m->weights) munmap(m->weights, m->weights_mapped);
  if (m->state) munmap(m->state, m->state_mapped);
  free(m);
}
