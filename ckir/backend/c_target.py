"""The ``c`` target of ``ckir-opt`` (``-t c`` or ``--emit-c``): model.h then model.c."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from ckir.backend.c_emitter import emit_c


@dataclass(frozen=True)
class CTarget(Target):
    """Print the C for a module holding a lowered.model and its layout.plan.

    The output is model.h followed by model.c, each introduced by a
    ``// ----- <file>`` line (``ckir compile`` writes them as two files).
    ``-t c{profile=true}`` (or ``--emit-c{profile=true}``) emits a profiling
    model.c: every kernel call timed, labelled with its origin.  ``trace=true`` adds
    the hook ``ckir debug --compare`` sets (``ckir_set_trace_hook``), told after every call.
    """

    name = "c"

    profile: bool = False
    trace: bool = False

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        sources = emit_c(module, profile=self.profile, trace=self.trace)
        output.write("// ----- model.h\n")
        output.write(sources.header)
        output.write("// ----- model.c\n")
        output.write(sources.source)
