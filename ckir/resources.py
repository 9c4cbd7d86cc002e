"""Where ckir's data lives: the architecture templates, the C runtime, the text corpus.

``templates/`` and ``runtime/`` are top-level folders of the repository,
mapped into the package as ``ckir.templates`` and ``ckir.runtime`` by
``[tool.setuptools.package-dir]`` (as ``dialects/`` and ``passes/`` are), so
a wheel carries them as package data.  They are found through
:mod:`importlib.resources`, which answers the same for a wheel installed in
a clean venv, an editable install and the source tree.

``ckir/data/`` (``corpus.txt``, the default training text of ``ckir train``)
is an ordinary subpackage with package data.

The data is only ever read: the runtime's C sources are compiled into the
cache directory (``$CKIR_CACHE_DIR``), never next to the sources, because an
installed package may be read-only.  Imports nothing heavy.
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

from ckir.errors import CkirError

__all__ = ["corpus_path", "import_root", "runtime_dir", "source_root", "templates_dir"]


def import_root() -> Path:
    """The folder holding the ``ckir`` package (a ``sys.path`` entry that imports this ckir)."""
    return Path(__file__).resolve().parent.parent


def source_root() -> Path | None:
    """The repository checkout ckir runs from (source tree, editable install), else None."""
    root = import_root()
    return root if (root / "pyproject.toml").is_file() else None


@functools.cache
def _data_dir(package: str) -> Path:
    """The folder of the data package ``ckir.<leaf>`` as a real directory."""
    leaf = package.rpartition(".")[2]
    try:
        found = importlib.resources.files(package)
    except ModuleNotFoundError:
        # an editable install made before the data packages were declared maps
        # only ``ckir``: the folder is still beside the package in the checkout
        root = source_root()
        if root is None:
            raise CkirError(f"ckir's {leaf}/ ({package}) is missing: reinstall ckir") from None
        found = root / leaf
    if not isinstance(found, Path):
        raise CkirError(
            f"ckir's {leaf}/ is not a folder on disk ({found}): install ckir unpacked, not zipped"
        )
    if not found.is_dir():
        raise CkirError(f"ckir's {leaf}/ is missing ({found}): reinstall ckir")
    return found.resolve()


def templates_dir() -> Path:
    """The architecture templates (``templates/*.yaml``)."""
    return _data_dir("ckir.templates")


def runtime_dir() -> Path:
    """The C runtime: ``include/``, ``kernels/``, ``support/``, ``bench/``, ``registry*.yaml``."""
    return _data_dir("ckir.runtime")


def corpus_path() -> Path:
    """``corpus.txt``: the small English corpus ``ckir train`` trains on by default."""
    try:
        found = importlib.resources.files("ckir.data") / "corpus.txt"
    except ModuleNotFoundError:
        raise CkirError("ckir's data/ (ckir.data) is missing: reinstall ckir") from None
    if not isinstance(found, Path) or not found.is_file():
        raise CkirError(f"ckir's corpus.txt is missing ({found}): reinstall ckir")
    return found
