"""The modules of the lit suite, for the IR JSON and IR key tests.

:func:`lit_modules` yields every module the lit inputs under ``tests/filecheck``
hold, as the text ``ckir-opt`` prints for it:

* every ``// -----`` chunk of every ``.mlir`` file that parses and verifies as is
  (a file's own module, the valid cases of a ``--split-input-file`` file, the
  shared ``inputs/``);
* the output of every RUN line whose ``ckir-opt`` stage reads a file (``%s``,
  ``%inputs/...`` or a ``sed`` edit of one) and prints IR, run in-process with
  its passes (the lowered and layout IR the pass tests check).

Chunks that are meant to fail (``invalid*.mlir`` cases) and RUN lines that
print C or JSON or expect failure are left out;
:func:`lit_files` lists every file so the test can check that each one gave at
least one module, or is known to hold none.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from ckir.ir_io import parse_module, print_module

FILECHECK = Path(__file__).parent / "filecheck"
INPUTS = FILECHECK / "inputs"


@dataclass(frozen=True)
class LitModule:
    """One module of the lit suite: where it came from and its printed text."""

    source: Path
    label: str
    text: str
    #: for a RUN line's output, the JSON of the module it printed (checked against
    #: ``text`` even when ``text`` does not re-parse)
    json: str | None = None
    #: False when xDSL's parser cannot read ``text`` back (then only ``json`` is checked)
    reparses: bool = True


def lit_files() -> list[Path]:
    """Every ``.mlir`` file of the lit suite (inputs included)."""
    return sorted(p for p in FILECHECK.rglob("*.mlir") if "Output" not in p.parts)


def _printed(text: str, name: str) -> str | None:
    """The printed text of a module that parses and verifies, else None."""
    try:
        module = parse_module(text, name)
        module.verify()
    except (ParseError, VerifyException, DiagnosticException, ValueError, RecursionError):
        return None
    return print_module(module)


def _substitute(word: str, path: Path) -> str:
    return word.replace("%s", str(path)).replace("%inputs", str(INPUTS))


def _run_line_args(path: Path, run: str, scratch: Path) -> list[str] | None:
    """The arguments of a RUN line's ``ckir-opt`` stage when it reads one file (``%s``,
    ``%inputs/...`` or a ``sed`` edit of one, written to ``scratch``) and prints IR."""
    stages = [stage.split(" > ")[0].strip() for stage in run.split(" | ")]
    try:
        words = [shlex.split(stage) for stage in stages]
    except ValueError:
        return None
    k = next((i for i, w in enumerate(words) if w[:1] == ["ckir-opt"]), None)
    if k is None or k > 1 or (k == 1 and words[0][:1] != ["sed"]):
        return None
    args = [_substitute(w, path) for w in words[k][1:]]
    if "-o" in args:  # the output goes to stdout instead
        i = args.index("-o")
        del args[i : i + 2]
    if any(
        a in ("-t", "--split-input-file", "--verify-diagnostics", "--print-op-generic")
        for a in args
    ) or any(a.startswith(("--emit-", "-t", "%t")) for a in args):
        return None
    files = [a for a in args if a.endswith(".mlir")]
    if k == 1:  # `sed ... FILE | ckir-opt ...`: the edited file is the input
        if files:
            return None
        sed = [_substitute(w, path) for w in words[0]]
        done = subprocess.run(sed, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return None
        scratch.write_text(done.stdout)
        return [str(scratch), *args]
    if len(files) != 1 or not Path(files[0]).exists():
        return None
    return args


def _run_opt(args: list[str]) -> str | None:
    """``ckir-opt args`` in-process: its output, or None when it fails."""
    from ckir.opt import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return out.getvalue() if code == 0 else None


def _run_opt_text_and_json(args: list[str]) -> tuple[str, str] | None:
    """``ckir-opt args`` in-process, once: the text it prints and the JSON of the same
    module (what ``-t json`` writes), or None when it fails."""
    from ckir.ir_json import dumps
    from ckir.opt import CkirOptMain, fold_pass_flags
    from ckir.universe import PASSES

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            driver = CkirOptMain(args=fold_pass_flags(args, list(PASSES)))
            (chunk, _), *_ = driver.prepare_input()[0]
            module = driver.parse_chunk(chunk, "mlir")
            assert module is not None
            driver.apply_passes(module)
            return driver.output_resulting_program(module), dumps(module, driver.ctx)
    except (Exception, SystemExit):  # a RUN line that is meant to fail
        return None


@cache
def lit_modules() -> tuple[LitModule, ...]:
    """Every module of the lit suite (see the module docstring), each once."""
    found: list[LitModule] = []
    seen: set[tuple[Path, str]] = set()

    def add(module: LitModule) -> None:
        if (module.source, module.text) not in seen:
            seen.add((module.source, module.text))
            found.append(module)

    scratch_dir = Path(tempfile.mkdtemp(prefix="ckir-lit-modules-"))
    scratch = scratch_dir / "edited.mlir"
    for path in lit_files():
        source = path.read_text()
        for i, chunk in enumerate(source.split("// -----")):
            text = _printed(chunk, str(path))
            if text is not None:
                add(LitModule(path, f"chunk {i}", text))
        for line in source.splitlines():
            if "RUN:" not in line:
                continue
            run = line.split("RUN:", 1)[1]
            args = _run_line_args(path, run, scratch)
            if args is None:
                continue
            ran = _run_opt_text_and_json(args)
            if ran is not None:
                out, as_json = ran
                reparses = _printed(out, f"{path} ({run.strip()})") == out
                add(LitModule(path, f"RUN: {run.strip()}", out, as_json, reparses))
    shutil.rmtree(scratch_dir, ignore_errors=True)
    return tuple(found)


def modules_by_file() -> dict[Path, list[LitModule]]:
    """The lit modules grouped by the file they come from (every file a key)."""
    out: dict[Path, list[LitModule]] = {p: [] for p in lit_files()}
    for m in lit_modules():
        out[m.source].append(m)
    return out


def label(module: LitModule) -> str:
    """``file: chunk N`` or ``file: RUN: ...`` (a test id)."""
    return f"{module.source.relative_to(FILECHECK)}: {module.label}"
