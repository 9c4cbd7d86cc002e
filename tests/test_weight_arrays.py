"""``CompiledModel.weight_arrays`` reads each weight in the dtype the build declares.

The dtype of every stored weight is its buffer's in the build's ``layout.mlir`` (what
the weights writer encoded weights.bin from), not a guess from the slot's size and
``build.json``'s ``dtype``; a layout.mlir that lacks a weight's buffer, does not
parse, or disagrees with ``build.json``'s ``panel_weights`` is one line of CkirError.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.model import CompiledModel  # noqa: E402


@pytest.fixture(scope="module")
def builds(
    llama_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, CompiledModel]]:
    root = tmp_path_factory.mktemp("weight_arrays")
    out = {
        "f32": ckir.compile(llama_dir, root / "f32", max_context=16, panels=False),
        "bf16": ckir.compile(llama_dir, root / "bf16", max_context=16, dtype="bf16", panels=False),
        "bf16p": ckir.compile(llama_dir, root / "bf16p", max_context=16, dtype="bf16"),
    }
    yield out
    for model in out.values():
        model.close()


def bf16_rounded(values: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bf16 (ties to even), as float32."""
    bits = values.astype("<f4").view("<u4").astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype("<u4").view("<f4")


def test_dtypes_come_from_layout_mlir_not_build_json(builds: dict[str, CompiledModel]) -> None:
    """A bf16 build whose build.json lost its ``dtype`` still reads its bf16 matrices as
    bf16 (a guess from the slot sizes took them for the checkpoint's f32 and refused)."""
    plain = builds["f32"].weight_arrays()
    for name in ("bf16", "bf16p"):
        model = builds[name]
        want = model.weight_arrays()
        model.info = {**model.info, "dtype": None}
        got = model.weight_arrays()
        assert got.keys() == want.keys() == plain.keys()
        for weight, values in got.items():
            assert np.array_equal(values, want[weight]), weight
            if values.ndim == 2:  # the matrices are bf16, the norms kept f32
                assert np.array_equal(values, bf16_rounded(plain[weight])), weight
            else:
                assert np.array_equal(values, plain[weight]), weight


def copy_build(model: CompiledModel, dst: Path) -> Path:
    shutil.copytree(model.build_dir, dst)
    return dst


def test_a_layout_without_the_weight_buffer_is_refused(
    builds: dict[str, CompiledModel], tmp_path: Path
) -> None:
    build = copy_build(builds["bf16"], tmp_path / "b")
    layout = build / "layout.mlir"
    lines = layout.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if "lowered.buffer @w.final_norm weight" not in ln]
    assert len(kept) == len(lines) - 1
    layout.write_text("".join(kept))
    with ckir.load(build) as model, pytest.raises(CkirError) as err:
        model.weight_arrays()
    msg = str(err.value)
    assert "\n" not in msg
    assert "layout.mlir: no weight buffer for 'final_norm'" in msg and "recompile" in msg


def test_a_layout_that_does_not_parse_is_one_line(
    builds: dict[str, CompiledModel], tmp_path: Path
) -> None:
    build = copy_build(builds["bf16"], tmp_path / "b")
    (build / "layout.mlir").write_text("graph.model @x {\n  not ir\n")
    with ckir.load(build) as model, pytest.raises(CkirError) as err:
        model.weight_arrays()
    assert "layout.mlir: does not parse" in str(err.value)
    assert "\n" not in str(err.value)


def test_build_json_disagreeing_with_layout_mlir_is_damage(
    builds: dict[str, CompiledModel],
) -> None:
    model = builds["bf16p"]
    packed = model.panel_weights()
    assert set(packed.values()) == {"bf16p"}
    old = model.info
    model.info = {**old, "panel_weights": {**packed, "lm_head": "f32p"}}
    try:
        with pytest.raises(
            CkirError,
            match=r"build.json stores 'lm_head' as f32p, "
            r"layout.mlir as bf16p: the build is damaged",
        ):
            model.weight_arrays()
    finally:
        model.info = old
