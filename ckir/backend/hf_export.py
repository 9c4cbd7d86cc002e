"""ckir weights -> a HuggingFace state dict: the inverse of the weight mapping.

The frontend maps HF tensors onto ckir weights through the ``graph.weight``
declarations of the graph model (``graph.mlir`` of a build)::

    graph.weight @"layers.{i}.attn.wq" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight"
        [E, 3*E] slice(1, 0, E) transpose

reads ``transformer.h.<i>.attn.c_attn.weight`` ([E, 3E]), takes columns
``[0, E)`` and transposes them.  :func:`to_hf_state_dict` runs this backwards:
each ckir array is transposed back and written into its slice of the HF
tensor; a tensor packed from several slices (GPT-2's fused q/k/v) is put
together again, and every element of it must be covered by exactly one
slice.  Tied weights (``tied_to``) are left out: transformers ties them again
on load (``tie_word_embeddings``).

A graph imported from a GGUF file names GGUF tensors, not HF ones; its HF
names come from the template instantiated with the build's ``config.json``
(:func:`template_hf_names`), the names an HF import of the saved folder would
look for.  Rows of a fused GGUF tensor (``gguf "blk.{i}.attn_qkv.weight"
[(H+2*KV)*D, E] slice(0, 0, H*D)``) are put together into the fused HF tensor
the same way.  GGUF's per-head q/k row interleave needs no undoing here: ckir
keeps HF's row order (the weights writer restored it).

    model = load_graph_model(build / "graph.mlir")
    state = to_hf_state_dict(model, {"embed": ..., "layers.0.attn.wq": ..., ...})
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ckir.backend.weights import weight_instances
from ckir.dialects import graph as g
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError, one_line
from ckir.integrity import PRETRAINED_MARKER


def load_graph_model(path: Path) -> g.ModelOp:
    """The ``graph.model`` of an IR file (a build's ``graph.mlir``)."""
    from ckir.ir_io import load_module

    try:
        module = load_module(path)
    except OSError as err:
        raise CkirError(f"{path}: cannot read: {err.strerror or one_line(err)}") from None
    except Exception as err:  # a parse error: the build folder was edited or damaged
        raise CkirError(f"{path}: does not parse: {one_line(err)}") from None
    models = [op for op in module.ops if isinstance(op, g.ModelOp)]
    if len(models) != 1:
        raise CkirError(f"{path}: expected one graph.model, found {len(models)}")
    return models[0]


def template_hf_names(model: g.ModelOp, config: Mapping[str, object]) -> dict[str, str]:
    """Weight name (``layers.{i}.attn.wq``) -> HF tensor name pattern, from the template
    ``model`` was built with (its ``arch``), instantiated with the HF ``config``."""
    from ckir.template import select_template

    tpl = select_template(None, model.arch.data)
    spec = tpl.instantiate(dict(config))
    return {w.name: w.hf[0] for w in spec.weights if w.tied_to is None and w.hf}


def _hf_name(decl: g.WeightOp, layer: int | None, hf_names: Mapping[str, str] | None) -> str:
    if decl.hf_name is not None:
        return decl.source_tensor("hf", layer)
    pattern = (hf_names or {}).get(decl.weight_name)
    if pattern is None:
        raise CkirError(f"graph.weight @{decl.weight_name}: no HF tensor name to export it to")
    return pattern if layer is None else pattern.replace("{i}", str(layer))


def _index(decl: g.WeightOp, symbols: Mapping[str, int], ndim: int) -> tuple[slice, ...]:
    """Where the weight sits in its HF tensor (all of it without a slice)."""
    index = [slice(None)] * ndim
    spec = decl.slice_spec
    if spec is not None:
        axis, start, stop = spec  # stop is exclusive
        index[axis] = slice(evaluate_dim(start, symbols), evaluate_dim(stop, symbols))
    return tuple(index)


def to_hf_state_dict(
    model: g.ModelOp,
    weights: Mapping[str, np.ndarray],
    hf_names: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """HF tensor name -> float32 array in HF's shape, from ckir weight arrays.

    ``weights`` maps every non-tied weight instance (``embed``,
    ``layers.0.attn.wq``) to its values in ckir's shape.  ``hf_names`` gives
    the HF name pattern of weights declared without one (GGUF imports; see
    :func:`template_hf_names`).  CkirError, naming the weight or the tensor,
    for a missing array, a wrong shape, or an HF tensor whose slices leave
    elements uncovered or cover some twice.
    """
    symbols = model.symbol_values()
    out: dict[str, np.ndarray] = {}
    coverage: dict[str, np.ndarray] = {}  # per packed tensor: how often each element was written
    owner: dict[str, str] = {}  # HF tensor -> the (first) weight written into it
    for name, (decl, layer) in weight_instances(model).items():
        if decl.tied_to_name is not None:
            continue  # transformers re-ties it (tie_word_embeddings)
        arr = weights.get(name)
        if arr is None:
            raise CkirError(f"HF export: no values for weight '{name}'")
        want = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
        arr = np.asarray(arr)
        if tuple(arr.shape) != want:
            raise CkirError(
                f"HF export: weight '{name}' has shape {list(arr.shape)}, "
                f"graph.weight @{decl.weight_name} declares {list(want)}"
            )
        arr = arr.astype(np.float32, copy=False)
        if decl.is_transposed:
            arr = arr.T
        hf = _hf_name(decl, layer, hf_names)
        dims = decl.hf_dims
        full = tuple(evaluate_dim(d, symbols) for d in dims) if dims else tuple(arr.shape)
        if decl.slice_spec is None:
            if tuple(arr.shape) != full:
                raise CkirError(
                    f"HF export: weight '{name}' unpacks to shape {list(arr.shape)}, "
                    f"HF tensor '{hf}' is {list(full)}"
                )
            if hf in out:
                raise CkirError(
                    f"HF export: HF tensor '{hf}' is written by both '{owner[hf]}' and '{name}'"
                )
            out[hf] = np.ascontiguousarray(arr)
            owner[hf] = name
            continue
        if hf in out and hf not in coverage:
            raise CkirError(
                f"HF export: HF tensor '{hf}' is written whole by '{owner[hf]}' and sliced by "
                f"'{name}'"
            )
        if hf not in out:
            out[hf] = np.zeros(full, dtype=np.float32)
            coverage[hf] = np.zeros(full, dtype=np.uint8)
            owner[hf] = name
        elif tuple(out[hf].shape) != full:
            raise CkirError(
                f"HF export: HF tensor '{hf}' is declared {list(out[hf].shape)} by "
                f"'{owner[hf]}' and {list(full)} by '{name}'"
            )
        index = _index(decl, symbols, len(full))
        region = out[hf][index]
        if region.shape != arr.shape:
            raise CkirError(
                f"HF export: weight '{name}' unpacks to shape {list(arr.shape)}, its slice of "
                f"HF tensor '{hf}' is {list(region.shape)}"
            )
        out[hf][index] = arr
        cov = coverage[hf][index]
        coverage[hf][index] = np.minimum(cov.astype(np.uint16) + 1, 255).astype(np.uint8)
    for hf, cov in coverage.items():
        missing = int(np.count_nonzero(cov == 0))
        twice = int(np.count_nonzero(cov > 1))
        if missing or twice:
            what = []
            if missing:
                what.append(f"{missing} of {cov.size} elements covered by no slice")
            if twice:
                what.append(f"{twice} covered more than once")
            raise CkirError(f"HF export: HF tensor '{hf}': {', '.join(what)}")
    return out


# ---------------------------------------------------------------------------
# a saved folder
# ---------------------------------------------------------------------------

PRETRAINED_MARKER_TEXT = "a folder written by ckir's save_pretrained: a later save may replace it\n"
#: the weights file of a saved folder
SAFETENSORS_NAME = "model.safetensors"


def saved_files() -> tuple[str, ...]:
    """Every name ``save_pretrained`` may write into a saved folder (besides its marker)."""
    from ckir.compiler import HF_CONFIG, HF_EXTRA_FILES

    return (SAFETENSORS_NAME, HF_CONFIG, *HF_EXTRA_FILES)


def check_pretrained_dir(out_dir: str | Path, source: Path | None, flag: str) -> Path:
    """The resolved ``out_dir`` if a saved model may be written there (new, empty, or an
    earlier saved folder holding only what ckir wrote: the marker and
    :func:`saved_files`), else a one-line CkirError naming ``flag``.  It may not be or
    hold ``source`` (the build the weights come from), nor lie inside a build or
    another saved folder (docs/reliability.md, "The folder rule")."""
    from ckir.integrity import check_output_dir

    return check_output_dir(
        Path(out_dir),
        source,
        saved_files(),
        marker=PRETRAINED_MARKER,
        flag=flag,
        what="saved model folder",
    )


def tokenizer_files(tokenizer: object) -> dict[str, bytes]:
    """``tokenizer.json`` and a ``tokenizer_config.json`` (special tokens, chat template)
    for a :class:`ckir.tokenizer.Tokenizer` (e.g. one read from a GGUF file)."""
    import json

    from ckir.tokenizer import Tokenizer

    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"tokenizer must be a ckir.tokenizer.Tokenizer, got {tokenizer!r}")
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if tokenizer.bos_token is not None:
        config["bos_token"] = tokenizer.bos_token
    if tokenizer.eos_token is not None:
        config["eos_token"] = tokenizer.eos_token
    for key, tid in (("unk_token", tokenizer.unk_id), ("pad_token", tokenizer.pad_id)):
        if tid is not None:
            config[key] = tokenizer.id_to_token(tid)
    if tokenizer.chat_template is not None:
        config["chat_template"] = tokenizer.chat_template
    return {
        "tokenizer.json": tokenizer.backend.to_str().encode(),
        "tokenizer_config.json": (json.dumps(config, indent=2, sort_keys=True) + "\n").encode(),
    }


def _umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_hf_folder(
    out_dir: str | Path,
    state: Mapping[str, np.ndarray],
    files: Mapping[str, bytes],
    source: Path | None,
    flag: str = "save_pretrained",
) -> Path:
    """Write ``model.safetensors`` (``state``) and ``files`` (config.json, tokenizer
    files) into ``out_dir``, whole or not at all: into a temporary folder beside it,
    renamed into place when complete (replacing an earlier saved folder)."""
    import shutil

    from safetensors.numpy import save_file

    from ckir.integrity import pause_point, replace_dir, staging_dir

    target = check_pretrained_dir(out_dir, source, flag)
    work = staging_dir(target, f"{flag} {out_dir}: cannot write the folder")
    try:
        umask = _umask()
        work.chmod(0o777 & ~umask)  # mkdtemp's 0700 would make the saved folder private
        tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}
        save_file(tensors, str(work / SAFETENSORS_NAME), metadata={"format": "pt"})
        (work / SAFETENSORS_NAME).chmod(0o666 & ~umask)
        pause_point("staging")
        for fname, data in sorted(files.items()):
            (work / fname).write_bytes(data)
        (work / PRETRAINED_MARKER).write_text(PRETRAINED_MARKER_TEXT)
        check_pretrained_dir(target, source, flag)  # again: it may have changed meanwhile
        replace_dir(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target
