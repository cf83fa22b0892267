#!/usr/bin/env bash
# The whole GPU check in one call, for the rare, short loan of a GPU machine (docs/performance/gpu.md):
#
#   benchmarks/gpu/check.sh OUTPUT_DIR               # on the GPU machine, from the repository root
#   benchmarks/gpu/check.sh OUTPUT_DIR --device cpu  # the CPU rehearsal: the same steps, tiny sizes (tests/benchmarks/)
#
# It installs the wheels carried in .whl/ (benchmarks/gpu/wheels.txt says which and how to fetch them), prints the
# machine, then runs the overhead benchmark, two examples' epochs profiled, the tests marked gpu, an import of every
# module and the GPU-defaults benchmark, most valuable first, each bounded in time so that the whole ends within 8
# minutes and a second try fits in the loan. OUTPUT_DIR gets check.log, steps.tsv, each test's outcome as it came
# (gpu_tests.jsonl), each benchmark's JSON, each profiled run's report (fit-profile_EXAMPLE.txt), and figures.json:
# all of them in one file, with the device and commit.
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
# An example's train-only epochs under Lightning's SimpleProfiler (OUTPUT_DIR/fit-profile_EXAMPLE.txt): how much of
# the template's epoch waits on the loader, runs the step, or runs each hook; the runs' own folders are thrown away.
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
profiled=(--trainer.max_epochs 3 --trainer.limit_val_batches 0 --model.init_args.scheduler null
    --trainer.enable_progress_bar false --trainer.default_root_dir "$runs" --trainer.logger.init_args.save_dir "$runs"
    --trainer.profiler lightning.pytorch.profilers.SimpleProfiler --trainer.profiler.init_args.dirpath "$out")
if [[ $device == cuda ]]; then
    # First whether a training step still synchronizes between log steps (issue 48; seconds): each example's steady
    # steps under `torch.cuda.set_sync_debug_mode` (docs/monitoring.md). The gpu_tests step below runs it again.
    TEST_REPORT="$out/sync_debug.jsonl" step sync_debug 60 "$python" -m pytest -m gpu "${tests[@]}" \
        tests/monitoring/test_host_reads.py --timeout 50
    # Then what is still open: the template's epoch against a plain loop (every GPU test passed at 8a1e5d5), then
    # where the template's epoch goes (the CNN was the furthest from the plain loop at 8a1e5d5: 1.62x, train only).
    step overhead 150 "$python" -m benchmarks.overhead --device cuda --precision bf16-mixed --repeats 2 \
        --examples cnn,lstm,mlp --parts main --time-limit 110 --json "$out/overhead.json"
    gpu=(--trainer.accelerator gpu --trainer.devices 1 --trainer.precision bf16-mixed)
    step profile_cnn 30 "$python" cli.py fit --config configs/cnn.yaml "${profiled[@]}" "${gpu[@]}" \
        --trainer.profiler.init_args.filename profile_cnn
    # The 68 batches of the overhead benchmark's 6,000 names.
    step profile_lstm 25 "$python" cli.py fit --config configs/lstm.yaml "${profiled[@]}" "${gpu[@]}" \
        --trainer.limit_train_batches 68 --trainer.profiler.init_args.filename profile_lstm
    # Four at a time: with eight, the CNN's resume test (three runs, two loader workers each) outlasted the step.
    parallel=$("$python" -c "import xdist" 2>/dev/null && echo "-n 4")
    TEST_REPORT="$out/gpu_tests.jsonl" step gpu_tests 180 "$python" -m pytest -m gpu "${tests[@]}" $parallel \
        --continue-on-collection-errors --timeout 170
    # This machine's torch is older than the one CI tests; its tests run on the CPU here beforehand
    # (benchmarks/gpu/older_torch.sh 2.11.0), so the loan only checks that every module imports.
    step import_all 15 "$python" -m benchmarks.gpu.import_all
    # The LSTM first: the CNN's and the MLP's were measured at 8a1e5d5 (docs/performance/gpu.md).
    step gpu_defaults 35 "$python" -m benchmarks.gpu_defaults --device cuda --examples lstm cnn mlp --time-limit 15 \
        --json "$out/gpu_defaults.json"
else
    step overhead 60 "$python" -m benchmarks.overhead --device cpu --quick --examples mlp --time-limit 15 \
        --json "$out/overhead.json"
    step profile_mlp 60 "$python" cli.py fit --config configs/mlp.yaml "${profiled[@]}" --trainer.max_epochs 2 \
        --data.init_args.images_per_class 20 --trainer.profiler.init_args.filename profile_mlp
    TEST_REPORT="$out/gpu_tests.jsonl" step gpu_tests 60 "$python" -m pytest -m gpu "${tests[@]}"
    step import_all 30 "$python" -m benchmarks.gpu.import_all
    step gpu_defaults 60 "$python" -m benchmarks.gpu_defaults --device cpu --quick --examples mlp --time-limit 15 \
        --json "$out/gpu_defaults.json"
fi
"$python" -m benchmarks.gpu.figures "$out"
