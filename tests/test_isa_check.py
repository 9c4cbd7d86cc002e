"""A library compiled for instructions this CPU lacks is refused, not run into SIGILL.

``ckir_isa_missing`` (runtime/support/isa_check.c) names the extensions a library
was compiled for that the CPU lacks; ``ckir_open`` refuses with ``CKIR_ERR_ISA``
before any instruction of the library's -march runs, and the loader says which
extensions are missing.  The oracle for the check: the compiler's predefined
macros for an -march, mapped to /proc/cpuinfo's flag names by the table below,
minus the flags this CPU has.  Each machine kind meets a -march it cannot run
(Sapphire Rapids' AVX512-FP16 on AMD; Zen 3's SSE4a on Intel), so the refusal
runs on either.
"""

from __future__ import annotations

import ctypes
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ckir import model as ckir_model
from ckir.compiler import LIBRARY_NAME, CompileOptions, compile_model
from ckir.errors import CkirError
from ckir.integrity import file_digests
from ckir.model import bindings
from ckir.runtime_build import BASE_CFLAGS, LINK_LIBS, runtime_dir, support_sources

CC = "cc"

#: compiler macro -> /proc/cpuinfo flag (written from the GCC and Linux names)
MACRO_FLAG = {
    "__SSE3__": "pni",
    "__SSSE3__": "ssse3",
    "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2",
    "__SSE4A__": "sse4a",
    "__POPCNT__": "popcnt",
    "__AES__": "aes",
    "__PCLMUL__": "pclmulqdq",
    "__AVX__": "avx",
    "__AVX2__": "avx2",
    "__FMA__": "fma",
    "__F16C__": "f16c",
    "__BMI__": "bmi1",
    "__BMI2__": "bmi2",
    "__LZCNT__": "abm",
    "__MOVBE__": "movbe",
    "__ADX__": "adx",
    "__SHA__": "sha_ni",
    "__GFNI__": "gfni",
    "__VAES__": "vaes",
    "__VPCLMULQDQ__": "vpclmulqdq",
    "__AVXVNNI__": "avx_vnni",
    "__AVX512F__": "avx512f",
    "__AVX512CD__": "avx512cd",
    "__AVX512DQ__": "avx512dq",
    "__AVX512BW__": "avx512bw",
    "__AVX512VL__": "avx512vl",
    "__AVX512IFMA__": "avx512ifma",
    "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512_vbmi2",
    "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BITALG__": "avx512_bitalg",
    "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq",
    "__AVX512BF16__": "avx512_bf16",
    "__AVX512FP16__": "avx512_fp16",
}

#: -march values of both machine kinds and their neighbours (GCC 12 knows them all)
MARCHES = [
    "native",
    "x86-64",
    "haswell",
    "skylake-avx512",
    "icelake-server",
    "sapphirerapids",
    "znver3",
]

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64"
    or not Path("/proc/cpuinfo").exists()
    or "clang" in subprocess.run([CC, "--version"], capture_output=True, text=True).stdout,
    reason="the instruction check covers x86-64 Linux (/proc/cpuinfo) built by GCC; "
    "elsewhere it reports nothing",
)


def cpu_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("flags"))
    return set(line.split(":", 1)[1].split())


