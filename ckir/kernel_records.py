"""Tuning records: the best schedule found per kernel, shape bucket and machine, as JSON lines.

One record per line (``ckir kernel tune`` writes them, ``build`` / ``bench
--records`` apply them, ``tune --merge`` merges files)::

    {"bucket": "K=128,M=64,N=128", "compiler": "gcc (Debian 12.2.0-14) 12.2.0",
     "date": "2026-11-28T14:05:09Z", "device": "cpu", "func": "mm",
     "baseline_gflops": 9.1, "gflops": 14.2, "isa": "native",
     "key": "3f0c...", "schedule": {"order": "nmk", "tile_m": 16, ...},
     "shape_set": "A=64x128,B=128x128", "target": "c", "trials": 50, "vector_width": 16}

A record's identity (:data:`IDENTITY`) is the kernel's structural IR key with its
schedules removed (:func:`func_key`: blind to the func's and tensors' names), the
shape bucket (every dim symbol rounded up to a power of two, :func:`shape_bucket`),
the target and device, the ISA and its vector width, and the compiler's version
line.  Merging keeps, per identity, the record with the highest GFLOP/s (ties:
the smaller canonical JSON text), and writes them sorted by identity: the same
inputs in any order give the same bytes.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from ckir import kernel_tools as kt
from ckir.dialects import kernel as k
from ckir.errors import CkirError
from ckir.fileio import write_text_atomically
from ckir.ir_key import ir_key
from ckir.runtime_build import compiler_version, isa_vector_width

__all__ = [
    "IDENTITY",
    "Machine",
    "apply_records",
    "func_key",
    "merge_records",
    "read_records",
    "schedule_text",
    "shape_bucket",
    "tuned_schedules",
    "write_records",
]

Record = dict[str, Any]

#: the fields that identify a record; merging keeps one record per identity
IDENTITY: tuple[str, ...] = (
    "key", "bucket", "target", "device", "isa", "vector_width", "compiler",
)  # fmt: skip
#: every field a record must have, with its JSON type
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "key": str,
    "bucket": str,
    "target": str,
    "device": str,
    "isa": str,
    "vector_width": int,
    "compiler": str,
    "schedule": dict,
    "gflops": (int, float),
    "trials": int,
    "date": str,
}


def func_key(func: k.FuncOp) -> str:
    """The IR key of one kernel.func with every schedule removed (what tuning searches)."""
    return ir_key(kt.with_schedule(ModuleOp([func.clone()]), {}, ""))


def shape_bucket(symbols: Mapping[str, int]) -> str:
    """``{"M": 97, "N": 1}`` -> ``"M=128,N=1"``: each size rounded up to a power of two;
    ``"static"`` for a kernel whose dims are all constants."""
    if not symbols:
        return "static"
    return ",".join(f"{s}={1 << max(v - 1, 0).bit_length()}" for s, v in sorted(symbols.items()))


def schedule_text(values: Mapping[str, int | str]) -> str:
    """``tile_m=32,order=nmk`` in the dialect's field order (``--schedule`` syntax)."""
    return ",".join(f"{f}={values[f]}" for f in k.SCHEDULE_FIELDS if f in values)


class Machine:
    """The target, device, ISA, vector width and compiler a record is for."""

    def __init__(self, isa: str) -> None:
        self.fields: dict[str, Any] = {
            "target": "c",
            "device": "cpu",
            "isa": isa,
            "vector_width": isa_vector_width(isa),
            "compiler": compiler_version(),
        }

    def identity(self, key: str, bucket: str) -> tuple[Any, ...]:
        return tuple({"key": key, "bucket": bucket, **self.fields}[f] for f in IDENTITY)

    def record(self, **fields: Any) -> Record:
        """A record for this machine; ``date`` is now (UTC) unless given."""
        date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"date": date, **self.fields, **fields}


def _check(record: object, where: str) -> Record:
    if not isinstance(record, dict):
        raise CkirError(f"{where}: a record is a JSON object")
    for name, kind in REQUIRED.items():
        if name not in record:
            raise CkirError(f"{where}: the record has no '{name}'")
        if not isinstance(record[name], kind) or isinstance(record[name], bool):
            raise CkirError(f"{where}: '{name}' has the wrong type")
    for field, value in record["schedule"].items():
        problem = k.field_problem(field, value) if field in k.SCHEDULE_FIELDS else "unknown"
        if problem:
            raise CkirError(f"{where}: schedule field {field} = {value!r}: {problem}")
    return record


def read_records(path: Path) -> list[Record]:
    """The records of a JSON-lines file (blank lines skipped); a bad line is an error
    naming the file and line."""
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise CkirError(f"{path}: {err.strerror or err}") from None
    out: list[Record] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise CkirError(f"{path}:{n}: not JSON ({err.msg})") from None
        out.append(_check(data, f"{path}:{n}"))
    return out


def _canonical(record: Record) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def merge_records(records: Iterable[Record]) -> list[Record]:
    """The best record per identity (highest GFLOP/s, then the smaller canonical text),
    sorted by identity."""
    best: dict[tuple[Any, ...], Record] = {}
    for rec in records:
        ident = tuple(rec[f] for f in IDENTITY)
        old = best.get(ident)
        if old is None or (-rec["gflops"], _canonical(rec)) < (-old["gflops"], _canonical(old)):
            best[ident] = rec
    return [best[i] for i in sorted(best, key=lambda i: json.dumps(i))]


def write_records(path: Path, records: Iterable[Record]) -> None:
    """Write records as JSON lines (sorted keys), atomically."""
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    write_text_atomically(path, text)


def tuned_schedules(
    module: ModuleOp, path: Path, shape_sets: Sequence[str] | None, isa: str, where: str
) -> dict[str, dict[str, int | str]]:
    """The schedule of each func of ``module`` that has a record in ``path`` for this
    machine, by func name.

    The bucket comes from the (first) shape set; without one, a func whose records
    cover one bucket takes it and more than one bucket is an error.
    """
    records = read_records(path)
    machine = Machine(isa)
    found: dict[str, dict[str, int | str]] = {}
    for func in kt.funcs(module):
        key = func_key(func)
        mine = [
            r for r in records
            if all(r[f] == v for f, v in machine.fields.items()) and r["key"] == key
        ]  # fmt: skip
        if shape_sets:
            symbols = kt.bind_shapes(func, kt.parse_shape_set(shape_sets[0]), shape_sets[0])
            bucket = shape_bucket(symbols)
            mine = [r for r in mine if r["bucket"] == bucket]
        buckets = sorted({r["bucket"] for r in mine})
        if len(buckets) > 1:
            raise CkirError(
                f"{where}: kernel.func @{func.func_name}: {path} has records for the buckets "
                f"{'; '.join(buckets)}: give --shape-set to choose"
            )
        if mine:
            found[func.func_name] = merge_records(mine)[0]["schedule"]
    return found


def apply_records(
    module: ModuleOp, path: Path, shape_sets: Sequence[str] | None, isa: str, where: str
) -> ModuleOp:
    """A copy of ``module`` whose funcs take their schedules from their records in
    ``path`` (:func:`tuned_schedules`); a func without one is an error."""
    found = tuned_schedules(module, path, shape_sets, isa, where)
    out = module.clone()
    for func in kt.funcs(out):
        if func.func_name not in found:
            raise CkirError(
                f"{where}: kernel.func @{func.func_name}: no record in {path} for this kernel"
                f"{' and shape bucket' if shape_sets else ''} on this machine "
                f"(isa {isa}, {compiler_version()})"
            )
        kt.set_schedule(func, found[func.func_name])
    return out
