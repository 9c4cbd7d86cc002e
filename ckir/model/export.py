"""Export of a loaded build's weights: :meth:`Export.weight_arrays` (every stored
weight as f32) and :meth:`Export.save_pretrained` (a HuggingFace folder)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from ckir.compiler import BUILD_INFO, HF_CONFIG, HF_EXTRA_FILES, PANEL_WEIGHTS_KEY
from ckir.dialects import graph as g
from ckir.dialects import lowered as lw
from ckir.errors import CkirError, as_path, one_line
from ckir.model.bindings import LoadedBuild
from ckir.vocab import PANEL_DTYPES, PANEL_VALUES, storage_bytes

#: the dtypes whose values weight_arrays / save_pretrained give back exactly (as fp32);
#: a panel dtype of theirs is unpacked (f32p, bf16p), one of a block format is not (q8_0p,
#: q4_1p)
_SAVED_VALUES = ("f32", "bf16")


class Export(LoadedBuild):
    """Reading a build's weights back out: as arrays, or as a HuggingFace folder."""

    def panel_weights(self) -> dict[str, str]:
        """graph.weight name (``layers.{i}.mlp.down``) -> the panel dtype it is stored in
        (f32p, bf16p, q8_0p, q4_1p, q4_0p), from ``build.json`` (a build made before bf16p lists
        its f32p weights under ``f32p_weights``).  CkirError if the entry is malformed."""
        packed = self.info.get(PANEL_WEIGHTS_KEY)
        if packed is None:
            old = self.info.get("f32p_weights") or []
            names = isinstance(old, list) and all(isinstance(n, str) for n in old)
            packed = dict.fromkeys(old, "f32p") if names else None
        if not isinstance(packed, dict) or not all(
            isinstance(k, str) and v in PANEL_DTYPES for k, v in packed.items()
        ):
            raise CkirError(
                f"{self.build_dir / BUILD_INFO}: {PANEL_WEIGHTS_KEY} must map weight names "
                f"to panel dtypes ({', '.join(PANEL_DTYPES)})"
            )
        return dict(packed)

    def weight_arrays(self) -> dict[str, np.ndarray]:
        """Weight instance name (``layers.0.attn.wq``) -> a copy of its current values
        (f32, ckir's shape), for every stored weight (tied copies share their target's
        values and are not listed).  f32 weights are copied, bf16 ones widened exactly,
        f32p / bf16p panels unpacked (a bf16p weight gives its bf16 values).  CkirError
        naming the dtype for a weight stored in a block format (q8_0, its panels q8_0p,
        q4_1p, ...).

        Each weight's dtype is its buffer's in the build's ``layout.mlir`` (the
        lowered.model the weights writer encoded weights.bin from), checked against
        ``build.json``'s :meth:`panel_weights`; a layout.mlir that does not parse or
        lacks a weight's buffer is a CkirError asking to recompile."""
        return self._read_weights(*self._stored_weights())

    def _read_weights(
        self, model: g.ModelOp, buffers: dict[str, lw.BufferOp]
    ) -> dict[str, np.ndarray]:
        """:meth:`weight_arrays` for the build's parsed ``graph.model`` and weight buffers
        (:meth:`_stored_weights`)."""
        from ckir import quant
        from ckir.backend.weights import weight_instances
        from ckir.dialects.dims import evaluate_dim

        symbols = model.symbol_values()
        packed = self.panel_weights()
        out: dict[str, np.ndarray] = {}
        for name, (decl, _) in weight_instances(model).items():
            if decl.tied_to_name is not None:
                continue
            buffer = buffers.get(name)
            if buffer is None:
                raise CkirError(
                    f"{self.build_dir / 'layout.mlir'}: no weight buffer for '{name}' (a build "
                    "of an older ckir?); recompile it"
                )
            dtype = buffer.buffer_type.dtype_name
            listed = packed.get(decl.weight_name)
            if listed is not None and listed != dtype:
                raise CkirError(
                    f"{self.build_dir.name}: build.json stores '{decl.weight_name}' as {listed}, "
                    f"layout.mlir as {dtype}: the build is damaged; recompile it"
                )
            # the weight's param handle of the manifest (named by its source, as here)
            handle = self.manifest.get(name)
            if handle is None or handle.role != "param":
                raise CkirError(f"{self.build_dir.name}: no param handle for weight '{name}'")
            arena, offset, size = handle.arena, handle.offset, handle.bytes
            shape = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
            panels = PANEL_VALUES.get(dtype) in _SAVED_VALUES and len(shape) == 2
            if not panels and dtype not in _SAVED_VALUES:
                raise CkirError(
                    f"{self.build_dir.name}: weight '{name}' is stored as {dtype}; only f32 "
                    "and bf16 builds can be saved (compile with dtype='f32')"
                )
            try:
                nbytes = storage_bytes(dtype, shape)
            except ValueError:  # a shape the dtype cannot hold
                nbytes = -1
            if arena != 0 or size != nbytes:
                raise CkirError(
                    f"{self.build_dir.name}: weight '{name}' ({dtype}, shape {list(shape)}) "
                    f"does not match its {size}-byte slot: the build is damaged; recompile it"
                )
            if panels:
                out[name] = quant.unpack_panels(self._bytes(0, offset, size), shape, dtype)
            elif dtype == "f32":
                out[name] = self._f32(0, offset, size // 4, shape).copy()
            else:  # bf16
                raw = self._bytes(0, offset, size)
                out[name] = quant.from_bf16(raw.view("<u2")).reshape(shape)
        return out

    def _stored_weights(self) -> tuple[g.ModelOp, dict[str, lw.BufferOp]]:
        """The graph.model of the build's ``layout.mlir`` (as compiled: ``--dtype`` and
        the panels applied) and its lowered.model's weight buffers by source weight
        instance (``layers.0.attn.wq``)."""
        from ckir.backend.hf_export import load_graph_model

        path = self.build_dir / "layout.mlir"
        model = load_graph_model(path)  # CkirError: unreadable, does not parse
        module = model.parent_op()
        ops = module.ops if isinstance(module, ModuleOp) else ()
        lowered = [op for op in ops if isinstance(op, lw.LoweredModelOp)]
        if len(lowered) != 1:
            raise CkirError(f"{path}: expected one lowered.model, found {len(lowered)}")
        return model, {
            op.source_name: op
            for op in lowered[0].body_block.ops
            if isinstance(op, lw.BufferOp) and op.role == "weight" and op.source_name
        }

    def save_pretrained(self, out_dir: str | Path, *, tokenizer: object | None = None) -> Path:
        """Write the current weights as a HuggingFace folder: ``config.json``,
        ``model.safetensors`` and the source's tokenizer files the build kept.

        Works for any f32 build (trained or not) and any bf16 build (f32p / bf16p
        panels unpacked; bf16 weights are written as their exact fp32 values, like
        every tensor of the folder); CkirError naming the dtype for quantized builds.
        ``tokenizer`` (a :class:`ckir.tokenizer.Tokenizer`) adds ``tokenizer.json`` +
        ``tokenizer_config.json`` when the build has none (a GGUF source).  The folder
        is written whole or not at all (a temporary folder beside it, renamed);
        ``out_dir`` must be new, empty or an earlier saved folder (it holds
        ``.ckir-pretrained``).  Returns the folder's resolved path.
        """
        from ckir.backend import hf_export

        out = as_path(out_dir, "out_dir")
        hf_export.check_pretrained_dir(out, self.build_dir, "save_pretrained")
        config_path = self.build_dir / HF_CONFIG
        try:
            config_bytes = config_path.read_bytes()
            config = json.loads(config_bytes)
        except FileNotFoundError:
            raise CkirError(
                f"{self.build_dir}: no {HF_CONFIG} (built by an older ckir); recompile to save it"
            ) from None
        except (OSError, ValueError) as err:
            raise CkirError(f"{config_path}: unreadable: {one_line(err)}") from None
        if not isinstance(config, dict):
            raise CkirError(f"{config_path}: not a JSON object")
        # layout.mlir's graph.model, parsed once for both: its weights and their
        # checkpoint mapping are graph.mlir's (only their dtypes are the compiled ones)
        model, buffers = self._stored_weights()
        arrays = self._read_weights(model, buffers)
        unnamed = [
            d for d in model.weights().values() if d.hf_name is None and d.tied_to_name is None
        ]
        hf_names = hf_export.template_hf_names(model, config) if unnamed else None
        state = hf_export.to_hf_state_dict(model, arrays, hf_names)
        files = {HF_CONFIG: config_bytes}
        for name in HF_EXTRA_FILES:
            if (self.build_dir / name).is_file():
                files[name] = (self.build_dir / name).read_bytes()
        if tokenizer is not None and "tokenizer.json" not in files:
            files.update(hf_export.tokenizer_files(tokenizer))
        return hf_export.write_hf_folder(out, state, files, self.build_dir)
