#!/usr/bin/env bash
# The tests on an older torch, here on the CPU: the GPU machine's torch (2.11) checked before a GPU is lent, so that a
# feature newer than it is found by name here rather than in the loan's few minutes (docs/performance/gpu.md).
#
#   benchmarks/gpu/older_torch.sh 2.11.0                        # every module imports; the strategies' and resume tests
#   benchmarks/gpu/older_torch.sh 2.11.0 tests/strategies/mlp   # or the tests named
#
# torch VERSION and its torchvision install without their dependencies (the CUDA libraries and everything else come
# from the project's environment) into a cache folder outside the checkout, and shadow the environment's through
# PYTHONPATH.
set -euo pipefail
if [[ $# -lt 1 || ! "$1" =~ ^2\.([0-9]+)\.[0-9]+$ ]]; then
    echo "usage: benchmarks/gpu/older_torch.sh TORCH_VERSION [PYTEST ARGS...], a version such as 2.11.0" >&2
    exit 2
fi
version=$1
torchvision="0.$((BASH_REMATCH[1] + 15)).*"  # torch 2.N pairs with torchvision 0.(N+15)
shift
cd "$(dirname "$0")/../.."
python=${PYTHON:-.venv/bin/python}
site="${XDG_CACHE_HOME:-$HOME/.cache}/older-torch/$version"
if [[ ! -d $site ]]; then
    rm -rf "$site.partial"
    "$python" -m pip install -q --no-deps --target "$site.partial" "torch==$version" "torchvision==$torchvision"
    mv "$site.partial" "$site"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
"$python" -m benchmarks.gpu.import_all
if [[ $# -eq 0 ]]; then
    set -- tests/strategies tests/resume/test_examples.py
fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
