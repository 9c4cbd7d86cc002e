"""Instantiated template (:class:`~ckir.template.ModelSpec`) -> graph dialect module.

The thin last step of the frontend: every decision (which weights, which ops,
which shapes) was made by the template engine; this file only spells the
spec as ``graph`` ops::

    builtin.module {
      graph.model @<name> arch "<template>" symbols {...} {
        graph.weight ...          (one per weight, in template order)
        graph.header { ... }
        graph.body repeat L (...) { ... }
        graph.footer (...) { ... }
      }
    }
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, SSAValue
from xdsl.utils.exceptions import VerifyException

from ckir.dialects import graph as g
from ckir.errors import CkirError
from ckir.template import ModelSpec, SectionSpec, ValueType


@dataclass(frozen=True)
class ResolvedWeight:
    """How a template weight was found in the checkpoint."""

    hf: str | None  # the HF name that matched (with "{i}" for per-layer weights); None if tied
    dtype: str  # graph dtype: f32, bf16, f16


def _tensor_type(t: ValueType) -> g.TensorType:
    shape, dtype = t.to_ir()
    return g.TensorType.make(shape, dtype)


def _attrs(attrs: Mapping[str, object]) -> dict[str, Attribute | float | int | str | bool]:
    out: dict[str, Attribute | float | int | str | bool] = {}
    for k, v in attrs.items():
        if v is False:  # flags are unit attributes: false means absent
            continue
        if isinstance(v, dict):  # schedule hints
            out[k] = g.ScheduleAttr.make(**v)
        else:
            out[k] = v  # type: ignore[assignment]
    return out


def _fill(block: Block, sec: SectionSpec, values: dict[str, SSAValue]) -> list[SSAValue]:
    for name, t in sec.inputs:
        op = g.InputOp.make(name, _tensor_type(t))
        op.results[0].name_hint = name
        block.add_op(op)
        values[name] = op.results[0]
    for spec in sec.ops:
        op = g.compute_op(
            spec.kind,
            [values[v] for v in spec.ins],
            [_tensor_type(t) for t in spec.out_types],
            weights=spec.weights,
            attrs=_attrs(spec.attrs),
            when=spec.when,
        )
        for name, r in zip(spec.outs, op.results, strict=True):
            r.name_hint = name
            values[name] = r
        block.add_op(op)
    return [values[name] for name, _ in sec.results]


def _section_args(block: Block, sec: SectionSpec) -> dict[str, SSAValue]:
    values: dict[str, SSAValue] = {}
    for arg, (name, _) in zip(block.args, sec.args, strict=True):
        arg.name_hint = name
        values[name] = arg
    return values


def build_graph(
    spec: ModelSpec,
    name: str,
    weights: Mapping[str, ResolvedWeight] | None = None,
) -> ModuleOp:
    """The graph module for ``spec``; ``name`` is the model's symbol name.

    ``weights`` says which HF name matched and the dtype of each (non-tied)
    weight; without it (no checkpoint) the first candidate name and f32 are used.
    """
    model = g.ModelOp.make(name, spec.template.name, spec.symbols)
    block = model.body_block
    resolved: dict[str, ResolvedWeight] = dict(weights or {})
    for w in spec.weights:
        if w.tied_to is None and w.name not in resolved:
            resolved[w.name] = ResolvedWeight(w.hf[0] if w.hf else None, "f32")
    for w in spec.weights:
        if w.tied_to is not None:
            dtype = resolved[w.tied_to].dtype
            block.add_op(
                g.WeightOp.make(w.name, [d.to_ir() for d in w.shape], dtype, tied_to=w.tied_to)
            )
            continue
        r = resolved[w.name]
        sl = None
        if w.slice is not None:
            axis, start, stop = w.slice
            sl = (axis, start.to_ir(), stop.to_ir())
        block.add_op(
            g.WeightOp.make(
                w.name,
                [d.to_ir() for d in w.shape],
                r.dtype,
                hf=r.hf,
                hf_shape=[d.to_ir() for d in w.hf_shape] if w.hf_shape is not None else None,
                slice=sl,
                transpose=w.transpose,
                gguf=w.gguf,
            )
        )

    header = g.HeaderOp.make()
    carried = _fill(header.block, spec.header, {})
    header.block.add_op(g.YieldOp.make(carried))
    block.add_op(header)

    assert spec.body.repeat is not None
    body = g.BodyOp.make(
        str(spec.body.repeat.to_ir()), [_tensor_type(t) for _, t in spec.body.args]
    )
    carried = _fill(body.block, spec.body, _section_args(body.block, spec.body))
    body.block.add_op(g.YieldOp.make(carried))
    block.add_op(body)

    footer = g.FooterOp.make([_tensor_type(t) for _, t in spec.footer.args])
    outputs = _fill(footer.block, spec.footer, _section_args(footer.block, spec.footer))
    footer.block.add_op(g.OutputOp.make(outputs))
    block.add_op(footer)

    module = ModuleOp([model])
    try:
        module.verify()
    except VerifyException as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CkirError(
            f"{spec.template.file}: template {spec.template.name} builds a graph that does "
            f"not verify: {first}"
        ) from None
    return module
