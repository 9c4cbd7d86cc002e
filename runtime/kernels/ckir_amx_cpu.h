/* ckir runtime: whether this process can run AMX tiles, and the tile
 * configuration: its layout, the shapes this runtime loads, loading and
 * releasing it (private; shared by gemm_amx.c and the benchmark probes,
 * runtime/bench/probes.c, which link nothing else of the runtime).
 *
 * Usable: CPUID shows AMX-TILE, AMX-BF16 and AMX-INT8 with palette 1 at 8
 * tiles of 16 rows x 64 bytes, the OS saves the tile state (OSXSAVE, XCR0 bits
 * 17 and 18) and Linux grants it to the process (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and later; the grant
 * is process-wide and idempotent).  The includer defines _GNU_SOURCE or
 * _DEFAULT_SOURCE (for syscall) before its first include.  x86-64 only. */
#ifndef CKIR_AMX_CPU_H
#define CKIR_AMX_CPU_H

#include <cpuid.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* LDTILECFG's 64-byte operand (palette 1 uses tiles 0-7; the rest stay zero) */
typedef struct {
  uint8_t palette, start_row, reserved0[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((aligned(64))) ckir_amx_cfg;
_Static_assert(sizeof(ckir_amx_cfg) == 64, "LDTILECFG reads 64 bytes");

/* Tiles 0-3 hold C (16 rows of 16 int32 / fp32), 4-5 A (16 rows of acolsb
 * bytes), 6-7 B (brows rows of 64 bytes).  bf16: A and B 16 pairs of k
 * (acolsb 64, brows 16); int8: one block of 32 k (acolsb 32, brows 8). */
static inline ckir_amx_cfg ckir_amx_cfg_make(int acolsb, int brows) {
  ckir_amx_cfg c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 8; t++) {
    c.colsb[t] = (uint16_t)(t == 4 || t == 5 ? acolsb : 64);
    c.rows[t] = (uint8_t)(t >= 6 ? brows : 16);
  }
  return c;
}

/* LDTILECFG and TILERELEASE on this thread (the hardware; compiler barriers
 * around them, the configuration's stores done first) */
static inline void ckir_amx_load_config(const ckir_amx_cfg *c) {
  __asm__ volatile("" ::: "memory");
  __asm__ volatile("ldtilecfg %0" ::"m"(*c));
}

static inline void ckir_amx_release(void) { __asm__ volatile("tilerelease" ::: "memory"); }

static inline int ckir_amx_cpu_usable(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, NULL) < 0x1D) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned amx = (1u << 22) | (1u << 24) | (1u << 25); /* AMX-BF16, -TILE, -INT8 */
  if ((d & amx) != amx) return 0;
  __cpuid_count(0x1D, 1, a, b, c, d); /* palette 1 */
  if ((b & 0xFFFF) != 64 || (b >> 16) < 8 || (c & 0xFFFF) < 16) return 0;
  __cpuid(1, a, b, c, d);
  if (!(c & (1u << 27))) return 0; /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return 0;
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

#endif /* CKIR_AMX_CPU_H */
