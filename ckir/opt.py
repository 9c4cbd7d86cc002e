"""``ckir-opt``: xDSL's optimizer driver with ckir's dialects, passes and the C target.

Usage::

    ckir-opt model.mlir --lower-decode --plan-layout
    ckir-opt model.mlir -p 'lower-prefill{max-context=256},plan-layout{strategy=bump}'
    ckir-opt model.mlir --lower-decode --plan-layout --emit-c      # same as -t c
    ckir-opt model.mlir --lower-decode --emit-json                 # same as -t json
    ckir-opt model.json --plan-layout                              # reads IR JSON

Passes given as flags (``--lower-decode``, ``--plan-layout{align=128}``,
``--plan-layout=align=128``) are folded, in the order they appear, into the
``-p`` pipeline before argparse sees them; ``-p`` lists and flags may be mixed.
Pass options default to what ``ckir compile`` uses (``--plan-layout`` plans with
liveness, as a non-debug build does).
Input is IR JSON (docs/ir-json.md) when the file name ends in ``.json`` or its
first non-space character is ``{`` (also on stdin, ``-`` or no file).
Errors in the input (parse errors, verifier failures) print one located line
and exit 1; ``-o FILE`` is written only when the whole run succeeded.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from ckir.errors import CkirError
from ckir.fileio import write_text_atomically
from ckir.ir_io import register_dialects
from ckir.ir_json_opt import json_aware_input, register_json_frontend
from ckir.universe import PASSES, pass_factories, target_factories


def fold_pass_flags(argv: Sequence[str], pass_names: Sequence[str]) -> list[str]:
    """Rewrite flag-style passes into one ``-p`` pipeline, keeping their order.

    >>> fold_pass_flags(["m.mlir", "--lower-decode", "--plan-layout{align=128}"],
    ...                 ["lower-decode", "plan-layout"])
    ['m.mlir', '-p', 'lower-decode,plan-layout{align=128}']
    """
    names = set(pass_names)
    out: list[str] = []
    pipeline: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-p", "--passes") and i + 1 < len(args):
            if args[i + 1]:
                pipeline.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--passes="):
            pipeline.append(arg.removeprefix("--passes="))
            i += 1
            continue
        if arg == "--emit-json":
            out += ["-t", "json"]
            i += 1
            continue
        if arg == "--emit-c" or arg.startswith("--emit-c{"):
            out += ["-t", "c" + arg.removeprefix("--emit-c")]  # --emit-c{profile=true}
            i += 1
            continue
        if arg.startswith("--") and not arg.startswith("---"):
            body = arg[2:]
            name, sep, opts = body.partition("=")
            if sep and name in names:
                pipeline.append(f"{name}{{{opts}}}")
                i += 1
                continue
            brace = body.find("{")
            base = body if brace < 0 else body[:brace]
            if base in names:
                # an unquoted `--pass{a=1 b=2}` arrives split at the space: re-join it
                while brace >= 0 and body.count("{") > body.count("}") and i + 1 < len(args):
                    i += 1
                    body += " " + args[i]
                pipeline.append(body)
                i += 1
                continue
        out.append(arg)
        i += 1
    if pipeline:
        out += ["-p", ",".join(pipeline)]
    return out


class CkirOptMain(xDSLOptMain):
    """The ``ckir-opt`` driver: only ckir's dialects (plus builtin/func), passes and targets."""

    version_format = "ckir-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        register_dialects(self.ctx)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        register_json_frontend(self)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        return json_aware_input(self)

    def register_all_passes(self) -> None:
        for name, factory in pass_factories().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        # xDSL's own targets for other dialects (llvm, riscv-asm, ...) cannot print ckir's IR
        # and some need packages ckir does not install: offer mlir and ckir's targets only
        super().register_all_targets()
        self.available_targets = {
            "mlir": self.available_targets["mlir"],
            **target_factories(),
        }

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        group = arg_parser.add_argument_group(
            "passes (flags run in the order given; options as --pass{opt=value ...})"
        )
        for name in PASSES:
            group.add_argument(f"--{name}", action="store_true", help=_pass_summary(name))
        group.add_argument("--emit-c", action="store_true", help="print C (same as -t c)")
        group.add_argument(
            "--emit-json", action="store_true", help="print IR JSON (same as -t json)"
        )

    def prepare_output(self) -> IO[str]:
        # With -o, write to memory: the file is created only once the run succeeded.
        if self.args.output_file is None:
            return sys.stdout
        return _KeepOpenStringIO()


class _KeepOpenStringIO(io.StringIO):
    """A StringIO that survives xDSL closing its output stream."""

    def close(self) -> None:
        pass


def _pass_summary(name: str) -> str:
    """First docstring line of a pass (imports it: only used for ``--help``)."""
    try:
        cls = pass_factories()[name]()
    except Exception as err:  # a broken pass should not break --help
        return f"(unavailable: {err})"
    doc = (cls.__doc__ or "").strip().splitlines()
    return doc[0] if doc else name


def format_parse_error(err: ParseError) -> str:
    """``file:line:col: error: message`` followed by the source line with carets."""
    loc = err.span.get_location()
    name = loc.file if loc.file not in ("", "<unknown>") else "<stdin>"
    context = err.span.print_with_context(err.msg).splitlines()
    # print_with_context starts with the location line; keep the source lines after it
    return "\n".join([f"{name}:{loc.line}:{loc.col}: error: {err.msg}", *context[1:]])


def main(argv: Sequence[str] | None = None) -> int:
    args = fold_pass_flags(list(sys.argv[1:] if argv is None else argv), list(PASSES))
    driver: CkirOptMain | None = None
    try:
        driver = CkirOptMain(description="ckir optimizer driver", args=args)
        output = driver.prepare_output()
        driver.prepare_output = lambda: output  # type: ignore[method-assign]
        driver.run()
        if isinstance(output, _KeepOpenStringIO):
            write_text_atomically(Path(driver.args.output_file), output.getvalue())
    except ParseError as err:
        print(format_parse_error(err), file=sys.stderr)
        return 1
    except (DiagnosticException, ArgSpecParseError) as err:  # the latter: a BaseException
        print(f"error: {str(err).strip()}", file=sys.stderr)
        return 1
    except CkirError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except RecursionError:
        given = getattr(driver.args, "input_file", None) if driver is not None else None
        what = given or "<stdin>"
        print(f"error: {what}: regions nest too deeply to parse", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
