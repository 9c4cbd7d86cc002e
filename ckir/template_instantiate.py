"""Instantiation: a :class:`~ckir.template_schema.Template` and a HF config -> a
:class:`~ckir.template_schema.ModelSpec`.

* :func:`bind` evaluates the template's symbols (dims) and params (scalars,
  flags) from the config and runs its checks;
* :func:`instantiate` binds, then keeps the weights, ops and buffers whose
  conditions hold, checks that the sections still wire up (every value
  produced, the body's args and yields of one type, each op's weight count)
  and evaluates every shape.

``Template.bind`` / ``Template.instantiate`` call these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ckir.dialects.dims import Dim, DimError
from ckir.errors import CkirError
from ckir.template_conditions import TemplateError
from ckir.template_schema import (
    BufferSpec,
    ModelSpec,
    OpDef,
    OpSpec,
    SectionDef,
    SectionSpec,
    Template,
    ValueType,
    WeightDef,
    WeightSpec,
    WeightVariant,
    coerce,
    kind_of,
    resolve_weight,
)
from ckir.vocab import GRAPH_OPS

#: the largest value a symbol may have (IR integers are i64)
MAX_SYMBOL = 2**40


def config_lookup(config: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` of a (nested) config, or None when absent."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def list_period(items: list[Any], entry: str) -> int | None:
    """The period n of ``entry`` in a list of strings: ``entry`` sits exactly at the
    positions i with ``(i + 1) % n == 0`` (``len + 1`` when it is absent); None when no
    n fits or an item is not a string."""
    if not all(isinstance(x, str) for x in items):
        return None
    for n in range(1, len(items) + 2):
        if all((x == entry) == ((i + 1) % n == 0) for i, x in enumerate(items)):
            return n
    return None


def bind(
    template: Template,
    config: Mapping[str, Any],
    config_name: str = "config.json",
    warnings: list[str] | None = None,
) -> tuple[dict[str, int], dict[str, Any]]:
    """Evaluate symbols and params from a HF config: ``(symbols, params)``.

    Failed checks of severity ``warning`` are appended to ``warnings``.
    """
    tpl = f"template {template.name}"
    symbols: dict[str, int] = {}
    for s in template.symbols:
        if s.expr is not None:
            try:
                v = s.expr.evaluate(symbols)
            except (TemplateError, DimError) as e:
                raise CkirError(f"{config_name}: symbol {s.name} ({tpl}): {e}") from None
        else:
            found = [(k, config_lookup(config, k)) for k in s.keys]
            found = [(k, v) for k, v in found if v is not None]
            if found:
                key, v = found[0]
                if isinstance(v, bool) or not isinstance(v, int):
                    raise CkirError(
                        f"{config_name}: key '{key}' must be an integer, got {kind_of(v)} "
                        f"({tpl}, symbol {s.name})"
                    )
            elif s.default is not None:
                try:
                    v = s.default.evaluate(symbols)
                except (TemplateError, DimError) as e:
                    raise CkirError(
                        f"{config_name}: default of symbol {s.name} ({tpl}): {e}"
                    ) from None
            else:
                raise CkirError(
                    f"{config_name}: missing key '{' or '.join(s.keys)}' "
                    f"({tpl} needs it for symbol {s.name}, {template.file})"
                )
        if v <= 0:
            raise CkirError(f"{config_name}: symbol {s.name} ({tpl}) must be positive, got {v}")
        if v > MAX_SYMBOL:
            raise CkirError(f"{config_name}: symbol {s.name} ({tpl}) = {v} is too large")
        symbols[s.name] = v
    params: dict[str, Any] = {}
    for p in template.params:
        if p.value is not None:
            params[p.name] = p.value
            continue
        found = [(k, config_lookup(config, k)) for k in p.keys]
        found = [(k, v) for k, v in found if v is not None]
        if found:
            key, raw = found[0]
            if p.period_of is not None and isinstance(raw, list):
                period = list_period(raw, p.period_of)
                if period is None:
                    raise CkirError(
                        f"{config_name}: key '{key}' does not have '{p.period_of}' exactly "
                        f"at every n-th entry (positions i with (i + 1) % n == 0); "
                        f"{tpl} supports only that pattern (param {p.name})"
                    )
                raw = period
            try:
                v = coerce(raw, p.type)
            except (TemplateError, DimError) as e:
                raise CkirError(
                    f"{config_name}: key '{key}': {e} ({tpl}, param {p.name})"
                ) from None
            if p.choices is not None and v not in p.choices:
                allowed = ", ".join(str(c) for c in p.choices)
                raise CkirError(
                    f"{config_name}: key '{key}' is {v!r}; {tpl} supports only {allowed}"
                )
        elif p.default is not None:
            v = p.default
        else:
            raise CkirError(
                f"{config_name}: missing key '{' or '.join(p.keys)}' "
                f"({tpl} needs it for param {p.name}, {template.file})"
            )
        params[p.name] = v
    env = {**symbols, **params}
    for c in template.checks:
        if not c.cond.evaluate(env):
            msg = f"{config_name}: {c.message} ({tpl} checks: {c.cond.text})"
            if c.severity == "error":
                raise CkirError(msg)
            if warnings is not None:
                warnings.append(msg)
    return symbols, params


def instantiate(
    template: Template, config: Mapping[str, Any], config_name: str = "config.json"
) -> ModelSpec:
    """Bind ``config`` and select weights/ops: the template for one model."""
    warnings: list[str] = []
    symbols, params = bind(template, config, config_name, warnings)
    env = {**symbols, **params}
    weights: dict[str, WeightSpec] = {}
    for w in template.weights:
        variant = next((v for v in w.variants if v.cond is None or v.cond.evaluate(env)), None)
        if variant is not None:
            weights[w.name] = _weight_spec(template, w, variant, symbols)
    for w in weights.values():
        if w.tied_to is not None and w.tied_to not in weights:
            raise template.error(w.name, f"tied to '{w.tied_to}', which this config leaves out")
        if w.tied_to is not None and weights[w.tied_to].tied_to is not None:
            raise template.error(w.name, f"tied to '{w.tied_to}', which is itself tied")
    by_name = {w.name: w for w in template.weights}
    header = _section(template, template.header, (), env, weights, by_name)
    body = _section(template, template.body, header.results, env, weights, by_name)
    for (a, at), (r, rt) in zip(body.args, body.results, strict=True):
        if at != rt:
            raise template.error(
                "body.yield",
                f"value '{r}' has type {_fmt_type(rt)} but arg '{a}' has {_fmt_type(at)}; "
                "the body is repeated, so they must match",
            )
    footer = _section(template, template.footer, body.results, env, weights, by_name)
    assert body.repeat is not None
    try:
        layers = body.repeat.evaluate(symbols)
    except (TemplateError, DimError) as e:
        raise template.error("body.repeat", str(e)) from None
    if layers <= 0:
        raise template.error("body.repeat", f"'{body.repeat}' = {layers} is not positive")
    buffers = []
    for b in template.buffers:
        if b.cond is not None and not b.cond.evaluate(env):
            continue
        vals = _eval_shape(template, b.shape, symbols, f"buffers.{b.name}.shape")
        buffers.append(BufferSpec(b.name, b.shape, vals, b.dtype, b.role, b.per_layer, b.when))
    ignore = tuple(p + pat for pat in template.ignore for p in template.hf_prefixes)
    return ModelSpec(
        template=template,
        symbols=symbols,
        params=params,
        weights=tuple(weights.values()),
        header=header,
        body=body,
        footer=footer,
        buffers=tuple(buffers),
        ignore=ignore,
        warnings=tuple(warnings),
    )


def _eval_shape(
    template: Template, shape: Sequence[Dim], symbols: Mapping[str, int], where: str
) -> tuple[int, ...]:
    try:
        vals = tuple(d.evaluate(symbols) for d in shape)
    except (TemplateError, DimError) as e:
        raise template.error(where, str(e)) from None
    for d, v in zip(shape, vals, strict=True):
        if v < 0:
            raise template.error(where, f"'{d}' = {v} is negative")
    return vals


def _weight_spec(
    template: Template, w: WeightDef, v: WeightVariant, symbols: Mapping[str, int]
) -> WeightSpec:
    shape_vals = _eval_shape(template, v.shape, symbols, f"{w.where}.shape")
    hf_shape_vals: tuple[int, ...] | None = None
    if v.tied_to is None:
        if v.hf_shape is not None:
            hf_shape_vals = _eval_shape(template, v.hf_shape, symbols, f"{w.where}.hf_shape")
            got = list(hf_shape_vals)
            if v.slice is not None:
                axis, start, stop = v.slice
                a, b = _eval_shape(template, (start, stop), symbols, f"{w.where}.slice")
                if not a < b <= got[axis]:
                    raise template.error(
                        f"{w.where}.slice",
                        f"[{a}, {b}) is empty or outside axis {axis} of size {got[axis]}",
                    )
                got[axis] = b - a
            if v.transpose:
                got = got[::-1]
            if tuple(got) != shape_vals:
                raise template.error(
                    w.where,
                    f"hf_shape {_fmt_dims(v.hf_shape)} after slice/transpose gives "
                    f"{list(got)}, but shape {_fmt_dims(v.shape)} is {list(shape_vals)}",
                )
        else:
            hf_shape_vals = shape_vals[::-1] if v.transpose else shape_vals
    hf_shape = v.hf_shape
    if hf_shape is None and v.transpose:
        hf_shape = v.shape[::-1]
    hf = tuple(p + h for h in v.hf for p in template.hf_prefixes)
    return WeightSpec(
        name=w.name,
        per_layer=w.per_layer,
        shape=v.shape,
        shape_values=shape_vals,
        hf=hf,
        hf_shape=hf_shape,
        hf_shape_values=hf_shape_vals,
        slice=v.slice,
        transpose=v.transpose,
        tied_to=v.tied_to,
        gguf=v.gguf,
    )


def _section(
    template: Template,
    sec: SectionDef,
    incoming: tuple[tuple[str, ValueType], ...],
    env: Mapping[str, Any],
    weights: Mapping[str, WeightSpec],
    by_name: Mapping[str, WeightDef],
) -> SectionSpec:
    values: dict[str, ValueType] = {}
    disabled: dict[str, OpDef] = {}
    args = tuple((a, t) for a, (_, t) in zip(sec.args, incoming, strict=True))
    for name, t in (*args, *sec.inputs):
        values[name] = t
    ops = []
    for op in sec.ops:
        if op.cond is not None and not op.cond.evaluate(env):
            for v in op.outs:
                disabled.setdefault(v, op)
            continue
        in_types = []
        for v in op.ins:
            if v not in values:
                off = disabled[v]
                raise template.error(
                    op.where,
                    f"value '{v}' is not produced: {off.where} is disabled "
                    f"(if {off.cond.text if off.cond else ''})",
                )
            in_types.append(values[v])
        out_types = tuple(t if t is not None else in_types[n] for n, t in enumerate(op.types))
        for v, t in zip(op.outs, out_types, strict=True):
            if v in values:
                raise template.error(op.where, f"value '{v}' is defined by two enabled ops")
            values[v] = t
        names = []
        for ref in op.weights:
            # a weight whose `if` is false for this config is absent: drop the reference
            wdef = resolve_weight(ref, sec.kind, by_name)
            assert wdef is not None
            if wdef.name in weights:
                names.append(wdef.name)
        lo, hi = GRAPH_OPS[op.kind].weights
        if not lo <= len(names) <= hi:
            missing = [
                r for r in op.weights if resolve_weight(r, sec.kind, by_name).name not in weights
            ]
            raise template.error(
                op.where,
                f"{op.kind} needs {lo} to {hi} weights, but this config leaves out "
                f"{', '.join(repr(m) for m in missing)} (their 'if' is false)",
            )
        attrs: dict[str, Any] = {}
        for k, a in op.attrs.items():
            if isinstance(a, Dim):
                attrs[k] = a.to_ir()
            elif isinstance(a, str) and a.startswith("$"):
                akind = GRAPH_OPS[op.kind].attrs[k][0]
                attrs[k] = float(env[a[1:]]) if akind == "float" else env[a[1:]]
            else:
                attrs[k] = a
        ops.append(OpSpec(op.kind, op.ins, op.outs, out_types, tuple(names), attrs, op.when))
    results = []
    for r in sec.results:
        if r not in values:
            off = disabled[r]
            raise template.error(
                f"{sec.kind}", f"value '{r}' is not produced: {off.where} is disabled"
            )
        results.append((r, values[r]))
    return SectionSpec(sec.kind, sec.repeat, args, sec.inputs, tuple(ops), tuple(results))


def _fmt_dims(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _fmt_type(t: ValueType) -> str:
    return f"{_fmt_dims(t.shape)} {t.dtype}"
