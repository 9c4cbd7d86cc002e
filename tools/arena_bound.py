"""Arena size against its lower bound, per mode, for model shapes compiled without weights.

    python -m ckir.tools.arena_bound [smollm-135m qwen2-0.5b gpt2-small] [--strategy S] [--no-views]

For each built-in shape of ``tools/bench_build.py`` (or a HF ``config.json`` path),
the graph is imported from the config and the tensor shapes of a transformers model
built on PyTorch's ``meta`` device (no weights, no download), lowered for prefill,
decode and backward, planned, and the ``arena.<mode>`` / ``bound.<mode>`` totals
printed with their ratio and the time the planner took.  docs/memory.md quotes it.
torch and transformers are imported inside the functions: a tool, not ckir's runtime.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from ckir.compiler import CompileOptions, lower
from ckir.dialects import layout as ly
from ckir.frontend.hf import import_tensors
from ckir.frontend.safetensors_header import TensorInfo
from ckir.template import select_template
from ckir.vocab import LOWERED_MODES

#: safetensors dtype names of the torch dtypes a meta model has
_ST_DTYPES = {"torch.float32": "F32", "torch.bfloat16": "BF16", "torch.float16": "F16"}


def hf_config(model_type: str, config: Mapping[str, Any]) -> Any:
    """The transformers config object of ``model_type`` with the keys of ``config``."""
    import transformers

    return transformers.AutoConfig.for_model(model_type, **config)


def meta_tensors(cfg: Any) -> dict[str, TensorInfo]:
    """The tensor header a transformers checkpoint of config object ``cfg`` would have
    (names, dtypes, shapes), from a model on the ``meta`` device: no bytes allocated."""
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    out: dict[str, TensorInfo] = {}
    offset = 0
    fake = Path("meta.safetensors")
    tied = (getattr(model, "_tied_weights_keys", None) or ()) if cfg.tie_word_embeddings else ()
    for name, t in model.state_dict().items():
        if name in tied:  # a tied checkpoint does not store the copy
            continue
        size = t.numel() * t.element_size()
        dtype = _ST_DTYPES[str(t.dtype)]
        out[name] = TensorInfo(dtype, tuple(t.shape), (offset, offset + size), fake)
        offset += size
    return out


def graph_of_config(cfg: Any, name: str = "model") -> ModuleOp:
    """The graph module of a transformers config object, without weights
    (:func:`meta_tensors`); the template is chosen by its ``model_type``."""
    config = cfg.to_dict()
    tpl = select_template(cfg.model_type, None, config_name=name)
    tensors = meta_tensors(cfg)
    return import_tensors(tpl, config, name, tensors, Path(name), name, [], allow_unused=("*",))


def plan_of(module: ModuleOp) -> ly.PlanOp:
    return next(op for op in module.ops if isinstance(op, ly.PlanOp))


def measure(
    cfg: Any,
    modes: Sequence[str] = LOWERED_MODES,
    max_context: int | None = None,
    strategy: str | None = None,
    views: bool = True,
) -> tuple[dict[str, tuple[int, int]], float]:
    """``({mode: (arena bytes, bound)}, seconds spent lowering and planning)`` of
    transformers config ``cfg``: one build per mode (training builds need f32 weights
    and no panels; their ``optimize`` program is reported too)."""
    out: dict[str, tuple[int, int]] = {}
    seconds = 0.0
    for mode in modes:
        module = graph_of_config(cfg)
        train = mode == "backward"
        opts = CompileOptions(
            modes=(mode,),
            max_context=max_context,
            strategy=strategy,
            dtype="f32" if train else None,
            panels=False if train else None,
            views=views,
        )
        t0 = time.perf_counter()
        lower(module, opts)
        seconds += time.perf_counter() - t0
        usage = ly.mode_usage(plan_of(module))
        for m, v in usage.items():
            out[m] = v
    return out, seconds


def main(argv: list[str] | None = None) -> int:
    from ckir.tools.bench_build import SHAPES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(SHAPES))
    ap.add_argument("--strategy", default=None)
    ap.add_argument("--max-context", type=int, default=None)
    ap.add_argument("--no-views", action="store_true", help="without --plan-views")
    args = ap.parse_args(argv)
    print(f"{'model':<14} {'mode':<9} {'arena':>14} {'bound':>14} {'ratio':>6}")
    for name in args.models:
        arch, cfg = SHAPES[name]
        usage, secs = measure(
            hf_config(arch, cfg),
            max_context=args.max_context,
            strategy=args.strategy,
            views=not args.no_views,
        )
        for mode, (used, bound) in usage.items():
            print(f"{name:<14} {mode:<9} {used:>14,} {bound:>14,} {used / bound:>6.3f}")
        print(f"{name:<14} lowering + planning {secs:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
