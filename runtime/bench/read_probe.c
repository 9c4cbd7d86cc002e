/* ckir benchmark probe: memory read bandwidth with the kernels' own flags.
 *
 * Not part of the kernel library: a benchmark that wants it next to the kernels
 * (the read-bandwidth mark of benchmarks/bench_weight_dtypes.py) compiles this
 * file into its library as an extra source (build_library(...,
 * extra_sources=[runtime_dir() / "bench" / "read_probe.c"])), so it is built
 * with the same compiler, ISA and OpenMP flags as the kernels it is compared
 * with.
 *
 *   ckir_quant_read_probe(buf, out, n)   out[0] = sum of buf[0..n), read once
 *                                        by every OpenMP thread's share
 *
 * Each thread reads its contiguous share as PROBE_S concurrent sequential
 * streams, two vectors per stream per step, into independent accumulators (4
 * streams read a little faster than 1 here: the probe is the upper mark). */
#include "../kernels/ckir_internal.h"

#define PROBE_S 4

void ckir_quant_read_probe(const float *buf, float *out, int64_t n);

void ckir_quant_read_probe(const float *buf, float *out, int64_t n) {
  float total = 0.0f;
#pragma omp parallel reduction(+ : total)
  {
#ifdef _OPENMP
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
    const int64_t nt = 1, t = 0;
#endif
    const int64_t chunk = (n / nt + 63) / 64 * 64;
    const int64_t lo = CKIR_MIN(n, t * chunk), hi = CKIR_MIN(n, lo + chunk);
    const int64_t len = (hi - lo) / (PROBE_S * 2 * CKV_W) * (2 * CKV_W); /* floats per stream */
    const float *s[PROBE_S];
    ckv a[PROBE_S][2];
    for (int j = 0; j < PROBE_S; j++) {
      s[j] = buf + lo + j * len;
      a[j][0] = a[j][1] = ckv_zero();
    }
    for (int64_t i = 0; i < len; i += 2 * CKV_W)
      for (int j = 0; j < PROBE_S; j++) {
        a[j][0] = ckv_add(a[j][0], ckv_loadu(s[j] + i));
        a[j][1] = ckv_add(a[j][1], ckv_loadu(s[j] + i + CKV_W));
      }
    float acc = 0.0f;
    for (int j = 0; j < PROBE_S; j++) acc += ckv_reduce_add(ckv_add(a[j][0], a[j][1]));
    for (int64_t k = lo + PROBE_S * len; k < hi; k++) acc += buf[k];
    total += acc;
  }
  out[0] = total;
}
