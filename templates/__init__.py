"""Package data, not code: the architecture templates (``*.yaml``), shipped as ``ckir.templates``.

Found through :func:`ckir.resources.templates_dir`.
"""
