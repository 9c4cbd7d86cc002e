"""``ckir kernel serve``: kernel IR requests answered as JSON lines (the agent side).

::

    ckir kernel serve [--port N] [--isa native] [--cache-dir DIR | --no-cache]

Reads one JSON object per line on stdin (or from each connection to
``127.0.0.1:N`` with ``--port``; ``--port 0`` picks a free port and prints it on
stderr) and writes one JSON line per request, carrying the request's ``id``.
A request::

    {"id": 1, "op": "validate", "ir": {...IR JSON...}, "shape_sets": ["A=7x5,B=5x3"]}

``op`` is one of :data:`OPS`; ``ir`` is IR JSON (docs/ir-json.md) or IR text in a
string.  Options: ``isa`` (default: the server's ``--isa``), ``fuse`` (true),
``shape_sets`` (validate, bench, tune), ``tol`` (1e-4), ``seed`` (0),
``schedules`` (bench: ``["ir", "tile_m=8,unroll=2"]``), ``reps`` (bench, 3),
``trials`` (tune, 20), ``rounds`` (tune, 5).  Every answer is
``{"id": ..., "result": {...}}`` or ``{"id": ..., "error": {"type": T, "message": M}}``
with ``T`` one of :data:`ERROR_TYPES`; the server keeps running after any error.
docs/kernel-ir.md shows each answer.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import socketserver
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

import ckir
from ckir import kernel_tools as kt
from ckir.backend.kernel_c import KernelCodegenError
from ckir.errors import CkirError, one_line
from ckir.ir_io import parse_module
from ckir.ir_json import module_from_json
from ckir.kernel_cache import KernelCache, kernel_cache_options
from ckir.kernel_tune import tune_module, work
from ckir.runtime_build import ISAS, RuntimeBuildError

__all__ = ["ERROR_TYPES", "OPS", "KernelServer", "register_serve"]

#: what a request may ask
OPS: tuple[str, ...] = ("ping", "lower", "compile", "validate", "bench", "tune")
#: the ``type`` of an error answer
ERROR_TYPES: tuple[str, ...] = (
    "malformed_json", "bad_request", "unknown_op", "bad_ir", "compile_error", "internal",
)  # fmt: skip

JSON = Any


class RequestError(Exception):
    """A request that cannot be answered: ``kind`` is one of :data:`ERROR_TYPES`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _field(req: dict[str, JSON], name: str, kind: type | tuple[type, ...], default: JSON) -> JSON:
    value = req.get(name, default)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise RequestError("bad_request", f"'{name}' has the wrong type")
    return value


def _shape_sets(req: dict[str, JSON]) -> list[str]:
    sets = _field(req, "shape_sets", list, None) if "shape_sets" in req else None
    if not sets or not all(isinstance(s, str) for s in sets):
        raise RequestError("bad_request", "'shape_sets' must be a non-empty list of strings")
    return sets


