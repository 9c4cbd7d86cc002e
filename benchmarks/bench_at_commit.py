"""Run ``ckir bench`` on a clean export of a commit (run by hand).

    .venv/bin/python benchmarks/bench_at_commit.py [--rev HEAD] -- smollm-135m --against torch

The working tree of a shared checkout may hold other people's unfinished
changes to the runtime; timing those says nothing about the committed
compiler.  This script exports ``--rev`` with ``git archive`` into a
temporary folder (the repository itself is not touched: no checkout, no
worktree), links the ``ckir.dialects`` / ``ckir.passes`` package folders the
way the editable install maps them, and runs ``python -m ckir.tools.bench`` (``ckir.bench``
before it moved) from
there with the same interpreter, so the compiler, the runtime kernels and the
probes all come from that commit.  Builds go to a folder of their own under
the cache (``bench-builds-<rev>``); the random-weight models are shared.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def export(rev: str, prefix: str = "ckir-") -> Path:
    """Extract commit ``rev`` into a new temporary folder, its package folders linked."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}{rev}-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    # the folders pyproject maps into the package (which ones depends on the commit)
    for pkg in ("dialects", "passes", "tools", "templates", "runtime"):
        link = tmp / "ckir" / pkg
        if (tmp / pkg).is_dir() and not link.exists():
            link.symlink_to(tmp / pkg, target_is_directory=True)
    return tmp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", default="HEAD", help="commit to export (default HEAD)")
    ap.add_argument("--keep", action="store_true", help="keep the exported tree")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then ckir bench arguments")
    args = ap.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", args.rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tmp = export(rev)
    # ckir bench moved from ckir/bench.py to tools/bench.py
    module = "ckir.tools.bench" if (tmp / "tools" / "bench.py").exists() else "ckir.bench"
    (tmp / "COMMIT").write_text(rev + "\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cache = Path(env.get("CKIR_CACHE_DIR", Path.home() / ".cache" / "ckir")).expanduser()
    if "--build-dir" not in bench_args:
        bench_args = [*bench_args, "--build-dir", str(cache / f"bench-builds-{rev}")]
    print(f"[bench_at_commit] {rev} exported to {tmp}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run([sys.executable, "-m", module, *bench_args], cwd=tmp, env=env)
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
