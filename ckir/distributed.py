"""Data-parallel training over ``torch.distributed`` with the gloo backend.

    torchrun --nproc_per_node 2 -m ckir train MODEL --out DIR --distributed

``torchrun`` starts the processes and sets ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT``; :func:`init_group` joins them into one gloo
process group.  Every process loads the same build (:func:`check_same_build`
compares fingerprints), trains on its own micro-batches, and before each AdamW step
:class:`AllReduce` (the ``reduce`` hook of
:meth:`ckir.model.training.Training.train_step`) sums, over the group, the state
arena's gradients in place -- one f32 view of the region that the manifest's
``grad.`` handles span, handed to gloo as a tensor sharing its memory
(``torch.from_numpy``: no copy) -- and the loss and target counts; the step then
divides by the total count, so every process applies the same averaged gradient and
keeps the same weights.  The transport is gloo's; nothing here moves bytes itself.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ckir.errors import CkirError

#: what torchrun sets for each process (torch.distributed's env:// initialisation)
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def under_torchrun() -> bool:
    """Whether this process was started by torchrun with more than one process."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ
    except ValueError:
        return False


def _dist() -> Any:
    try:
        import torch.distributed as dist
    except ImportError:
        raise CkirError(
            "--distributed: needs PyTorch (torch.distributed, gloo): pip install torch"
        ) from None
    if not dist.is_available() or not dist.is_gloo_available():
        raise CkirError("--distributed: this PyTorch has no torch.distributed gloo backend")
    return dist


def init_group() -> tuple[int, int]:
    """Join the gloo process group torchrun describes; ``(rank, world size)``."""
    missing = [k for k in TORCHRUN_ENV if not os.environ.get(k)]
    if missing:
        raise CkirError(
            f"--distributed: {missing[0]} is not set; start the processes with torchrun "
            "(torchrun --nproc_per_node N -m ckir train ... --distributed)"
        )
    dist = _dist()
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    return int(dist.get_rank()), int(dist.get_world_size())


def close_group() -> None:
    """Leave the process group (when one was joined)."""
    dist = _dist()
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    _dist().barrier()


def broadcast(value: object) -> object:
    """Rank 0's ``value`` on every rank (a picklable object)."""
    box = [value]
    _dist().broadcast_object_list(box, src=0)
    return box[0]


def check_same_build(fingerprint: str) -> None:
    """CkirError on every rank unless every rank loaded a build of this fingerprint."""
    dist = _dist()
    seen: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(seen, fingerprint)
    if len(set(seen)) != 1:
        listed = ", ".join(f"rank {r}: {f}" for r, f in enumerate(seen))
        raise CkirError(f"--distributed: the processes loaded different builds ({listed})")


@dataclass
class AllReduce:
    """The ``reduce`` hook of ``train_step``: sums the gradient views and the
    ``(loss sum, target count)`` over the process group (gloo, in place).  A barrier
    first, so that :attr:`seconds` (each call's all-reduce) is the transfer and sum
    alone and :attr:`waits` the time spent waiting for the slowest process."""

    seconds: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)

    def __call__(self, regions: list[np.ndarray], loss_sum: float, count: int) -> tuple[float, int]:
        import torch

        dist = _dist()
        t0 = time.perf_counter()
        dist.barrier()
        t1 = time.perf_counter()
        for region in regions:
            dist.all_reduce(torch.from_numpy(region), op=dist.ReduceOp.SUM)  # shares memory
        sums = torch.tensor([loss_sum, float(count)], dtype=torch.float64)
        dist.all_reduce(sums, op=dist.ReduceOp.SUM)
        self.waits.append(t1 - t0)
        self.seconds.append(time.perf_counter() - t1)
        return float(sums[0]), int(round(float(sums[1])))
