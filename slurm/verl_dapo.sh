#!/bin/bash
# verl's DAPO trainer (Ray + FSDP + vLLM) on this project's data and reward, for jobs beyond
# what the data-parallel trainer here is for (larger models, many nodes, long completions).
#
#   python generators/build_dataset.py export-verl --train RUN_DIR/screen/mixed.jsonl \
#       --val RUN_DIR/data/val.jsonl --out-dir RUN_DIR/verl     # train/validation.parquet
#   sbatch --nodes=2 slurm/verl_dapo.sh      # or: slurm/verl_dapo.sh [--dry-run] [overrides]
#
# Settings (environment): VERL_DATA (default RUN_DIR/verl or data/verl), VERL_MODEL (default
# Qwen/Qwen3-8B), VERL_OUT (checkpoints, default RUN_DIR/verl_dapo or runs/verl_dapo),
# NNODES (default SLURM_NNODES or 1), GPUS_PER_NODE (default SLURM_GPUS_ON_NODE or 8),
# VERL_ENTRY (default recipe.dapo.main_dapo: verl's DAPO recipe; newer verl releases keep it
# in the verl-recipe repository), TOLERANCE_RULE (study, the default, or complement: the
# grader's --tolerance-rule, passed to compute_score as a reward_kwargs entry). Arguments
# after the options are extra hydra overrides and win. Several nodes need a Ray cluster
# across them first (verl's multi-node guide: `ray start --head` on one node, `ray start
# --address` on the others, RAY_ADDRESS for the driver).
# --dry-run prints the command and runs nothing. Needs verl installed (pip install verl); this
# repository does not install it.
#
# The values match this project's exp7/exp10 trainer (relrl/rl/grpo_trainer.py) except where a
# comment says "differs".
#SBATCH --job-name=relrl-verl-dapo
#SBATCH --output=slurm-%x-%j.out
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --time=24:00:00
#RELRL kind=train
set -euo pipefail
ROOT="${RELRL_ROOT:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}"
dry_run=0
if [ "${1:-}" = --dry-run ]; then dry_run=1; shift; fi

base="${RUN_DIR:-runs}"
data="${VERL_DATA:-${RUN_DIR:+$RUN_DIR/verl}}"
data="${data:-data/verl}"
out="${VERL_OUT:-$base/verl_dapo}"
nnodes="${NNODES:-${SLURM_NNODES:-1}}"
gpus="${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-8}}"
rule="${TOLERANCE_RULE:-study}"
case "$rule" in
    study|complement) ;;
    *) echo "error: verl_dapo.sh: TOLERANCE_RULE must be study or complement, got '$rule'" >&2; exit 2 ;;
esac
if [ "$dry_run" = 0 ]; then
    for f in "$data/train.parquet" "$data/validation.parquet"; do
        [ -f "$f" ] || { echo "error: verl_dapo.sh: no $f (run build_dataset.py export-verl first)" >&2; exit 2; }
    done
fi

