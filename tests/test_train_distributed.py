"""Data-parallel ``ckir train`` over ``torch.distributed`` (gloo), against gradient
accumulation in one process.

Two processes on localhost (``python -m torch.distributed.run``, i.e. ``torchrun``,
on a free port), each training on one of the two windows of every step, end 20 AdamW
steps with the weights of one process that accumulates the gradients of both windows
(``--accumulate 2``): within 1e-5 of each tensor's largest entry (the all-reduce sums
the same two token-weighted gradients the accumulation sums, so they agree to the
last bit when both processes compute the same gradients).  Every step line reports
the all-reduce's time, and the last line its median.  A run whose gradient norm
overflows (``--lr 1e30``) stops on every rank at the same step, with rank 0's error
line, instead of leaving a rank waiting in the all-reduce.  Slow (two compiles' worth of
processes and a torchrun start-up: over a minute on the 2-vCPU machine).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

BIN = Path(sys.executable).parent
STEP = re.compile(
    r"^step +(\d+)/20  loss (\S+)  [\d,]+ tok/s  all-reduce (\d+\.\d+) ms \(waited \S+ ms\)$"
)
WEIGHT_TOL = 1e-5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_two_processes_equal_one_that_accumulates(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from ckir.tools.zoo import make_tiny_model, write_byte_tokenizer

    src = make_tiny_model("llama", tmp_path / "src", seed=4)
    write_byte_tokenizer(src)
    env = {**os.environ, "CKIR_CACHE_DIR": str(tmp_path / "cache")}
    common = ["train", str(src), "--steps", "20", "--seq-len", "16", "--lr", "1e-3", "-q"]

    def run(*argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
        assert (proc.returncode == 0) == ok, proc.stderr
        return proc

    one = run(str(BIN / "ckir"), *common, "--accumulate", "2", "--out", str(tmp_path / "one"))
    assert "2 windows per step" in one.stderr
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    two = run(*launcher, "-m", "ckir", *common, "--distributed", "--out", str(tmp_path / "two"))
    assert "2 processes (torch.distributed, gloo) x 1 window per step" in two.stderr
    steps = [STEP.match(line) for line in two.stdout.splitlines()]
    assert len(steps) == 20 and all(steps), two.stdout  # rank 0 prints, once per step
    summary = r"all-reduce \d+\.\d+ ms/step \(median\) over 2 processes, waited \d+\.\d+ ms"
    assert re.search(summary, two.stderr), two.stderr
    # the same global batches: the same loss every step
    ones = [float(line.split()[3]) for line in one.stdout.splitlines()]
    twos = [float(m.group(2)) for m in steps if m]
    assert np.allclose(ones, twos, rtol=1e-5, atol=0), (ones, twos)
    a = load_file(str(tmp_path / "one" / "model.safetensors"))
    b = load_file(str(tmp_path / "two" / "model.safetensors"))
    original = load_file(str(src / "model.safetensors"))
    assert sorted(a) == sorted(b) == sorted(original)
    for name, ref in a.items():
        assert not np.array_equal(ref, original[name]) or "norm" in name, name
        err = float(np.abs(b[name] - ref).max())
        assert err <= WEIGHT_TOL * float(np.abs(ref).max()), (name, err)
    # a step whose gradient norm overflows on every rank stops every rank at that step
    # (none waits for ever in the all-reduce); rank 0 says why nothing was saved
    launcher[-1] = str(free_port())
    bad = ["train", str(src), "--steps", "6", "--seq-len", "16", "--lr", "1e30", "-q"]
    stop = run(
        *launcher, "-m", "ckir", *bad, "--distributed", "--out", str(tmp_path / "x"), ok=False
    )
    assert "error: step 2/6: the gradient norm is not finite; weights unchanged; stopped." in (
        stop.stderr
    )
    assert "Nothing was saved" in stop.stderr and not (tmp_path / "x").exists()
