"""NumPy's SGEMM (OpenBLAS, one thread) as the baseline of a kernel benchmark.

NumPy runs in a child process whose environment pins every BLAS pool to one thread
and drops ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (they may be set on the
project's machines and slow OpenBLAS down), so the figure is OpenBLAS's own kernel
for this CPU; the child names that kernel through threadpoolctl when it is
installed.

Example::

    secs, blas = numpy_sgemm_seconds([(256, 256, 256)])
    print(2 * 256**3 / secs[0] / 1e9, "GFLOP/s with", blas)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

from ckir.errors import CkirError, one_line

__all__ = ["DROPPED_ENV", "numpy_sgemm_seconds"]

#: environment variables removed for the baseline (they change OpenBLAS's kernel choice)
DROPPED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

_CHILD = r"""
import json, sys
import numpy as np
from ckir.kernel_tools import best_seconds
shapes, reps, min_seconds = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
try:
    from threadpoolctl import threadpool_info
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    blas = "; ".join(
        f"{p.get('internal_api')} {p.get('version')}, kernel {p.get('architecture')}, "
        f"{p.get('num_threads')} thread(s)" for p in pools
    ) or "no BLAS pool found by threadpoolctl"
except ImportError:
    blas = "BLAS kernel unknown (threadpoolctl not installed)"
out = []
for m, k, n in shapes:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), dtype=np.float32)
    out.append(best_seconds(lambda: np.matmul(a, b, out=c), min_seconds=min_seconds, reps=reps))
print(json.dumps({"seconds": out, "blas": blas}))
"""


def numpy_sgemm_seconds(
    shapes: Sequence[tuple[int, int, int]], *, reps: int = 5, min_seconds: float = 0.2
) -> tuple[list[float], str]:
    """Best seconds per ``a[m, k] @ b[k, n]`` (f32, one thread) for each (m, k, n),
    and the BLAS that ran (library, version, kernel)."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    args = [json.dumps([list(s) for s in shapes]), str(reps), str(min_seconds)]
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise CkirError(f"the NumPy baseline failed: {one_line(proc.stderr[-300:])}")
    data = json.loads(proc.stdout)
    return [float(s) for s in data["seconds"]], str(data["blas"])
