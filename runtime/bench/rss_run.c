/* ckir benchmark driver: peak RSS (and plain-C timing) of a prefill + decode run,
 * or of training steps.
 *
 *   rss_run LIBMODEL WEIGHTS THREADS CONTEXT STEPS VOCAB
 *   rss_run --train LIBMODEL WEIGHTS THREADS T STEPS VOCAB
 *
 * Opens a ckir build through its generated-model ABI (dlopen), prefills CONTEXT
 * tokens (ids below VOCAB), decodes STEPS tokens, and prints one JSON line: resident set before
 * ckir_open and its high-water mark at the end (VmRSS / VmHWM of
 * /proc/self/status, kB), the seconds of the prefill and of the decode steps.
 * No Python in the process, so the high-water mark is the model's footprint
 * plus libc/libgomp (a few MB).  Exit status 2 on any failure.
 *
 * --train (a build compiled with mode backward): STEPS calls of ckir_train_step on
 * windows of T + 1 pseudo-random ids (tokens = w[0..T), targets = w[1..T]), each window
 * a new one, learning rate 1e-4.  Printed: VmRSS before and after ckir_open, VmHWM,
 * RssAnon / RssFile at the end (both arenas are anonymous memory), the seconds of
 * the first step (it faults in every page the step writes) and the mean of the
 * others, the last loss. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void *(*open_fn)(const char *, int *);
typedef int (*prefill_fn)(void *, const int32_t *, int64_t);
typedef int (*decode_fn)(void *, int32_t);
typedef void (*close_fn)(void *);
typedef void (*threads_fn)(int);
typedef const char *(*error_fn)(const void *);
typedef float (*train_fn)(void *, const int32_t *, const int32_t *, int64_t, float);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) {
      v = strtol(line + n, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "rss_run: %s: missing symbol %s\n", "libmodel", name);
    exit(2);
  }
  return p;
}

/* ckir_set_num_threads(threads), then ckir_open(weights): the model, or NULL after a
 * message; *rss_loaded is VmRSS in between (the library loaded, nothing opened) */
static void *open_model(void *lib, const char *weights, int threads, long *rss_loaded) {
  open_fn op = (open_fn)sym(lib, "ckir_open");
  threads_fn th = (threads_fn)sym(lib, "ckir_set_num_threads");
  th(threads);
  *rss_loaded = status_kb("VmRSS:");
  int err = 0;
  void *m = op(weights, &err);
  if (!m) fprintf(stderr, "rss_run: ckir_open failed (code %d)\n", err);
  return m;
}

static int train_main(void *lib, const char *weights, int threads, int64_t T, int64_t steps,
                      int64_t vocab, long rss0) {
  train_fn tr = (train_fn)sym(lib, "ckir_train_step");
  close_fn cl = (close_fn)sym(lib, "ckir_close");
  error_fn er = (error_fn)sym(lib, "ckir_error");
  long rss1;
  void *m = open_model(lib, weights, threads, &rss1);
  if (!m) return 2;
  long rss2 = status_kb("VmRSS:");
  int32_t *w = malloc(sizeof(int32_t) * (size_t)(T + 1));
  if (!w) return 2;
  double first = 0.0, rest = 0.0;
  float loss = 0.0f;
  for (int64_t s = 0; s < steps; s++) {
    for (int64_t i = 0; i <= T; i++)
      w[i] = (int32_t)((uint64_t)((s + 1) * 1000003 + i * 7919 + 13) % (uint64_t)vocab);
    double t0 = now();
    loss = tr(m, w, w + 1, T, 1e-4f);
    double dt = now() - t0;
    if (loss != loss) {
      fprintf(stderr, "rss_run: train step %lld: %s\n", (long long)s, er(m));
      return 2;
    }
    if (s == 0)
      first = dt;
    else
      rest += dt;
  }
  long hwm = status_kb("VmHWM:");
  printf("{\"rss_start_kb\": %ld, \"rss_loaded_kb\": %ld, \"rss_open_kb\": %ld, \"hwm_kb\": %ld, "
         "\"rss_anon_kb\": %ld, \"rss_file_kb\": %ld, \"first_step_s\": %.6f, "
         "\"step_s\": %.6f, \"loss\": %.6f}\n",
         rss0, rss1, rss2, hwm, status_kb("RssAnon:"), status_kb("RssFile:"), first,
         steps > 1 ? rest / (double)(steps - 1) : first, (double)loss);
  cl(m);
  free(w);
  return 0;
}

int main(int argc, char **argv) {
  int train = argc > 1 && strcmp(argv[1], "--train") == 0;
  if (train) {
    argc--;
    argv++;
  }
  if (argc != 7) {
    fprintf(stderr, "usage: rss_run [--train] LIBMODEL WEIGHTS THREADS CONTEXT STEPS VOCAB\n");
    return 2;
  }
  int threads = atoi(argv[3]);
  int64_t context = atoll(argv[4]), steps = atoll(argv[5]), vocab = atoll(argv[6]);
  if (vocab < 1) vocab = 1;
  long rss0 = status_kb("VmRSS:");
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "rss_run: %s\n", dlerror());
    return 2;
  }
  if (train) {
    if (context < 1 || steps < 1) {
      fprintf(stderr, "rss_run: --train needs T >= 1 and STEPS >= 1\n");
      return 2;
    }
    return train_main(lib, argv[2], threads, context, steps, vocab, rss0);
  }
  prefill_fn pf = (prefill_fn)sym(lib, "ckir_prefill");
  decode_fn dc = (decode_fn)sym(lib, "ckir_decode");
  close_fn cl = (close_fn)sym(lib, "ckir_close");
  error_fn er = (error_fn)sym(lib, "ckir_error");
  long rss1;
  void *m = open_model(lib, argv[2], threads, &rss1);
  if (!m) return 2;
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(context > 0 ? context : 1));
  for (int64_t i = 0; i < context; i++) tokens[i] = (int32_t)((i * 7919 + 13) % vocab);
  double t0 = now();
  if (context > 0 && pf(m, tokens, context) != 0) {
    fprintf(stderr, "rss_run: prefill: %s\n", er(m));
    return 2;
  }
  double t1 = now();
  for (int64_t i = 0; i < steps; i++)
    if (dc(m, (int32_t)((i * 104729 + 7) % vocab)) != 0) {
      fprintf(stderr, "rss_run: decode: %s\n", er(m));
      return 2;
    }
  double t2 = now();
  long hwm = status_kb("VmHWM:");
  printf("{\"rss_start_kb\": %ld, \"rss_loaded_kb\": %ld, \"hwm_kb\": %ld, "
         "\"prefill_s\": %.6f, \"decode_s\": %.6f}\n",
         rss0, rss1, hwm, t1 - t0, t2 - t1);
  cl(m);
  free(tokens);
  return 0;
}
