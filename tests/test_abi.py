"""ckir/backend/abi.py agrees with runtime/include/ckir_model.h.

The header is written by hand; abi.py's :data:`DESC_STRUCTS` is the one table the
loader's ctypes structures and the C emitter's initializers are built from.  These
tests parse the header's struct definitions and constants and compare them with the
table, then compile a C program against the header to compare every field offset and
struct size with the ctypes structures built from the table.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ckir.backend import abi
from ckir.backend.abi import DESC_STRUCTS, Field, c_initializer
from ckir.model.bindings import DESC_TYPES
from ckir.runtime_build import runtime_dir

HEADER = runtime_dir() / "include" / "ckir_model.h"

_STRUCT = re.compile(r"typedef struct (\w+) \{(.*?)\} (\w+);", re.S)
_FIELD = re.compile(r"^(.*?)\s*\b(\w+)(?:\[(\d+)\])?$")


def header_structs(text: str) -> dict[str, tuple[Field, ...]]:
    """Every ``typedef struct X {...} X;`` of the header: its fields, in order."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out: dict[str, tuple[Field, ...]] = {}
    for name, body, alias in _STRUCT.findall(text):
        assert name == alias, f"typedef struct {name} ... {alias}"
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            m = _FIELD.match(decl)
            assert m is not None, f"{name}: cannot read field {decl!r}"
            ctype, field, length = m.groups()
            fields.append(Field(field, ctype, int(length or 0)))
        out[name] = tuple(fields)
    return out


def test_header_parser_reads_arrays_and_pointers() -> None:
    text = "typedef struct s { const int *p; /* c */ int64_t a[4]; } s;"
    assert header_structs(text) == {
        "s": (Field("p", "const int *"), Field("a", "int64_t", 4)),
    }


def test_desc_structs_match_the_header() -> None:
    """Field names, C types and order of every description struct, as the header says."""
    structs = header_structs(HEADER.read_text())
    for name, fields in DESC_STRUCTS.items():
        assert structs.get(name) == fields, name
    # and the table leaves out no description struct of the header
    described = {n for n in structs if n.endswith("_desc")}
    assert described == set(DESC_STRUCTS)


def test_constants_match_the_header() -> None:
    text = HEADER.read_text()

    def define(name: str) -> str:
        m = re.search(rf"#define {name} (\S+)", text)
        assert m is not None, name
        return m.group(1)

    assert define("CKIR_WEIGHTS_MAGIC") == f'"{abi.WEIGHTS_MAGIC.decode()}"'
    assert int(define("CKIR_WEIGHTS_VERSION").rstrip("u")) == abi.WEIGHTS_VERSION
    assert int(define("CKIR_WEIGHTS_HEADER_BYTES")) == abi.WEIGHTS_HEADER_BYTES
    assert int(define("CKIR_CANARY_WORD").rstrip("u"), 16) == abi.CANARY_WORD
    assert int(define("CKIR_CANARY_BYTES")) == len(abi.canary_bytes())


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_ctypes_offsets_match_the_c_compiler(tmp_path: Path) -> None:
    """offsetof and sizeof of every field and struct, from cc, equal the ctypes
    structures built from the table."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "ckir_model.h"', ""]
    lines.append("int main(void) {")
    expected: list[int] = []
    for struct, fields in DESC_STRUCTS.items():
        lines.append(f'  printf("%zu\\n", sizeof({struct}));')
        expected.append(ctypes.sizeof(DESC_TYPES[struct]))
        for f in fields:
            lines.append(f'  printf("%zu\\n", offsetof({struct}, {f.name}));')
            expected.append(getattr(DESC_TYPES[struct], f.name).offset)
    lines += ["  return 0;", "}"]
    src = tmp_path / "offsets.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "offsets"
    subprocess.run(["cc", "-I", str(HEADER.parent), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert [int(n) for n in out.split()] == expected


def test_initializer_names_every_field_in_order() -> None:
    slot = {"name": '"w.x"', "arena": "0", "offset": "0LL", "size": "64LL", "canary": "-1LL"}
    assert c_initializer("ckir_slot_desc", slot) == '{"w.x", 0, 0LL, 64LL, -1LL}'
    with pytest.raises(ValueError, match="ckir_slot_desc"):
        c_initializer("ckir_slot_desc", {k: slot[k] for k in reversed(slot)})
    with pytest.raises(ValueError, match="ckir_slot_desc"):
        c_initializer("ckir_slot_desc", {k: v for k, v in slot.items() if k != "canary"})
    train = {f.name: "0" for f in DESC_STRUCTS["ckir_train_desc"]}
    text = c_initializer("ckir_train_desc", train, indent=2)
    assert text.splitlines()[0] == "{"
    assert text.splitlines()[1] == "    .backward = 0,"
    assert text.splitlines()[-1] == "  }"
