"""Tools around the compiler, not part of it: benchmarks and the test-model maker.

Installed as ``ckir.tools`` (the folder is mapped like ``dialects/`` and ``passes/``).
"""
