"""Grow a question set with an LLM: new problems on the seed questions' concepts, or paraphrases.

--mode generate (default): for each seed question, ask the generator model for ONE new problem on
the same concepts, answered in a fixed QUESTION / REASONING / ANSWER format. A generation is
rejected, with its reason kept, when a section is missing, the question asks for several
things (two questions, or parts (a), (b) that each ask something), the answer is not a single
number, the text was cut off, or the question is a near-duplicate of a seed or of an accepted
question (the same words once numbers are masked).

--mode paraphrase: ask for the seed question in other words; the seed's answer is kept, and a
paraphrase whose numbers differ from the original's (as a multiset) is refused.

Accepted items keep the seed's `source` and `group` (its id when it has none) and name the
generating model. Every attempt is appended to <output>.progress.jsonl as it finishes; a rerun
resumes there, sends nothing for attempts already made, and stops at --target accepted items.
Generated answers are the generator's own: check them with verify_generated.py.

  python generators/augment_grpo_questions.py --seeds data/master_v4.jsonl --model openai/gpt-4o \
      --target 500 --output data/generated.jsonl
"""
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from relrl.data.dataset_io import ProgressFile, atomic_write_jsonl, load_dataset
from relrl.evaluation import api_client as api
from relrl.evaluation.api_jobs import run_jobs
from relrl.grading.numbers import find_numbers, normalize, parse_target
from relrl.runtime.cli import ArgumentParser, UsageError, env_default, positive_int, run_main

GENERATE_PROMPT = """Here is a reliability-engineering problem and its answer.

PROBLEM: {question}
ANSWER: {answer}

Write ONE new problem that tests the same concepts with a different scenario and different \
numbers. It must be self-contained and ask for exactly one numerical quantity (no parts a, b, \
c). Then solve it step by step. Reply in exactly this format and nothing else:

QUESTION: <the new problem>
REASONING: <the step-by-step solution>
ANSWER: <the final answer as one number, without units>"""

PARAPHRASE_PROMPT = """Rewrite the following reliability-engineering problem in different words. \
Keep every number, every unit and the quantity asked for exactly as they are; do not add or \
remove information and do not solve it. Reply in exactly this format and nothing else:

QUESTION: <the rewritten problem>

PROBLEM: {question}"""

_HEADER = re.compile(r"^[ \t>#*_]*(QUESTION|REASONING|ANSWER)[ \t*_]*:[ \t*_]*",
                     re.IGNORECASE | re.MULTILINE)
_PART = re.compile(r"(?:(?<=^)|(?<=[\s:;,.]))\(?([a-e]|i{1,3}|iv|v|[1-5])\)\s|\bpart\s+"
                   r"\(?([a-e1-5])\)?\b", re.IGNORECASE)
_VERBS = "find|determine|calculate|compute|estimate|evaluate|obtain|derive"
_ASK_VERB = re.compile(rf"\W*(?:{_VERBS})\b", re.IGNORECASE)  # a sentence that orders
_ASK_VERB_ANYWHERE = re.compile(rf"\b(?:{_VERBS})\b", re.IGNORECASE)
_ASK_WORD = re.compile(rf"\b(?:{_VERBS}|what|how|which)\b|\?", re.IGNORECASE)
_WORD = re.compile(r"\b(?:find|determine|calculate|compute|estimate|evaluate|obtain|"
                       r"derive|what|how|which)\b|\?", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]+|#")


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default=env_default("DATASET_PATH", None),
                        help="seed questions, any dataset file (env DATASET_PATH)")
    parser.add_argument("--output", required=True, help="accepted items, JSONL")
    parser.add_argument("--rejected", default=None,
                        help="rejected generations with reasons (default <output>.rejected.jsonl)")
    parser.add_argument("--model", required=True, help="generator model id at the endpoint")
    parser.add_argument("--mode", choices=("generate", "paraphrase"), default="generate",
                        help="new problems, or paraphrases with unchanged numbers "
                             "(default generate)")
    parser.add_argument("--target", type=positive_int("--target"), required=True,
                        help="number of accepted items to reach")
    parser.add_argument("--max-attempts", type=positive_int("--max-attempts"), default=None,
                        help="give up after this many generations (default 3 x --target)")
    parser.add_argument("--dup-threshold", type=float, default=0.85,
                        help="word-set similarity (numbers masked) at which a generated "
                             "question is a near-duplicate (default 0.85; >1 turns it off)")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="generator temperature (default 1.0)")
    parser.add_argument("--max-tokens", type=positive_int("--max-tokens"), default=2048,
                        help="generation length limit (default 2048)")
    parser.add_argument("--seed", type=int, default=0,
                        help="order in which seed questions are visited (default 0)")
    api.add_api_arguments(parser)
    args = parser.parse_args(argv)
    if not args.seeds:
        parser.error("--seeds is required (or set DATASET_PATH)")
    if not 0 < args.dup_threshold:
        parser.error(f"--dup-threshold must be > 0, got {args.dup_threshold}")
    return args


