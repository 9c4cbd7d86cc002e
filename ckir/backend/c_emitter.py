"""C emission: lowered programs + the layout plan -> ``model.h`` and ``model.c``.

Every kernel call in the C comes from one ``lowered.call`` (printed above it
as a comment, with its origin); nothing here knows an architecture.  Argument
order and C names come from the ``lowered.kernel`` declarations of the model;
the runtime registry is consulted once, to check that the runtime has every
declared kernel with the declared signature (:func:`check_runtime_abi`).
With ``profile``, every call is wrapped in a timer (see :data:`PROFILE_HEADER`); with
``trace``, a hook set from outside is told after every call (:data:`TRACE_HEADER`).
``model.h`` holds one offset constant per slot and view; ``model.c`` holds one function per mode,
the slot table (for canary checks) and the exported entry points of
``runtime/include/ckir_model.h``.  Output is deterministic: same IR, same
bytes.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import singledispatchmethod

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.printer import Printer

import ckir
from ckir.backend import manifest
from ckir.backend.abi import (
    ARENA_INDEX,
    DESC_STRUCTS,
    arenas,
    build_fingerprint,
    c_initializer,
    declared,
    placed_offsets,
    row_offsets,
)
from ckir.backend.phases_c import PhasedProgram, entry_points, layer_count
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.dialects.dims import CONTEXT, LR, POSITION, STEP, TOKENS
from ckir.errors import CkirError
from ckir.passes.tag_phases import phase_of
from ckir.registry import load_registry
from ckir.vocab import DTYPE_TABLE, INFERENCE_MODES

#: C element type of each buffer dtype (block formats, q8_0p, q4_1p and q4_0p: bytes; f32p: float;
#: bf16p: uint16_t)
C_TYPES = {d.name: d.c_type for d in DTYPE_TABLE}
#: the C expression of each run-time symbol (ckir.dialects.dims) in a generated function
RUNTIME_SCALARS = {TOKENS: "T", POSITION: "P", CONTEXT: "(P + T)", STEP: "m->step", LR: "m->lr"}
_RT_PRODUCT = re.compile(TOKENS + r"\*(\d+)")


@dataclass(frozen=True)
class ProfiledCall:
    """One timed call of a profiling build: its slot in the timer arrays and what it is."""

    index: int
    mode: str
    kernel: str
    kind: str
    label: str
    #: weight buffers the call reads
    weights: tuple[str, ...]
    #: the phase it runs in (``prologue``, ``layer 3``, ``epilogue (grad)``: PhaseAttr.label)
    phase: str = ""


@dataclass(frozen=True)
class CSources:
    header: str
    source: str
    #: the timed calls, in timer-index order (empty unless emitted with ``profile``)
    profile: tuple[ProfiledCall, ...] = ()


#: profiling builds: one timer and one counter per call, read through exported functions
PROFILE_HEADER = """\
/* ---- profiling build: wall time and count of every kernel call (not reentrant) ---- */
#include <time.h>
#define CKIR_PROF_NCALLS {n}
static double ckir_prof_time[CKIR_PROF_NCALLS];
static long long ckir_prof_count[CKIR_PROF_NCALLS];
static const char *const ckir_prof_labels[CKIR_PROF_NCALLS] = {{
{labels}
}};
static inline double ckir_prof_now(void) {{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}}
long long ckir_profile_n(void) {{ return CKIR_PROF_NCALLS; }}
const double *ckir_profile_times(void) {{ return ckir_prof_time; }}
const long long *ckir_profile_counts(void) {{ return ckir_prof_count; }}
const char *ckir_profile_label(long long i) {{
  return i >= 0 && i < CKIR_PROF_NCALLS ? ckir_prof_labels[i] : "";
}}
void ckir_profile_reset(void) {{
  for (int i = 0; i < CKIR_PROF_NCALLS; i++) {{ ckir_prof_time[i] = 0; ckir_prof_count[i] = 0; }}
}}
"""


#: tracing builds (``ckir debug --compare``): ckir_set_trace_hook(fn) makes every mode
#: function call fn(i) after its i-th kernel call; a nonzero return ends the run there
#: with that code
TRACE_HEADER = """\
typedef int (*ckir_trace_fn)(int64_t call);
static ckir_trace_fn ckir_trace_hook;
void ckir_set_trace_hook(ckir_trace_fn fn) { ckir_trace_hook = fn; }
"""


def c_string(text: str) -> str:
    """A C string literal of ``text`` (backslashes, quotes and control characters escaped)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class Place:
    arena: str
    offset: int
    macro: str
    #: a view at a run-time row: the C expression of its row offset in bytes (``P * 128``)
    rows: str = ""


