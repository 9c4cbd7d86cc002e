"""The phases of the generated C: one static function per phase, and the entry points
that run a step one layer at a time.

Every program is cut into its phases (``#lowered.phase``, set by ``--tag-phases``
or inferred the same way for calls without one: :func:`ckir.passes.tag_phases.segments`).
Each phase becomes a static function ``ckir_ph_<mode>_<phase>(m, T)`` holding its
calls; the mode function ``ckir_run_<mode>`` (what ``ckir_prefill`` / ``ckir_decode``
/ ``ckir_backward`` run) calls them in order.  For the inference modes, model.c
also exports (docs/runtime.md, "Running one layer at a time")::

    int ckir_<mode>_prologue(ckir_model *m, const int32_t *tokens, int64_t n);
    int ckir_<mode>_layer(ckir_model *m, int64_t i);       /* i = 0, 1, ... in order */
    int ckir_<mode>_epilogue(ckir_model *m);
    const float *ckir_<mode>_hidden(const ckir_model *m, int64_t i);
    int64_t ckir_hidden_size(void);                          /* CKIR_HIDDEN_SIZE */

``ckir_<mode>_hidden(m, i)`` points at the state layer ``i`` hands on to the next
phase (the residual stream: ``n`` rows of ``CKIR_HIDDEN_SIZE`` floats), valid
until a later phase overwrites it.  It is the buffer that layer ``i`` writes and
the next phase reads, leaving out buffers lowering made for a later scope (a
norm of the next layer's input fused into layer ``i``'s last add).

For the backward program (a training step), the phases run in its order::

    int ckir_backward_prologue(ckir_model *m, const int32_t *tokens, const int32_t *targets,
                               int64_t n);
    int ckir_backward_layer(ckir_model *m, int64_t i);        /* i = 0 .. L-1 */
    int ckir_backward_epilogue(ckir_model *m, float *loss);   /* the loss */
    int ckir_backward_grad_epilogue(ckir_model *m);
    int ckir_backward_grad_layer(ckir_model *m, int64_t i);   /* i = L-1 .. 0 */
    int ckir_backward_grad_prologue(ckir_model *m, float *loss);

over one table of the program's phase functions in that order
(:meth:`PhasedProgram.stages`), which the runtime's ``ckir_model_train_phase`` indexes.
"""

from __future__ import annotations

from collections.abc import Callable

from ckir.dialects import lowered as lw
from ckir.dialects.phase import STEADY, PhaseAttr
from ckir.errors import CkirError
from ckir.passes.tag_phases import Segment, segments
from ckir.vocab import INFERENCE_MODES

PREAMBLE = [
    "  uint8_t *W = m->weights;",
    "  uint8_t *S = m->state;",
    "  const int64_t P = m->pos;",
    "  (void)W; (void)S; (void)P; (void)T;",
]


def phase_function_name(mode: str, phase: PhaseAttr) -> str:
    """``ckir_ph_prefill_prologue``, ``ckir_ph_decode_layer_3``, ``ckir_ph_backward_prologue_grad``:
    the static C function of a phase."""
    layer = phase.layer_index
    name = f"ckir_ph_{mode}_" + (phase.kind_name if layer is None else f"layer_{layer}")
    return name + ("_grad" if phase.is_grad else "")


