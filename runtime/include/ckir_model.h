/* ckir generated-model ABI: what every generated model.c exports.
 *
 * A build folder holds model.h (offsets), model.c (one function per mode),
 * weights.bin (a header + the weights arena) and a shared library with the
 * runtime kernels.  All entry points are reentrant: the model handle holds the
 * two arena base pointers (weights, state); nothing is global.
 */
#ifndef CKIR_MODEL_H
#define CKIR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  CKIR_OK = 0,
  CKIR_ERR_TOKEN = 1,     /* a token id >= vocabulary size (or < 0) */
  CKIR_ERR_CONTEXT = 2,   /* the call would run past max_context (or n < 1) */
  CKIR_ERR_CANARY = 3,    /* debug build: a canary was overwritten */
  CKIR_ERR_IO = 4,        /* weights.bin cannot be opened or mapped */
  CKIR_ERR_FORMAT = 5,    /* weights.bin has a bad magic, version or size */
  CKIR_ERR_LAYOUT = 6,    /* weights.bin was written for another build (fingerprint) */
  CKIR_ERR_NOMEM = 7,     /* the state arena cannot be allocated */
  CKIR_ERR_MODE = 8,      /* this mode was not compiled into the model */
  CKIR_ERR_NONFINITE = 9, /* training: the loss or the gradient norm is NaN or infinite */
  CKIR_ERR_ARG = 10,      /* a bad argument (learning rate <= 0 or NaN, ...) */
  CKIR_ERR_ISA = 11       /* compiled for instructions this CPU lacks (ckir_isa_missing) */
};

/* Functions that must run on any CPU of the architecture, whatever -march
 * the library was built with: ckir_open and the instruction check it calls
 * first (GCC; elsewhere the attribute is left out). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CKIR_BASELINE __attribute__((target("arch=x86-64")))
#else
#define CKIR_BASELINE
#endif

/* The instruction-set extensions this library was compiled for (the
 * compiler's -march) that the CPU running it lacks: their count, and their
 * /proc/cpuinfo names, space separated, in buf (truncated to size; buf may be
 * NULL).  ckir_open refuses with CKIR_ERR_ISA when the count is not 0, before
 * any instruction of the library's -march runs.  0 on other architectures. */
int ckir_isa_missing(char *buf, size_t size);

#define CKIR_WEIGHTS_MAGIC "CKIRWTS1"
#define CKIR_WEIGHTS_VERSION 1u
/* weights.bin: a 4096-byte header, then the weights arena (page aligned for mmap). */
#define CKIR_WEIGHTS_HEADER_BYTES 4096
#define CKIR_CANARY_BYTES 64
#define CKIR_CANARY_WORD 0xDEADBEEFu

/* One slot of the layout plan, for canary checks and debugging tools. */
typedef struct ckir_slot_desc {
  const char *name;
  int arena;        /* 0 = weights, 1 = state */
  int64_t offset;
  int64_t size;
  int64_t canary;   /* byte offset of the guard, or -1 */
} ckir_slot_desc;

typedef struct ckir_model ckir_model;

/* Mode function generated in model.c: runs every call of one program. */
typedef int (*ckir_mode_fn)(ckir_model *m, int64_t T);

typedef struct ckir_mode_desc {
  const char *name;
  ckir_mode_fn run;        /* NULL when the mode was not compiled */
  int64_t tokens_offset;   /* io buffer that receives the tokens (state arena) */
  int64_t tokens_rows;     /* rows of that buffer (max tokens per call) */
  int64_t logits_offset;   /* io buffer of the output (state arena) */
  int64_t logits_rows;     /* rows of that buffer: tokens_rows (one per token) or 1 (the
                              last token's only: prefill compiled with logits=last) */
  int64_t token_bound;     /* tokens must be < this (embedding rows), 0 = unchecked */
} ckir_mode_desc;

/* One trained weight: where it, its gradient and its AdamW moments live. */
typedef struct ckir_param_desc {
  const char *name;        /* the weight's buffer, e.g. "w.layers.0.attn.wq" */
  int64_t weight_offset;   /* weights arena */
  int64_t grad_offset;     /* state arena: dloss/dweight of the last backward */
  int64_t m_offset;        /* state arena: AdamW first moment */
  int64_t v_offset;        /* state arena: AdamW second moment */
  int64_t numel;           /* f32 elements */
  int64_t ndim;            /* the weight's shape: shape[0..ndim) */
  int64_t shape[4];
} ckir_param_desc;