def c_identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def check_runtime_abi(model: lw.LoweredModelOp) -> None:
    """Every declared kernel exists in the runtime registry with the declared signature.

    The one place emission consults the registry: the declarations in the IR
    describe the kernels, this checks that the C runtime really has them.
    """
    registry = load_registry()
    for op in model.body_block.ops:
        if not isinstance(op, lw.KernelOp):
            continue
        where = f"emit-c: kernel @{op.kernel_name}"
        runtime = registry.get(op.kernel_name)
        if runtime is None:
            raise CkirError(f"{where} is declared in the IR but the runtime has no such kernel")
        declared = op.spec()
        if (declared.c_name, declared.operands, declared.params) != (
            runtime.c_name,
            runtime.operands,
            runtime.params,
        ):
            raise CkirError(
                f"{where}: declared as {declared.c_signature()} "
                f"[{' '.join(o.access for o in declared.operands)}], the runtime has "
                f"{runtime.c_signature()} [{' '.join(o.access for o in runtime.operands)}]"
            )


def find_model_and_plan(module: ModuleOp) -> tuple[lw.LoweredModelOp, ly.PlanOp]:
    models = [op for op in module.ops if isinstance(op, lw.LoweredModelOp)]
    plans = [op for op in module.ops if isinstance(op, ly.PlanOp)]
    if len(models) != 1 or len(plans) != 1:
        raise CkirError(
            "emit-c: needs one lowered.model and one layout.plan "
            "(run --lower-prefill/--lower-decode and --plan-layout first)"
        )
    return models[0], plans[0]


