"""A second backend from the same plan: the planned lowered program run by NumPy.

:class:`PlanInterpreter` reads a build's ``layout.mlir`` (graph + lowered + layout IR) and
``weights.bin``, holds one NumPy byte buffer per arena of the plan, and runs each
``lowered.call`` of a program on xDSL's interpreter framework
(:class:`LoweredFunctions`, an :class:`~xdsl.interpreter.InterpreterFunctions` with one
implementation per lowered op) with the reference of the call's kernel kind
(:data:`ckir.reference.kernels.REFERENCE`): operands are read from and written to the
arena bytes at the offsets of the plan (the slot of each buffer, a view's root plus its
offset), exactly where model.c's kernels read and write them.  Weights in a compressed
dtype (panels, bf16, Q8_0, Q4, K-quants) are dequantized by :func:`ckir.quant.dequantize`.
No C compiler is involved: a pass author runs a new pass's output here first::

    from ckir.interp import PlanInterpreter
    model = PlanInterpreter("build/tiny")        # or PlanInterpreter.from_module(module)
    logits = model.prefill([1, 2, 3])           # [T, V] float32, like CompiledModel
    nxt = model.decode(int(logits[-1].argmax()))  # [V]

``on_call`` (:meth:`PlanInterpreter.run`) is told after every call, which is how
``ckir debug --compare`` (:mod:`ckir.debug_compare`) walks the C build beside it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from ckir import quant
from ckir.backend.abi import (
    WEIGHTS_HEADER_BYTES,
    WEIGHTS_MAGIC,
    arenas,
    build_fingerprint,
    declared,
    fingerprint_hex,
    placed_offsets,
    row_offsets,
)
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.dialects.dims import CONTEXT, LR, POSITION, STEP, TOKENS, evaluate_dim
from ckir.errors import CkirError
from ckir.ir_io import load_module
from ckir.reference.kernels import REFERENCE
from ckir.vocab import BLOCK_DTYPES

#: dtypes whose values the interpreter reads in place (everything else is dequantized)
_PLAIN = {"f32": np.float32, "i32": np.int32}
#: weight dtype -> the block x is quantized in by the decode GEMVs (docs/quantization.md)
#: (every block format's GEMV quantizes x per block of its own length: 32, or 256 for the
#: K-quants' Q8_K)
INT8_X_BLOCK = {name: values for name, (_, values) in BLOCK_DTYPES.items()}
#: weight dtypes whose prefill GEMMs run on int8 x (when int8 prefill is on): the block
#: panels, q5_0p / q5_1p included (x per block of 32), and the K-quants, in rows or
#: panels (Q8_K, per super-block of 256)
INT8_PREFILL = (
    *("q8_0p", "q4_0p", "q4_1p", "q4_k", "q5_k", "q6_k", "q4_kp", "q6_kp", "q5_0p", "q5_1p"),
)
_PRODUCTS = ("linear", "fused_qkv", "fused_gate_up")


@dataclass(frozen=True)
class CallInfo:
    """One executed call: its index in the program, kernel, kind, origin and the buffers it
    wrote with the elements written (from the start of each buffer)."""

    index: int
    kernel: str
    kind: str
    origin: str
    outputs: tuple[tuple[str, int], ...]


@dataclass
class PlanMemory:
    """The arenas of a plan as NumPy byte buffers and where each buffer lives in them."""

    model: lw.LoweredModelOp
    plan: ly.PlanOp
    arenas: dict[str, np.ndarray]
    #: buffer or view name -> (arena, byte offset; a view at a run-time row: at P = 0)
    places: dict[str, tuple[str, int]] = field(default_factory=dict)
    types: dict[str, lw.BufferType] = field(default_factory=dict)
    kernels: dict[str, lw.KernelOp] = field(default_factory=dict)
    #: views at a run-time row (the KV append) -> bytes per row: they start
    #: ``position * row bytes`` after their place
    rows: dict[str, int] = field(default_factory=dict)
    #: the position of the program being run (P, the tokens already in the KV cache)
    position: int = 0
    _dequantized: dict[str, np.ndarray] = field(default_factory=dict)

    @staticmethod
    def of(model: lw.LoweredModelOp, plan: ly.PlanOp) -> PlanMemory:
        """Zeroed arenas of ``plan`` (the weights arena to be filled by the caller)."""
        mem = PlanMemory(
            model, plan, {n: np.zeros(a.size_bytes, np.uint8) for n, a in arenas(plan).items()}
        )
        mem.places = placed_offsets(plan)
        mem.rows = {name: row_bytes for name, (_, row_bytes) in row_offsets(plan).items()}
        mem.kernels, mem.types = declared(model)
        missing = sorted(set(mem.types) - set(mem.places))
        if missing:
            raise CkirError(f"interpreter: buffer @{missing[0]} has no slot in the layout plan")
        return mem

    def address(self, name: str) -> tuple[str, int]:
        """(arena, byte offset) of buffer ``name`` now: a view at a run-time row moves with
        :attr:`position`, as model.c's pointer ``S + offset + P * row_bytes`` does."""
        aname, offset = self.places[name]
        return aname, offset + self.position * self.rows.get(name, 0)

    def raw(self, name: str) -> np.ndarray:
        """The bytes of buffer ``name`` in its arena (a view: writes go to the arena)."""
        aname, offset = self.address(name)
        return self.arenas[aname][offset : offset + self.types[name].byte_size]

    def values(self, name: str, count: int | None = None) -> np.ndarray:
        """The first ``count`` elements (all by default) of an f32 / i32 buffer, a typed
        view of the arena."""
        ty = self.types[name]
        np_type = _PLAIN.get(ty.dtype_name)
        if np_type is None:
            raise CkirError(f"interpreter: @{name} is {ty.dtype_name}, not f32 or i32")
        n = ty.num_elements if count is None else count
        aname, offset = self.address(name)
        return self.arenas[aname][offset : offset + 4 * n].view(np_type)

    def read(self, name: str, dtype: str) -> np.ndarray:
        """Buffer ``name`` as a kernel operand of ``dtype`` reads it: f32 values as float64,
        i32 as int32, anything else dequantized to float64 (cached: weights are read-only)."""
        if dtype in _PLAIN:
            v = self.values(name)
            return v.astype(np.float64) if dtype == "f32" else v.copy()
        cached = self._dequantized.get(name)
        if cached is None:
            ty = self.types[name]
            shape = ty.shape_ints
            raw = self.raw(name)
            if dtype not in quant.PANEL_DTYPES and dtype != "bf16" and len(shape) > 1:
                raw = raw.reshape(shape[0], -1)  # block rows
            elif dtype == "bf16":
                raw = raw.view(np.uint16)
            deq = quant.dequantize(raw, dtype, shape)
            cached = np.asarray(deq, np.float64).reshape(-1)
            self._dequantized[name] = cached
        return cached


