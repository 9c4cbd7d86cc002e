"""ckir.runtime_build: flags, object cache, extra sources, error reporting."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ckir import runtime_build as rb


@pytest.fixture(scope="module")
def module_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh CKIR_CACHE_DIR for this file's tests: the first test to build the scalar
    runtime (test_cache_is_reused, in file order) compiles it from nothing, the others reuse
    its objects instead of compiling the whole runtime again (about 20 s each)."""
    return tmp_path_factory.mktemp("rb_cache")


@pytest.fixture
def cache(module_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CKIR_CACHE_DIR", str(module_cache_dir))
    return module_cache_dir / "runtime"


def test_isa_flags_and_dirs():
    assert rb.isa_flags("native") == ["-march=native"]
    assert rb.isa_flags("avx2") == ["-march=haswell"]
    assert rb.isa_flags("scalar") == ["-march=x86-64", "-DCKIR_FORCE_SCALAR"]
    with pytest.raises(ValueError, match="unknown ISA"):
        rb.isa_flags("sse9")
    assert (rb.runtime_dir() / "include" / "ckir_runtime.h").is_file()
    assert rb.runtime_dir() / "kernels" / "gemm.c" in rb.kernel_sources()


def test_cache_is_reused(cache, tmp_path):
    objs = rb.compile_runtime_objects(isa="scalar")
    assert all(o.parent.parent == cache for o in objs)
    stamps = [o.stat().st_mtime_ns for o in objs]
    assert rb.compile_runtime_objects(isa="scalar") == objs
    assert [o.stat().st_mtime_ns for o in objs] == stamps
    debug = rb.compile_runtime_objects(isa="scalar", debug=True)
    assert debug[0].parent != objs[0].parent  # other flags, other cache entry
    assert not list(cache.rglob("*.tmp"))


def test_extra_sources_are_linked(cache, tmp_path):
    src = tmp_path / "model.c"
    src.write_text(
        textwrap.dedent(
            """
            #include "ckir_runtime.h"
            float model_sum3(void) {
              float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, c[3];
              ckir_add_f32(a, b, c, 3);
              return c[0] + c[1] + c[2];
            }
            """
        )
    )
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "model_consts.h").write_text("#define MODEL_SCALE 2.0f\n")
    src.write_text(
        src.read_text()
        .replace(
            '#include "ckir_runtime.h"', '#include "ckir_runtime.h"\n#include "model_consts.h"'
        )
        .replace("return c[0]", "return MODEL_SCALE * c[0]")
    )
    before = set(cache.rglob("*.o")) if cache.exists() else set()
    lib_path = rb.build_library(
        tmp_path / "out" / "libmodel.so", isa="scalar", extra_sources=[src], include_dirs=[inc]
    )
    fn = ctypes.CDLL(str(lib_path)).model_sum3
    fn.restype = ctypes.c_float
    assert fn() == 77.0  # 2*11 + 22 + 33
    # the model's include dirs do not change the runtime objects: same cache entry
    objs = set(cache.rglob("*.o"))
    rb.build_library(
        tmp_path / "out" / "libmodel2.so",
        isa="scalar",
        extra_sources=[src],
        include_dirs=[inc, tmp_path],
    )
    assert set(cache.rglob("*.o")) == objs
    assert before <= objs


def test_compile_error_is_one_line_and_leaves_nothing(cache, tmp_path):
    bad = tmp_path / "broken.c"
    bad.write_text("int f(void) { return undefined_name; }\n")
    out = tmp_path / "libbad.so"
    with pytest.raises(rb.RuntimeBuildError) as info:
        rb.build_library(out, isa="scalar", extra_sources=[bad])
    msg = str(info.value)
    assert "\n" not in msg
    assert "broken.c" in msg and "undefined_name" in msg
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("libbad.so")]


def test_missing_extra_source(cache, tmp_path):
    with pytest.raises(rb.RuntimeBuildError, match="not found"):
        rb.build_library(tmp_path / "x.so", isa="scalar", extra_sources=[tmp_path / "nope.c"])


def test_debug_build_checks_constraints(cache, tmp_path):
    lib_path = rb.build_library(tmp_path / "libdbg.so", isa="scalar", debug=True)
    code = textwrap.dedent(
        f"""
        import ctypes
        lib = ctypes.CDLL({str(lib_path)!r})
        buf = (ctypes.c_float * 4096)()
        I = ctypes.c_int64
        lib.ckir_attention_f32(buf, buf, buf, buf, I(1), I(0), I(6), I(4), I(8))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode != 0
    assert "attention_f32: constraint violated" in proc.stderr
