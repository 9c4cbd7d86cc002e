"""``--kv-cache-dtype``: store the KV cache of a lowered model in another dtype (q8_0).

Runs on lowered IR, after ``--lower-prefill`` / ``--lower-decode`` and before
``--plan-layout``: every f32 ``kv_cache`` buffer takes the new dtype, and every
call that reads or writes one (``kv_store``, ``attention``) is re-selected
from the registry for the new operand dtypes (``kv_store_q8_0``,
``attention_q8_0``, ``attention_ext_q8_0``: runtime/registry_kv.yaml), in every
program.  Q8_0 blocks of 32 run along head_dim: a head of ``D`` values takes
``DB = ceil(D / 32)`` blocks, the last zero-padded, so a cache of ``KV`` heads
becomes ``[max_context, KV*DB*32]`` (head_dim 40: 64 values a head, the padding
counted in ``layout.totals``) and its calls take ``D`` and ``DB``.  A call no
kernel serves over the new dtype is refused with one line naming it.  Training
programs have no KV cache, so the pass leaves them alone; ``ckir compile
--kv-dtype`` refuses training builds.

Example::

    ckir-opt m.mlir --lower-prefill --lower-decode --kv-cache-dtype{dtype=q8_0} --plan-layout

    lowered.buffer @"kv.layers.0.k" kv_cache : !lowered.buf<[256, 64], f32>
    lowered.call @kv_store_f32(@k, @v) -> (@"kv.layers.0.k", @"kv.layers.0.v") {...}
    // becomes
    lowered.buffer @"kv.layers.0.k" kv_cache : !lowered.buf<[256, 64], q8_0>
    lowered.call @kv_store_q8_0(@k, @v) -> (@"kv.layers.0.k", @"kv.layers.0.v") {..., DB = 1}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.passes.lowering.kernels import declare_kernel, kernel_params, select_kernel

#: KV-cache dtypes: f32 (the lowering's own) and those the registry has kernels for
KV_DTYPES: tuple[str, ...] = ("f32", "q8_0")
#: elements per block along head_dim of each quantized KV dtype
KV_BLOCK: dict[str, int] = {"q8_0": 32}


def _where(program: lw.ProgramOp, call: lw.CallOp) -> str:
    origin = call.origin.label if call.origin is not None else f"@{call.kernel_name}"
    return f"{program.mode_name} {origin}"


def _retype_call(
    model: lw.LoweredModelOp,
    program: lw.ProgramOp,
    call: lw.CallOp,
    types: dict[str, lw.BufferType],
    dtype: str,
    head_dim: int,
) -> lw.CallOp:
    """``call`` re-selected for the buffers' new dtypes (declared in ``model``), given the
    head_dim ``D`` of its cache and the blocks ``DB`` of a head."""
    decl = call.declaration()
    if decl is None:
        raise CkirError(f"kv-cache-dtype: lowered.call @{call.kernel_name} is not declared")
    where = _where(program, call)
    block = KV_BLOCK[dtype]
    params = {**call.param_values, "D": head_dim, "DB": -(-head_dim // block)}
    try:
        spec = select_kernel(
            decl.kind_name,
            program.mode_name,
            [types[n].dtype_name for n in call.in_names],
            [types[n].dtype_name for n in call.out_names],
            params,
            where=where,
        )
    except CkirError:
        raise CkirError(
            f"--kv-dtype {dtype}: {where}: no kernel runs {decl.kind_name} over a {dtype} "
            "KV cache; use --kv-dtype f32"
        ) from None
    declare_kernel(model, spec)
    return lw.CallOp.make(
        spec.name,
        call.in_names,
        call.out_names,
        kernel_params(spec, params),
        origin=call.origin,
    )


def set_kv_dtype(model: lw.LoweredModelOp, dtype: str) -> int:
    """Store ``model``'s f32 KV caches as ``dtype`` and re-select the calls that touch
    them; returns the number of caches converted."""
    caches = [
        b
        for b in model.buffers().values()
        if b.role == "kv_cache" and b.buffer_type.dtype_name == "f32"
    ]
    if not caches:
        return 0
    names = {b.buffer_name for b in caches}
    heads = _cache_heads(model, names)
    block = KV_BLOCK[dtype]
    types: dict[str, lw.BufferType] = {n: b.buffer_type for n, b in model.buffers().items()}
    for b in caches:
        ctx, width = b.buffer_type.shape_ints
        kv, d = heads.setdefault(b.buffer_name, (1, width))
        padded = kv * -(-d // block) * block
        types[b.buffer_name] = lw.BufferType.make([ctx, padded], dtype)
    replaced: set[str] = set()
    for program in model.programs().values():
        local = {**types}
        for op in program.body_block.ops:
            if isinstance(op, lw.BufferOp):
                local[op.buffer_name] = op.buffer_type
        for call in list(program.calls()):
            if names.isdisjoint((*call.in_names, *call.out_names)):
                continue
            cache = next(n for n in (*call.in_names, *call.out_names) if n in names)
            new = _retype_call(model, program, call, local, dtype, heads[cache][1])
            program.body_block.insert_op_before(new, call)
            program.body_block.erase_op(call)
            replaced.add(call.kernel_name)
    for b in caches:
        b.properties["buffer_type"] = types[b.buffer_name]
    _drop_unused_kernels(model, replaced)
    return len(caches)


def _cache_heads(model: lw.LoweredModelOp, names: set[str]) -> dict[str, tuple[int, int]]:
    """(KV heads, head_dim D) of each cache in ``names``, from the calls that read it
    with ``KV`` and ``D`` params (the attention calls); a cache no such call reads is
    left out (set_kv_dtype takes its rows as one head of their whole width)."""
    out: dict[str, tuple[int, int]] = {}
    for program in model.programs().values():
        for call in program.calls():
            p = call.param_values
            kv, d = p.get("KV"), p.get("D")
            if not (isinstance(kv, int) and isinstance(d, int)):
                continue
            for n in call.in_names:
                if n in names:
                    out[n] = (kv, d)
    return out


def _drop_unused_kernels(model: lw.LoweredModelOp, candidates: set[str]) -> None:
    """Erase the declarations among ``candidates`` that no call names any more."""
    used = {c.kernel_name for p in model.programs().values() for c in p.calls()}
    for op in list(model.body_block.ops):
        if isinstance(op, lw.KernelOp) and op.kernel_name in candidates - used:
            model.body_block.erase_op(op)


@dataclass(frozen=True)
class KvCacheDtypePass(ModulePass):
    """Store the KV caches of every lowered model as ``dtype`` (``q8_0``; ``f32``: no
    change), with the kv_store / attention kernels of that dtype.

    Example: ``ckir-opt m.mlir --lower-decode --kv-cache-dtype{dtype=q8_0} --plan-layout``
    """

    name = "kv-cache-dtype"

    dtype: str = "q8_0"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.dtype not in KV_DTYPES:
            raise CkirError(
                f"kv-cache-dtype: unknown dtype {self.dtype!r}; use {' or '.join(KV_DTYPES)}"
            )
        if self.dtype == "f32":
            return
        if any(o.name == "layout.plan" for o in op.walk()):
            raise CkirError(
                "kv-cache-dtype: the module already has a layout.plan; run --kv-cache-dtype "
                "before --plan-layout (the caches' sizes change)"
            )
        for model in op.walk():
            if isinstance(model, lw.LoweredModelOp):
                set_kv_dtype(model, self.dtype)
