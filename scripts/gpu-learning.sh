#!/usr/bin/env bash
# The quickstart recipe (`trade quickstart`: fine-tune, GRPO with trl-grpo, held-out evaluation, backtest) on ONE
# GPU of a machine that cannot download anything, with a larger random-init Qwen3; prints GRPO steps/s, rollout
# tokens/s, the GPU's peak memory and what the run learned.
#
#   bash scripts/gpu-learning.sh build                  # here, where pip reaches PyPI: the wheels into $WHEELS
#   bash scripts/gpu-learning.sh check                  # there: install the wheels, say in one line what is missing
#   bash scripts/gpu-learning.sh run [QUICKSTART FLAGS] # there: check, then the quickstart on the GPU, then the figures
#   bash scripts/gpu-learning.sh report                 # there: the figures of a finished (or stopped) run again
#
# `build` runs `pip wheel --no-deps` on packages/trade-{core,data,tools,reward,records,train,eval} and on TRL (the version
# trade-train's `trl` extra names), so it needs pip reaching PyPI (or an index holding hatchling and TRL).
# EXTRA="name==version ..." also downloads those wheels for the GPU machine's Python ($PY_VERSION, default 3.12,
# manylinux x86_64): the packages `check` reported missing there.
# `check` and `run` need on the GPU machine: python3 with PyTorch built for CUDA, transformers, peft, accelerate
# and `packaging`, nvidia-smi, and $WHEELS from `build` (copy it along: dist/ is git-ignored). They install the wheels
# with `pip install --no-deps --no-index` into $SITE (default /tmp/gpu-learning-site, put first on PYTHONPATH and
# PATH; the machine's own packages are not touched) and walk every runtime requirement of the quickstart through
# the installed packages' metadata (datasets, pydantic, structlog, ... for TRL and ours): anything missing stops
# the run in one line (a missing package's own requirements show once it is there); a version other than asked is
# reported and the run goes on.
#
# `run` passes `--device gpu --model tiny --model-layers $LAYERS --model-hidden $HIDDEN` (default 8 and 512: ~90 M
# parameters, most of them the 151,936-row embedding; the quickstart's own default, SmolLM2 with prefix-grpo, trains
# on CPU only) to `trade quickstart --out $RUN` (default runs/gpu-learning), then any
# flags given (e.g. `--steps 20 --days 10 --samples 2` for a run of minutes); DEVICE=cpu runs it on the CPU.
# nvidia-smi samples the GPU every 0.5 s into $RUN/gpu.csv; the figures are printed and written to
# $RUN/gpu-learning.json, beside the quickstart's report.md.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS="${WHEELS:-dist/gpu-wheels}"
SITE="${SITE:-/tmp/gpu-learning-site}"
RUN="${RUN:-runs/gpu-learning}"
LAYERS="${LAYERS:-8}"
HIDDEN="${HIDDEN:-512}"
DEVICE="${DEVICE:-gpu}"
PYTHON="${PYTHON:-python3}"
step="${1:-run}"
[ $# -gt 0 ] && shift

install() {
    if ! ls "$WHEELS"/trade_train-*.whl >/dev/null 2>&1; then
        echo "error: no wheels in $WHEELS (run \`bash scripts/gpu-learning.sh build\` where pip reaches PyPI)" >&2
        exit 2
    fi
    "$PYTHON" -m pip install -q --no-deps --no-index --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WHEELS"/*.whl
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
    "$PYTHON" scripts/gpu_learning.py check "$DEVICE"
}

case "$step" in
build)
    rm -rf "$WHEELS"
    "$PYTHON" scripts/gpu_learning.py build "$WHEELS"
    if [ -n "${EXTRA:-}" ]; then
        # shellcheck disable=SC2086  # EXTRA is a list of requirements
        "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "${PY_VERSION:-3.12}" \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d "$WHEELS" $EXTRA
    fi
    du -sh "$WHEELS"
    ;;
check)
    install
    ;;
run)
    install
    mkdir -p "$RUN"
    sampler=""
    if [ "$DEVICE" = gpu ]; then
        nvidia-smi --query-gpu=memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits -lms 500 \
            >"$RUN/gpu.csv" &
        sampler=$!
        trap 'kill "$sampler" 2>/dev/null || true' EXIT
    fi
    trade quickstart --out "$RUN" --device "$DEVICE" --model tiny --model-layers "$LAYERS" --model-hidden "$HIDDEN" "$@"
    if [ -n "$sampler" ]; then
        kill "$sampler" 2>/dev/null || true
    fi
    "$PYTHON" scripts/gpu_learning.py report "$RUN"
    ;;
report)
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    "$PYTHON" scripts/gpu_learning.py report "$RUN"
    ;;
*)
    sed -n '2,9p' "$0" >&2
    exit 2
    ;;
esac
