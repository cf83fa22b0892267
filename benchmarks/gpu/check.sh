#!/usr/bin/env bash
# The whole GPU check in one call, for the rare, short loan of a GPU machine (docs/performance/gpu.md):
#
#   benchmarks/gpu/check.sh OUTPUT_DIR               # on the GPU machine, from the repository root
#   benchmarks/gpu/check.sh OUTPUT_DIR --device cpu  # the CPU rehearsal: the same steps, tiny sizes (tests/benchmarks/)
#
# It installs the wheels carried in .whl/ (benchmarks/gpu/wheels.txt says which and how to fetch them), prints the
# machine, runs the tests marked gpu, then the overhead and GPU-defaults benchmarks, most valuable first, each bounded
# in time so the whole ends within 8 minutes and a second try fits in the loan. OUTPUT_DIR gets check.log, the
# tests' JUnit report, each benchmark's JSON, and figures.json: all of them in one file, with the device and commit.
set -uo pipefail
if [[ $# -ne 1 && ! ($# -eq 3 && "$2" == "--device" && "$3" =~ ^(cuda|cpu)$) ]]; then
    echo "usage: benchmarks/gpu/check.sh OUTPUT_DIR [--device cuda|cpu]" >&2
    exit 2
fi
out=$(realpath -m "$1")
device=${3:-cuda}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
exec > >(tee "$out/check.log") 2>&1
python=${PYTHON:-python3}
steps="$out/steps.tsv"
: >"$steps"

# One bounded step: its name, its time limit in seconds, its command; its exit status and seconds go to steps.tsv.
step() {
    local name=$1 limit=$2
    shift 2
    echo "== $name (at most ${limit} s): $*"
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@"
    local status=$?
    printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - start))" >>"$steps"
    echo "== $name: exit $status after $((SECONDS - start)) s"
}

# The wheels are for the GPU machine's Python; the rehearsal runs in the project's own environment.
if [[ $device == cuda && -d .whl ]] && compgen -G ".whl/*.whl" >/dev/null; then
    site=$(mktemp -d)
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl || exit 1
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    echo "== installed $(ls .whl | wc -l) carried wheels into $site"
fi
export PYTHONUNBUFFERED=1

command -v nvidia-smi >/dev/null && nvidia-smi
"$python" - <<'PY'
import importlib.metadata as metadata, platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.version.cuda,
      "| cudnn", torch.backends.cudnn.version(), "| devices", torch.cuda.device_count())
for name in ("lightning", "torchmetrics", "torchvision", "jsonargparse", "distributed", "optuna", "wandb", "submitit"):
    try:
        print(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"{name} missing")
PY

# Each test's outcome is written as it comes (benchmarks/gpu/live_report.py): a step cut off keeps what it reached.
tests=(-p no:cacheprovider -p benchmarks.gpu.live_report -q)
if [[ $device == cuda ]]; then
    # Four at a time: with eight, the CNN's resume test (three runs, two loader workers each) outlasted the step.
    parallel=$("$python" -c "import xdist" 2>/dev/null && echo "-n 4")
    TEST_REPORT="$out/gpu_tests.jsonl" step gpu_tests 200 "$python" -m pytest -m gpu "${tests[@]}" $parallel \
        --continue-on-collection-errors --timeout 190
    # This machine's torch is older than the one CI tests: every module imports, and the newest schedules run, on
    # the CPU as in CI (with the GPU visible, `--trainer.devices 2` would ask for two GPUs).
    CUDA_VISIBLE_DEVICES="" TEST_REPORT="$out/torch_version.jsonl" step torch_version 70 bash -c \
        "$python -m benchmarks.gpu.import_all && \
        $python -m pytest ${tests[*]} $parallel tests/strategies/mlp/test_pipeline_schedules.py \
        -k 'DualPipeV or ZBVZeroBubble'"
    step overhead 130 "$python" -m benchmarks.overhead --device cuda --precision bf16-mixed --repeats 2 \
        --examples mlp,cnn,lstm --time-limit 80 --json "$out/overhead.json"
    step gpu_defaults 60 "$python" -m benchmarks.gpu_defaults --device cuda --time-limit 40 \
        --json "$out/gpu_defaults.json"
else
    TEST_REPORT="$out/gpu_tests.jsonl" step gpu_tests 60 "$python" -m pytest -m gpu "${tests[@]}"
    step overhead 60 "$python" -m benchmarks.overhead --device cpu --quick --examples mlp --time-limit 15 \
        --json "$out/overhead.json"
    step gpu_defaults 60 "$python" -m benchmarks.gpu_defaults --device cpu --quick --examples mlp --time-limit 15 \
        --json "$out/gpu_defaults.json"
fi
"$python" -m benchmarks.gpu.figures "$out"