def expected_missing(march: str) -> set[str]:
    """The cpuinfo flags an -march lets the compiler use that this CPU lacks."""
    macros = subprocess.run(
        [CC, f"-march={march}", "-dM", "-E", "-x", "c", "/dev/null"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    defined = {ln.split()[1] for ln in macros.splitlines() if ln.startswith("#define ")}
    return {flag for macro, flag in MACRO_FLAG.items() if macro in defined} - cpu_flags()


def mismatch_march() -> str:
    """An -march this CPU cannot run (skips when it runs every one of MARCHES)."""
    for march in MARCHES:
        if expected_missing(march):
            return march
    pytest.skip(f"this CPU has every extension of {', '.join(MARCHES)}")


@pytest.fixture(scope="module")
def check_lib(tmp_path_factory: pytest.TempPathFactory):
    """march -> the check alone, compiled for that -march into a library of its own."""
    out = tmp_path_factory.mktemp("isa")
    libs: dict[str, ctypes.CDLL] = {}

    def get(march: str) -> ctypes.CDLL:
        if march not in libs:
            so = out / f"isa_{march}.so"
            src = runtime_dir() / "support" / "isa_check.c"
            inc = runtime_dir() / "include"
            subprocess.run(
                [CC, *BASE_CFLAGS, f"-march={march}", "-Wall", "-Werror", "-shared"]
                + ["-I", str(inc), str(src), "-o", str(so)],
                check=True,
            )
            lib = ctypes.CDLL(str(so))
            lib.ckir_isa_missing.restype = ctypes.c_int
            lib.ckir_isa_missing.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            libs[march] = lib
        return libs[march]

    return get


def test_error_codes_have_messages() -> None:
    """Every CKIR_ERR_* of ckir_model.h has a message in the loader, and no other."""
    header = (runtime_dir() / "include" / "ckir_model.h").read_text()
    codes = {int(n) for n in re.findall(r"CKIR_ERR_\w+ = (\d+)", header)}
    assert 11 in codes  # CKIR_ERR_ISA
    assert codes == set(ckir_model.ERRORS)


@pytest.mark.parametrize("march", MARCHES)
def test_missing_extensions_match_the_compiler_and_cpuinfo(check_lib, march: str) -> None:
    lib = check_lib(march)
    buf = ctypes.create_string_buffer(1024)
    n = lib.ckir_isa_missing(buf, len(buf))
    names = buf.value.decode().split()
    assert n == len(names)
    assert set(names) == expected_missing(march)
    assert lib.ckir_isa_missing(None, 0) == n  # no buffer: the count alone


def test_a_short_buffer_is_truncated_and_terminated(check_lib) -> None:
    march = mismatch_march()
    lib = check_lib(march)
    full = ctypes.create_string_buffer(1024)
    n = lib.ckir_isa_missing(full, len(full))
    short = ctypes.create_string_buffer(b"\xff" * 6, 6)
    assert lib.ckir_isa_missing(short, 4) == n
    assert short.raw[3] == 0 and short.value == full.value[:3]
    assert short.raw[4:] == b"\xff\xff"  # nothing written past size


def test_the_loader_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, llama_dir: Path, tmp_path: Path
) -> None:
    out = compile_model(llama_dir, tmp_path / "b", CompileOptions(max_context=16), quiet=True)
    assert ckir_model.load(out).vocab_size > 0  # opens here
    # the loader (ckir.model.bindings.load_library) looks isa_missing up in its module
    monkeypatch.setattr(bindings, "isa_missing", lambda lib: ["avx512_fp16", "amx_tile"])
    with pytest.raises(CkirError) as err:
        ckir_model.load(out)
    msg = str(err.value)
    assert LIBRARY_NAME in msg and "isa native" in msg
    assert "avx512_fp16, amx_tile" in msg and "--isa avx2" in msg


@pytest.mark.slow
def test_a_library_for_another_cpu_is_refused(llama_dir: Path, tmp_path: Path) -> None:
    """A whole model library compiled for an -march this CPU cannot run: the loader
    refuses it with the missing extensions named, and ckir_open from C returns
    CKIR_ERR_ISA; no instruction of the foreign -march runs (else: SIGILL)."""
    march = mismatch_march()
    out = compile_model(llama_dir, tmp_path / "b", CompileOptions(max_context=16), quiet=True)
    lib = out / LIBRARY_NAME
    sources = sorted((runtime_dir() / "kernels").glob("*.c"))
    subprocess.run(
        [CC, *BASE_CFLAGS, f"-march={march}", "-shared"]
        + ["-I", str(runtime_dir() / "include"), "-I", str(out)]
        + [str(p) for p in (*sources, *support_sources(), out / "model.c")]
        + ["-o", str(lib), *LINK_LIBS],
        check=True,
    )
    info = json.loads((out / "build.json").read_text())
    info["files"].update(file_digests(out, [LIBRARY_NAME]))
    (out / "build.json").write_text(json.dumps(info))
    # in a child process: a SIGILL there fails the test instead of killing pytest
    code = (
        "import ctypes, sys\n"
        "from ckir import model\n"
        "from ckir.errors import CkirError\n"
        f"lib = ctypes.CDLL({str(lib)!r})\n"
        "lib.ckir_open.restype = ctypes.c_void_p\n"
        "lib.ckir_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]\n"
        "err = ctypes.c_int(0)\n"
        f"h = lib.ckir_open({str(out / 'weights.bin')!r}.encode(), ctypes.byref(err))\n"
        "print('open', h is None, err.value)\n"
        "try:\n"
        f"    model.load({str(out)!r})\n"
        "except CkirError as e:\n"
        "    print('load', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    lines = proc.stdout.splitlines()
    assert lines[0] == "open True 11"  # NULL, CKIR_ERR_ISA
    assert lines[1].startswith("load ") and "--isa avx2" in lines[1]
    named = lines[1].split("lacks: ", 1)[1].split(";", 1)[0].split(", ")
    assert set(named) == expected_missing(march)