def run_time_params(
    call: lw.CallOp, T: int, P: int, step: int = 0, lr: float = 0.0
) -> dict[str, int | float]:
    """The call's parameters with the run-time symbols (T, P, P+T, T*k, and the
    optimizer's step and lr) resolved."""
    env: dict[str, int | float] = {TOKENS: T, POSITION: P, CONTEXT: P + T, STEP: step, LR: lr}
    out: dict[str, int | float] = {}
    for k, v in call.param_values.items():
        if isinstance(v, str):
            base, _, factor = v.partition("*")
            if base not in env:
                raise CkirError(f"interpreter: @{call.kernel_name}: run-time value '{v}' unknown")
            out[k] = env[base] * (int(factor) if factor else 1)
        else:
            out[k] = v
    return out


@register_impls
@dataclass
class LoweredFunctions(InterpreterFunctions):
    """xDSL interpreter implementations of the lowered ops over a :class:`PlanMemory`.

    ``lowered.call`` runs the reference of its kernel's kind on the operands bound by
    the declaration and writes the results into the arena; buffers and views are
    places, nothing to run.  ``T`` and ``P`` are the run-time token count and position
    of the program being run."""

    memory: PlanMemory | None = None
    T: int = 1
    P: int = 0
    last: CallInfo | None = None
    #: prefill GEMMs of q8_0p / q4_0p / q4_1p and K-quant weights on int8 x (the C
    #: runtime's default)
    int8_prefill: bool = True
    #: the optimizer program's run-time values: AdamW's 1-based step, the learning rate
    step: int = 0
    lr: float = 0.0

    @impl(lw.BufferOp)
    def run_buffer(self, interpreter: Interpreter, op: lw.BufferOp, args: tuple[Any, ...]) -> tuple:
        return ()

    @impl(lw.ViewOp)
    def run_view(self, interpreter: Interpreter, op: lw.ViewOp, args: tuple[Any, ...]) -> tuple:
        return ()

    @impl(lw.CallOp)
    def run_call(self, interpreter: Interpreter, op: lw.CallOp, args: tuple[Any, ...]) -> tuple:
        mem = self.memory
        assert mem is not None
        decl = mem.kernels.get(op.kernel_name)
        if decl is None:
            raise CkirError(f"interpreter: lowered.call @{op.kernel_name}: kernel not declared")
        kind = decl.kind_name
        ref = REFERENCE.get(kind)
        if ref is None:
            raise CkirError(
                f"interpreter: no reference for kernel kind '{kind}' (@{op.kernel_name}); "
                "add one to ckir.reference.kernels.REFERENCE"
            )
        params = run_time_params(op, self.T, self.P, self.step, self.lr)
        mem.position = self.P  # views at a run-time row start at row P
        ints = {k: int(v) for k, v in params.items() if isinstance(v, int)}
        bindings = op.bindings(decl)
        if kind in _PRODUCTS:
            params["int8_x"] = self.int8_block(decl, "M" in params)
        ops = {arg.name_text: mem.read(name, arg.dtype_name) for arg, name in bindings}
        results = ref(ops, params)
        written: list[tuple[str, int]] = []
        for arg, name in bindings:
            if not arg.writes:
                continue
            value = results.get(arg.name_text)
            if value is None:
                raise CkirError(
                    f"interpreter: reference of '{kind}' did not produce operand "
                    f"{arg.name_text} of @{op.kernel_name}"
                )
            extent = arg.extent_text
            n = evaluate_dim(extent, ints) if extent else value.size
            if value.size != n:
                raise CkirError(
                    f"interpreter: '{kind}' produced {value.size} values for "
                    f"{arg.name_text} = @{name}, its extent is {n}"
                )
            mem.values(name, n)[:] = value
            written.append((name, n))
        origin = op.origin.label if op.origin is not None else op.kernel_name
        self.last = CallInfo(-1, op.kernel_name, kind, origin, tuple(written))
        return ()

    def int8_block(self, decl: lw.KernelOp, gemm: bool) -> int:
        """The block in which a product kernel quantizes x (0: fp32 x): decode GEMVs of
        block-quantized weights always, prefill GEMMs of block panels and K-quants with
        int8 prefill."""
        wdtypes = {a.dtype_name for a in decl.arg_list if a.name_text.startswith("w")}
        for dtype in wdtypes:
            block = INT8_X_BLOCK.get(dtype, 0)
            if block and (not gemm or (self.int8_prefill and dtype in INT8_PREFILL)):
                return block
        return 0