class PhasedProgram:
    """One program's phases: their C functions and, for a forward program, its layers."""

    def __init__(self, program: lw.ProgramOp) -> None:
        self.program = program
        self.mode = program.mode_name
        self.segments: list[Segment] = segments(program)
        forward = [s for s in self.segments if not s.phase.is_grad]
        self.prologue = next((s for s in forward if s.phase.layer_index is None), None)
        if self.prologue is not None and self.prologue.phase.kind_name != "prologue":
            self.prologue = None
        self.layers = [s for s in forward if s.phase.kind_name == STEADY]
        self.epilogue = next((s for s in forward if s.phase.kind_name == "epilogue"), None)

    def name(self, seg: Segment | None) -> str:
        return "NULL" if seg is None else phase_function_name(self.mode, seg.phase)

    def functions(self, emit_call: Callable[[lw.CallOp, list[str]], None]) -> list[str]:
        """The phase functions, then ``ckir_run_<mode>`` calling them in order.

        ``emit_call`` prints one call (the emitter's; it keeps the trace and
        profile counters running across phases).  Canary checks
        (``CKIR_SCOPE_END``) follow each run of calls of one origin scope.
        """
        out: list[str] = []
        for seg in self.segments:
            out += [f"static int {self.name(seg)}(ckir_model *m, int64_t T) {{", *PREAMBLE]
            scope: str | None = None
            for call in seg.calls:
                if scope is not None and call.scope_name != scope:
                    out.append(f"  CKIR_SCOPE_END(m); /* end of {scope} */")
                scope = call.scope_name
                emit_call(call, out)
            if scope is not None:
                out.append(f"  CKIR_SCOPE_END(m); /* end of {scope} */")
            out += ["  return CKIR_OK;", "}", ""]
        out += [f"static int ckir_run_{self.mode}(ckir_model *m, int64_t T) {{"]
        if self.segments:
            out.append("  int rc;")
        for seg in self.segments:
            out.append(f"  if ((rc = {self.name(seg)}(m, T)) != CKIR_OK) return rc;")
        out += ["  return CKIR_OK;", "}", ""]
        return out

    def stages(self, layers: int) -> list[str]:
        """The phase functions of a training program in the order of its stages (what
        ``ckir_model_train_phase`` indexes): prologue, layers 0..L-1, epilogue, grad
        epilogue, grad layers L-1..0, grad prologue; "NULL" for a phase without calls."""
        out = ["NULL"] * (2 * layers + 4)
        for seg in self.segments:
            ph = seg.phase
            if ph.layer_index is not None:
                at = 2 * layers + 2 - ph.layer_index if ph.is_grad else 1 + ph.layer_index
            else:
                at = {
                    ("prologue", False): 0,
                    ("epilogue", False): layers + 1,
                    ("epilogue", True): layers + 2,
                    ("prologue", True): 2 * layers + 3,
                }[(ph.kind_name, ph.is_grad)]
            out[at] = self.name(seg)
        return out

    def hidden(self, types: dict[str, lw.BufferType]) -> list[str | None]:
        """Per layer, the f32 buffer of this program it hands on (None if none is found).

        The last buffer the layer writes that the next phase reads, or that no
        later call reads (the last layer's residual sum when the final norm is
        fused into its add), leaving out buffers named for a later scope.
        """
        forward = [s for s in self.segments if not s.phase.is_grad]
        calls = self.program.calls()
        position = {id(c): n for n, c in enumerate(calls)}
        out: list[str | None] = []
        for seg in self.layers:
            layer = seg.phase.layer_index or 0
            at = forward.index(seg)
            nxt = forward[at + 1] if at + 1 < len(forward) else None
            read = {n for c in nxt.calls for n in c.in_names} if nxt is not None else set()
            found: str | None = None
            for call in seg.calls:
                after = calls[position[id(call)] + 1 :]
                for name in call.out_names:
                    if not self._own(name, layer) or types[name].dtype_name != "f32":
                        continue
                    if name in read or not any(name in c.in_names for c in after):
                        found = name
            out.append(found)
        return out

    def _own(self, name: str, layer: int) -> bool:
        """Whether a buffer of this program was not named for a scope after ``layer``."""
        if not name.startswith(self.mode + ".") or name.startswith(f"{self.mode}.footer."):
            return False
        index = name.removeprefix(f"{self.mode}.layers.").split(".", 1)[0]
        return not (index.isdigit() and int(index) > layer)


def layer_count(phased: dict[str, PhasedProgram]) -> int:
    """Layers of the steady phase, the same in every program that has one."""
    counts = {mode: len(p.layers) for mode, p in phased.items() if p.layers}
    if len(set(counts.values())) > 1:
        raise CkirError(
            "emit-c: the programs have different numbers of layers: "
            + ", ".join(f"{m} {n}" for m, n in counts.items())
        )
    return next(iter(counts.values()), 0)


