"""C emission: lowered programs + the layout plan -> ``model.h`` and ``model.c``.

Every kernel call in the C comes from one ``lowered.call`` (printed above it
as a comment); nothing here knows an architecture.  ``model.h`` holds one
offset constant per slot and view; ``model.c`` holds one function per mode,
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
from ckir.backend.abi import ARENA_INDEX, arenas, layout_hash
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.registry import KernelSpec, load_registry
from ckir.vocab import LOWERED_MODES

C_TYPES = {
    "f32": "float",
    "i32": "int32_t",
    "i64": "int64_t",
    "bf16": "uint16_t",
    "f16": "uint16_t",
}
RUNTIME_SCALARS = {"T": "T", "P": "P", "PT": "(P + T)"}
_RT_PRODUCT = re.compile(r"T\*(\d+)")


@dataclass(frozen=True)
class CSources:
    header: str
    source: str


@dataclass(frozen=True)
class Place:
    arena: str
    offset: int
    macro: str


def c_identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


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

    def __init__(self, module: ModuleOp) -> None:
        self.model, self.plan = find_model_and_plan(module)
        self.registry = load_registry()
        self.places: dict[str, Place] = {}
        self.types: dict[str, lw.BufferType] = {}
        self._collect()

    # -- collection -----------------------------------------------------------------
    def _collect(self) -> None:
        used: set[str] = set()
        for arena in arenas(self.plan).values():
            for op in arena.body_block.ops:
                if isinstance(op, ly.SlotOp):
                    name, offset = op.buffer_name, op.offset_bytes
                elif isinstance(op, ly.LayoutViewOp):
                    root = self.places[op.root_name]
                    name, offset = op.view_name, root.offset + op.offset_bytes
                else:
                    continue
                macro = "CKIR_OFF_" + c_identifier(name)
                base, n = macro, 1
                while macro in used:
                    macro, n = f"{base}_{n}", n + 1
                used.add(macro)
                self.places[name] = Place(arena.arena_name, offset, macro)
        for op in self.model.walk():
            if isinstance(op, lw.BufferOp):
                self.types[op.buffer_name] = op.buffer_type
            elif isinstance(op, lw.ViewOp):
                self.types[op.view_name] = op.view_type
        missing = sorted(set(self.types) - set(self.places))
        if missing:
            raise CkirError(f"emit-c: buffer @{missing[0]} has no slot in the layout plan")

    # -- pieces ---------------------------------------------------------------------
    def pointer(self, name: str, dtype: str, const: bool) -> str:
        place = self.places[name]
        base = "W" if place.arena == "weights" else "S"
        ctype = C_TYPES.get(dtype, "uint8_t")
        qual = "const " if const else ""
        return f"({qual}{ctype} *)({base} + {place.macro})"

    @staticmethod
    def scalar(value: int | float | str, ctype: str) -> str:
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

    @emit_op.register
    def _(self, op: lw.CallOp, out: list[str]) -> None:
        spec: KernelSpec = self.registry[op.kernel_name]
        bind = dict(zip([o.name for o in spec.inputs()], op.in_names, strict=True))
        bind |= dict(zip([o.name for o in spec.outputs()], op.out_names, strict=True))
        params = op.param_values
        args = [self.pointer(bind[o.name], o.dtype, o.access == "read") for o in spec.operands]
        args += [self.scalar(params[p.name], p.type) for p in spec.params]
        text = io.StringIO()
        Printer(stream=text).print_op(op)
        comment = text.getvalue().strip().replace("*/", "* /")
        out.append(f"  /* {comment} */")
        out.append(f"  {spec.c_name}({', '.join(args)});")

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
            f"#define CKIR_LAYOUT_HASH 0x{layout_hash(self.plan):016x}ULL",
        ]
        for aname, arena in arenas(self.plan).items():
            lines.append(f"#define CKIR_{aname.upper()}_BYTES {arena.size_bytes}LL")
        lines.append("")
        lines.append("/* byte offsets of every slot and view in its arena */")
        for bname, place in self.places.items():
            lines.append(f"#define {place.macro} {place.offset}LL /* {place.arena}: {bname} */")
        lines += ["", "#endif", ""]
        return "\n".join(lines)

    def programs(self) -> dict[str, lw.ProgramOp]:
        return {
            op.mode_name: op for op in self.model.body_block.ops if isinstance(op, lw.ProgramOp)
        }

    def mode_function(self, program: lw.ProgramOp) -> list[str]:
        mode = program.mode_name
        out = [
            f"static int ckir_run_{mode}(ckir_model *m, int64_t T) {{",
            "  uint8_t *W = m->weights;",
            "  uint8_t *S = m->state;",
            "  const int64_t P = m->pos;",
            "  (void)W; (void)S; (void)P; (void)T;",
        ]
        scope: str | None = None
        for op in program.body_block.ops:
            if isinstance(op, lw.CallOp):
                op_scope = (op.comment_text or "").split(":")[0]
                if scope is not None and op_scope != scope:
                    out.append(f"  CKIR_SCOPE_END(m); /* end of {scope} */")
                scope = op_scope
            self.emit_op(op, out)
        if scope is not None:
            out.append(f"  CKIR_SCOPE_END(m); /* end of {scope} */")
        out += ["  return CKIR_OK;", "}", ""]
        return out

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
        bound = 0
        for op in program.body_block.ops:
            if (
                isinstance(op, lw.CallOp)
                and self.registry[op.kernel_name].op == "embed"
                and op.in_names[0] == tokens
            ):
                bound = self.types[op.in_names[1]].shape_ints[0]
        return tokens, logits, bound

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
                    out.append(
                        f'  {{"{op.buffer_name}", {ARENA_INDEX[arena.arena_name]}, '
                        f"{op.offset_bytes}LL, {op.size_bytes}LL, {canary}LL}},"
                    )
                    n_slots += 1
        if n_slots == 0:
            out.append('  {"", 0, 0, 0, -1},')
        out += ["};", ""]
        for program in progs.values():
            out += self.mode_function(program)
        vocab = 0
        modes: list[str] = []
        for mode in LOWERED_MODES:  # the fields of ckir_model_desc, in order
            program = progs.get(mode)
            if program is None:
                modes.append(f'  .{mode} = {{"{mode}", 0, 0, 0, 0, 0}},')
                continue
            tokens, logits, bound = self.io_of(program)
            vocab = self.types[logits].shape_ints[-1]
            rows = self.types[tokens].shape_ints[0]
            modes.append(
                f'  .{mode} = {{"{mode}", ckir_run_{mode}, {self.places[tokens].macro}, '
                f"{rows}, {self.places[logits].macro}, {bound}}},"
            )
        max_ctx = max((p.max_ctx for p in progs.values()), default=0)
        sizes = {a: op.size_bytes for a, op in arenas(self.plan).items()}
        out += [
            "static const ckir_model_desc ckir_desc = {",
            f'  .name = "{name}",',
            "  .layout_hash = CKIR_LAYOUT_HASH,",
            f"  .weights_bytes = {sizes.get('weights', 0)}LL,",
            f"  .state_bytes = {sizes.get('state', 0)}LL,",
            f"  .max_context = {max_ctx},",
            f"  .vocab = {vocab},",
            f"  .align = {self.plan.align_bytes},",
            "  .slots = ckir_slots,",
            f"  .n_slots = {n_slots},",
            *modes,
            "};",
            "",
            *ENTRY_POINTS,
        ]
        return "\n".join(out)


def _buffers(program: lw.ProgramOp) -> list[lw.BufferOp]:
    return [op for op in program.body_block.ops if isinstance(op, lw.BufferOp)]


ENTRY_POINTS = """\
const ckir_model_desc *ckir_describe(void) { return &ckir_desc; }

ckir_model *ckir_open(const char *weights_path, int *err) {
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
int64_t ckir_position(const ckir_model *m) { return m->pos; }
void ckir_reset(ckir_model *m) { m->pos = 0; m->last_rows = 0; }
const char *ckir_error(const ckir_model *m) { return m->error; }
int ckir_check_canaries(ckir_model *m) { return ckir_model_check_canaries(m); }
uint8_t *ckir_arena(ckir_model *m, int arena) { return arena == 0 ? m->weights : m->state; }
""".splitlines()


def emit_c(module: ModuleOp) -> CSources:
    """model.h and model.c for a module holding a lowered.model and its layout.plan."""
    emitter = CEmitter(module)
    return CSources(header=emitter.header(), source=emitter.source() + "\n")
