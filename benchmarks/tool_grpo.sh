#!/usr/bin/env bash
# GRPO with the calculator on `tiny-tool` at a development seed, through the project's own
# scripts, every stage resumable (issue 29: does GRPO raise held-out accuracy; issue 31: the
# objectives side by side):
#   1. questions of tiny-tool's families (build_dataset.py --families tiny-tool), split by group
#   2. GRPO exp10 (a fresh LoRA on tiny-tool, DAPO dynamic sampling) with LOSS's recipe
#      (recipes/grpo_exp10[_gspo|_cispo].yaml: its clip ranges and aggregation), reward and
#      validation under the complement rule; two optimiser steps per batch (--num-iterations 2)
#      so the importance ratio departs from 1 and the objectives differ in more than aggregation
#   3. the holdout, 4 samples a question: the first loss's best checkpoint paired with the base
#      (evaluate_single.py), the others with that base (evaluate_finetuned_only.py); the paired
#      tests, beside the guess baselines of the train split
#
#   bash benchmarks/tool_grpo.sh [SEED] [LOSS]     # SEED 0, 1 or >= 100; LOSS grpo|gspo|cispo
# Run the losses one after another (they share the seed's data and base evaluation).
# Work (data, checkpoints) in runs/tool-grpo-seed<SEED>/ (the data shared by the losses); the
# paired holdout result, statistics and log in results/tiny-tool/<LOSS>-seed<SEED>/;
# benchmarks/tool_grpo_table.py prints them side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${1:-100}
LOSS=${2:-grpo}
case $LOSS in
    grpo) RECIPE=recipes/grpo_exp10.yaml ;;
    gspo | cispo) RECIPE=recipes/grpo_exp10_$LOSS.yaml ;;
    *) echo "tool_grpo.sh: LOSS must be grpo, gspo or cispo, got '$LOSS'" >&2; exit 2 ;;
esac
WORK=runs/tool-grpo-seed$SEED
OUT=results/tiny-tool/$LOSS-seed$SEED
PY=${PYTHON:-.venv/bin/python}
STEPS=${STEPS:-120}  # useful steps (groups): 4 a parameter update, as in the demo
COMMON=(--model tiny-tool --tools calculator --tolerance-rule complement --max-new-tokens 120)
mkdir -p "$WORK/data" "$OUT"

if [[ ! -f $WORK/data/holdout.jsonl ]]; then
    $PY generators/build_dataset.py generate --families tiny-tool --n 1500 --paraphrases 2 \
        --seed "$SEED" --out "$WORK/data/all.jsonl"
    $PY generators/build_dataset.py split "$WORK/data/all.jsonl" --out-dir "$WORK/data" \
        --seed "$SEED" --val-frac 0.1 --holdout-frac 0.2
fi

$PY training/grpo_exp10_nosft.py --config "$RECIPE" --resume "${COMMON[@]}" \
    --dataset "$WORK/data/train.jsonl" --val-dataset "$WORK/data/val.jsonl" --val-samples 4 \
    --val-limit 80 --seed "$SEED" --max-useful-steps "$STEPS" --val-every 10 --save-every 10 \
    --num-iterations 2 --learning-rate 2e-3 --sampling-mode batch \
    --gen-batch 16 --gen-micro-batch 64 --output-dir "$WORK/$LOSS"

# The base is sampled once per seed: the first loss evaluated pairs it with its best checkpoint
# (evaluate_single.py) and leaves that pair as base_holdout.json; the others pair with its base
# (evaluate_finetuned_only.py --base-results). A compact layout (--records gzip), which
# evaluation/recompress_results.py turns into the xz one results/ commits.
BASE=$WORK/base_holdout.json
EVAL=("${COMMON[@]}" --records gzip --dataset "$WORK/data/holdout.jsonl" --adapter "$WORK/$LOSS/best"
      --samples 4 --seed $((SEED + 1000)) --micro-batch 64 --baseline-train "$WORK/data/train.jsonl"
      --label "tiny-tool + GRPO ($LOSS, calculator)" --output "$OUT/eval_holdout.json")
if [[ -f $BASE ]]; then
    $PY evaluation/evaluate_finetuned_only.py --base-results "$BASE" "${EVAL[@]}"
else
    $PY evaluation/evaluate_single.py "${EVAL[@]}"
    for records in "$OUT"/eval_holdout.records.json.*; do  # whichever layout --records wrote
        cp "$records" "$WORK/base_holdout${records#"$OUT/eval_holdout"}"
    done
    cp "$OUT/eval_holdout.json" "$BASE"  # the summary last, as write_result writes them
fi
cp "$WORK/$LOSS/statistics.json" "$OUT/"
# the log gzipped, as results/ keeps logs (a tenth of the size)
gzip -9nc "$WORK/$LOSS/train_log.jsonl" > "$OUT/train_log.jsonl.gz"