class CEmitter:
    """Prints model.h / model.c; one method per op kind it prints (singledispatch)."""

    def __init__(
        self,
        module: ModuleOp,
        *,
        profile: bool = False,
        trace: bool = False,
        fingerprint: int | None = None,
    ) -> None:
        self.model, self.plan = find_model_and_plan(module)
        #: the build fingerprint (computed here unless the caller has it already)
        self.fingerprint = (
            build_fingerprint(self.model, self.plan) if fingerprint is None else fingerprint
        )
        check_runtime_abi(self.model)
        self.profile = profile
        self.trace = trace
        self.trace_index = 0
        self.timed: list[ProfiledCall] = []
        #: each program's phases (filled by mode_function)
        self.phased: dict[str, PhasedProgram] = {}
        #: model.h lines of the steady phase (filled by source)
        self.phase_header: list[str] = []
        self.kernels: dict[str, lw.KernelOp] = {}
        self.places: dict[str, Place] = {}
        self.types: dict[str, lw.BufferType] = {}
        self._collect()

    # -- collection -----------------------------------------------------------------
    def _collect(self) -> None:
        used: set[str] = set()
        rows = row_offsets(self.plan)
        for name, (aname, offset) in placed_offsets(self.plan).items():
            macro = "CKIR_OFF_" + c_identifier(name)
            base, n = macro, 1
            while macro in used:
                macro, n = f"{base}_{n}", n + 1
            used.add(macro)
            row = rows.get(name)
            extra = f"{RUNTIME_SCALARS[row[0]]} * {row[1]}LL" if row is not None else ""
            self.places[name] = Place(aname, offset, macro, extra)
        self.kernels, self.types = declared(self.model)
        missing = sorted(set(self.types) - set(self.places))
        if missing:
            raise CkirError(f"emit-c: buffer @{missing[0]} has no slot in the layout plan")

    # -- pieces ---------------------------------------------------------------------
    def pointer(self, name: str, dtype: str, const: bool) -> str:
        place = self.places[name]
        base = "W" if place.arena == "weights" else "S"
        ctype = C_TYPES.get(dtype, "uint8_t")
        qual = "const " if const else ""
        rows = f" + {place.rows}" if place.rows else ""  # a view at a run-time row
        return f"({qual}{ctype} *)({base} + {place.macro}{rows})"

    @staticmethod
    def scalar(value: int | float | str | tuple[float, ...], ctype: str) -> str:
        if isinstance(value, tuple):  # an f32s table: a compound literal
            return "(const float[]){" + ", ".join(repr(float(v)) + "f" for v in value) + "}"
        if isinstance(value, str):
            if value in RUNTIME_SCALARS:
                return RUNTIME_SCALARS[value]
            m = _RT_PRODUCT.fullmatch(value)
            if m:
                return f"(T * {m.group(1)})"
            raise CkirError(f"emit-c: unknown run-time value '{value}'")
        if ctype == "f32":
            text = repr(float(value))
            return text + "f"
        return str(int(value))

    @singledispatchmethod
    def emit_op(self, op: Operation, out: list[str]) -> None:
        raise CkirError(f"emit-c: cannot print '{op.name}' inside a lowered.program")

    @emit_op.register
    def _(self, op: lw.BufferOp, out: list[str]) -> None:
        pass  # buffers are slots; nothing to run

    @emit_op.register
    def _(self, op: lw.ViewOp, out: list[str]) -> None:
        pass

    def declaration(self, call: lw.CallOp) -> lw.KernelOp:
        decl = self.kernels.get(call.kernel_name)
        if decl is None:
            raise CkirError(f"emit-c: lowered.call @{call.kernel_name}: the kernel is not declared")
        return decl

    @emit_op.register
    def _(self, op: lw.CallOp, out: list[str]) -> None:
        decl = self.declaration(op)
        params = op.param_values
        args = [
            self.pointer(name, arg.dtype_name, not arg.writes) for arg, name in op.bindings(decl)
        ]
        args += [self.scalar(params[p], ptype) for p, ptype in decl.param_types()]
        text = io.StringIO()
        op.print(Printer(stream=text), with_origin=False)
        printed = f"{op.name}{text.getvalue().rstrip()}"
        if op.origin is not None:
            printed = f"{printed} -- {op.origin.label}"
        out.append(f"  /* {printed.replace('*/', '* /')} */")
        call = f"{decl.c_name.data}({', '.join(args)});"
        if self.trace:
            i = self.trace_index
            self.trace_index += 1
            call += f" if (ckir_trace_hook) {{ int rc = ckir_trace_hook({i}); if (rc) return rc; }}"
        if not self.profile:
            out.append(f"  {call}")
            return
        i = len(self.timed)
        program = op.parent_op()
        weights = tuple(name for name in op.in_names if self.places[name].arena == "weights")
        self.timed.append(
            ProfiledCall(
                index=i,
                mode=program.mode_name if isinstance(program, lw.ProgramOp) else "",
                kernel=op.kernel_name,
                kind=decl.kind_name,
                label=op.origin.label if op.origin is not None else op.kernel_name,
                weights=weights,
                phase=phase_of(op).label,
            )
        )
        out.append("  { double ckir_prof_t0 = ckir_prof_now();")
        out.append(f"  {call}")
        out.append(
            f"  ckir_prof_time[{i}] += ckir_prof_now() - ckir_prof_t0; ckir_prof_count[{i}]++; }}"
        )

    # -- files ----------------------------------------------------------------------
    def header(self) -> str:
        name = self.model.sym_name.data
        lines = [
            f"/* Generated by ckir {ckir.__version__} for model @{name}. Do not edit. */",
            f"#ifndef CKIR_MODEL_{c_identifier(name)}_H",
            f"#define CKIR_MODEL_{c_identifier(name)}_H",
            "",
            '#include "ckir_model.h"',
            "",
            f"#define CKIR_FINGERPRINT 0x{self.fingerprint:016x}ULL",
        ]
        for aname, arena in arenas(self.plan).items():
            lines.append(f"#define CKIR_{aname.upper()}_BYTES {arena.size_bytes}LL")
        lines.append("")
        lines.append("/* byte offsets of every slot and view in its arena */")
        for bname, place in self.places.items():
            at = f", + {place.rows} at run time" if place.rows else ""
            lines.append(f"#define {place.macro} {place.offset}LL /* {place.arena}: {bname}{at} */")
        lines += manifest.header_lines(self.plan)
        lines += ["", "/* the steady phase: its layers, the floats per row a layer hands on */"]
        lines += self.phase_header
        lines += ["", "#endif", ""]
        return "\n".join(lines)

    def programs(self) -> dict[str, lw.ProgramOp]:
        return {
            op.mode_name: op for op in self.model.body_block.ops if isinstance(op, lw.ProgramOp)
        }

    def mode_function(self, program: lw.ProgramOp) -> list[str]:
        """One static function per phase of the program and ``ckir_run_<mode>`` (phases_c)."""
        self.trace_index = 0
        self.phased[program.mode_name] = phased = PhasedProgram(program)
        return phased.functions(self.emit_op)

    def io_of(self, program: lw.ProgramOp) -> tuple[str, str, int]:
        """(tokens buffer, output buffer, token bound) of a program."""
        inputs = [b for b in _buffers(program) if b.role == "io" and b.source_name == "input"]
        outputs = [b for b in _buffers(program) if b.role == "io" and b.source_name == "output"]
        if len(inputs) != 1 or len(outputs) != 1:
            raise CkirError(
                f"emit-c: program @{program.sym_name.data} needs one input and one output "
                f"io buffer, has {len(inputs)} and {len(outputs)}"
            )
        tokens, logits = inputs[0].buffer_name, outputs[0].buffer_name
        return self.io_of_tokens(program, tokens, logits)

    def io_of_tokens(
        self, program: lw.ProgramOp, tokens: str, logits: str = ""
    ) -> tuple[str, str, int]:
        """(tokens, output, token bound): the bound is the rows of the table embedding them."""
        bound = 0
        for op in program.body_block.ops:
            if (
                isinstance(op, lw.CallOp)
                and self.declaration(op).kind_name == "embed"
                and op.in_names[0] == tokens
            ):
                bound = self.types[op.in_names[1]].shape_ints[0]
        return tokens, logits, bound

    def train_desc(self, progs: dict[str, lw.ProgramOp]) -> tuple[list[str], str]:
        """The parameter table and the initializer of ``ckir_model_desc.train``.

        The backward program's io buffers are the tokens (source ``input``), the
        targets (``targets``) and the loss (``output``); the trained weights are
        the ``w`` operands of the optimize program's AdamW calls, in call order.
        """
        backward, optimize = progs.get("backward"), progs.get("optimize")
        if backward is None or optimize is None:
            if backward is not None or optimize is not None:
                raise CkirError("emit-c: a backward program needs an optimize program (and back)")
            return [], "{0}"
        io = {b.source_name: b.buffer_name for b in _buffers(backward) if b.role == "io"}
        missing = [k for k in ("input", "targets", "output") if k not in io]
        if missing:
            raise CkirError(
                f"emit-c: program @backward has no io buffer with source {missing[0]!r}"
            )
        _, _, bound = self.io_of_tokens(backward, io["input"])
        rows: list[str] = ["static const ckir_param_desc ckir_params[] = {"]
        n = 0
        sumsq: str | None = None
        for op in optimize.body_block.ops:
            if not isinstance(op, lw.CallOp):
                continue
            kind = self.declaration(op).kind_name
            if kind == "grad_sumsq":
                sumsq = op.out_names[0]
            if kind != "adamw":
                continue
            (grad, _), (weight, m, v) = op.in_names, op.out_names
            wtype = self.types[weight]
            shape = list(wtype.shape_ints)
            if len(shape) > 4:
                raise CkirError(f"emit-c: weight @{weight} has {len(shape)} dims (at most 4)")
            dims = ", ".join(f"{d}LL" for d in shape) or "0"
            param = {
                "name": c_string(weight),
                "weight_offset": self.places[weight].macro,
                "grad_offset": self.places[grad].macro,
                "m_offset": self.places[m].macro,
                "v_offset": self.places[v].macro,
                "numel": f"{wtype.num_elements}LL",
                "ndim": str(len(shape)),
                "shape": f"{{{dims}}}",
            }
            rows.append(f"  {c_initializer('ckir_param_desc', param)},")
            n += 1
        if sumsq is None or n == 0:
            raise CkirError("emit-c: program @optimize has no grad_sumsq or adamw call")
        rows += ["};", ""]
        train = {
            "backward": "ckir_run_backward",
            "optimize": "ckir_run_optimize",
            "tokens_offset": self.places[io["input"]].macro,
            "targets_offset": self.places[io["targets"]].macro,
            "loss_offset": self.places[io["output"]].macro,
            "sumsq_offset": self.places[sumsq].macro,
            "rows": str(self.types[io["input"]].shape_ints[0]),
            "token_bound": str(bound),
            "params": "ckir_params",
            "n_params": str(n),
        }
        return rows, c_initializer("ckir_train_desc", train, indent=2)

    def source(self) -> str:
        name = self.model.sym_name.data
        progs = self.programs()
        out = [
            f"/* Generated by ckir {ckir.__version__} for model @{name}. Do not edit.",
            " * One function per mode; every call below comes from one lowered.call. */",
            '#include "model.h"',
            '#include "ckir_runtime.h"',
            '#include "ckir_quant.h"',
            '#include "ckir_fused.h"',
            "#include <math.h>",
            "",
            "#ifdef CKIR_DEBUG",
            "#define CKIR_SCOPE_END(m) \\",
            "  do { if (ckir_model_check_canaries(m) >= 0) return CKIR_ERR_CANARY; } while (0)",
            "#else",
            "#define CKIR_SCOPE_END(m) ((void)0)",
            "#endif",
            "",
            "static const ckir_slot_desc ckir_slots[] = {",
        ]
        n_slots = 0
        for arena in arenas(self.plan).values():
            for op in arena.body_block.ops:
                if isinstance(op, ly.SlotOp):
                    canary = -1 if op.canary_offset is None else op.canary_offset
                    slot = {
                        "name": f'"{op.buffer_name}"',
                        "arena": str(ARENA_INDEX[arena.arena_name]),
                        "offset": f"{op.offset_bytes}LL",
                        "size": f"{op.size_bytes}LL",
                        "canary": f"{canary}LL",
                    }
                    out.append(f"  {c_initializer('ckir_slot_desc', slot)},")
                    n_slots += 1
        if n_slots == 0:
            empty = {"name": '""', "arena": "0", "offset": "0", "size": "0", "canary": "-1"}
            out.append(f"  {c_initializer('ckir_slot_desc', empty)},")
        out += ["};", ""]
        functions: list[str] = []
        for program in progs.values():
            functions += self.mode_function(program)
        if self.profile:
            labels = ",\n".join(f"  {c_string(c.label)}" for c in self.timed) or '  ""'
            out += PROFILE_HEADER.format(n=max(1, len(self.timed)), labels=labels).splitlines()
            out.append("")
        if self.trace:
            out += [*TRACE_HEADER.splitlines(), ""]
        out += functions
        vocab = 0
        modes: dict[str, str] = {}
        for mode in INFERENCE_MODES:
            program = progs.get(mode)
            # a mode not compiled: its name, the rest 0 (run NULL)
            desc = {f.name: "0" for f in DESC_STRUCTS["ckir_mode_desc"]} | {"name": f'"{mode}"'}
            if program is not None:
                tokens, logits, bound = self.io_of(program)
                vocab = self.types[logits].shape_ints[-1]
                desc |= {
                    "run": f"ckir_run_{mode}",
                    "tokens_offset": self.places[tokens].macro,
                    "tokens_rows": str(self.types[tokens].shape_ints[0]),
                    "logits_offset": self.places[logits].macro,
                    "logits_rows": str(self.types[logits].shape_ints[0]),
                    "token_bound": str(bound),
                }
            modes[mode] = c_initializer("ckir_mode_desc", desc)
        params, train = self.train_desc(progs)
        out += params
        max_ctx = max((p.max_ctx for p in progs.values()), default=0)
        sizes = {a: op.size_bytes for a, op in arenas(self.plan).items()}
        desc = {
            "name": f'"{name}"',
            "fingerprint": "CKIR_FINGERPRINT",
            "weights_bytes": f"{sizes.get('weights', 0)}LL",
            "state_bytes": f"{sizes.get('state', 0)}LL",
            "max_context": str(max_ctx),
            "vocab": str(vocab),
            "align": str(self.plan.align_bytes),
            "slots": "ckir_slots",
            "n_slots": str(n_slots),
            **modes,
            "train": train,
            "n_layers": str(layer_count(self.phased)),
        }
        model_desc = c_initializer("ckir_model_desc", desc, indent=0)
        self.phase_header, phase_source = entry_points(
            self.phased, self.types, lambda b: self.places[b].macro
        )
        out += [
            f"static const ckir_model_desc ckir_desc = {model_desc};",
            "",
            *manifest.source_lines(self.plan),
            *ENTRY_POINTS,
            "",
            *phase_source,
        ]
        return "\n".join(out)


