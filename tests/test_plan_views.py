"""``--plan-views`` (passes/plan_views.py): in-place reuse keeps every result.

* the operands :data:`ALIASABLE` names exist in every registry kernel of those kinds,
  the output writing and the inputs reading the same extent and dtype (a renamed or
  reshaped operand fails here, not silently in a build);
* builds of tiny random checkpoints (no torch) compiled with and without the pass give
  the same prefill and decode logits, and for training the same loss, gradients and
  updated weights' logits, within 1e-6 of the largest value; the build with the pass
  does have in-place views, the arena of its prefill is no larger, and the plan
  interpreter (ckir.interp) running the same aliased plan agrees with its C.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ckir.compiler import CompileOptions, compile_model
from ckir.dialects import layout as ly
from ckir.interp import PlanInterpreter
from ckir.ir_io import load_module
from ckir.model import CompiledModel
from ckir.passes.plan_views import ALIASABLE
from ckir.registry import load_registry
from ckir.tools.zoo import make_numpy_model

MAX_CONTEXT = 24
TOL = 1e-6


def test_aliasable_operands_match_the_registry() -> None:
    seen = set()
    for name, spec in load_registry().items():
        if spec.op not in ALIASABLE:
            continue
        seen.add(spec.op)
        out, ins = ALIASABLE[spec.op]
        by_name = {o.name: o for o in spec.operands}
        assert out in by_name and by_name[out].access == "write", (name, out)
        for i in ins:
            assert i in by_name and by_name[i].access == "read", (name, i)
            assert by_name[i].extent == by_name[out].extent, (name, i)
            assert by_name[i].dtype == by_name[out].dtype, (name, i)
    assert seen == set(ALIASABLE), f"kinds without a kernel: {set(ALIASABLE) - seen}"


def _plan(build: Path) -> ly.PlanOp:
    return next(op for op in load_module(build / "layout.mlir").ops if isinstance(op, ly.PlanOp))


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    scale = max(float(np.abs(want).max()), 1e-30)
    err = float(np.abs(got.astype(np.float64) - want).max())
    assert err <= TOL * scale, f"{what}: max error {err:.3g} > {TOL} * {scale:.3g}"


def _pair(src: Path, out: Path, **kw: object) -> tuple[CompiledModel, CompiledModel]:
    models = []
    for views in (True, False):
        options = CompileOptions(max_context=MAX_CONTEXT, views=views, **kw)  # type: ignore[arg-type]
        compile_model(src, out / f"views_{views}", options)
        models.append(CompiledModel(out / f"views_{views}"))
    return models[0], models[1]


@pytest.mark.parametrize(
    ("arch", "fuse"), [("llama", False), ("llama", True), ("gpt2", False), ("qwen2", True)]
)
def test_inference_with_and_without_views(arch: str, fuse: bool, tmp_path: Path) -> None:
    src = make_numpy_model(arch, tmp_path / "src", seed=5)
    mine, ref = _pair(src, tmp_path, fuse=fuse)
    with mine, ref:
        plan = _plan(mine.build_dir)
        inplace = [v for a in plan.arenas().values() for v in a.views() if v.is_inplace]
        assert inplace, f"{arch}: no in-place reuse"
        assert plan.totals()[ly.INPLACE_BYTES_KEY] == sum(v.size_bytes for v in inplace)
        used = ly.mode_usage(plan)["prefill"][0]
        assert used <= ly.mode_usage(_plan(ref.build_dir))["prefill"][0]
        tokens = np.random.default_rng(1).integers(0, mine.vocab_size, size=13)
        _close(mine.prefill(tokens), ref.prefill(tokens), f"{arch} prefill")
        for token in (3, 11, 40):
            _close(mine.decode(token), ref.decode(token), f"{arch} decode")
        interp = PlanInterpreter(mine.build_dir)
        mine.reset()
        got = interp.prefill(tokens[:7])
        want = mine.prefill(tokens[:7])
        assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_training_with_and_without_views(arch: str, tmp_path: Path) -> None:
    src = make_numpy_model(arch, tmp_path / "src", seed=6)
    modes = ("prefill", "decode", "backward")
    mine, ref = _pair(src, tmp_path, modes=modes)
    with mine, ref:
        plan = _plan(mine.build_dir)
        assert any(v.is_inplace for v in plan.arenas()["state"].views())
        rng = np.random.default_rng(4)
        tokens, targets = (rng.integers(0, mine.vocab_size, size=11) for _ in range(2))
        loss, want = mine.backward(tokens, targets), ref.backward(tokens, targets)
        assert abs(loss - want) <= TOL * abs(want)
        grads, want_grads = mine.gradients(), ref.gradients()
        assert set(grads) == set(want_grads)
        gmax = max(float(np.abs(g).max()) for g in want_grads.values())
        for name, grad in want_grads.items():
            err = float(np.abs(grads[name] - grad).max())
            assert err <= TOL * gmax, f"{arch} gradient of {name}: {err:.3g}"
        mine.optimizer_step(1e-3)
        ref.optimizer_step(1e-3)
        _close(mine.prefill([5, 6, 7]), ref.prefill([5, 6, 7]), f"{arch} after a step")


def _row_views(plan: ly.PlanOp) -> list[ly.LayoutViewOp]:
    return [v for a in plan.arenas().values() for v in a.views() if v.row_offset is not None]


def test_kv_append_views_keep_every_position(tmp_path: Path) -> None:
    """The KV append as views at row P (k / v written straight into the caches, no
    kv_store): every layer's k and v of both modes are such views, copies_removed counts
    them, and the C build equals the build without views at P > 0 too (a second prefill
    chunk at P = 7, then decode steps), as does the plan interpreter (same rows)."""
    layers = 3
    src = make_numpy_model("llama", tmp_path / "src", seed=9, num_hidden_layers=layers)
    mine, ref = _pair(src, tmp_path)
    with mine, ref:
        module = load_module(mine.build_dir / "layout.mlir")
        plan = next(op for op in module.ops if isinstance(op, ly.PlanOp))
        rows = _row_views(plan)
        assert len(rows) == 2 * layers * 2  # k and v, per layer, prefill and decode
        assert plan.totals()[ly.COPIES_KEY] == len(rows)
        assert {v.root_name for v in rows} == {
            f"kv.layers.{i}.{kv}" for i in range(layers) for kv in "kv"
        }
        assert "kv_store" not in (mine.build_dir / "model.c").read_text()
        assert "kv_store" in (ref.build_dir / "model.c").read_text()
        interp = PlanInterpreter(mine.build_dir)
        tokens = np.random.default_rng(2).integers(0, mine.vocab_size, size=12)
        for chunk in (tokens[:7], tokens[7:]):  # the second chunk starts at P = 7
            got = mine.prefill(chunk)
            _close(got, ref.prefill(chunk), "prefill chunk")
            want = interp.prefill(chunk)
            assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())
        for token in (5, 17, 2):
            got = mine.decode(token)
            _close(got, ref.decode(token), "decode")
            want = interp.decode(token)
            assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_q8_0_cache_keeps_its_copy(tmp_path: Path) -> None:
    """A Q8_0 KV cache: kv_store_q8_0 quantizes, it is no copy; the pass leaves it."""
    from ckir.compiler import import_source, lower
    from ckir.dialects import lowered as lw

    src = make_numpy_model(
        "llama",
        tmp_path / "src",
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=96,
        num_hidden_layers=2,
    )
    module, _, _ = import_source(src, None)
    lower(module, CompileOptions(max_context=MAX_CONTEXT, kv_dtype="q8_0"))
    model = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp))
    plan = next(op for op in module.ops if isinstance(op, ly.PlanOp))
    assert not _row_views(plan)
    assert plan.totals()[ly.COPIES_KEY] == 0
    stores = [
        c for p in model.programs().values() for c in p.calls() if "kv_store" in c.kernel_name
    ]
    assert stores and all(c.kernel_name == "kv_store_q8_0" for c in stores)
