"""Package data, not code: the C runtime (headers, kernels, registries), shipped as
``ckir.runtime``.

Found through :func:`ckir.resources.runtime_dir`; compiled into the cache directory.
"""