/* The training programs (compiled by --lower-backward; run NULL otherwise). */
typedef struct ckir_train_desc {
  ckir_mode_fn backward;   /* forward + loss + gradients of T tokens from position 0 */
  ckir_mode_fn optimize;   /* clip + one AdamW step from the gradients (T unused) */
  int64_t tokens_offset;   /* io buffer of the tokens (state arena) */
  int64_t targets_offset;  /* io buffer of the targets */
  int64_t loss_offset;     /* io buffer of the mean cross-entropy (one float) */
  int64_t sumsq_offset;    /* the optimizer's sum of squared gradients (one float) */
  int64_t rows;            /* max tokens per step */
  int64_t token_bound;     /* tokens and targets must be < this (the vocabulary) */
  const ckir_param_desc *params;
  int64_t n_params;
} ckir_train_desc;

/* One handle of the build's I/O manifest (docs/manifest.md): ckir_io_desc(i, &h). */
typedef struct ckir_handle_desc {
  const char *name;        /* "prefill.tokens", "layers.0.attn.wq", "kv.layers.0.k", ... */
  const char *role;        /* "input", "param", "state" or "output" */
  const char *mode;        /* the program it belongs to ("prefill", ...), "" for params, state */
  const char *dtype;       /* "f32", "i32", "bf16", "q8_0", ... */
  int64_t rank;
  int64_t shape[4];        /* the largest shape (what its slot holds): shape[0..rank) */
  const char *dims[4];     /* per dim: "" static, else the run-time symbol it follows (T, PT) */
  int arena;               /* 0 = weights, 1 = state */
  int64_t offset;          /* byte offset in that arena */
  int64_t bytes;           /* bytes of the largest shape */
} ckir_handle_desc;

typedef struct ckir_model_desc {
  const char *name;
  uint64_t fingerprint;    /* the build's (ckir_fingerprint); weights.bin must carry it */
  int64_t weights_bytes;
  int64_t state_bytes;
  int64_t max_context;
  int64_t vocab;           /* columns of the output buffer */
  int64_t align;
  const ckir_slot_desc *slots;
  int64_t n_slots;
  ckir_mode_desc prefill;
  ckir_mode_desc decode;
  ckir_train_desc train;
  int64_t n_layers;        /* layers of the steady phase (ckir_<mode>_layer) */
} ckir_model_desc;

struct ckir_model {
  const ckir_model_desc *desc;
  uint8_t *weights;        /* the weights arena: weights.bin after its header */
  uint8_t *state;          /* the state arena (KV cache, io, activations) */
  size_t weights_mapped;   /* bytes of the anonymous mappings that hold the arenas */
  size_t state_mapped;
  int64_t pos;             /* tokens already in the KV cache */
  int64_t last_rows;       /* rows of the logits of the last call */
  int64_t last_logits;     /* offset of the logits of the last call */
  char error[256];         /* the last error, one line */
  int64_t step;            /* optimizer steps applied (AdamW's step is step + 1 while one runs) */
  float lr;                /* the learning rate of the running optimizer step */
  int fp32_x;              /* 1: q8_0p / q4_1p prefill GEMMs on fp32 x (ckir_set_int8_prefill) */
  /* a step run phase by phase (ckir_<mode>_prologue ... _epilogue): its mode (NULL when
   * none runs), its tokens and the next layer to run */
  const ckir_mode_desc *phase_mode;
  int64_t phase_rows;
  int64_t phase_next;
};

/* Implemented once in runtime/support/ckir_model.c. */
ckir_model *ckir_model_open_desc(const ckir_model_desc *d, const char *weights_path, int *err);
int ckir_model_run(ckir_model *m, const ckir_mode_desc *mode, const int32_t *tokens, int64_t n);
int ckir_model_check_canaries(ckir_model *m);
/* Copy the logits of the last call (ckir_logits_rows x vocab floats) to dst;
 * returns how many of them are NaN or infinite. */
int64_t ckir_model_copy_logits(const ckir_model *m, float *dst);
/* Copy n floats of an arena (0 weights, 1 state) from byte offset `offset` to dst;
 * returns how many are NaN or infinite, or -1 when they are not inside the arena. */
int64_t ckir_model_copy_f32(const ckir_model *m, int arena, int64_t offset, int64_t n,
                            float *dst);
