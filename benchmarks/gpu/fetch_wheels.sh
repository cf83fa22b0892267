#!/usr/bin/env bash
# Fetches benchmarks/gpu/wheels.txt into .whl/ (git-ignored) as cp312 manylinux wheels for the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
platforms=()
for tag in manylinux_2_{17,24,27,28,31,34,35}_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
grep -v '^#' benchmarks/gpu/wheels.txt | xargs python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp "${platforms[@]}" -d .whl
echo "$(ls .whl | wc -l) wheels in .whl/ ($(du -sh .whl | cut -f1)): carry .whl with the GPU call"
