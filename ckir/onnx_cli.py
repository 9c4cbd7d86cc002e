"""``ckir import model.onnx [--explain]``: the ONNX frontend's command line.

Without ``--explain`` it prints the graph IR (like a HF folder's import); with
it, per rule of the import pipeline (docs/onnx.md) the number of subgraphs it
matched, then every candidate that did not match with the node and the check
that failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckir.fileio import write_text_atomically


def explain_text(counts: dict[str, int], misses: list[str]) -> str:
    """The ``--explain`` report: ``rule: N matched`` lines, then ``miss: ...`` lines."""
    lines = [f"{rule}: {n} matched" for rule, n in counts.items()]
    lines += [f"miss: {m}" for m in misses]
    return "\n".join(lines) + "\n"


def cmd_import_onnx(args: argparse.Namespace) -> int:
    """``ckir import`` of an ``.onnx`` file."""
    from ckir.errors import CkirError
    from ckir.frontend.onnx import PIPELINE, import_onnx, load_onnx, run_pipeline
    from ckir.ir_io import print_module
    from ckir.passes.onnx_match import matched_counts, missed

    if args.template:
        raise CkirError(
            f"{args.model}: an ONNX model takes no --template (its graph is in the file)"
        )
    if getattr(args, "explain", False):
        module = load_onnx(Path(args.model))
        run_pipeline(module, PIPELINE[:-1])
        counts, misses = matched_counts(module), missed(module)
        text = explain_text(counts, misses)
        try:
            run_pipeline(module, PIPELINE[-1:])
        except CkirError as e:
            text += f"{PIPELINE[-1]}: {e}\n"
    else:
        module, _, _ = import_onnx(Path(args.model))
        text = print_module(module)
    if args.output:
        out = Path(args.output)
        if out.resolve() == Path(args.model).resolve():
            raise CkirError(f"-o {args.output}: is the source {args.model}")
        write_text_atomically(out, text)
    else:
        sys.stdout.write(text)
    return 0
