"""Materialization: graph model -> one flat ``lowered.program`` per mode.

This is the structural half of a lowering pass (the other half is the set of
rewrite patterns that turn each graph op into kernel calls):

* global buffers: one ``lowered.buffer`` per weight (per layer for ``{i}``
  weights; tied weights get none) in the ``lowered.model``, created once and
  shared by every mode;
* the program: header ops, the body cloned ``repeat`` times, the footer ops,
  with mode-guarded ops (``when``) left out;
* one buffer per SSA value, sized for the mode (``T`` rows = max_context in
  prefill, 1 in decode); results of in-place ops reuse their operand's
  buffer; the model's inputs and outputs get role ``io``;
* with ``logits="last"`` (prefill), the footer runs on the last token row: a
  ``copy_last_row`` call copies row ``T-1`` of each value the body yields into
  a one-row buffer, and every token-indexed footer buffer has one row.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from ckir.dialects import graph as g
from ckir.dialects import lowered as lw
from ckir.dialects.dims import TOKENS
from ckir.errors import CkirError
from ckir.passes.lowering.context import (
    FOOTER_SCOPE,
    LOGITS_CHOICES,
    InplaceTable,
    LoweringContext,
    find_graph_model,
)
from ckir.passes.lowering.kernels import declare_kernel, kernel_params, select_kernel
from ckir.vocab import BLOCK_DTYPES

#: the KV-cache length when none is asked for, capped by the model's positions C
DEFAULT_MAX_CONTEXT = 256


def materialize(
    module: ModuleOp,
    mode: str,
    max_context: int | None,
    inplace: InplaceTable,
    pass_name: str,
    logits: str = "all",
) -> LoweringContext:
    """Build the program skeleton for ``mode`` and return the lowering context.

    ``max_context`` None means min(C, DEFAULT_MAX_CONTEXT), C the model's maximum
    positions when it has one.  ``logits`` is ``"all"`` (the footer runs on every
    token row) or ``"last"`` (on the last row only; prefill).
    """
    if logits not in LOGITS_CHOICES:
        raise CkirError(f"{pass_name}: logits must be 'all' or 'last', got '{logits}'")
    model = find_graph_model(module, pass_name)
    symbols = model.symbol_values()
    if max_context is None:
        max_context = min(symbols.get("C", DEFAULT_MAX_CONTEXT), DEFAULT_MAX_CONTEXT)
    if max_context < 1:
        raise CkirError(f"{pass_name}: max-context must be >= 1, got {max_context}")
    limit = symbols.get("C")
    if limit is not None and max_context > limit:
        raise CkirError(
            f"{pass_name}: max-context {max_context} exceeds the model's maximum "
            f"positions C = {limit}"
        )
    lmodel = _lowered_model(module, model)
    for op in lmodel.body_block.ops:
        if isinstance(op, lw.ProgramOp) and op.mode_name == mode:
            raise CkirError(f"{pass_name}: the module already has a {mode} program")

    program = lw.ProgramOp.make(mode, mode, max_context)
    lmodel.body_block.add_op(program)
    ctx = LoweringContext(
        mode=mode,
        model=model,
        lowered_model=lmodel,
        program=program,
        max_context=max_context,
        symbols=symbols,
        logits=logits,
    )
    for op in lmodel.body_block.ops:
        if isinstance(op, lw.BufferOp):
            ctx.buffer_types[op.buffer_name] = op.buffer_type
    _declare_weights(ctx)
    _Cloner(ctx, inplace).run()
    return ctx


def _lowered_model(module: ModuleOp, model: g.ModelOp) -> lw.LoweredModelOp:
    for op in module.ops:
        if isinstance(op, lw.LoweredModelOp):
            return op
    lmodel = lw.LoweredModelOp.make(model.sym_name.data)
    Rewriter.insert_op(lmodel, InsertPoint.after(model))
    return lmodel


def _repeat_count(ctx: LoweringContext) -> int:
    for op in ctx.model.body_block.ops:
        if isinstance(op, g.BodyOp):
            return ctx.dim(op.repeat.text, where="graph.body")
    return 0


def _declare_weights(ctx: LoweringContext) -> None:
    """One global weight buffer per (layer of a) weight, in declaration order."""
    if any(t for t in ctx.buffer_types if t.startswith("w.")):
        return
    layers = _repeat_count(ctx)
    block = ctx.lowered_model.body_block
    # after the kernel declarations (which a previous pass may have added)
    first = next((o for o in block.ops if not isinstance(o, lw.KernelOp)), None)
    decls = [d for d in ctx.model.weights().values() if d.tied_to_name is None]
    # model-wide weights first, then layer by layer: a layer's weights are contiguous
    instances = [(d, d.weight_name, None) for d in decls if not d.per_layer]
    for i in range(layers):
        instances += [(d, d.weight_name.replace("{i}", str(i)), i) for d in decls if d.per_layer]
    for decl, inst, layer in instances:
        where = f"graph.weight @{decl.weight_name}"
        shape = [ctx.dim(d, where=where) for d in decl.shape_dims]
        try:  # a layer's own dtype where the layers differ (layer_dtypes)
            dtype = decl.layer_dtype(layer)
        except VerifyException as err:
            raise CkirError(str(err)) from None
        qblock = BLOCK_DTYPES.get(dtype)
        if qblock is not None and shape and shape[-1] % qblock[1]:
            raise CkirError(
                f"{where} ({inst}): {dtype} stores rows of whole {qblock[1]}-element blocks, "
                f"but its rows have {shape[-1]} elements"
            )
        btype = lw.BufferType.make(shape, dtype)
        buf = lw.BufferOp.make(f"w.{inst}", "weight", btype, source=inst)
        if first is None:
            block.add_op(buf)
        else:
            block.insert_op_before(buf, first)
        ctx.buffer_types[f"w.{inst}"] = btype


class _Cloner:
    """Clones the graph sections into the program and names every value's buffer."""

    def __init__(self, ctx: LoweringContext, inplace: InplaceTable) -> None:
        self.ctx = ctx
        self.inplace = inplace
        self.block = ctx.program.body_block
        # buffer name -> shape, dtype, role, source ("input"/"output" for io buffers)
        self.specs: dict[str, tuple[list[int], str, str, str | None]] = {}
        self.dropped: dict[SSAValue, str] = {}
        self.used_names: set[str] = set()
        #: holds the stand-in values of the last rows (``logits="last"``) until lowering
        self.stand_ins = Block()

    def run(self) -> None:
        header = body = footer = None
        for op in self.ctx.model.body_block.ops:
            if isinstance(op, g.HeaderOp):
                header = op
            elif isinstance(op, g.BodyOp):
                body = op
            elif isinstance(op, g.FooterOp):
                footer = op
        carried: list[SSAValue] = []
        if header is not None:
            carried = self._section(header.block, [], "header", None)
        if body is not None:
            for i in range(self.ctx.dim(body.repeat.text, where="graph.body")):
                carried = self._section(body.block, carried, f"layers.{i}", i)
        if footer is not None:
            if self.ctx.footer_one_row(FOOTER_SCOPE):
                carried = [self._last_row(v) for v in carried]
            self.ctx.one_row = self.ctx.footer_one_row(FOOTER_SCOPE)
            self._section(footer.block, carried, FOOTER_SCOPE, None)
            self.ctx.one_row = False
        first = self.block.first_op
        for name, (shape, dtype, role, source) in self.specs.items():
            btype = lw.BufferType.make(shape, dtype)
            buf = lw.BufferOp.make(name, role, btype, source=source)
            if first is None:
                self.block.add_op(buf)
            else:
                self.block.insert_op_before(buf, first)
            self.ctx.buffer_types[name] = btype

    def _section(
        self, block, args: list[SSAValue], scope: str, layer: int | None
    ) -> list[SSAValue]:
        if len(block.args) != len(args):
            raise CkirError(
                f"graph {scope}: takes {len(block.args)} values, "
                f"the previous section yields {len(args)}"
            )
        mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, args, strict=True))
        for op in block.ops:
            if isinstance(op, g.InputOp):
                # the input value itself stands for the io buffer; no op is cloned
                name = self._new_buffer(op.results[0], scope, "io", "input")
                self.ctx.names[op.results[0]] = name
                mapping[op.results[0]] = op.results[0]
            elif isinstance(op, g.YieldOp):
                return [self._mapped(mapping, v, op) for v in op.operands]
            elif isinstance(op, g.OutputOp):
                for v in op.operands:
                    name = self.ctx.names[self._mapped(mapping, v, op)]
                    shape, dtype, _, _ = self.specs[name]
                    self.specs[name] = (shape, dtype, "io", "output")
                return []
            elif isinstance(op, g.ComputeOp):
                self._clone(op, mapping, scope, layer)
            else:
                raise CkirError(f"graph {scope}: cannot lower '{op.name}'")
        return []

    def _last_row(self, value: SSAValue) -> SSAValue:
        """A one-row stand-in for ``value`` and the call that fills it with row T-1.

        The stand-in is a block argument of a detached block: the footer's graph
        ops read it until the patterns replace them by calls, which name buffers.
        """
        ctx = self.ctx
        vtype = value.type
        assert isinstance(vtype, g.TensorType)
        where = f"{ctx.mode} {FOOTER_SCOPE} (logits=last)"
        if len(vtype.dims) != 2 or vtype.dims[0] != TOKENS:
            raise CkirError(
                f"{where}: the body yields a value of shape {list(vtype.dims)}, not [T, n]"
            )
        stand_in = self.stand_ins.insert_arg(vtype, len(self.stand_ins.args))
        stand_in.name_hint = f"{value.name_hint or 'x'}_last"
        ctx.one_row = True
        out = self._new_buffer(stand_in, FOOTER_SCOPE, "activation")
        ctx.one_row = False
        ctx.names[stand_in] = out
        src = ctx.names[value]
        shape, dtype, _, _ = self.specs[src]
        params = {"T": TOKENS, "cols": ctx.dim(vtype.dims[1], where=where)}
        spec = select_kernel("copy_last_row", ctx.mode, [dtype], [dtype], params, where=where)
        declare_kernel(ctx.lowered_model, spec)
        origin = lw.OriginAttr.make(FOOTER_SCOPE, "graph.footer")
        call = lw.CallOp.make(spec.name, [src], [out], kernel_params(spec, params), origin=origin)
        self.block.add_op(call)
        return stand_in

    def _mapped(self, mapping: dict[SSAValue, SSAValue], v: SSAValue, user: Operation) -> SSAValue:
        if v in self.dropped:
            raise CkirError(
                f"{user.name}: uses a value of an op guarded out of mode {self.ctx.mode} "
                f"({self.dropped[v]})"
            )
        return mapping[v]

    def _clone(
        self, op: Operation, mapping: dict[SSAValue, SSAValue], scope: str, layer: int | None
    ) -> None:
        assert isinstance(op, g.ComputeOp)
        modes = op.modes
        if modes is not None and self.ctx.mode not in modes:
            for r in op.results:
                self.dropped[r] = f"{op.name} when {list(modes)}"
            return
        operands = [self._mapped(mapping, v, op) for v in op.operands]
        clone = op.clone(value_mapper=dict(zip(op.operands, operands, strict=True)))
        self.block.add_op(clone)
        self.ctx.scopes[clone] = (scope, layer)
        reuse = self.inplace.get(op.kind, {})
        for j, (orig, new) in enumerate(zip(op.results, clone.results, strict=True)):
            mapping[orig] = new
            if j in reuse:
                src = op.operands[reuse[j]]
                n_uses = sum(1 for _ in src.uses)
                if n_uses != 1:
                    raise CkirError(
                        f"{op.name} in {scope}: updates operand #{reuse[j]} in place, "
                        f"but that value has {n_uses} uses"
                    )
                self.ctx.names[new] = self.ctx.names[operands[reuse[j]]]
            else:
                self.ctx.names[new] = self._new_buffer(orig, scope, "activation")

    def _new_buffer(self, value: SSAValue, scope: str, role: str, source: str | None = None) -> str:
        vtype = value.type
        assert isinstance(vtype, g.TensorType)
        hint = value.name_hint or f"v{len(self.specs)}"
        base = f"{self.ctx.mode}.{scope}.{hint}"
        name, n = base, 1
        while name in self.used_names:
            name, n = f"{base}_{n}", n + 1
        self.used_names.add(name)
        where = f"{self.ctx.mode} {scope} %{hint}"
        shape = [self.ctx.dim(d, where=where) for d in vtype.dims]
        self.specs[name] = (shape, vtype.dtype_name, role, source)
        return name