def _buffers(program: lw.ProgramOp) -> list[lw.BufferOp]:
    return [op for op in program.body_block.ops if isinstance(op, lw.BufferOp)]


ENTRY_POINTS = """\
const ckir_model_desc *ckir_describe(void) { return &ckir_desc; }

/* compiled for the architecture's baseline: the CPU is checked before any
 * instruction of this library's -march runs */
CKIR_BASELINE ckir_model *ckir_open(const char *weights_path, int *err) {
  if (ckir_isa_missing(NULL, 0) != 0) {
    if (err) *err = CKIR_ERR_ISA;
    return NULL;
  }
  return ckir_model_open_desc(&ckir_desc, weights_path, err);
}

void ckir_close(ckir_model *m) { ckir_model_close(m); }

int ckir_prefill(ckir_model *m, const int32_t *tokens, int64_t n) {
  return ckir_model_run(m, &ckir_desc.prefill, tokens, n);
}

int ckir_decode(ckir_model *m, int32_t token) {
  return ckir_model_run(m, &ckir_desc.decode, &token, 1);
}

const float *ckir_logits(const ckir_model *m) {
  return (const float *)(m->state + m->last_logits);
}

int64_t ckir_logits_rows(const ckir_model *m) { return m->last_rows; }

int64_t ckir_copy_logits(const ckir_model *m, float *dst) { return ckir_model_copy_logits(m, dst); }

int ckir_set_int8_prefill(ckir_model *m, int on) { return ckir_model_set_int8_prefill(m, on); }

int ckir_backward(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t T,
                  float *loss) {
  return ckir_model_backward(m, tokens, targets, T, loss);
}

int ckir_optimizer_step(ckir_model *m, float lr) { return ckir_model_optimize(m, lr); }

int64_t ckir_train_steps(const ckir_model *m) { return m->step; }

float ckir_train_step(ckir_model *m, const int32_t *tokens, const int32_t *targets, int64_t T,
                      float lr) {
  float loss = 0.0f;
  if (ckir_model_backward(m, tokens, targets, T, &loss) != CKIR_OK) return NAN;
  if (ckir_model_optimize(m, lr) != CKIR_OK) return NAN;
  return loss;
}
int64_t ckir_position(const ckir_model *m) { return m->pos; }
void ckir_reset(ckir_model *m) { m->pos = 0; m->last_rows = 0; m->phase_mode = NULL; }
const char *ckir_error(const ckir_model *m) { return m->error; }
int ckir_check_canaries(ckir_model *m) { return ckir_model_check_canaries(m); }
uint8_t *ckir_arena(ckir_model *m, int arena) { return arena == 0 ? m->weights : m->state; }

/* the inputs already in the arena, written through the I/O manifest's handles */
int ckir_prefill_in_arena(ckir_model *m, int64_t n) {
  const ckir_mode_desc *d = &ckir_desc.prefill;
  return ckir_model_run(m, d, (const int32_t *)(m->state + d->tokens_offset), n);
}
int ckir_decode_in_arena(ckir_model *m) {
  const ckir_mode_desc *d = &ckir_desc.decode;
  return ckir_model_run(m, d, (const int32_t *)(m->state + d->tokens_offset), 1);
}
int ckir_backward_in_arena(ckir_model *m, int64_t n) {
  const ckir_train_desc *t = &ckir_desc.train;
  return ckir_model_backward(m, (const int32_t *)(m->state + t->tokens_offset),
                             (const int32_t *)(m->state + t->targets_offset), n, NULL);
}
int64_t ckir_copy_f32(const ckir_model *m, int arena, int64_t offset, int64_t n, float *dst) {
  return ckir_model_copy_f32(m, arena, offset, n, dst);
}
""".splitlines()


def emit_c(
    module: ModuleOp, *, profile: bool = False, trace: bool = False, fingerprint: int | None = None
) -> CSources:
    """model.h and model.c for a module holding a lowered.model and its layout.plan.

    With ``profile``, model.c times every kernel call (wall time and count per
    call, exported as ``ckir_profile_n/times/counts/label/reset``) and the
    result lists the timed calls; a profiling model.c is not reentrant.  With ``trace``,
    it exports ``ckir_set_trace_hook`` (:data:`TRACE_HEADER`).
    ``fingerprint``: the build fingerprint when the caller computed it already
    (:func:`ckir.backend.abi.build_fingerprint` of the module's model and plan).
    """
    emitter = CEmitter(module, profile=profile, trace=trace, fingerprint=fingerprint)
    source = emitter.source() + "\n"  # before header(): it fills the phase lines
    return CSources(header=emitter.header(), source=source, profile=tuple(emitter.timed))
