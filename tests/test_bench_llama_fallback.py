"""``ckir bench``: a llama.cpp worker that dies is run again once without llama.cpp's weight
repacking (``use_extra_bufts=False``).

No llama.cpp needed: a stand-in ``llama_cpp`` package, written to a temporary folder on the
workers' PYTHONPATH, kills its own process with SIGSEGV (as llama.cpp's AMX path did on
Sapphire Rapids) while the weights are repacked, and otherwise answers like llama_cpp as far
as :class:`ckir.tools.bench.LlamaCppRunner` asks.  Its behaviour comes from the JSON in
``$FAKE_LLAMA_CPP``:

* ``api``: ``params`` (as llama-cpp-python 0.3.x: ``Llama(**kwargs)`` drops unknown keywords
  and reads ``use_extra_bufts`` from ``llama_cpp.llama_cpp.llama_model_default_params()``),
  ``kwarg`` (a ``Llama`` that names ``use_extra_bufts``) or ``old`` (no such parameter);
* ``crash``: ``load`` (in ``Llama(...)``), ``eval`` (at the ``crash_at``-th eval) or ``never``;
* ``fallback``: ``ok``, or ``dies`` (SIGSEGV in ``Llama(...)`` without repacking too);
* ``only``: crash only for model paths containing this text.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ckir.tools import bench

FAKE_INIT = '''
"""A stand-in for llama-cpp-python (tests/test_bench_llama_fallback.py)."""

import json
import os
import signal

import numpy as np

from . import llama_cpp

__version__ = "0.3.99+fake"
GGML_TYPE_F32 = 0
SETTINGS = {"api": "params", "crash": "load", "crash_at": 1, "fallback": "ok", "only": ""}
SETTINGS.update(json.loads(os.environ.get("FAKE_LLAMA_CPP", "{}")))
VOCAB = int(SETTINGS.get("vocab", 64))


def llama_print_system_info():
    return b"CPU : SSE3 = 1 | AVX2 = 1 | AMX_INT8 = 0 | REPACK = 1 | "


def _segv():
    os.kill(os.getpid(), signal.SIGSEGV)


class _Model:
    def _load(self, model_path, repack, n_ctx=512, **_ignored):
        crashes = SETTINGS["only"] in model_path
        dies = SETTINGS["crash"] == "load" if repack else SETTINGS["fallback"] == "dies"
        if crashes and dies:
            _segv()
        self.crash_eval = crashes and repack and SETTINGS["crash"] == "eval"
        self.evals = 0
        self.scores = np.zeros((n_ctx, VOCAB), dtype=np.float32)

    def reset(self):
        pass

    def eval(self, tokens):
        self.evals += 1
        if self.crash_eval and self.evals >= SETTINGS["crash_at"]:
            _segv()
        for i, t in enumerate(tokens):
            self.scores[i % len(self.scores)] = np.sin(np.arange(VOCAB) + t)


if SETTINGS["api"] == "kwarg":

    class Llama(_Model):
        def __init__(self, model_path, *, use_extra_bufts=True, **kwargs):
            self._load(model_path, use_extra_bufts, **kwargs)

else:

    class Llama(_Model):
        def __init__(self, model_path, **kwargs):
            self.model_params = llama_cpp.llama_model_default_params()
            repack = getattr(self.model_params, "use_extra_bufts", True)
            self._load(model_path, repack, **kwargs)
'''

FAKE_BINDINGS = '''
"""The ctypes bindings module of the stand-in (llama_cpp.llama_cpp)."""

import ctypes
import json
import os

_API = json.loads(os.environ.get("FAKE_LLAMA_CPP", "{}")).get("api", "params")
_FIELDS = [("n_gpu_layers", ctypes.c_int32), ("vocab_only", ctypes.c_bool)]
if _API != "old":
    _FIELDS.append(("use_extra_bufts", ctypes.c_bool))


class llama_model_params(ctypes.Structure):
    _fields_ = _FIELDS


def llama_model_default_params():
    params = llama_model_params()
    if _API != "old":
        params.use_extra_bufts = True
    return params
'''


@pytest.fixture
def fake_llama_cpp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Writes the stand-in package; returns ``configure(**settings)``, which sets
    ``$FAKE_LLAMA_CPP`` for the workers started after it."""
    root = tmp_path / "fake-site"
    pkg = root / "llama_cpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_INIT)
    (pkg / "llama_cpp.py").write_text(FAKE_BINDINGS)
    monkeypatch.setenv("PYTHONPATH", str(root))

    def configure(**settings: Any) -> None:
        monkeypatch.setenv("FAKE_LLAMA_CPP", json.dumps(settings))

    return configure


