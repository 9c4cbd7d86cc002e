/* ckir runtime: whether this process can run AMX tiles, and the tile
 * configuration's layout (private; shared by gemm_amx.c and the benchmark
 * probes, runtime/bench/probes.c, which link nothing else of the runtime).
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
#include <sys/syscall.h>
#include <unistd.h>

/* LDTILECFG's 64-byte operand (palette 1 uses tiles 0-7; the rest stay zero) */
typedef struct {
  uint8_t palette, start_row, reserved0[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((aligned(64))) ckir_amx_cfg;
_Static_assert(sizeof(ckir_amx_cfg) == 64, "LDTILECFG reads 64 bytes");

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