def read_weights_bin(path: Path, model: lw.LoweredModelOp, plan: ly.PlanOp) -> np.ndarray:
    """The weights arena stored in ``path`` (after its header), checked against the
    build fingerprint of ``model`` and ``plan``."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as err:
        raise CkirError(f"{path}: cannot read: {err.strerror}") from None
    if data.size < WEIGHTS_HEADER_BYTES:
        raise CkirError(f"{path}: truncated (no header)")
    magic, _version, _, lhash, size = struct.unpack_from("<8sIIQQ", data.tobytes()[:32])
    if magic != WEIGHTS_MAGIC:
        raise CkirError(f"{path}: not a ckir weights.bin (bad magic)")
    ours = build_fingerprint(model, plan)
    if lhash != ours:
        raise CkirError(
            f"{path}: written for build fingerprint {fingerprint_hex(lhash)}, but this "
            f"program and plan are {fingerprint_hex(ours)}"
        )
    if data.size < WEIGHTS_HEADER_BYTES + size:
        raise CkirError(
            f"{path}: truncated ({data.size} bytes, needs {WEIGHTS_HEADER_BYTES + size})"
        )
    return data[WEIGHTS_HEADER_BYTES : WEIGHTS_HEADER_BYTES + size].copy()


def find_model_and_plan(module: ModuleOp, where: str) -> tuple[lw.LoweredModelOp, ly.PlanOp]:
    """The one lowered.model and layout.plan of ``module``."""
    models = [op for op in module.ops if isinstance(op, lw.LoweredModelOp)]
    plans = [op for op in module.ops if isinstance(op, ly.PlanOp)]
    if len(models) != 1 or len(plans) != 1:
        raise CkirError(f"{where}: needs one lowered.model and one layout.plan (run --plan-layout)")
    return models[0], plans[0]


class PlanInterpreter:
    """A planned module run by NumPy: ``prefill``, ``decode``, ``reset``, ``position``,
    logits as float32 arrays, like :class:`ckir.CompiledModel`."""

    def __init__(self, build_dir: str | Path) -> None:
        build = Path(build_dir)
        path = build / "layout.mlir"
        if not path.is_file():
            raise CkirError(f"{build}: not a ckir build (no layout.mlir)")
        module = load_module(path)
        model, plan = find_model_and_plan(module, str(path))
        self._init(module, model, plan)
        if "weights" in self.memory.arenas:
            self.memory.arenas["weights"][:] = read_weights_bin(build / "weights.bin", model, plan)

    @classmethod
    def from_module(cls, module: ModuleOp, weights: np.ndarray | None = None) -> PlanInterpreter:
        """An interpreter of a planned module in memory (``weights``: the weights arena's
        bytes; zeros when None), for a pass author's module before any C exists."""
        self = cls.__new__(cls)
        model, plan = find_model_and_plan(module, "interpreter")
        self._init(module, model, plan)
        if weights is not None:
            self.memory.arenas["weights"][:] = weights
        return self

    def _init(self, module: ModuleOp, model: lw.LoweredModelOp, plan: ly.PlanOp) -> None:
        self.module = module
        self.memory = PlanMemory.of(model, plan)
        self.programs = {
            op.mode_name: op for op in model.body_block.ops if isinstance(op, lw.ProgramOp)
        }
        self.functions = LoweredFunctions(memory=self.memory)
        self.interpreter = Interpreter(module)
        self.interpreter.register_implementations(self.functions)
        self.position = 0
        self.max_context = max((p.max_ctx for p in self.programs.values()), default=0)

    @property
    def int8_prefill(self) -> bool:
        """Whether prefill GEMMs of q8_0p / q4_1p / q4_0p weights quantize x per block of
        32 (K-quants: per super-block of 256), as the C runtime does by default
        (:attr:`ckir.CompiledModel.int8_prefill`)."""
        return self.functions.int8_prefill

    @int8_prefill.setter
    def int8_prefill(self, on: bool) -> None:
        self.functions.int8_prefill = bool(on)

    def program(self, mode: str) -> lw.ProgramOp:
        prog = self.programs.get(mode)
        if prog is None:
            raise CkirError(
                f"interpreter: mode {mode} is not in this plan ({', '.join(self.programs)})"
            )
        return prog

    def io(self, mode: str) -> tuple[str, str]:
        """(tokens buffer, output buffer) of a mode's program."""
        bufs = [op for op in self.program(mode).body_block.ops if isinstance(op, lw.BufferOp)]
        ins = [b.buffer_name for b in bufs if b.role == "io" and b.source_name == "input"]
        outs = [b.buffer_name for b in bufs if b.role == "io" and b.source_name == "output"]
        if len(ins) != 1 or len(outs) != 1:
            raise CkirError(f"interpreter: program {mode} needs one input and one output buffer")
        return ins[0], outs[0]

    def calls(self, mode: str) -> list[lw.CallOp]:
        return [op for op in self.program(mode).body_block.ops if isinstance(op, lw.CallOp)]

    def run(
        self,
        mode: str,
        tokens: Sequence[int] | np.ndarray,
        on_call: Callable[[CallInfo], bool | None] | None = None,
    ) -> np.ndarray:
        """Run ``mode`` on ``tokens`` at the current position; the logits rows.
        ``on_call(info)`` after every call; returning True stops the run there (the
        position does not advance; empty logits)."""
        steps = self.steps(mode, tokens)
        for info in steps:
            if on_call is not None and on_call(info):
                steps.close()
                return np.zeros((0, 0), np.float32)
        return self.logits(mode, len(np.asarray(tokens).reshape(-1)))

    def steps(self, mode: str, tokens: Sequence[int] | np.ndarray) -> Iterator[CallInfo]:
        """Run ``mode`` on ``tokens`` one call at a time: yields each call's
        :class:`CallInfo` after running it; the position advances once all have run
        (then :meth:`logits` reads the output)."""
        arr = np.asarray(tokens, dtype=np.int64).reshape(-1)
        self._check_tokens(mode, arr)
        return self._steps(mode, arr)

    def _check_tokens(self, mode: str, arr: np.ndarray) -> None:
        T = int(arr.size)
        tok_name, _ = self.io(mode)
        rows = self.memory.types[tok_name].shape_ints[0]
        if not 1 <= T <= rows or self.position + T > self.max_context:
            raise CkirError(
                f"{mode} of {T} tokens at position {self.position} does not fit "
                f"(max {rows} per call, max_context {self.max_context})"
            )
        bound = self._token_bound(mode)
        bad = [int(t) for t in arr if t < 0 or (bound and t >= bound)]
        if bad:
            raise CkirError(f"token id {bad[0]} is outside the vocabulary [0, {bound})")

    def _steps(
        self, mode: str, arr: np.ndarray, inputs: dict[str, np.ndarray] | None = None
    ) -> Iterator[CallInfo]:
        T = int(arr.size)
        if T:
            self.memory.values(self._io_named(mode, "input"), T)[:] = arr
        for name, values in (inputs or {}).items():
            self.memory.values(name, values.size)[:] = values
        self.functions.T, self.functions.P = T, self.position
        index = 0
        for op in self.program(mode).body_block.ops:
            try:
                self.interpreter.run_op(op, ())
            except CkirError as err:  # without the note xDSL adds: the whole module's text
                raise CkirError(str(err)) from None
            if isinstance(op, lw.CallOp):
                last = self.functions.last
                assert last is not None
                yield CallInfo(index, last.kernel, last.kind, last.origin, last.outputs)
                index += 1
        self.position += T

    def logits(self, mode: str, T: int) -> np.ndarray:
        """The output rows of the last ``T``-token run of ``mode`` ([T, V]; [1, V] from a
        one-row output, ``logits="last"``)."""
        tok_name, out_name = self.io(mode)
        out_type = self.memory.types[out_name]
        vocab = out_type.shape_ints[-1]
        rows = self.memory.types[tok_name].shape_ints[0]
        out_rows = 1 if out_type.shape_ints[0] < rows else T
        return self.memory.values(out_name, out_rows * vocab).reshape(out_rows, vocab).copy()

    def _token_bound(self, mode: str) -> int:
        """Rows of the table the program's embed call reads (0: no embed)."""
        for call in self.calls(mode):
            decl = self.memory.kernels[call.kernel_name]
            if decl.kind_name == "embed":
                for arg, name in call.bindings(decl):
                    if arg.name_text == "table":
                        return self.memory.types[name].shape_ints[0]
        return 0

    def prefill(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """Logits [T, V] (or [1, V] of a ``logits="last"`` plan) of ``tokens``."""
        return self.run("prefill", tokens)

    def decode(self, token: int) -> np.ndarray:
        """Logits [V] of one token at the next position."""
        return self.run("decode", [int(token)])[0]

    def reset(self) -> None:
        """Forget the KV cache: the next call starts at position 0."""
        self.position = 0

    def _io_named(self, mode: str, source: str) -> str:
        for op in self.program(mode).body_block.ops:
            if isinstance(op, lw.BufferOp) and op.role == "io" and op.source_name == source:
                return op.buffer_name
        raise CkirError(f"interpreter: program {mode} has no {source} buffer")

    def backward(self, tokens: Sequence[int], targets: Sequence[int]) -> float:
        """The ``backward`` program from position 0: forward, mean cross-entropy against
        ``targets`` and every weight's gradient (in the plan's grad buffers); the loss."""
        for _ in self.backward_steps(tokens, targets):
            pass
        return self.loss()

    def backward_steps(
        self, tokens: Sequence[int], targets: Sequence[int]
    ) -> Iterator[CallInfo]:
        """:meth:`backward` one call at a time, as :meth:`steps` runs the inference
        modes; :meth:`loss` reads the loss once all have run."""
        tok = np.asarray(tokens, dtype=np.int64).reshape(-1)
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        if tok.size != tgt.size:
            raise CkirError(f"backward: {tok.size} tokens but {tgt.size} targets")
        bound = self._token_bound("backward")
        bad = [int(t) for t in tgt if t < 0 or t >= bound]
        if bad:
            raise CkirError(f"backward: target {bad[0]} is outside the vocabulary [0, {bound})")
        self.position = 0
        self._check_tokens("backward", tok)
        return self._backward_steps(tok, tgt)

    def _backward_steps(self, tok: np.ndarray, tgt: np.ndarray) -> Iterator[CallInfo]:
        targets_buf = self._io_named("backward", "targets")
        yield from self._steps("backward", tok, {targets_buf: tgt})
        self.position = 0

    def loss(self) -> float:
        """The loss the last backward run wrote."""
        return float(self.memory.values(self._io_named("backward", "output"), 1)[0])

    def optimizer_step(self, lr: float) -> None:
        """The ``optimize`` program: clipped AdamW on the gradients, weights in place."""
        if not (lr > 0 and np.isfinite(lr)):
            raise CkirError(f"optimizer_step: lr must be a finite number > 0, got {lr!r}")
        self.functions.step += 1
        self.functions.lr = float(np.float32(lr))
        for _ in self._steps("optimize", np.zeros(0, np.int64)):
            pass
        self.position = 0

    def _by_weight(self, role: str) -> dict[str, np.ndarray]:
        """Weight buffer name -> a copy of the ``role`` buffer whose source it is."""
        out: dict[str, np.ndarray] = {}
        for op in self.memory.model.walk():
            if isinstance(op, lw.BufferOp) and op.role == role and op.source_name:
                out[op.source_name] = self.memory.values(op.buffer_name).copy()
        return out

    def gradients(self) -> dict[str, np.ndarray]:
        """Weight name (``layers.0.attn.wq``) -> a copy of its gradient from the last
        :meth:`backward` (f32, the weight's shape), like ``CompiledModel.gradients``."""
        out: dict[str, np.ndarray] = {}
        for source, grad in self._by_weight("grad").items():
            name = source.removeprefix("w.")
            out[name] = grad.reshape(self.memory.types[source].shape_ints)
        return out

    def train_step(self, tokens: Sequence[int], targets: Sequence[int], *, lr: float) -> float:
        """``backward`` then ``optimizer_step``; the loss before the update."""
        loss = self.backward(tokens, targets)
        self.optimizer_step(lr)
        return loss
