"""Python API over a build folder: load the shared library, run prefill and decode,
train, save.

    model = ckir.compile("tiny-llama/", "build/tiny", max_context=128)
    logits = model.prefill([1, 2, 3])      # ndarray [3, V]
    nxt = model.decode(int(logits[-1].argmax()))   # ndarray [V]
    model.reset()
    model.save_pretrained("out/tiny-hf")   # config.json + model.safetensors (+ tokenizer)

Several models (or several instances of one) can live in one process: each
instance has its own state arena and maps weights.bin privately.

One module per job: :mod:`~ckir.model.bindings` (the library, the description
structs built from :data:`ckir.backend.abi.DESC_STRUCTS`, the model handle),
:mod:`~ckir.model.inference`, :mod:`~ckir.model.training` and
:mod:`~ckir.model.export`.  :class:`CompiledModel` is their mixins over one
:class:`~ckir.model.bindings.LoadedBuild`, rather than an object delegating to three
helpers: every job runs on the same library, description and handle, and
``ckir.load`` gives one object with every method, so composition would repeat each
public method's signature and docstring in a forwarding method.  The mixins depend on
LoadedBuild alone, never on each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ckir.compiler import CompileOptions, compile_model
from ckir.errors import as_path
from ckir.model.bindings import ERRORS, NonFiniteError, isa_missing
from ckir.model.export import Export
from ckir.model.inference import Inference
from ckir.model.training import Training
from ckir.vocab import INFERENCE_MODES

__all__ = ["ERRORS", "CompiledModel", "NonFiniteError", "compile", "isa_missing", "load"]


class CompiledModel(Inference, Training, Export):
    """A loaded build: ``prefill``, ``decode``, ``reset``; logits as NumPy arrays;
    training (``train_step`` ...) when compiled for it; ``save_pretrained``."""


def load(build_dir: str | Path) -> CompiledModel:
    """Load a build folder written by ``ckir compile``."""
    return CompiledModel(build_dir)


def compile(  # noqa: A001 - the public name is ckir.compile
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    modes: Sequence[str] = INFERENCE_MODES,
    max_context: int | None = None,
    debug: bool = False,
    template: str | None = None,
    strategy: str | None = None,
    dtype: str | None = None,
    fuse: bool = True,
    logits: str = "all",
    panels: bool | None = None,
    allow_unused: Sequence[str] = (),
    strict: bool = False,
    kv_dtype: str = "f32",
    quiet: bool = True,
    qconfig: str | Path | None = None,
) -> CompiledModel:
    """Compile a HF checkpoint folder (or GGUF file) into ``out_dir`` and load it.

    ``logits="last"`` builds a prefill that returns the last prompt row only ([1, V]).
    ``panels`` stores the f32 / bf16 / q8_0 / q4_1 / q4_0 matrices of an inference build
    as f32p / bf16p / q8_0p / q4_1p / q4_0p (GEMM panels;
    :attr:`ckir.compiler.CompileOptions.panels`, None: the default, on).
    ``allow_unused``: globs of checkpoint tensors the template may leave unused (any
    other tensor no weight uses is an error naming it; ``--allow-unused``).
    ``strict``: a ``dtype`` some weight matrix cannot take is an error (otherwise a
    warning per matrix; build.json ``weight_dtypes`` records what each weight got).
    ``kv_dtype``: the KV cache's storage, ``"f32"`` or ``"q8_0"`` (``--kv-dtype``;
    head_dim % 32 == 0, inference builds only).
    ``qconfig``: a QConfig YAML file (docs/quantization.md): the qbits of weights,
    activations and KV cache, per layer and per tensor (``dtype``: its weights' shorthand).
    """
    model_dir, out_dir = as_path(model_dir, "model_dir"), as_path(out_dir, "out_dir")
    if isinstance(modes, (str, bytes)):
        raise TypeError(f"compile: modes must be a sequence like ('prefill',), not {modes!r}")
    options = CompileOptions(
        modes=tuple(modes),
        max_context=max_context,
        debug=debug,
        template=template,
        strategy=strategy,
        dtype=dtype,
        fuse=fuse,
        logits=logits,
        panels=panels,
        allow_unused=tuple(allow_unused),
        strict=strict,
        kv_dtype=kv_dtype,
        qconfig=qconfig,
    )
    compile_model(model_dir, out_dir, options, quiet=quiet)
    return CompiledModel(out_dir)