void ckir_model_close(ckir_model *m);
int ckir_model_backward(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t n,
                        float *loss);
int ckir_model_optimize(ckir_model *m, float lr);
int ckir_model_set_int8_prefill(ckir_model *m, int on);
/* A step phase by phase (what ckir_<mode>_prologue / _layer / _epilogue call): the checks
 * and the prologue, layer i (in order, from 0), then the epilogue and the bookkeeping of
 * ckir_model_run (position, logits). */
int ckir_model_phase_begin(ckir_model *m, const ckir_mode_desc *mode, const int32_t *tokens,
                           int64_t n, ckir_mode_fn prologue);
int ckir_model_phase_layer(ckir_model *m, const ckir_mode_desc *mode, int64_t i,
                           const ckir_mode_fn *layers);
int ckir_model_phase_end(ckir_model *m, const ckir_mode_desc *mode, ckir_mode_fn epilogue);
/* A training step phase by phase (what ckir_backward_prologue ... _grad_prologue call).
 * stages: the backward program's phase functions in the order they run (NULL where a
 * phase has no calls): prologue, layers 0..L-1, epilogue, grad epilogue, grad layers
 * L-1..0, grad prologue (2L + 4).  ckir_model_train_phase runs phase `kind` (layer i for
 * the layer kinds) when it is the next one; after the epilogue and the grad prologue it
 * reads the loss into *loss (may be NULL) and checks it is finite. */
enum {
  CKIR_PHASE_LAYER = 1,
  CKIR_PHASE_EPILOGUE = 2,
  CKIR_PHASE_GRAD_EPILOGUE = 3,
  CKIR_PHASE_GRAD_LAYER = 4,
  CKIR_PHASE_GRAD_PROLOGUE = 5
};
int ckir_model_train_phase_begin(ckir_model *m, const int32_t *tokens, const int32_t *targets,
                                 int64_t n, const ckir_mode_fn *stages);
int ckir_model_train_phase(ckir_model *m, int kind, int64_t i, const ckir_mode_fn *stages,
                           float *loss);

/* Exported by every generated model.c. */
/* checks the CPU first (ckir_isa_missing): CKIR_ERR_ISA */
CKIR_BASELINE ckir_model *ckir_open(const char *weights_path, int *err);
void ckir_close(ckir_model *m);
int ckir_prefill(ckir_model *m, const int32_t *tokens, int64_t n);
int ckir_decode(ckir_model *m, int32_t token);
const float *ckir_logits(const ckir_model *m);
int64_t ckir_logits_rows(const ckir_model *m);
int64_t ckir_copy_logits(const ckir_model *m, float *dst);
int64_t ckir_position(const ckir_model *m);
void ckir_reset(ckir_model *m);
const char *ckir_error(const ckir_model *m);
int ckir_check_canaries(ckir_model *m);
const ckir_model_desc *ckir_describe(void);
uint8_t *ckir_arena(ckir_model *m, int arena);
/* Runs on the inputs already in the state arena, written there through the I/O
 * manifest (docs/manifest.md: ckir_arena(m, h.arena) + h.offset of the handles
 * prefill.tokens, decode.tokens, backward.tokens, backward.targets): the checks and
 * the step of ckir_prefill / ckir_decode (one token) / ckir_backward without a copy of
 * the inputs.  The outputs are read through their handles (prefill.logits: n rows, or
 * 1 when compiled with logits=last; decode.logits; backward.loss), e.g. with
 * ckir_copy_f32. */
int ckir_prefill_in_arena(ckir_model *m, int64_t n);
int ckir_decode_in_arena(ckir_model *m);
int ckir_backward_in_arena(ckir_model *m, int64_t n);
/* Copy n floats of arena `arena` from byte offset `offset` (a handle's) to dst; returns
 * how many of them are NaN or infinite, or -1 when they are not inside the arena. */
int64_t ckir_copy_f32(const ckir_model *m, int arena, int64_t offset, int64_t n, float *dst);
/* The I/O manifest: how many handles, and handle i (CKIR_ERR_ARG when i is out of
 * range or out is NULL). */
int64_t ckir_io_count(void);
int ckir_io_desc(int64_t i, ckir_handle_desc *out);
/* The build fingerprint (program, plan and weights layout) the library was compiled
 * for; weights.bin carries the one it was written for, and ckir_open refuses a file
 * whose fingerprint differs (CKIR_ERR_LAYOUT). */