def entry_points(
    phased: dict[str, PhasedProgram],
    types: dict[str, lw.BufferType],
    offset_macro: Callable[[str], str],
) -> tuple[list[str], list[str]]:
    """(model.h lines, model.c lines) of the layer-by-layer entry points of the
    inference modes (a mode not compiled: they return CKIR_ERR_MODE)."""
    header: list[str] = [f"#define CKIR_N_LAYERS {layer_count(phased)}"]
    source: list[str] = []
    hidden_size = 0
    for mode in INFERENCE_MODES:
        p = phased.get(mode)
        desc = f"&ckir_desc.{mode}"
        table = "NULL"
        hidden = p.hidden(types) if p is not None else []
        if p is not None and p.layers:
            table = f"ckir_{mode}_layer_fns"
            names = ", ".join(p.name(s) for s in p.layers)
            source.append(f"static const ckir_mode_fn {table}[] = {{{names}}};")
        if any(h is not None for h in hidden):
            offs = ", ".join("-1" if h is None else offset_macro(h) for h in hidden)
            source.append(f"static const int64_t ckir_{mode}_hidden_off[] = {{{offs}}};")
            hidden_size = max(types[h].shape_ints[-1] for h in hidden if h is not None)
            off = f"ckir_{mode}_hidden_off"
            get = (
                f"  if (i < 0 || i >= {len(hidden)} || {off}[i] < 0) return NULL;\n"
                f"  return (const float *)(m->state + {off}[i]);"
            )
        else:
            get = "  (void)m; (void)i;\n  return NULL;"
        prologue = p.name(p.prologue) if p is not None else "NULL"
        epilogue = p.name(p.epilogue) if p is not None else "NULL"
        source += [
            f"int ckir_{mode}_prologue(ckir_model *m, const int32_t *tokens, int64_t n) {{",
            f"  return ckir_model_phase_begin(m, {desc}, tokens, n, {prologue});",
            "}",
            f"int ckir_{mode}_layer(ckir_model *m, int64_t i) {{",
            f"  return ckir_model_phase_layer(m, {desc}, i, {table});",
            "}",
            f"int ckir_{mode}_epilogue(ckir_model *m) {{",
            f"  return ckir_model_phase_end(m, {desc}, {epilogue});",
            "}",
            f"const float *ckir_{mode}_hidden(const ckir_model *m, int64_t i) {{",
            get,
            "}",
            "",
        ]
    header.append(f"#define CKIR_HIDDEN_SIZE {hidden_size}")
    source += training_entry_points(phased.get("backward"), layer_count(phased))
    source += [
        "int64_t ckir_hidden_size(void) {",
        "  return CKIR_HIDDEN_SIZE;",
        "}",
        "",
    ]
    return header, source


def training_entry_points(backward: PhasedProgram | None, layers: int) -> list[str]:
    """model.c lines of ``ckir_backward_prologue`` ... ``ckir_backward_grad_prologue``:
    the training step one phase at a time (without a backward program they return
    CKIR_ERR_MODE, as ``ckir_backward`` does)."""
    table = "NULL"
    out: list[str] = []
    if backward is not None:
        table = "ckir_backward_stage_fns"
        stages = ", ".join(backward.stages(layers))
        out.append(f"static const ckir_mode_fn {table}[] = {{{stages}}};")

    def phase(kind: str, *, layer: bool = False, loss: bool = False) -> list[str]:
        export = "ckir_backward_" + kind.lower()
        params = "ckir_model *m" + (", int64_t i" if layer else "")
        params += ", float *loss" if loss else ""
        args = f"m, CKIR_PHASE_{kind}, {'i' if layer else '0'}, {table}"
        args += ", loss" if loss else ", NULL"
        return [f"int {export}({params}) {{", f"  return ckir_model_train_phase({args});", "}"]

    out += [
        "int ckir_backward_prologue(ckir_model *m, const int32_t *tokens, const int32_t *targets,",
        "                           int64_t n) {",
        f"  return ckir_model_train_phase_begin(m, tokens, targets, n, {table});",
        "}",
        *phase("LAYER", layer=True),
        *phase("EPILOGUE", loss=True),
        *phase("GRAD_EPILOGUE"),
        *phase("GRAD_LAYER", layer=True),
        *phase("GRAD_PROLOGUE", loss=True),
        "",
    ]
    return out