# -- parsing and checks -------------------------------------------------------------------------
def sections(text: str) -> tuple[dict[str, str], str]:
    """{'question': ..., 'reasoning': ..., 'answer': ...} from a reply, or ({}, why not)."""
    found = list(_HEADER.finditer(text))
    names = [m.group(1).lower() for m in found]
    if names.count("question") > 1:
        return {}, "malformed: several problems (more than one QUESTION section)"
    repeated = [n for n in ("answer", "reasoning") if names.count(n) > 1]
    if repeated:
        return {}, f"malformed: more than one {repeated[0].upper()} section"
    parts = {}
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        parts[m.group(1).lower()] = text[m.end():end].strip().strip("*_ ").strip()
    return parts, ""


def multi_part(question: str) -> str:
    """Why the question asks for several things, or "". Enumerations that only describe
    (failure modes (i) open and (ii) short) are fine; parts that each ask something are not."""
    sentences = re.split(r"(?<=[.?!])\s+", question.strip())
    asks = [s for s in sentences if s.rstrip().endswith("?") or _ASK_VERB.match(s)]
    if len(asks) >= 2:
        return f"multi-part question ({len(asks)} questions asked)"
    markers = list(_PART.finditer(question))
    ends = [m.start() for m in markers[1:]] + [len(question)]
    asking = [(m[1] or m[2]).lower() for m, end in zip(markers, ends)
              if _ASK_WORD.search(question[m.end():end])]
    if len(set(asking)) >= 2:
        return "multi-part question (parts " + ", ".join(asking) + ")"
    if len({(m[1] or m[2]).lower() for m in markers}) >= 2:
        lead = re.split(r"(?<=[.?!])\s+", question[:markers[0].start()])[-1]
        if _ASK_VERB_ANYWHERE.search(lead):  # "Compute: (a) the MTTF and (b) R(100)."
            return "multi-part question (parts " + ", ".join(m[1] or m[2] for m in markers) + ")"
    return ""


def word_set(text: str) -> frozenset:
    """Lower-case words with every number masked, for near-duplicate checks."""
    masked = re.sub(r"\d+(?:[.,]\d+)*", " # ", text.lower())
    return frozenset(_WORD.findall(masked))