uint64_t ckir_fingerprint(void);

/* A step one phase at a time (docs/runtime.md, "Running one layer at a time"):
 * ckir_<mode>_prologue checks and copies the tokens as ckir_prefill / ckir_decode do
 * and runs the prologue (the embedding); ckir_<mode>_layer(m, i) runs layer i, for
 * i = 0 .. ckir_describe()->n_layers - 1 in order (CKIR_ERR_ARG out of order or without
 * a prologue); ckir_<mode>_epilogue runs the rest and then, as a whole step would, moves
 * the position on and makes the logits readable.  Stopping before the epilogue leaves
 * the position where it was (the next prologue starts over); the layers run so far have
 * written their KV-cache rows.  ckir_<mode>_hidden(m, i): the state layer i hands on
 * (n rows of CKIR_HIDDEN_SIZE floats), NULL if i is out of range. */
int ckir_prefill_prologue(ckir_model *m, const int32_t *tokens, int64_t n);
int ckir_prefill_layer(ckir_model *m, int64_t i);
int ckir_prefill_epilogue(ckir_model *m);
const float *ckir_prefill_hidden(const ckir_model *m, int64_t i);
int ckir_decode_prologue(ckir_model *m, const int32_t *tokens, int64_t n);
int ckir_decode_layer(ckir_model *m, int64_t i);
int ckir_decode_epilogue(ckir_model *m);
const float *ckir_decode_hidden(const ckir_model *m, int64_t i);
/* CKIR_HIDDEN_SIZE, for callers without model.h (ckir's Python API) */
int64_t ckir_hidden_size(void);

/* on = 1 (the default): prefill's q8_0p / q4_1p / q4_0p GEMMs quantize x per block of 32
 * (q4_k / q5_k / q6_k: per super-block of 256, Q8_K) and
 * compute each row as decode's GEMV does (int8 dot products, about twice the fp32
 * speed) where the runtime has that GEMM (ckir_runtime_qp_int8_gemm); on = 0: they
 * multiply fp32 x by the dequantized weights, as exact as the weights allow.  Returns
 * 1 when this model's prefill now runs on int8 x, 0 when on fp32 x. */
int ckir_set_int8_prefill(ckir_model *m, int on);

/* Training (models compiled with --lower-backward; CKIR_ERR_MODE otherwise).
 * ckir_backward: forward over tokens[0..T) from position 0, *loss = mean cross-entropy
 *   against targets, and the gradient of every weight (see ckir_describe()->train.params).
 * ckir_optimizer_step: clip the global gradient norm, one AdamW step with learning rate
 *   lr; the KV cache is reset (it was computed with the old weights).  Refuses (weights
 *   untouched) when the gradient norm is not finite.
 * ckir_train_step: both; returns the loss, or NaN with ckir_error() set on any error
 *   (a non-finite loss leaves the weights as they were). */
int ckir_backward(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t T,
                  float *loss);
int ckir_optimizer_step(ckir_model *m, float lr);
int64_t ckir_train_steps(const ckir_model *m);
/* A training step one phase at a time (docs/runtime.md, "Running one layer at a time"),
 * the phases ckir_backward runs, in its order: ckir_backward_prologue (the checks and
 * copies of ckir_backward, the embedding), ckir_backward_layer(m, i) for i = 0 .. L-1,
 * ckir_backward_epilogue (final norm, lm_head, the loss: *loss, may be NULL),
 * ckir_backward_grad_epilogue, ckir_backward_grad_layer(m, i) for i = L-1 .. 0, and
 * ckir_backward_grad_prologue (the embedding's gradient; *loss again).  Then every
 * gradient is what ckir_backward leaves.  Out of order or without a prologue:
 * CKIR_ERR_ARG, ckir_error names the phase that is next.  L = ckir_describe()->n_layers. */
int ckir_backward_prologue(ckir_model *m, const int32_t *tokens, const int32_t *targets,
                           int64_t n);
int ckir_backward_layer(ckir_model *m, int64_t i);
int ckir_backward_epilogue(ckir_model *m, float *loss);
int ckir_backward_grad_epilogue(ckir_model *m);
int ckir_backward_grad_layer(ckir_model *m, int64_t i);
int ckir_backward_grad_prologue(ckir_model *m, float *loss);
float ckir_train_step(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t T,
                      float lr);

#ifdef __cplusplus
}
#endif
#endif /* CKIR_MODEL_H */
