/* ckir runtime: the core of the q4_kp panels (ckir_kpanel.h): 32 rows of w against 1 to
 * CKIR_KP_TX rows of Q8_K x.  For now every build runs the portable core. */
#define CKIR_QUANT_INTERNAL 1
#include "ckir_internal.h"
#include "ckir_quant.h"
#include "ckir_kpanel.h"

void ckir_internal_core_q4_kp(const uint8_t *panel, int64_t nb, const ckir_q8k *xs, int X,
                              int64_t pfd, float *out) {
  (void)pfd;
  ckir_internal_core_kp_portable(CKIR_KP_Q4, panel, nb, xs, X, out);
}