overrides=(
    "data.train_files=$data/train.parquet"
    "data.val_files=$data/validation.parquet"
    data.prompt_key=prompt
    data.max_prompt_length=1024
    data.max_response_length=3072                      # --max-new-tokens 3072 (CUDA default)
    # Qwen3 without a thinking block, as relrl.data.prompting builds every prompt
    +data.apply_chat_template_kwargs.enable_thinking=False
    # batch mode of our dynamic sampling: 8 questions per generation call (--gen-batch 8), until
    # 4 informative groups fill the batch (--grad-accum 4), at most 10 rounds (--max-resample)
    data.gen_batch_size=8
    data.train_batch_size=4
    algorithm.filter_groups.enable=True
    # differs: verl drops groups whose score is all the same; ours drops groups whose rewards
    # spread by at most 1e-6 (the same groups, up to that tolerance)
    algorithm.filter_groups.metric=score
    algorithm.filter_groups.max_num_gen_batches=10
    algorithm.adv_estimator=grpo                       # (r - mean) / std within the group
    # differs: verl adds 1e-6 to the std, ours 1e-4 (--advantage group_norm)
    algorithm.norm_adv_by_std_in_grpo=True
    algorithm.use_kl_in_reward=False
    actor_rollout_ref.actor.use_kl_loss=False          # --beta 0.0
    actor_rollout_ref.actor.clip_ratio_low=0.2         # --clip-low
    actor_rollout_ref.actor.clip_ratio_high=0.28       # --clip-high
    actor_rollout_ref.actor.loss_agg_mode=token-mean   # --aggregation token_mean
    actor_rollout_ref.actor.ppo_epochs=1               # --num-iterations 1
    actor_rollout_ref.actor.ppo_mini_batch_size=4      # one optimiser step per batch
    actor_rollout_ref.actor.optim.lr=1e-5              # --learning-rate (the study's)
    actor_rollout_ref.actor.optim.weight_decay=0.1     # --weight-decay
    actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1   # --warmup-ratio
    # differs: verl's default schedule after warmup is constant; ours decays by a cosine
    # (newer verl releases name it optim.lr_scheduler_type=cosine)
    actor_rollout_ref.actor.optim.warmup_style=cosine
    actor_rollout_ref.actor.grad_clip=0.1              # --max-grad-norm
    # differs: the study loaded a 4-bit (bitsandbytes) base; verl's FSDP trains LoRA on bf16
    "actor_rollout_ref.model.path=${VERL_MODEL:-Qwen/Qwen3-8B}"
    actor_rollout_ref.model.lora_rank=32               # exp10's new LoRA (exp7 keeps SFT's)
    actor_rollout_ref.model.lora_alpha=32
    actor_rollout_ref.model.target_modules=all-linear  # q,k,v,o,gate,up,down in Qwen3
    actor_rollout_ref.model.enable_gradient_checkpointing=True
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.n=4                      # G=4
    actor_rollout_ref.rollout.temperature=1.0
    actor_rollout_ref.rollout.top_p=0.95
    actor_rollout_ref.rollout.val_kwargs.n=1           # validation: one sample per question
    actor_rollout_ref.rollout.val_kwargs.do_sample=True
    actor_rollout_ref.rollout.val_kwargs.temperature=1.0
    actor_rollout_ref.rollout.val_kwargs.top_p=0.95
    reward_model.reward_manager=dapo
    # differs: our --overlong-buffer is 0 (off) by default; DAPO's soft overlong punishment over
    # the last 512 tokens, as --overlong-buffer 512 (the same linear ramp to -1)
    reward_model.overlong_buffer.enable=True
    reward_model.overlong_buffer.len=512
    reward_model.overlong_buffer.penalty_factor=1.0
    # the study's tiered grader (1.0 / 0.8 / 0.4 / 0.01 / 0 / -0.3)
    "custom_reward_function.path=$ROOT/relrl/grading/rewards.py"
    custom_reward_function.name=compute_score
    "++custom_reward_function.reward_kwargs.tolerance_rule=$rule"
    trainer.total_training_steps=50                    # 200 useful steps / 4 per update
    trainer.test_freq=5                                # --val-every 20 useful steps
    trainer.save_freq=5                                # --save-every 20
    "trainer.default_local_dir=$out"
    trainer.project_name=relrl
    trainer.experiment_name=dapo_exp10
    trainer.logger=[console]
    "trainer.nnodes=$nnodes"
    "trainer.n_gpus_per_node=$gpus"
)
command=(python3 -m "${VERL_ENTRY:-recipe.dapo.main_dapo}")
for word in "${overrides[@]}" "$@"; do command+=("$word"); done

if [ "$dry_run" = 1 ]; then
    printf '%q ' "${command[@]}"
    echo
    exit 0
fi
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the reward file imports relrl
exec "${command[@]}"
