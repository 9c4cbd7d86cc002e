"""NumPy reference semantics of the runtime kernels (:mod:`ckir.reference.kernels`).

The executable definition of what each kernel kind computes, in float64, shared by the
kernel tests (their oracles) and the plan interpreter (:mod:`ckir.interp`).
"""
