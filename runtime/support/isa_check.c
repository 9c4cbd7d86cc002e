/* Generic model support: the instructions a library was compiled for that the
 * CPU running it lacks (ckir_isa_missing, ckir_model.h).
 *
 * A library built with -march=native on one machine and opened on another
 * (a build folder copied between the AVX-512 and the AVX2 machine kinds) would
 * die of SIGILL at its first vector instruction.  The compiler's predefined
 * macros say which extensions it was free to use here; each is asked of the
 * CPU with __builtin_cpu_supports, from functions compiled for the baseline
 * of the architecture (CKIR_BASELINE), so the check itself runs anywhere.
 * AMX is not listed: the compiler never emits tile instructions by itself,
 * and the runtime uses them only after its own CPUID and OS checks. */
#include "ckir_model.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)

/* name appended to buf (space separated, truncated to size); the new length */
CKIR_BASELINE __attribute__((unused)) static size_t put_name(char *buf, size_t size,
                                                             size_t used, const char *name) {
  if (!buf || size == 0) return used;
  for (const char *s = used ? " " : ""; *s && used + 1 < size; s++) buf[used++] = *s;
  for (const char *s = name; *s && used + 1 < size; s++) buf[used++] = *s;
  buf[used] = '\0';
  return used;
}

/* feature: __builtin_cpu_supports's name; name: /proc/cpuinfo's */
#define CKIR_NEED(feature, name)            \
  if (!__builtin_cpu_supports(feature)) {   \
    n++;                                    \
    used = put_name(buf, size, used, name); \
  }

CKIR_BASELINE int ckir_isa_missing(char *buf, size_t size) {
  int n = 0;
  size_t used = 0;
  if (buf && size) buf[0] = '\0';
  __builtin_cpu_init();
#ifdef __SSE3__
  CKIR_NEED("sse3", "pni")
#endif
#ifdef __SSSE3__
  CKIR_NEED("ssse3", "ssse3")
#endif
#ifdef __SSE4_1__
  CKIR_NEED("sse4.1", "sse4_1")
#endif
#ifdef __SSE4_2__
  CKIR_NEED("sse4.2", "sse4_2")
#endif
#ifdef __SSE4A__
  CKIR_NEED("sse4a", "sse4a")
#endif
#ifdef __POPCNT__
  CKIR_NEED("popcnt", "popcnt")
#endif
#ifdef __AES__
  CKIR_NEED("aes", "aes")
#endif
#ifdef __PCLMUL__
  CKIR_NEED("pclmul", "pclmulqdq")
#endif
#ifdef __AVX__
  CKIR_NEED("avx", "avx")
#endif
#ifdef __AVX2__
  CKIR_NEED("avx2", "avx2")
#endif
#ifdef __FMA__
  CKIR_NEED("fma", "fma")
#endif
#ifdef __F16C__
  CKIR_NEED("f16c", "f16c")
#endif
#ifdef __BMI__
  CKIR_NEED("bmi", "bmi1")
#endif
#ifdef __BMI2__
  CKIR_NEED("bmi2", "bmi2")
#endif
#ifdef __LZCNT__
  CKIR_NEED("lzcnt", "abm")
#endif
#ifdef __MOVBE__
  CKIR_NEED("movbe", "movbe")
#endif
#ifdef __ADX__
  CKIR_NEED("adx", "adx")
#endif
#ifdef __SHA__
  CKIR_NEED("sha", "sha_ni")
#endif
#ifdef __GFNI__
  CKIR_NEED("gfni", "gfni")
#endif
#ifdef __VAES__
  CKIR_NEED("vaes", "vaes")
#endif
#ifdef __VPCLMULQDQ__
  CKIR_NEED("vpclmulqdq", "vpclmulqdq")
#endif
#ifdef __AVXVNNI__
  CKIR_NEED("avxvnni", "avx_vnni")
#endif
#ifdef __AVX512F__
  CKIR_NEED("avx512f", "avx512f")
#endif
#ifdef __AVX512CD__
  CKIR_NEED("avx512cd", "avx512cd")
#endif
#ifdef __AVX512DQ__
  CKIR_NEED("avx512dq", "avx512dq")
#endif
#ifdef __AVX512BW__
  CKIR_NEED("avx512bw", "avx512bw")
#endif
#ifdef __AVX512VL__
  CKIR_NEED("avx512vl", "avx512vl")
#endif
#ifdef __AVX512IFMA__
  CKIR_NEED("avx512ifma", "avx512ifma")
#endif
#ifdef __AVX512VBMI__
  CKIR_NEED("avx512vbmi", "avx512vbmi")
#endif
#ifdef __AVX512VBMI2__
  CKIR_NEED("avx512vbmi2", "avx512_vbmi2")
#endif
#ifdef __AVX512VNNI__
  CKIR_NEED("avx512vnni", "avx512_vnni")
#endif
#ifdef __AVX512BITALG__
  CKIR_NEED("avx512bitalg", "avx512_bitalg")
#endif
#ifdef __AVX512VPOPCNTDQ__
  CKIR_NEED("avx512vpopcntdq", "avx512_vpopcntdq")
#endif
#ifdef __AVX512BF16__
  CKIR_NEED("avx512bf16", "avx512_bf16")
#endif
#ifdef __AVX512FP16__
  CKIR_NEED("avx512fp16", "avx512_fp16")
#endif
  (void)used; /* the baseline itself defines none of the macros */
  return n;
}

#else /* another architecture, or a compiler other than GCC (whose
       * __builtin_cpu_supports may lack some of the names): nothing is checked */

int ckir_isa_missing(char *buf, size_t size) {
  if (buf && size) buf[0] = '\0';
  return 0;
}

#endif