#: what start_workers reads of the command line
ARGS = argparse.Namespace(threads=1, timeout=60.0)


def _llama_spec(tmp_path: Path, dtype: str) -> dict[str, Any]:
    gguf = tmp_path / f"model-{dtype}.gguf"
    gguf.write_bytes(b"")  # the stand-in reads no file
    return {"kind": "llama.cpp", "gguf": str(gguf), "threads": 1, "n_ctx": 16, "n_batch": 8}


def _empty_report() -> bench.Report:
    return bench.Report("m", {}, {}, {}, [], [], [], [], [], {}, {}, {})


def _bench_systems(
    tmp_path: Path,
    dtypes: list[str],
    repeat: int = 3,
    runs: list[tuple[str, str, int]] | None = None,
) -> tuple[list[bench.System], bench.Report]:
    """What ``collect`` does with its systems, minus ckir and the probes: start, warm up,
    ``repeat`` alternating rounds of prefill and decode; ``runs`` gets (dtype, mode, round)
    of every run the rounds ask for."""
    report = _empty_report()
    modes = ("prefill", "decode")
    specs = [
        (bench.System("llama.cpp", dt, modes, fallback=bench.LLAMA_CPP_NO_REPACK), spec)
        for dt in dtypes
        if (spec := _llama_spec(tmp_path, dt))
    ]
    prompt, context, steps = [1, 2, 3], [4, 5], [6, 7]
    with bench._workers([s for s, _ in specs]):
        systems = report.systems = bench.start_workers(specs, ARGS, report)
        bench.warm_up(systems, prompt, context, steps)

        def run_one(s: bench.System, mode: str, r: int) -> float | None:
            if runs is not None:
                runs.append((s.dtype, mode, r))
            return bench._run_one(s, mode, prompt, context, steps)

        bench.alternate_rounds(systems, modes, repeat, run_one, lambda mode, dtype: 1.0)
        report.notes += bench.system_notes(systems)
        bench.set_isa_env(report.env, systems)
    return systems, report


DIED_AT_LOAD = (
    "llama.cpp q8_0: the worker died (SIGSEGV) with llama.cpp's weight repacking "
    "(AMX/extra buffer types) while starting; measured again with use_extra_bufts=False"
)


@pytest.mark.parametrize("api", ["params", "kwarg"])
def test_crash_at_load_falls_back(
    fake_llama_cpp: Any, tmp_path: Path, api: str, capfd: pytest.CaptureFixture
) -> None:
    """q8_0's worker dies loading the repacked weights and runs again without repacking;
    q4_1 (no crash) is measured as ever, in every round."""
    fake_llama_cpp(api=api, crash="load", only="q8_0")
    systems, report = _bench_systems(tmp_path, ["q8_0", "q4_1"])
    q8, q4 = systems
    assert (q8.label, q4.label) == ("llama.cpp q8_0", "llama.cpp q4_1")
    for s in systems:
        assert s.dead is None
        for mode in ("prefill", "decode"):
            assert len(s.seconds[mode]) == 3 and all(t > 0 for t in s.seconds[mode])
            assert s.run_rounds(mode) == [0, 1, 2] and len(s.probes[mode]) == 3
    assert report.notes == [DIED_AT_LOAD]
    assert q8.worker is not None and q8.worker.info["repack"] is False
    assert q4.worker is not None and q4.worker.info["repack"] is True
    # the two systems ran different paths: the ISA entry of each says which
    assert report.env["llama.cpp q8_0 ISA"] == "SSE3 AVX2 REPACK; weight repacking off " + (
        "(use_extra_bufts=False)"
    )
    assert report.env["llama.cpp q4_1 ISA"].endswith(
        "; weight repacking on (extra buffer types, AMX where built)"
    )
    assert "llama.cpp ISA" not in report.env
    assert "Traceback" not in capfd.readouterr().err


