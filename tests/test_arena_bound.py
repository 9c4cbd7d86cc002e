"""The state arena against its lower bound (``arena.<mode>`` / ``bound.<mode>`` totals).

* the bound :func:`ckir.dialects.layout.mode_usage` computes equals its definition
  (the most footprint bytes live at one call) evaluated call by call on random slots;
* the liveness planner stays within 1.05x of the bound on every template x mode, on the
  tiny configs the parity tests use (graphs built from the configs on the meta device,
  no weights), and reaches it (1.00x) on the tiny decoders except llama / qwen2 backward
  (strict xfail: 1.0014x, 1.0016x).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("transformers")

import transformers  # noqa: E402

from ckir.dialects import layout as ly  # noqa: E402
from ckir.passes.plan_layout import Item, Planner  # noqa: E402
from ckir.tools.arena_bound import measure  # noqa: E402
from ckir.tools.zoo import ARCHES, tiny_config  # noqa: E402

MAX_CONTEXT = 32


def _configs() -> dict[str, Any]:
    """Every tiny config of the parity tests, as transformers config objects."""
    import test_gemma
    import test_gemma3
    import test_templates_phi3_starcoder2 as phi3_sc2

    out: dict[str, Any] = {
        a: transformers.AutoConfig.for_model(a, **tiny_config(a)) for a in ARCHES
    }
    for table in (test_gemma.CONFIGS, phi3_sc2.CASES):
        for key, (cfg_cls, _, kwargs) in table.items():
            out[key] = getattr(transformers, cfg_cls)(**kwargs)
    for key, kwargs in test_gemma3.CONFIGS.items():
        out[key] = transformers.Gemma3TextConfig(max_position_embeddings=MAX_CONTEXT, **kwargs)
    return out


CONFIGS = _configs()


#: known misses of the 1.05x target (none since the planner tries seeded orders: phi3_gqa
#: and phi3_gguf prefill were 1.072x / 1.060x); a miss added here is a strict xfail, so a
#: planner that fixes it fails here until the mark goes
MISSES: set[tuple[str, str]] = set()


def _cases() -> list[Any]:
    out = []
    for key in sorted(CONFIGS):
        for mode in ("prefill", "decode", "backward"):
            marks = []
            if (key, mode) in MISSES:
                marks = [pytest.mark.xfail(strict=True, reason="planner misses 1.05x here")]
            out.append(pytest.param(key, mode, marks=marks, id=f"{mode}-{key}"))
    return out


@pytest.mark.parametrize(("key", "mode"), _cases())
def test_arena_within_bound(key: str, mode: str) -> None:
    usage, _ = measure(CONFIGS[key], modes=(mode,), max_context=MAX_CONTEXT)
    assert mode in usage
    for m, (used, bound) in usage.items():
        assert bound > 0
        assert used >= bound, f"{key} {m}: arena {used} below its lower bound {bound}"
        assert used <= 1.05 * bound, f"{key} {m}: arena {used} > 1.05 x bound {bound}"


#: tiny llama and qwen2 backward end 1.0014x / 1.0016x above the bound (the full-size
#: shapes reach it: docs/memory.md); strict xfail, as above
_TINY_BACKWARD = pytest.mark.xfail(strict=True, reason="tiny backward: 1.0014x-1.0016x")


@pytest.mark.parametrize(
    ("arch", "mode"),
    [
        pytest.param(a, m, marks=[_TINY_BACKWARD] if m == "backward" and a != "gpt2" else [])
        for a in ("llama", "qwen2", "gpt2")
        for m in ("prefill", "decode", "backward")
    ],
)
def test_decoders_reach_the_bound(arch: str, mode: str) -> None:
    usage, _ = measure(CONFIGS[arch], modes=(mode,), max_context=MAX_CONTEXT)
    for m, (used, bound) in usage.items():
        assert used == bound, f"{arch} {m}: arena {used}, bound {bound}"


def _brute_bound(plan: ly.PlanOp) -> dict[str, int]:
    """The bound by its definition: every call index of every mode, every slot."""
    align, canaries = plan.align_bytes, plan.has_canaries
    slots = [s for a in plan.arenas().values() for s in a.slots()]
    perm = sum(ly.footprint(s.size_bytes, align, canaries) for s in slots if s.live_range is None)
    out: dict[str, int] = {}
    modes = {s.live_range[0] for s in slots if s.live_range is not None}
    for mode in modes:
        ranges = [(s.live_range, s.size_bytes) for s in slots if s.live_range is not None]
        last = max(r[2] for r, _ in ranges if r[0] == mode)
        best = 0
        for i in range(last + 1):
            live = sum(
                ly.footprint(size, align, canaries)
                for (m, first, end), size in ranges
                if m == mode and first <= i <= end
            )
            best = max(best, live)
        out[mode] = perm + best
    return out


@pytest.mark.parametrize("seed", range(12))
def test_bound_matches_its_definition_and_planner_respects_it(seed: int) -> None:
    rng = random.Random(seed)
    align = rng.choice([8, 64, 128])
    canaries = rng.random() < 0.5
    planner = Planner(align, canaries)
    perm = [Item(f"kv{i}", rng.randint(1, 300), "kv_cache", None) for i in range(rng.randint(0, 3))]
    trans = []
    for i in range(rng.randint(1, 40)):
        mode = rng.choice(["prefill", "decode"])
        first = rng.randint(0, 30)
        live = (mode, first, first + rng.randint(0, 8))
        trans.append(Item(f"a{i}", rng.choice([1, 7, 64, 65, 100, 1000]), "activation", live))
    placed_perm = planner.bump(perm)
    base = max((p.end for p in placed_perm), default=0)
    placed = placed_perm + planner.best_fit(trans, base)
    plan = ly.PlanOp.make("p", "liveness", align, canaries)
    size = max((p.end for p in placed), default=0)
    arena = ly.ArenaOp.make("state", -(-size // align) * align)
    for p in placed:
        arena.body_block.add_op(
            ly.SlotOp.make(p.item.name, p.offset, p.item.size, p.item.role, p.canary, p.item.live)
        )
    plan.body_block.add_op(arena)
    totals: dict[str, int] = {}
    for p in placed:
        totals[p.item.role] = totals.get(p.item.role, 0) + p.item.size
    plan.body_block.add_op(ly.TotalsOp.make({**totals, **ly.usage_totals(plan)}))
    plan.verify()  # no overlap of live slots, totals consistent
    usage = ly.mode_usage(plan)
    assert {m: b for m, (_, b) in usage.items()} == _brute_bound(plan)
    for mode, (used, bound) in usage.items():
        assert used >= bound, (mode, used, bound)
