/* ckir runtime: thread-count control (OpenMP is the only threading model) and build info. */
#include "ckir_internal.h"

void ckir_set_num_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n < 1 ? 1 : n);
#else
  (void)n;
#endif
}

int ckir_get_num_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

const char *ckir_runtime_isa(void) {
#if defined(CKIR_AVX512)
  return "avx512";
#elif defined(CKIR_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

int ckir_runtime_bf16_dot(void) {
#if defined(CKIR_BF16DOT)
  return 1;
#else
  return 0;
#endif
}
