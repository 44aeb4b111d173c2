"""The "model result" built from per-question records (aggregates count all n x K completions),
and the paired comparison of two model results on the same questions (a pair result)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from relrl.data.dataset_io import DatasetError, questions_fingerprint
from relrl.evaluation import results_io
from relrl.evaluation.clustered_stats import at_k_interval
from relrl.evaluation.settings import EvalSettings, settings_of
from relrl.evaluation.stats import (
    discordant,
    mcnemar,
    paired_bootstrap_ci,
    paired_permutation_test,
    pass_at_k,
)
from relrl.evaluation.strata import strata
from relrl.runtime.cli import UsageError

AT_K_BOOT = 2000  # resamples of paraphrase groups behind each recorded pass@k / mean@k interval


def _ks(samples: int) -> list[int]:
    return sorted({k for k in (1, 2, 4, 8, 16, 32, 64) if k <= samples} | {samples})


def _pass_at(records: Sequence[dict], samples: int) -> dict:
    n = len(records)
    return {str(k): sum(pass_at_k(r["samples"], r["pass_count"], k) for r in records) / n
            for k in _ks(samples)}


def at_k_intervals(records: Sequence[dict], samples: int, *, n_boot: int = AT_K_BOOT,
                   seed: int = 0) -> dict:
    """mean@k for the result's k values (the mean share correct: one value whatever k), and a
    95% interval for it and for each pass@k from resampling paraphrase groups whole
    (clustered_stats.at_k_interval), as [low, high] by k."""
    ks = _ks(samples)
    mean = at_k_interval(records, 1, "mean", n_boot=n_boot, seed=seed)
    passes = {k: at_k_interval(records, k, "pass", n_boot=n_boot, seed=seed) for k in ks}
    return {"mean_at_k": {str(k): mean["value"] for k in ks},
            "at_k_ci": {"confidence": mean["confidence"], "n_boot": n_boot, "seed": seed,
                        "groups": mean["groups"],
                        "pass": {str(k): [c["low"], c["high"]] for k, c in passes.items()},
                        "mean": {str(k): [mean["low"], mean["high"]] for k in ks}}}


def difficulty_breakdown(records: Sequence[dict]) -> dict | None:
    """Accuracy by the base model's screening score ("0/4" ... "4/4"), when rows carry it."""
    groups: dict[tuple[int, int | None], list[dict]] = {}
    for r in records:
        if r.get("base_score") is not None:
            groups.setdefault((int(r["base_score"]), r.get("base_samples")), []).append(r)
    if not groups:
        return None
    table = {}
    for (score, of), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        correct = sum(r["pass_count"] for r in rs)
        total = sum(r["samples"] for r in rs)
        table[f"{score}/{of}" if of else str(score)] = {
            "n": len(rs), "correct": correct, "total": total, "accuracy": correct / total}
    return table


def tool_use(samples: Sequence[dict]) -> dict:
    """How the answers used the tool: calls made, the mean per answer, the share of answers with
    at least one call, and the share of calls answered with an error (None without calls)."""
    calls = sum(c["tool_calls"] for c in samples)
    failed = sum(c["tool_errors"] for c in samples)
    return {"calls": calls, "failed": failed,
            "calls_per_answer": calls / len(samples) if samples else 0.0,
            "share_with_call": sum(c["tool_calls"] > 0 for c in samples) / len(samples)
            if samples else 0.0,
            "share_failed": failed / calls if calls else None}


def model_result(records: Sequence[dict], *, label: str, model_path: str, adapter: str | None,
                 dataset: str, fingerprint: str, settings: EvalSettings,
                 rollout_engine: str | None = None) -> dict:
    """The "model result" object of the team contract, built only from records and metadata.
    `rollout_engine` (hf, hf-merged or vllm) is recorded when a model sampled the completions.
    With tools the result adds "tools", "max_tool_calls" and "tool_use" (see tool_use); without,
    it holds the study's keys only."""
    n = len(records)
    total = sum(r["samples"] for r in records)
    correct = sum(r["pass_count"] for r in records)
    samples = [c for r in records for c in r.get("completions", [r])]
    result = {
        "kind": "model_result", "model": label, "model_path": model_path, "adapter": adapter,
        "dataset": dataset, "fingerprint": fingerprint, "n": n, "correct": correct,
        "accuracy": correct / total if total else 0.0,
        "truncated": sum(c["truncated"] for c in samples),
        "unextracted": sum(c["value"] is None for c in samples),
        "samples": settings.samples, "seed": settings.seed, "tolerance": settings.tolerance,
        "tolerance_rule": settings.tolerance_rule,
        "settings": settings.signature(),
        "pass_at_k": _pass_at(records, settings.samples) if n else {},
        **(at_k_intervals(records, settings.samples) if n else {"mean_at_k": {}, "at_k_ci": None}),
    }
    if settings.uses_tools:
        result.update(tools=settings.tools, max_tool_calls=settings.max_tool_calls,
                      tool_use=tool_use(samples))
    if rollout_engine is not None:
        result["rollout_engine"] = rollout_engine
    by_score = difficulty_breakdown(records)
    if by_score is not None:
        result["by_base_score"] = by_score
    result["strata"] = strata(records)
    result["results"] = list(records)
    return result