def test_crash_in_a_round_reruns_that_system_only(fake_llama_cpp: Any, tmp_path: Path) -> None:
    """The worker dies in round 1's prefill: its runs so far ran the other path and are
    discarded, that run is measured again, and the other system keeps one run per round."""
    # evals of q8_0: warm-up prefill 1, warm-up decode 1 + 2; round 0 prefill 1, decode
    # 1 + 2: round 1's prefill is the 9th
    fake_llama_cpp(crash="eval", crash_at=9, only="q8_0")
    runs: list[tuple[str, str, int]] = []
    systems, report = _bench_systems(tmp_path, ["q8_0", "q4_1"], runs=runs)
    q8, q4 = systems
    # the run that died is asked for again (between fresh probes); every other run once
    again = ("q8_0", "prefill", 1)
    assert runs.count(again) == 2
    others = [x for x in runs if x != again]
    assert len(others) == len(set(others)) == 2 * 2 * 3 - 1
    assert q8.dead is None and q4.dead is None
    assert q8.run_rounds("prefill") == [1, 2] and q8.run_rounds("decode") == [1, 2]
    assert len(q8.seconds["prefill"]) == len(q8.probes["prefill"]) == 2
    for mode in ("prefill", "decode"):
        assert q4.run_rounds(mode) == [0, 1, 2] and len(q4.seconds[mode]) == 3
    (note,) = report.notes
    assert note == (
        "llama.cpp q8_0: the worker died (SIGSEGV) with llama.cpp's weight repacking "
        "(AMX/extra buffer types) while running (prefill); measured again with "
        "use_extra_bufts=False (the 2 run(s) measured before the restart were discarded: "
        "this system has fewer rounds)"
    )
    # pairs by round: round 0 of the restarted system does not exist
    assert bench.paired_rounds(q4, q8, "decode") == [(1, 0), (2, 1)]


