"""The KV append as views: k / v written straight into the KV cache at row ``P``.

Part of ``--plan-views`` (passes/plan_views.py), run before its in-place reuse.  A
decoder layer's ``kv_store`` call copies its k and v rows (``[T, KVD]``) into rows
``P .. P+T-1`` of the layer's caches.  When the copy is exact, the k and v buffers
become views of the caches at that run-time row (``ckir.dialects.row_offset``) and the
call goes: the kernels that produce k (the k projection, then RoPE in place; or the
head norm) and v (the v projection) write the cache rows themselves::

    // before
    lowered.buffer @decode.layers.0.k activation : !lowered.buf<[1, 32], f32>
    lowered.buffer @decode.layers.0.v activation : !lowered.buf<[1, 32], f32>
    lowered.call @gemv_f32(@decode.layers.0.h, @w.layers.0.attn.wk) -> (@decode.layers.0.k) ...
    lowered.call @kv_store_f32(@decode.layers.0.k, @decode.layers.0.v)
        -> (@kv.layers.0.k, @kv.layers.0.v) {T = 1 : i64, P = #lowered.rt<P>, KVD = 32 : i64}
    // after
    lowered.view @decode.layers.0.k of @kv.layers.0.k offset 0 + P * 128 : !lowered.buf<...>
    lowered.view @decode.layers.0.v of @kv.layers.0.v offset 0 + P * 128 : !lowered.buf<...>
    lowered.call @gemv_f32(@decode.layers.0.h, @w.layers.0.attn.wk) -> (@decode.layers.0.k) ...

Exact means, for one ``kv_store`` call (every operand and both caches f32, its ``P``
the run-time position):

- k and v are two program buffers of role ``activation`` / ``scratch`` that no view
  aliases, of shape ``[R, KVD]`` with the caches' row width and ``R`` no more than the
  caches' rows (so the view fits at ``P = 0``);
- each is first named by a call that writes it (``write``, not ``readwrite``: no
  stale value is read), every call that names it before the store binds exactly the
  ``T * KVD`` values the store copies (whole rows, the same rows: checked by
  evaluating the extents at several ``T`` / ``P``), and no call after the store names
  it (nothing reads the buffer afterwards; attention reads the cache rows);
- no call from the first one naming k or v up to the store names either cache (the
  rows ``P .. P+T-1`` are read only once the store would have written them: the
  layer's attention comes after it).

Q8_0 (or any non-f32) caches keep the copy: ``kv_store_q8_0`` quantizes, it is no
copy.  The backward program has no KV cache (its attention reads k and v).
"""

from __future__ import annotations

from ckir.dialects import lowered as lw
from ckir.dialects.dims import CONTEXT, POSITION, TOKENS, evaluate_dim

__all__ = ["SAMPLES", "kv_append_views"]

#: (T, P) pairs at which two extents must agree to count as the same rows
SAMPLES: tuple[tuple[int, int], ...] = ((1, 0), (3, 5), (7, 2), (16, 113))
#: roles of the program buffers that may become views of a cache
_TRANSIENT = frozenset({"activation", "scratch"})


def _ints(call: lw.CallOp, T: int, P: int) -> dict[str, int] | None:
    """The call's integer parameters with ``T``, ``P``, ``PT`` and ``T*k`` resolved
    (None when a parameter is another run-time value)."""
    env = {TOKENS: T, POSITION: P, CONTEXT: P + T}
    out: dict[str, int] = {}
    for key, value in call.param_values.items():
        if isinstance(value, str):
            base, _, factor = value.partition("*")
            if base not in env:
                return None
            out[key] = env[base] * (int(factor) if factor else 1)
        elif isinstance(value, int):
            out[key] = value
    return out


def _extents(call: lw.CallOp, decl: lw.KernelOp, name: str) -> list[tuple[str, int | None]]:
    """``(access, values at each sample (T, P) folded into one key)`` of every operand of
    ``call`` bound to ``name``; the key is None when an extent cannot be evaluated."""
    out: list[tuple[str, int | None]] = []
    for arg, bound in call.bindings(decl):
        if bound != name:
            continue
        extent = arg.extent_text
        key: int | None = 0
        for T, P in SAMPLES:
            ints = _ints(call, T, P)
            if not extent or ints is None or arg.dtype_name != "f32":
                key = None
                break
            try:
                n = evaluate_dim(extent, ints)
            except Exception:  # noqa: BLE001 - an extent this pass cannot read: no view
                key = None
                break
            key = key * 1_000_003 + n
        out.append((arg.access_text, key))
    return out