_SLIM = ("id", "target", "extracted", "value", "correct", "truncated", "pass_count", "samples")


def compare_models(base: dict, ft: dict, *, n_boot: int = 10_000, run_name: str | None = None) -> dict:
    """The paired comparison file: the study's fields in its units (results_io.study_fields;
    `run_name` defaults to the fine-tuned model's label), then both model results, whose
    `accuracy` are the exact fractions (read them with results_io.pair_accuracies).

    With one sample per question the test is McNemar's (exact binomial p as `mcnemar_p`, the
    corrected chi-square beside it). With K > 1, `paired_test` (the exact sign-flip permutation
    test on per-question accuracies) is the primary test; McNemar then reports first samples.
    """
    check_same_questions(base, ft, "base results", "fine-tuned results")
    b_rec, f_rec = base["results"], ft["results"]
    b01, b10 = discordant([r["correct"] for r in b_rec], [r["correct"] for r in f_rec])
    mc = mcnemar(b01, b10)
    b_acc = [r["pass_count"] / r["samples"] for r in b_rec]
    f_acc = [r["pass_count"] / r["samples"] for r in f_rec]
    paired = paired_permutation_test([r["pass_count"] for r in b_rec], [r["samples"] for r in b_rec],
                                     [r["pass_count"] for r in f_rec], [r["samples"] for r in f_rec])
    one_sample = base["samples"] == 1 and ft["samples"] == 1
    return {
        "kind": "pair_result",
        "dataset": ft["dataset"], "fingerprint": ft["fingerprint"], "n": ft["n"],
        **results_io.study_fields(base["accuracy"], ft["accuracy"], n=ft["n"],
                                  run_name=run_name or ft["model"], lora_path=ft["adapter"]),
        "mcnemar_b01": b01, "mcnemar_b10": b10, "mcnemar_p": mc["exact_p"],
        "mcnemar_chi2": mc["chi2"], "mcnemar_chi2_p": mc["chi2_p"],
        "test": "mcnemar_exact" if one_sample else "paired_permutation",
        "p_value": mc["exact_p"] if one_sample else paired["p"],
        "paired_test": paired,
        "bootstrap_ci": paired_bootstrap_ci(b_acc, f_acc, n_boot=n_boot),
        "base_results": [{k: r[k] for k in _SLIM} for r in b_rec],
        "ft_results": [{k: r[k] for k in _SLIM} for r in f_rec],
        "base": base, "finetuned": ft,
    }


def check_same_questions(a: dict, b: dict, a_name: str, b_name: str) -> None:
    """Paired statistics need the same questions in the same order."""
    if a.get("fingerprint") != b.get("fingerprint") or \
            [r["id"] for r in a["results"]] != [r["id"] for r in b["results"]]:
        raise UsageError(f"{a_name} and {b_name} are for different questions (fingerprint "
                         f"{a.get('fingerprint')} vs {b.get('fingerprint')}); compare runs on one dataset")


def load_model_result(path: str | Path, role: str = "base") -> dict:
    """A model result from a result file: a model result itself, or one side of a pair file."""
    data = results_io.read_result(path)
    if isinstance(data, dict) and data.get("kind") == "pair_result":
        data = data["base" if role == "base" else "finetuned"]
    if not isinstance(data, dict) or data.get("kind") not in ("model_result", "screening") \
            or not isinstance(data.get("results"), list):
        raise DatasetError(f"{path}: not a model result or pair result JSON")
    return data


def summary_line(result: dict) -> str:
    k = result["samples"]
    of = f"{result['n']}" if k == 1 else f"{result['n']}x{k}"
    line = (f"{result['model']}: {result['correct']}/{of} correct ({100 * result['accuracy']:.1f}%), "
            f"{result['truncated']} truncated, {result['unextracted']} without an answer")
    use = result.get("tool_use")
    if use is not None:
        line += (f"; {use['calls']} {result['tools']} calls ({use['calls_per_answer']:.2f} per answer, "
                 f"{100 * use['share_with_call']:.0f}% of answers with one, {use['failed']} failed)")
    return line


def with_records(result: dict, records: Sequence[dict]) -> dict:
    """`result` rebuilt over other records (a subset, or records merged from shards)."""
    return model_result(records, label=result["model"], model_path=result["model_path"],
                        adapter=result["adapter"], dataset=result["dataset"],
                        fingerprint=questions_fingerprint(
                            {"question": r["question"], "answer": r["target"]} for r in records),
                        settings=settings_of(result), rollout_engine=result.get("rollout_engine"))
