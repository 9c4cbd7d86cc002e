"""ckir.vocab owns the vocabulary: every other list is derived from it or checked here.

Each check would fail if a module kept (or grew) a copy of its own that drifted:
an op kind the dialect lacks, a kernel for an unknown op, a mode without a pass,
a dtype whose size disagrees with NumPy, or a literal copy of a vocabulary list.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ckir import vocab
from ckir.dialects import graph as g
from ckir.dialects import lowered as lw
from ckir.passes.lowering.patterns import PATTERNS
from ckir.registry import load_registry
from ckir.universe import CKIR_UNIVERSE

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    p
    for folder in ("ckir", "dialects", "passes", "tools")
    for p in sorted((ROOT / folder).rglob("*.py"))
    if p.name != "vocab.py"
]


def test_graph_dialect_follows_the_op_kinds() -> None:
    assert set(g.COMPUTE_OPS) == set(vocab.GRAPH_OPS)
    for kind, cls in g.COMPUTE_OPS.items():
        sig = vocab.GRAPH_OPS[kind]
        assert cls.name == f"graph.{kind}"
        assert (sig.ins, sig.outs) == (cls.NUM_INPUTS, cls.NUM_OUTPUTS), kind
        assert sig.weight_counts == cls.WEIGHT_COUNTS, kind
        assert tuple(sig.attrs) == cls.PROP_ORDER, kind
        assert sig.dim_attrs == cls.DIM_PROPS, kind
        assert cls.__doc__ and f"graph.{kind}" in cls.__doc__, f"{kind}: no IR example"


def test_every_graph_op_kind_has_one_lowering_pattern() -> None:
    kinds = [p.kind for p in PATTERNS]
    assert len(kinds) == len(set(kinds))
    assert set(kinds) == set(vocab.GRAPH_OPS)


def test_registry_speaks_the_vocabulary() -> None:
    registry = load_registry()
    for name, spec in registry.items():
        assert spec.op in vocab.KERNEL_OPS, name
        assert set(spec.modes) <= set(vocab.MODES), name
        assert all(o.dtype in vocab.DTYPES for o in spec.operands), name
    implemented = {spec.op for spec in registry.values()}
    for kind, sig in vocab.GRAPH_OPS.items():  # a kind served by another's kernels names a real one
        assert not sig.kernel or sig.kernel in implemented, kind
    # a kernel-only op nobody implements is a stale vocabulary entry
    assert implemented >= vocab.KERNEL_ONLY_OPS
    for dtype in vocab.WEIGHT_DTYPES:  # every weight dtype has a linear kernel per mode
        for mode in vocab.INFERENCE_MODES:
            assert any(
                s.op == "linear" and mode in s.modes and s.operands[1].dtype == dtype
                for s in registry.values()
            ), (dtype, mode)
    # training runs on f32 weights: a forward linear and both backward products
    for kind in ("linear", "linear_bwd_input", "linear_bwd_weight"):
        assert any(s.op == kind and "backward" in s.modes for s in registry.values()), kind


def test_every_lowered_mode_has_a_pass() -> None:
    passes = set(CKIR_UNIVERSE.all_passes)
    for mode in vocab.LOWERED_MODES:
        assert f"lower-{mode}" in passes
    for mode in set(vocab.MODES) - set(vocab.LOWERED_MODES):
        assert f"lower-{mode}" not in passes, f"{mode} is lowered: mark it so in MODE_TABLE"


def test_dtype_table() -> None:
    assert lw.DTYPES == g.DTYPES == vocab.DTYPES
    for d in vocab.DTYPE_TABLE:
        assert (d.elem_bytes is None) != (d.block is None), d.name
        if d.numpy is not None:
            assert np.dtype(d.numpy).itemsize == d.elem_bytes, d.name
        assert d.c_type in ("float", "int32_t", "int64_t", "uint16_t", "uint8_t"), d.name
    assert vocab.storage_bytes("q8_0", 64) == 68
    assert vocab.storage_bytes("bf16", 3) == 6
    with pytest.raises(KeyError, match="unknown dtype 'f99'"):
        vocab.dtype_info("f99")


def test_file_format_maps_land_on_vocabulary_dtypes() -> None:
    from ckir.frontend.gguf import GGUF_WEIGHT_DTYPES
    from ckir.frontend.hf import WEIGHT_DTYPES as HF_WEIGHT_DTYPES

    assert set(HF_WEIGHT_DTYPES.values()) <= set(vocab.DTYPES)
    assert set(GGUF_WEIGHT_DTYPES.values()) <= set(vocab.DTYPES)


# literal copies of vocabulary lists: a tuple or list of two or more of these names
_MODE_LIST = re.compile(
    r"""[(\[]\s*"(prefill|decode|backward)"\s*,\s*"(prefill|decode|backward)"\s*"""
)
_DTYPE_LIST = re.compile(r"""[(\[]\s*"(f32|bf16|q8_0)"\s*,\s*"(bf16|f16|q8_0|q4_0|i32)"\s*,""")
_ROLE_LIST = re.compile(r"""[(\[{]\s*"(weight|kv_cache)"\s*,\s*"(kv_cache|activation)"\s*,""")


@pytest.mark.parametrize(
    "pattern", [_MODE_LIST, _DTYPE_LIST, _ROLE_LIST], ids=lambda p: p.pattern[:30]
)
def test_no_second_copy_of_a_vocabulary_list(pattern: re.Pattern[str]) -> None:
    found = [
        f"{p.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}"
        for p in SOURCES
        for text in [p.read_text()]
        for m in pattern.finditer(text)
    ]
    assert not found, f"copies of a ckir.vocab list: {found}"
