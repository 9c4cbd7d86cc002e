"""The kernel registry gives the recorded entries and the recorded kernel choices.

``tests/registry_expected/entries.json`` holds every expanded registry entry and
``selection.json`` the kernel each call of each build of the suite's matrix
selects (see ``tests/registry_selection.py``, which also rewrites them).  A change
of the registry's format must leave both unchanged; a change of a kernel or of
the selection rules shows here first, and the files are then regenerated in the
same commit, saying why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from registry_selection import (
    ENTRIES_FILE,
    GGUF_SOURCES,
    SELECTION_FILE,
    SOURCES,
    builds,
    expanded_entries,
    lowered_calls,
    make_source,
    program_calls,
    select,
)

#: sources whose builds are re-lowered in the quick runs (a llama checkpoint and a GGUF
#: file); the others are marked slow.  The query replay covers every build quickly.
QUICK_SOURCES = ("llama_i128", "llama_i128.q4_0.gguf")


@pytest.fixture(scope="module")
def selection() -> dict[str, Any]:
    return json.loads(SELECTION_FILE.read_text())


def test_expanded_entries_equal_the_record():
    """Every entry, every field (operand extents and docs included), as recorded."""
    want = json.loads(ENTRIES_FILE.read_text())
    got = expanded_entries()
    assert sorted(got) == sorted(want), (
        f"kernels added {sorted(set(got) - set(want))}, removed {sorted(set(want) - set(got))}"
    )
    for name, entry in want.items():
        for key, value in entry.items():
            assert got[name][key] == value, f"{name}.{key}: {got[name][key]!r} != {value!r}"
        assert set(got[name]) == set(entry), name


def test_recorded_questions_get_the_recorded_kernels(selection: dict[str, Any]):
    """Every kernel question lowering and fusion asked while making the builds."""
    assert len(selection["queries"]) > 400
    wrong = []
    for query in selection["queries"]:
        got = select(query)
        if got != query["kernel"]:
            wrong.append(f"{query}: now {got}")
    assert not wrong, f"{len(wrong)} choices changed, e.g. {wrong[:3]}"


def test_record_covers_the_matrix(selection: dict[str, Any]):
    """The record has every build of the matrix (and none it lacks), all lowered."""
    keys = [b.key for b in builds()]
    assert len(set(keys)) == len(keys)
    assert sorted(selection["builds"]) == sorted(keys)
    errors = {k: v for k, v in selection["builds"].items() if isinstance(v, str)}
    assert not errors
    chosen = {k for p in selection["programs"] for k in p}
    # every weight dtype family of the registry is chosen by some build
    for name in ("gemm_q4_0p", "gemv_qkv_bias_q8_0", "embed_q4_1", "gemm_gate_up_bf16p"):
        assert name in chosen, name


def _params() -> list[Any]:
    out = []
    for name in (*SOURCES, *GGUF_SOURCES):
        marks = () if name in QUICK_SOURCES else (pytest.mark.slow,)
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("source", _params())
def test_builds_select_the_recorded_kernels(source: str, selection: dict[str, Any], tmp_path: Path):
    """Lower every build of ``source`` again: each call names the recorded kernel."""
    path = make_source(source, tmp_path)
    mine = [b for b in builds() if b.source == source]
    assert mine
    for build in mine:
        got = lowered_calls(build, path)
        want = program_calls(selection, build.key)
        assert got == want, build.key