def test_fallback_dies_too_drops_the_row(
    fake_llama_cpp: Any, tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    fake_llama_cpp(crash="load", fallback="dies", only="q8_0")
    systems, report = _bench_systems(tmp_path, ["q8_0", "q4_1"], repeat=2)
    assert [s.label for s in systems] == ["llama.cpp q4_1"]
    assert report.notes == [
        "llama.cpp q8_0: skipped: the worker died (SIGSEGV) with llama.cpp's weight "
        "repacking (AMX/extra buffer types) while starting; with use_extra_bufts=False it "
        "died too (SIGSEGV) while starting; no runs reported"
    ]
    assert len(systems[0].seconds["decode"]) == 2
    assert "Traceback" not in capfd.readouterr().err


def test_fallback_dies_in_a_round_drops_the_row(fake_llama_cpp: Any, tmp_path: Path) -> None:
    """Died in a run, then died again restarting: no runs of either path are kept."""
    fake_llama_cpp(crash="eval", crash_at=9, fallback="dies", only="q8_0")
    systems, report = _bench_systems(tmp_path, ["q8_0"], repeat=3)
    (q8,) = systems
    assert q8.dead is not None and not any(q8.seconds.values())
    assert report.notes == [
        "llama.cpp q8_0: stopped: the worker died (SIGSEGV) with llama.cpp's weight "
        "repacking (AMX/extra buffer types) while running (prefill); with "
        "use_extra_bufts=False it died too (SIGSEGV) while starting; no runs reported"
    ]
    assert not [k for k in report.env if k.endswith(" ISA")]  # dropped: no ISA entry


def test_llama_cpp_without_the_parameter_says_so(fake_llama_cpp: Any, tmp_path: Path) -> None:
    """A llama-cpp-python whose Llama and model parameters lack use_extra_bufts: the
    fallback fails with that reason instead of running with the weights repacked."""
    fake_llama_cpp(api="old", crash="load")
    systems, report = _bench_systems(tmp_path, ["q8_0"])
    assert systems == []
    (note,) = report.notes
    assert note.startswith("llama.cpp q8_0: skipped: the worker died (SIGSEGV) with llama.cpp")
    assert (
        "with use_extra_bufts=False it failed (llama-cpp-python 0.3.99+fake cannot load "
        "without weight repacking: neither Llama() nor llama_model_params has "
        "use_extra_bufts" in note
    )


def test_no_fallback_without_a_death(fake_llama_cpp: Any, tmp_path: Path) -> None:
    """A worker that works is never restarted: no note, the repacked path's ISA entry."""
    fake_llama_cpp(crash="never")
    systems, report = _bench_systems(tmp_path, ["q8_0", "q4_1"], repeat=1)
    assert report.notes == [] and all(s.first_failure is None for s in systems)
    repacked = "SSE3 AVX2 REPACK; weight repacking on (extra buffer types, AMX where built)"
    assert report.env == {"llama.cpp": "0.3.99+fake", "llama.cpp ISA": repacked}


@pytest.mark.parametrize("fallback", ["ok", "dies"])
def test_bench_run_with_a_crashing_llama_cpp(
    fake_llama_cpp: Any,
    llama_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    fallback: str,
) -> None:
    """A whole (tiny) ``ckir bench --against llama.cpp`` whose llama.cpp dies at load."""
    fake_llama_cpp(crash="load", fallback=fallback, vocab=256)  # the tiny llama's vocab
    monkeypatch.setattr(bench, "cache_root", lambda: tmp_path / "cache")  # the GGUF goes here
    report = tmp_path / "bench.json"
    small = "--dtype q8_0 --repeat 2 --prompt-tokens 8 --decode-tokens 4 --context 8"
    argv = [str(llama_dir), "--against", "llama.cpp", *small.split(), "--probe-mib", "16"]
    argv += ["--build-dir", str(tmp_path / "builds"), "--json", str(report)]
    assert bench.main(argv) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    rows = {
        tuple(cells[:3]): cells
        for line in out.out.splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    data = json.loads(report.read_text())
    llama = [s for s in data["systems"] if s["name"] == "llama.cpp"]
    assert ("ckir", "q8_0", "decode") in rows
    if fallback == "ok":
        assert f"note: {DIED_AT_LOAD}" in out.out
        for mode in ("prefill", "decode"):
            assert re.fullmatch(r"\d\.\d\d \(.*\)", rows["llama.cpp", "q8_0", mode][5])
        assert "llama.cpp ISA: SSE3 AVX2 REPACK; weight repacking off (use_extra_bufts=False)" in (
            out.out
        )
        (s,) = llama
        assert s["fallback"] == "use_extra_bufts=False"
        assert len(s["seconds"]["decode"]) == 2 and s["rounds"]["decode"] == [0, 1]
    else:
        assert not [r for r in rows if r[0] == "llama.cpp"]
        assert llama == []
        assert (
            "note: llama.cpp q8_0: skipped: the worker died (SIGSEGV) with llama.cpp's weight "
            "repacking (AMX/extra buffer types) while starting; with use_extra_bufts=False it "
            "died too (SIGSEGV) while starting; no runs reported"
        ) in out.out
        assert "llama.cpp ISA" not in out.out