class KernelServer:
    """Answers requests (one JSON text each) with one JSON text each."""

    def __init__(self, cache: KernelCache, isa: str = "native") -> None:
        self.cache = cache
        self.isa = isa
        self.handlers: dict[str, Callable[[dict[str, JSON], ModuleOp, str], JSON]] = {
            "lower": self._lower,
            "compile": self._compile,
            "validate": self._validate,
            "bench": self._bench,
            "tune": self._tune,
        }

    def answer(self, line: str) -> str:
        """The JSON line answering one request line."""
        ident: JSON = None
        try:
            try:
                req = json.loads(line.strip())
            except (json.JSONDecodeError, RecursionError) as err:
                raise RequestError("malformed_json", f"not JSON: {one_line(err)}") from None
            if not isinstance(req, dict):
                raise RequestError("bad_request", "a request is a JSON object")
            ident = req.get("id")
            result = self._dispatch(req)
            return json.dumps({"id": ident, "result": result}, allow_nan=False)
        except RequestError as err:
            return json.dumps({"id": ident, "error": {"type": err.kind, "message": err.message}})
        except Exception as err:  # noqa: BLE001 - the server must answer and keep running
            message = f"{type(err).__name__}: {one_line(err)}"
            return json.dumps({"id": ident, "error": {"type": "internal", "message": message}})

    def _dispatch(self, req: dict[str, JSON]) -> JSON:
        if "id" not in req:
            raise RequestError("bad_request", "the request has no 'id'")
        op = req.get("op")
        if op == "ping":
            return {"ckir": ckir.__version__, "ops": list(OPS)}
        if not isinstance(op, str) or op not in self.handlers:
            raise RequestError("unknown_op", f"unknown op {op!r} (ops: {', '.join(OPS)})")
        where = f"request {json.dumps(req['id'])}"
        isa = _field(req, "isa", str, self.isa)
        if isa not in ISAS:
            raise RequestError("bad_request", f"isa {isa!r} is not one of {', '.join(ISAS)}")
        module = self._module(req, where)
        try:
            return self.handlers[op](req, module, isa)
        except (KernelCodegenError, RuntimeBuildError) as err:
            raise RequestError("compile_error", one_line(err)) from None
        except CkirError as err:
            raise RequestError("bad_request", one_line(err)) from None

    def _module(self, req: dict[str, JSON], where: str) -> ModuleOp:
        if "ir" not in req:
            raise RequestError("bad_request", "the request has no 'ir'")
        ir, fuse = req["ir"], _field(req, "fuse", bool, True)
        try:
            if isinstance(ir, dict):
                module = module_from_json(ir, where)
            elif isinstance(ir, str):
                module = parse_module(ir, where)
                module.verify()
            else:
                raise RequestError("bad_ir", "'ir' must be IR JSON (an object) or IR text")
            return kt.prepare_kernels(module, where, fuse=fuse)
        except ParseError as err:
            loc = err.span.get_location()
            raise RequestError("bad_ir", f"{where}:{loc.line}:{loc.col}: {err.msg}") from None
        except (VerifyException, DiagnosticException) as err:
            raise RequestError("bad_ir", f"{where}: {one_line(err)}") from None
        except CkirError as err:
            raise RequestError("bad_ir", one_line(err)) from None

    # ------------------------------------------------------------------ ops

    def _lower(self, req: dict[str, JSON], module: ModuleOp, isa: str) -> JSON:
        gen = kt.generate(module, isa)
        return {"source": gen.source, "notes": gen.notes}

    def _build(self, module: ModuleOp, isa: str) -> tuple[ctypes.CDLL, JSON]:
        gen = kt.generate(module, isa)
        built = self.cache.build(module, isa=isa)
        info = {"key": built.key, "cached": built.hit, "notes": gen.notes}
        return ctypes.CDLL(str(built.library)), {**info, "library": str(built.library)}

    def _compile(self, req: dict[str, JSON], module: ModuleOp, isa: str) -> JSON:
        _, info = self._build(module, isa)
        entry_points = [f.func_name for f in kt.funcs(module)]
        return {**info, "entry_points": entry_points, "source": kt.generate(module, isa).source}

    def _validate(self, req: dict[str, JSON], module: ModuleOp, isa: str) -> JSON:
        sets = _shape_sets(req)
        for func in kt.funcs(module):
            for text in sets:
                kt.bind_shapes(func, kt.parse_shape_set(text), text)
        tol = float(_field(req, "tol", (int, float), 1e-4))
        seed = _field(req, "seed", int, 0)
        _, info = self._build(module, isa)
        results = kt.validate(module, Path(info["library"]), sets, tol=tol, seed=seed)
        rows = [
            {"func": r.func, "shape_set": r.shape_set, "error": r.error, "passed": r.passed}
            for r in results
        ]
        failed = sum(not r.passed for r in results)
        return {**info, "results": rows, "passed": len(rows) - failed, "failed": failed}

    def _bench(self, req: dict[str, JSON], module: ModuleOp, isa: str) -> JSON:
        sets = _shape_sets(req)
        texts = _field(req, "schedules", list, ["ir"])
        reps = _field(req, "reps", int, 3)
        if not texts or not all(isinstance(t, str) for t in texts) or not 1 <= reps <= 100:
            raise RequestError("bad_request", "'schedules': strings; 'reps': 1..100")
        combined = ModuleOp([])
        for i, text in enumerate(texts):
            values = None if text == "ir" else kt.parse_schedule(text)
            for func in kt.funcs(kt.with_schedule(module, values, f"_s{i}")):
                combined.body.block.add_op(func.clone())
        for func in kt.funcs(module):
            for text in sets:
                kt.bind_shapes(func, kt.parse_shape_set(text), text)
        lib, info = self._build(combined, isa)
        variants = {f.func_name: f for f in kt.funcs(combined)}
        rows = []
        for func in kt.funcs(module):
            for text in sets:
                symbols = kt.bind_shapes(func, kt.parse_shape_set(text), text)
                inputs = kt.random_inputs(func, symbols, 0)
                want = kt.reference(func, inputs)
                flops = work(func, symbols)
                for i, sched in enumerate(texts):
                    variant = variants[f"{func.func_name}_s{i}"]
                    got = kt.run(lib, variant, inputs, symbols)
                    err = max(kt.relative_error(g, w) for g, w in zip(got, want, strict=True))
                    secs = kt.time_call(lib, variant, inputs, symbols, min_seconds=0.05, reps=reps)
                    rows.append(
                        {
                            "func": func.func_name, "shape_set": text, "schedule": sched,
                            "ms": secs * 1e3, "gflops": flops / secs / 1e9,
                            "error": err, "correct": err <= 1e-4,
                        }
                    )  # fmt: skip
        return {**info, "results": rows}

    def _tune(self, req: dict[str, JSON], module: ModuleOp, isa: str) -> JSON:

        trials = _field(req, "trials", int, 20)
        rounds = _field(req, "rounds", int, 5)
        if not 1 <= trials <= 1000 or not 1 <= rounds <= 51:
            raise RequestError("bad_request", "'trials': 1..1000; 'rounds': 1..51")
        records = tune_module(
            module, _shape_sets(req), isa=isa, cache=self.cache, trials=trials, rounds=rounds,
            seed=_field(req, "seed", int, 0), tol=float(_field(req, "tol", (int, float), 1e-4)),
        )  # fmt: skip
        return {"records": records}

    # ------------------------------------------------------------------ transport

    def serve_stream(self, reader: IO[bytes], writer: IO[str]) -> None:
        """Answer every non-blank line of ``reader`` on ``writer`` until end of input
        (bytes that are not UTF-8 are replaced: that line is then malformed JSON)."""
        for raw in reader:
            line = raw.decode("utf-8", errors="replace")
            if line.strip():
                writer.write(self.answer(line) + "\n")
                writer.flush()


def register_serve(ksub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``ckir kernel serve``."""
    s = ksub.add_parser("serve", help="answer kernel IR requests as JSON lines (stdin or a port)")
    s.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT instead of stdin/stdout")
    s.add_argument("--isa", choices=ISAS, default="native", help="default ISA of the builds")
    kernel_cache_options(s)
    s.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    with KernelCache.open(args.cache_dir, disabled=args.no_cache) as cache:
        server = KernelServer(cache, args.isa)
        if args.port is None:
            server.serve_stream(sys.stdin.buffer, sys.stdout)
            return 0

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for raw in self.rfile:
                    line = raw.decode("utf-8", errors="replace")
                    if line.strip():
                        self.wfile.write((server.answer(line) + "\n").encode())
                        self.wfile.flush()

        socketserver.TCPServer.allow_reuse_address = True
        with socketserver.TCPServer(("127.0.0.1", args.port), Handler) as tcp:
            print(f"listening on 127.0.0.1:{tcp.server_address[1]}", file=sys.stderr, flush=True)
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops the server
                tcp.serve_forever()
    return 0
