"""``ckir bench``'s workers seen from the parent: one process per system, a JSON line
protocol over a private pipe (:class:`Worker`), a worker that dies, the fallback a system
runs again on (:class:`Fallback`), and a system's column of timed runs
(:class:`System`).  Part of :mod:`ckir.tools.bench`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ckir.resources import import_root
from ckir.tools.bench_runners import NO_REPACK_PARAM, BaselineUnavailable


class WorkerDied(BaselineUnavailable):
    """The worker process ended without a reply: killed by a signal or any exit, while
    starting or while running (an error the worker reports itself is not a death)."""

    def __init__(self, label: str, returncode: int | None, stderr_tail: str) -> None:
        self.cause = exit_cause(returncode)
        super().__init__(f"{label}: worker died ({self.cause}): {stderr_tail}")


def exit_cause(returncode: int | None) -> str:
    """``SIGSEGV`` for a process killed by a signal, else ``exit status N``."""
    if returncode is None:
        return "still running, output closed"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Worker:
    """A system loaded in its own process; ``call`` sends one request, returns the reply.
    A worker that dies raises :class:`WorkerDied`, one that reports an error
    :class:`BaselineUnavailable`."""

    def __init__(self, label: str, spec: dict[str, Any], threads: int, timeout: float) -> None:
        self.label = label
        self.threads = threads
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
        env["TOKENIZERS_PARALLELISM"] = "false"
        search = [str(import_root()), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(search).rstrip(os.pathsep)
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ckir.tools.bench", "--worker", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
        )
        self.timeout = timeout
        try:
            self.info: dict[str, Any] = self._read()
        except BaselineUnavailable:
            self.close()
            raise

    def _stderr_tail(self) -> str:
        self._err.seek(0)
        lines = [ln.strip() for ln in self._err.read().splitlines() if ln.strip()]
        return lines[-1] if lines else "(no output)"

    def _died(self) -> WorkerDied:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return WorkerDied(self.label, self.proc.poll(), self._stderr_tail())

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise self._died()
        reply = json.loads(line)
        if "error" in reply:
            raise BaselineUnavailable(f"{self.label}: {reply['error']}")
        return reply

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._died() from None
        return self._read()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


@dataclass(frozen=True)
class Fallback:
    """How a system runs again, once, when its worker dies (a signal or any exit without a
    reply) while starting or running: the worker spec updated with ``spec``."""

    #: worker spec keys of the other path, e.g. ``{"no_repack": True}``
    spec: dict[str, Any]
    #: the path that died, for the note: "with llama.cpp's weight repacking (...)"
    path: str
    #: the path run instead, for the note: "use_extra_bufts=False"
    instead: str


#: llama.cpp's fallback: on Sapphire Rapids its q8_0/q4_1 workers died (SIGSEGV in
#: ggml_backend_amx_mul_mat) with the weights repacked for AMX; without repacking they run
LLAMA_CPP_NO_REPACK = Fallback(
    spec={"no_repack": True},
    path="with llama.cpp's weight repacking (AMX/extra buffer types)",
    instead=f"{NO_REPACK_PARAM}=False",
)


@dataclass
class System:
    """One column of runs: a system at a dtype, with its worker and its timings."""

    name: str
    dtype: str
    modes: tuple[str, ...]
    worker: Worker | None = None
    seconds: dict[str, list[float]] = field(default_factory=dict)
    #: per run: the machine probe (GB/s decode, GFLOP/s prefill), mean of right before and after
    probes: dict[str, list[float]] = field(default_factory=dict)
    #: per run: its round (0-based); the runs of two systems pair by round
    rounds: dict[str, list[int]] = field(default_factory=dict)
    dead: str | None = None
    #: the worker spec it was started with (start_system)
    spec: dict[str, Any] = field(default_factory=dict)
    #: the other path to restart on when the worker dies (once), or None
    fallback: Fallback | None = None
    #: requests replayed on a restarted worker before it measures (the warm-up)
    warmup: list[dict[str, Any]] = field(default_factory=list)
    #: set when the worker died and was restarted with the fallback: how it died
    first_failure: str | None = None
    #: runs measured before that restart (another path): discarded
    discarded_runs: int = 0

    @property
    def label(self) -> str:
        return f"{self.name} {self.dtype}"

    def run_rounds(self, mode: str) -> list[int]:
        """The round of each run of ``mode`` (0, 1, ... where not recorded)."""
        got = self.rounds.get(mode)
        return list(got) if got is not None else list(range(len(self.seconds.get(mode, []))))

    def discard_runs(self) -> int:
        """Forget every measured run (they ran another path); how many there were."""
        n = sum(len(v) for v in self.seconds.values())
        for runs in (self.seconds, self.probes, self.rounds):
            for m in runs:
                runs[m] = []
        return n


def paired_rounds(a: System, b: System, mode: str) -> list[tuple[int, int]]:
    """(index of a's run, index of b's run) for each round in which both ran ``mode``."""
    mine = {r: i for i, r in enumerate(a.run_rounds(mode))}
    return [(mine[r], j) for j, r in enumerate(b.run_rounds(mode)) if r in mine]