def _exact(
    calls: list[lw.CallOp],
    kernels: dict[str, lw.KernelOp],
    index: int,
    name: str,
    want: int | None,
) -> bool:
    """Buffer ``name`` is first written (``write``), then named only with ``want``
    values (the store's), by the calls before ``index``, and by none after it."""
    first = True
    for i, call in enumerate(calls):
        decl = kernels.get(call.kernel_name)
        uses = _extents(call, decl, name) if decl is not None else []
        if decl is None and name in (*call.in_names, *call.out_names):
            return False
        if not uses or i == index:
            continue
        if i > index:
            return False
        if first and uses[0][0] != "write":
            return False
        first = False
        if any(key is None or key != want for _, key in uses):
            return False
    return not first


def _names(call: lw.CallOp, roots: dict[str, str]) -> set[str]:
    """The roots of every buffer ``call`` names."""
    return {roots.get(n, n) for n in (*call.in_names, *call.out_names)}


def kv_append_views(
    program: lw.ProgramOp, kernels: dict[str, lw.KernelOp], caches: dict[str, lw.BufferOp]
) -> int:
    """Turn the k / v of every exact ``kv_store`` call of ``program`` into views of its
    caches at row ``P`` and remove the call; return the buffers no longer copied (2 per
    call removed).  ``caches``: the model's ``kv_cache`` buffers by name."""
    buffers: dict[str, lw.BufferOp] = {}
    roots: dict[str, str] = {}
    for op in program.body_block.ops:
        if isinstance(op, lw.BufferOp):
            buffers[op.buffer_name] = op
        elif isinstance(op, lw.ViewOp):
            roots[op.view_name] = op.root_name
    aliased = set(roots.values())
    removed = 0
    calls = [op for op in program.body_block.ops if isinstance(op, lw.CallOp)]
    for index, call in enumerate(calls):
        decl = kernels.get(call.kernel_name)
        if decl is None or decl.kind_name != "kv_store":
            continue
        found = _plan(calls, kernels, index, decl, buffers, aliased, roots, caches)
        if found is None:
            continue
        for name, cache in found:
            buf = buffers.pop(name)
            ctype = caches[cache].buffer_type
            row_bytes = ctype.byte_size // ctype.shape_ints[0]
            view = lw.ViewOp.make(name, cache, 0, buf.buffer_type, (POSITION, row_bytes))
            program.body_block.insert_op_before(view, buf)
            program.body_block.erase_op(buf)
            roots[name] = cache
            removed += 1
        program.body_block.erase_op(call)
    return removed


def _plan(
    calls: list[lw.CallOp],
    kernels: dict[str, lw.KernelOp],
    index: int,
    decl: lw.KernelOp,
    buffers: dict[str, lw.BufferOp],
    aliased: set[str],
    roots: dict[str, str],
    caches: dict[str, lw.BufferOp],
) -> list[tuple[str, str]] | None:
    """``[(k, k cache), (v, v cache)]`` when the store at ``index`` is exact, else None."""
    call = calls[index]
    bound = {arg.name_text: (arg, name) for arg, name in call.bindings(decl)}
    if set(bound) != {"k", "v", "kcache", "vcache"}:
        return None
    if any(arg.dtype_name != "f32" for arg, _ in bound.values()):
        return None
    if call.param_values.get("P") != POSITION:
        return None
    (_, k), (_, v) = bound["k"], bound["v"]
    (_, kc), (_, vc) = bound["kcache"], bound["vcache"]
    if k == v or kc == vc:
        return None
    want = _extents(call, decl, k)
    if len(want) != 1 or want[0][1] is None or _extents(call, decl, v) != want:
        return None
    start = len(calls)
    for name, cache in ((k, kc), (v, vc)):
        buf, cbuf = buffers.get(name), caches.get(cache)
        if buf is None or cbuf is None or buf.role not in _TRANSIENT or name in aliased:
            return None
        ty, cty = buf.buffer_type, cbuf.buffer_type
        if (
            ty.dtype_name != "f32"
            or cty.dtype_name != "f32"
            or len(ty.shape_ints) != 2
            or len(cty.shape_ints) != 2
            or ty.shape_ints[1] != cty.shape_ints[1]
            or ty.shape_ints[0] > cty.shape_ints[0]
        ):
            return None
        if not _exact(calls, kernels, index, name, want[0][1]):
            return None
        start = min(start, next(i for i, c in enumerate(calls) if name in _names(c, roots)))
    if any({kc, vc} & _names(c, roots) for c in calls[start:index]):
        return None
    return [(k, kc), (v, vc)]
