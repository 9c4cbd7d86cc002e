"""The runtime and a generated model under AddressSanitizer + UndefinedBehaviorSanitizer.

A tiny Llama is compiled once per weight dtype (f32, f32p, bf16, bf16p, q8_0, q8_0p,
q4_0, q4_0p, q4_1, q4_1p; ``panels=False``, so each build stores its matrices in the
dtype it is named by);
its ``model.c`` and the runtime's kernel and support sources are rebuilt with
``-fsanitize=address,undefined`` into a small C program (``DRIVER`` below) that
runs prefill, then decode one token at a time to the full context, checks that
one more token is refused (``CKIR_ERR_CONTEXT``), resets and runs a prefill of
the full context.  Any sanitizer report, non-zero return code or non-finite
logit fails the test.  Slow (about a minute): marked ``slow``; CI runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ckir.runtime_build import kernel_sources, runtime_dir, support_sources

pytestmark = pytest.mark.slow

DTYPES = ("f32", "f32p", "bf16", "bf16p", "q8_0", "q8_0p", "q4_0", "q4_0p", "q4_1", "q4_1p")
MAX_CONTEXT = 16
SANITIZE = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-g",
    "-O1",
]

DRIVER = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ckir_model.h"

static int finite_rows(const ckir_model *m, int64_t vocab) {
  const float *x = ckir_logits(m);
  int64_t n = ckir_logits_rows(m) * vocab;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return 0;
  return n > 0;
}

#define CHECK(cond, what) do { if (!(cond)) { \
  fprintf(stderr, "FAIL %s at position %lld\n", what, (long long)ckir_position(m)); \
  return 1; } } while (0)

int main(int argc, char **argv) {
  int err = 0;
  ckir_model *m = ckir_open(argv[1], &err);
  if (!m) { fprintf(stderr, "FAIL open: %d\n", err); return 1; }
  const ckir_model_desc *d = ckir_describe();
  int64_t ctx = d->max_context, vocab = d->vocab;
  int32_t *tokens = malloc(sizeof(int32_t) * (size_t)ctx);
  for (int64_t i = 0; i < ctx; i++) tokens[i] = (int32_t)((i * 7 + 1) % vocab);
  int64_t prompt = ctx / 2;
  CHECK(ckir_prefill(m, tokens, prompt) == CKIR_OK, "prefill");
  CHECK(finite_rows(m, vocab), "prefill logits");
  while (ckir_position(m) < ctx) {
    CHECK(ckir_decode(m, tokens[ckir_position(m)]) == CKIR_OK, "decode");
    CHECK(finite_rows(m, vocab), "decode logits");
  }
  CHECK(ckir_decode(m, 1) == CKIR_ERR_CONTEXT, "decode past the context is refused");
  CHECK(ckir_decode(m, (int32_t)vocab) != CKIR_OK, "token out of range is refused");
  ckir_reset(m);
  CHECK(ckir_prefill(m, tokens, ctx) == CKIR_OK, "full-context prefill");
  CHECK(finite_rows(m, vocab), "full-context prefill logits");
  printf("ok %lld\n", (long long)ckir_position(m));
  free(tokens);
  ckir_close(m);
  return 0;
}
"""


def _cc() -> str:
    return os.environ.get("CC", "cc")


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def sanitized_runtime(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The runtime's kernel and support sources compiled with the sanitizers (objects)."""
    probe = _run(
        [_cc(), "-fsanitize=address,undefined", "-x", "c", "-", "-o", os.devnull],
        input="int main(void){return 0;}",
    )
    if probe.returncode != 0:
        pytest.skip(f"the C compiler cannot build with ASan+UBSan: {probe.stderr.strip()[:200]}")
    out = tmp_path_factory.mktemp("asan_rt")
    objects = []
    for src in [*kernel_sources(), *support_sources()]:
        obj = out / f"{src.stem}.o"
        proc = _run(
            [
                _cc(),
                "-std=c11",
                "-fPIC",
                "-fopenmp",
                "-march=native",
                *SANITIZE,
                "-I",
                str(runtime_dir() / "include"),
                "-c",
                str(src),
                "-o",
                str(obj),
            ]
        )
        assert proc.returncode == 0, proc.stderr
        objects.append(obj)
    return objects


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from bad_inputs import tiny_llama

    return tiny_llama(tmp_path_factory.mktemp("asan_src") / "llama", seed=11)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prefill_and_decode_to_full_context_are_clean(
    dtype: str, model_dir: Path, sanitized_runtime: list[Path], tmp_path: Path
) -> None:
    from ckir.compiler import CompileOptions, compile_model

    build = compile_model(
        model_dir,
        tmp_path / "build",
        CompileOptions(max_context=MAX_CONTEXT, dtype=dtype, panels=False),
    )
    driver = tmp_path / "driver.c"
    driver.write_text(DRIVER)
    exe = tmp_path / "driver"
    proc = _run(
        [
            _cc(),
            "-std=c11",
            "-fopenmp",
            "-march=native",
            *SANITIZE,
            "-I",
            str(runtime_dir() / "include"),
            "-I",
            str(build),
            str(driver),
            str(build / "model.c"),
            *map(str, sanitized_runtime),
            "-o",
            str(exe),
            "-lm",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    env = {
        **os.environ,
        "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        "OMP_NUM_THREADS": "2",
    }
    env.pop("LD_PRELOAD", None)
    run = _run([str(exe), str(build / "weights.bin")], env=env)
    report = run.stderr[-3000:]
    assert run.returncode == 0, report
    assert "runtime error" not in run.stderr and "AddressSanitizer" not in run.stderr, report
    assert run.stdout.strip() == f"ok {MAX_CONTEXT}"
    shutil.rmtree(build)
