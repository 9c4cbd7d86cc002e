"""``ckir kernel serve``: a scripted client's 100 mixed requests (some malformed) over
stdin/stdout, each answered by one JSON line with its id; the TCP transport; and the
request/response examples of docs/kernel-ir.md, replayed against the real server."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ckir.ir_io import parse_module
from ckir.ir_json import module_to_json

ROOT = Path(__file__).resolve().parents[1]
T = "!graph.tensor<[R, C], f32>"
RELU = (
    f'kernel.func @r {{\n  %x = kernel.input "X" : {T}\n'
    f"  %y = kernel.relu %x : ({T}) -> {T}\n  kernel.output %y : {T}\n}}\n"
)
MK, KN, MN = (
    "!graph.tensor<[M, K], f32>",
    "!graph.tensor<[K, N], f32>",
    "!graph.tensor<[M, N], f32>",
)
MM = (
    f'kernel.func @mm {{\n  %a = kernel.input "A" : {MK}\n  %b = kernel.input "B" : {KN}\n'
    f"  %c = kernel.matmul %a, %b {{schedule = #kernel.schedule<tile_m = 8, vectorize = 8>}}"
    f" : ({MK}, {KN}) -> {MN}\n  kernel.output %c : {MN}\n}}\n"
)


def _ir(text: str) -> Any:
    return module_to_json(parse_module(text))


def _serve(lines: list[str], tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "ckir.cli", "kernel", "serve", "--cache-dir", str(tmp_path / "c"),
         *args],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    return answers


def _requests() -> list[tuple[str, str | None]]:
    """100 request lines and the answer each must get: 'result' or an error type."""
    relu, mm = _ir(RELU), _ir(MM)
    bad_ir = {"format": "ckir-ir-json", "version": 1, "ops": [{"op": "kernel.nope"}]}
    no_output = _ir(RELU)
    no_output["ops"][0]["regions"][0]["blocks"][0]["ops"].pop()  # kernel.func without output
    good = [
        ({"op": "ping"}, "result"),
        ({"op": "lower", "ir": mm}, "result"),
        ({"op": "compile", "ir": relu}, "result"),
        ({"op": "compile", "ir": MM}, "result"),  # IR text in a string
        ({"op": "validate", "ir": mm, "shape_sets": ["A=1x1,B=1x1", "A=13x17,B=17x31"]}, "result"),
        ({"op": "validate", "ir": relu, "shape_sets": ["X=3x5", "X=1x17"], "tol": 0.0}, "result"),
    ]
    bad = [
        ('{"id": 1, "op": "compile"', "malformed_json"),
        ("[1, 2, 3]", "bad_request"),
        ('"just a string"', "bad_request"),
        ({"op": "compile"}, "bad_request"),  # no ir
        ({"op": "frobnicate", "ir": relu}, "unknown_op"),
        ({"ir": relu}, "unknown_op"),
        ({"op": "compile", "ir": bad_ir}, "bad_ir"),
        ({"op": "compile", "ir": no_output}, "bad_ir"),
        ({"op": "compile", "ir": "kernel.func @f {"}, "bad_ir"),
        ({"op": "compile", "ir": 42}, "bad_ir"),
        ({"op": "compile", "ir": relu, "isa": "sparc"}, "bad_request"),
        ({"op": "validate", "ir": relu}, "bad_request"),  # no shape sets
        ({"op": "validate", "ir": relu, "shape_sets": ["Y=3x5"]}, "bad_request"),
        ({"op": "validate", "ir": mm, "shape_sets": ["A=3x4,B=5x6"]}, "bad_request"),
        ({"op": "bench", "ir": mm, "shape_sets": ["A=3x4,B=4x6"], "schedules": ["unroll=99"]},
         "bad_request"),
        ({"op": "bench", "ir": mm, "shape_sets": ["A=3x4,B=4x6"], "reps": "many"}, "bad_request"),
        ({"op": "compile", "ir": _ir(MM.replace("vectorize = 8", "vectorize = 16")),
          "isa": "avx2"}, "compile_error"),
    ]  # fmt: skip
    out: list[tuple[str, str | None]] = []
    n = 0
    while len(out) < 96:
        for req, expect in (*good, *bad):
            if len(out) >= 96:
                break
            if isinstance(req, str):
                out.append((req, expect))
                continue
            n += 1
            out.append((json.dumps({"id": f"r{n}", **req}), expect))
    out.append(("\xff\xfe not utf-8 \x00", "malformed_json"))
    out.append((json.dumps({"op": "ping"}), "bad_request"))  # no id
    slow = [
        ({"op": "bench", "ir": mm, "shape_sets": ["A=20x30,B=30x40"],
          "schedules": ["ir", "tile_m=4,unroll=2"], "reps": 1}, "result"),
        ({"op": "tune", "ir": relu, "shape_sets": ["X=30x70"], "trials": 2, "rounds": 1},
         "result"),
    ]  # fmt: skip
    for req, expect in slow:
        n += 1
        out.append((json.dumps({"id": f"r{n}", **req}), expect))
    return out


def test_serve_answers_100_mixed_requests(tmp_path: Path) -> None:
    script = _requests()
    assert len(script) == 100
    answers = _serve([line for line, _ in script], tmp_path)
    assert len(answers) == 100  # one line per request, none lost, the server never died
    for (line, expect), answer in zip(script, answers, strict=True):
        try:
            ident = json.loads(line).get("id")
        except (ValueError, AttributeError):
            ident = None
        assert answer["id"] == ident, (line, answer)
        if expect == "result":
            assert "result" in answer and "error" not in answer, (line[:200], answer)
        else:
            assert answer["error"]["type"] == expect, (line[:200], answer)
            assert answer["error"]["message"]
    by_id = {a["id"]: a for a in answers if a["id"]}
    validates = [a["result"] for a in by_id.values() if "result" in a and "failed" in a["result"]]
    assert validates and all(v["failed"] == 0 for v in validates)
    compiles = [
        a["result"] for a in by_id.values() if "result" in a and "entry_points" in a["result"]
    ]
    assert any(c["cached"] for c in compiles) and any(not c["cached"] for c in compiles)
    bench = answers[-2]["result"]["results"]
    assert [r["schedule"] for r in bench] == ["ir", "tile_m=4,unroll=2"]
    assert all(r["correct"] and r["gflops"] > 0 for r in bench)
    [record] = answers[-1]["result"]["records"]
    assert record["func"] == "r" and record["trials"] <= 2 and record["bucket"] == "C=128,R=32"


def test_serve_over_tcp(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckir.cli", "kernel", "serve", "--port", "0", "--no-cache"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.fullmatch(r"listening on 127\.0\.0\.1:(\d+)\n", line)
        assert m, line
        with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=300) as sock:
            requests = [
                json.dumps({"id": 1, "op": "ping"}),
                "{oops",
                json.dumps({"id": 3, "op": "validate", "ir": _ir(RELU), "shape_sets": ["X=2x9"]}),
            ]
            sock.sendall(("\n".join(requests) + "\n").encode())
            reader = sock.makefile("r")
            answers = [json.loads(reader.readline()) for _ in requests]
        assert answers[0]["id"] == 1 and answers[0]["result"]["ops"][0] == "ping"
        assert answers[1]["error"]["type"] == "malformed_json"
        assert answers[2]["id"] == 3 and answers[2]["result"]["failed"] == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --------------------------------------------------------------------------- docs

#: fields whose values differ from run to run or machine to machine
VARIABLE = {"key", "library", "source", "error", "ms", "gflops", "ckir", "date", "compiler"}


def _same_shape(doc: Any, real: Any, path: str = "") -> None:
    if isinstance(doc, dict):
        assert isinstance(real, dict) and set(doc) == set(real), (path, doc, real)
        for key in doc:
            if key not in VARIABLE:
                _same_shape(doc[key], real[key], f"{path}.{key}")
    elif isinstance(doc, list):
        assert isinstance(real, list) and len(doc) == len(real), (path, doc, real)
        for i, (d, r) in enumerate(zip(doc, real, strict=True)):
            _same_shape(d, r, f"{path}[{i}]")
    else:
        assert doc == real, (path, doc, real)


def _doc_exchanges() -> list[tuple[str, dict[str, Any]]]:
    text = (ROOT / "docs" / "kernel-ir.md").read_text()
    section = text.split("## `ckir kernel serve`", 1)[1].split("\n## ", 1)[0]
    pairs = []
    for block in re.findall(r"```jsonl\n(.*?)```", section, re.S):
        lines = block.splitlines()
        for req, ans in zip(lines[::2], lines[1::2], strict=True):
            assert req.startswith("> ") and ans.startswith("< "), (req, ans)
            pairs.append((req[2:], json.loads(ans[2:])))
    return pairs


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the examples were taken on x86-64")
def test_the_documented_exchanges_are_real(tmp_path: Path) -> None:
    pairs = _doc_exchanges()
    assert len(pairs) >= 5
    answers = _serve([req for req, _ in pairs], tmp_path)
    for (req, doc), real in zip(pairs, answers, strict=True):
        _same_shape(doc, real, req[:60])