def similarity(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def numbers_of(text: str) -> Counter:
    """The multiset of numbers a text states (as written: 5% counts as 5)."""
    values = [n.raw for n in find_numbers(normalize(text)) if n.raw is not None]
    return Counter(float(f"{abs(v):.10g}") for v in values)


def numbers_changed(original: str, paraphrase: str) -> str:
    """Why the paraphrase does not state exactly the original's numbers, or ""."""
    before, after = numbers_of(original), numbers_of(paraphrase)
    if before == after:
        return ""
    lost = sorted((before - after).elements())
    added = sorted((after - before).elements())
    parts = [f"missing {', '.join(f'{v:g}' for v in lost)}" if lost else "",
             f"added {', '.join(f'{v:g}' for v in added)}" if added else ""]
    return "numbers changed: " + "; ".join(p for p in parts if p)


class Augmenter:
    """The run's state: seeds, accepted items (for duplicate checks) and the progress file."""

    def __init__(self, args, seeds: list[dict]):
        self.args = args
        self.seeds = seeds
        self.order = list(range(len(seeds)))
        random.Random(args.seed).shuffle(self.order)
        output = Path(args.output)
        self.progress = ProgressFile(output.with_name(output.name + ".progress.jsonl"))
        self.done = self.progress.load()
        self.seen = [(row["id"], word_set(row["question"])) for row in seeds]
        self.accepted: list[dict] = []
        for record in sorted(self.done.values(), key=lambda r: r["attempt"]):
            if record.get("mode", "generate") != args.mode:
                raise UsageError(f"{self.progress.path}: made with --mode {record['mode']}; "
                                 "use another --output")
            if record["status"] == "accepted":
                self._accept(record["item"])

    def _accept(self, item: dict) -> None:
        self.accepted.append(item)
        self.seen.append((item["id"], word_set(item["question"])))

    def seed_for(self, attempt: int) -> dict:
        return self.seeds[self.order[attempt % len(self.order)]]

    def prompt(self, attempt: int) -> list[dict]:
        seed = self.seed_for(attempt)
        if self.args.mode == "paraphrase":
            text = PARAPHRASE_PROMPT.format(question=seed["question"])
        else:
            text = GENERATE_PROMPT.format(question=seed["question"], answer=seed["answer"])
        return [{"role": "user", "content": text}]

    def judge(self, attempt: int, result: api.ChatResult) -> tuple[dict | None, str]:
        """(item, "") for an acceptable generation, else (None, reason)."""
        seed = self.seed_for(attempt)
        if result.truncated:
            return None, "generation cut off (max tokens)"
        parts, why = sections(result.text)
        if why:
            return None, why
        question = parts.get("question", "")
        if not question:
            return None, "malformed: no QUESTION section"
        if self.args.mode == "paraphrase":
            fields, why = self._paraphrase(seed, question, attempt)
        else:
            fields, why = self._new_problem(seed, question, parts, attempt)
        if why:
            return None, why
        item = dict(fields)
        for key in ("answer_type", "source", "topic", "family"):
            if key in seed:
                item.setdefault(key, seed[key])
        item.update(group=seed.get("group") or seed["id"], seed_id=seed["id"],
                    generator=self.args.model)
        return item, ""

    def _paraphrase(self, seed: dict, question: str, attempt: int) -> tuple[dict, str]:
        changed = numbers_changed(seed["question"], question)
        if changed:
            return {}, changed
        flat = " ".join(question.split())
        if flat == " ".join(seed["question"].split()):
            return {}, "paraphrase identical to the original"
        if any(" ".join(a["question"].split()) == flat for a in self.accepted):
            return {}, "same as an accepted paraphrase"
        fields = {"id": f"{seed['id']}-p{attempt}", "question": question,
                  "answer": seed["answer"], "paraphrase_of": seed["id"]}
        for key in ("reasoning", "target_kind"):  # same question, same answer
            if seed.get(key):
                fields[key] = seed[key]
        return fields, ""

    def _new_problem(self, seed: dict, question: str, parts: dict,
                     attempt: int) -> tuple[dict, str]:
        answer = parts.get("answer", "")
        if not answer:
            return {}, "malformed: no ANSWER section"
        why = multi_part(question)
        if why:
            return {}, why
        answer = answer.splitlines()[0].strip()
        value, reason = parse_target(answer)
        if value is None or not math.isfinite(value):
            return {}, f"non-numeric answer {answer[:60]!r} ({reason})"
        words = word_set(question)
        for other_id, other in self.seen:
            score = similarity(words, other)
            if score >= self.args.dup_threshold:
                return {}, f"near-duplicate of {other_id} (similarity {score:.2f})"
        return {"id": f"{seed['id']}-g{attempt}", "question": question, "answer": answer,
                "answer_type": "numeric", "reasoning": parts.get("reasoning", "")}, ""

    def record(self, attempt: int, result: api.ChatResult) -> bool:
        item, reason = self.judge(attempt, result)
        record = {"key": f"a{attempt:06d}", "attempt": attempt, "mode": self.args.mode,
                  "seed_id": self.seed_for(attempt)["id"],
                  "status": "accepted" if item else "rejected", "reason": reason,
                  "raw": result.text, "usage": result.usage()}
        if item:
            record["item"] = item
        self.progress.append(record)  # before anything else: this answer is paid for
        self.done[record["key"]] = record
        if item:
            self._accept(item)
        return item is not None

    def write(self) -> tuple[Path, Path]:
        output = Path(self.args.output)
        rejected = Path(self.args.rejected or output.with_name(output.stem + ".rejected.jsonl"))
        atomic_write_jsonl(output, self.accepted[: self.args.target])
        atomic_write_jsonl(rejected, [
            {"attempt": r["attempt"], "seed_id": r["seed_id"], "reason": r["reason"],
             "raw": r["raw"]}
            for r in sorted(self.done.values(), key=lambda r: r["attempt"])
            if r["status"] == "rejected"])
        return output, rejected


def main(argv=None):
    args = parse_args(argv)
    seeds = load_dataset(args.seeds)
    output = Path(args.output)
    if not output.parent.is_dir():
        raise UsageError(f"--output: folder {output.parent} does not exist")
    client = api.client_from_args(args, args.model)
    run = Augmenter(args, seeds)
    max_attempts = args.max_attempts or 3 * args.target
    todo = (k for k in range(max_attempts) if f"a{k:06d}" not in run.done)

    def make(attempt: int) -> api.ChatResult:
        return client.chat(run.prompt(attempt), temperature=args.temperature,
                           max_tokens=args.max_tokens)

    def stop(in_flight: int) -> bool:
        return len(run.accepted) + in_flight >= args.target or api.over_budget(args, client)

    with tqdm(total=args.target, initial=min(len(run.accepted), args.target), desc="accepted",
              file=sys.stderr, disable=None) as bar:
        def save(attempt: int, result: api.ChatResult) -> None:
            if run.record(attempt, result):
                bar.update(1)

        try:
            report = run_jobs(todo, make, save, workers=args.workers, should_stop=stop)
        finally:
            accepted, rejected = run.write()  # what is paid for reaches the outputs, even on exit 2
            api.log(f"this run: {client.totals.line()}")
    reasons = Counter(r["reason"].split(" (")[0] for r in run.done.values()
                      if r["status"] == "rejected")
    for reason, count in reasons.most_common():
        api.log(f"rejected {count}: {reason}")
    for attempt, reason in report.failures:
        api.log(f"attempt {attempt} failed: {reason}")
    print(f"{min(len(run.accepted), args.target)}/{args.target} accepted -> {accepted} "
          f"(rejected -> {rejected})", flush=True)
    if len(run.accepted) >= args.target:
        return 0
    why = report.stopped or ("--max-cost reached" if api.over_budget(args, client) else
                             f"--max-attempts {max_attempts} used up" if not report.failures
                             else "request failures")
    api.log(f"stopped before --target: {why}; rerun to continue")
    return 1


if __name__ == "__main__":
    run_main(main)
