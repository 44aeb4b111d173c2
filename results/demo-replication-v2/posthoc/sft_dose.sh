#!/usr/bin/env bash
# Post hoc, not pre-registered: is the SFT warm start's collapse at seeds 21-22 the doubled
# number of steps or the doubled data? Seed 22's SFT data (524 prose solutions, 2 epochs, 132
# steps) collapsed; development seed 100's (258, 2 epochs, 66 steps) did not. Two variants of
# 66 steps on seed 22's data, each evaluated on seed 22's retention set as the run did:
#   one_epoch   all 524 solutions, 1 epoch
#   half_data   the first 262 solutions (the file is shuffled), 2 epochs
# Needs seed 22's work/seed-22/data/ (the demo remakes it byte-identical) and tiny-tool.
#   bash results/demo-replication-v2/posthoc/sft_dose.sh [scratch folder]
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
V2=results/demo-replication-v2
DATA=$V2/work/seed-22/data
OUT=$V2/posthoc/sft-dose
SCRATCH=${1:-/tmp/sft-dose}
COMMON=(--tolerance-rule complement --tools calculator)
run() {  # name, extra SFT flags...
  local name=$1; shift
  "$PY" training/sft_qwen3_kfold.py --resume --model tiny-tool --dataset "$DATA/sft_non_mixed.jsonl" \
    --output-dir "$SCRATCH/$name" --folds 1 --train-all --learning-rate 0.0002 --seed 22 \
    "${COMMON[@]}" "$@"
  mkdir -p "$OUT/$name"
  cp "$SCRATCH/$name/all/statistics.json" "$OUT/$name/sft_statistics.json"
  "$PY" evaluation/evaluate_finetuned_only.py --base-results "$V2/seed-22/eval/retention/sft_warm_start.json" \
    --model tiny-tool --dataset "$DATA/retention.jsonl" --seed 1022 --max-new-tokens 120 --micro-batch 64 \
    --baseline-train "$DATA/train.jsonl" --rollout-engine hf --records gzip "${COMMON[@]}" \
    --adapter "$SCRATCH/$name/adapters/all" --label "SFT, $name" --output "$OUT/$name/retention.json"
}
run one_epoch --epochs 1
run half_data --epochs 2 --max-questions 262
