"""Fault and event trees: gate-by-gate top-event probability, rare-event approximation over
minimal cut sets, exact top-event probability by inclusion-exclusion, event-tree sequences.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 4 (fault trees) and ch. 9 (event trees).
The tree and cut-set helpers here are shared with importance.py.
"""
from __future__ import annotations

import itertools
import math

from .base import Family, enumerate_states, exact, nice, pick, tex, txt

LETTERS = "ABCDE"
EVENT_WORDS = {"A": "the primary pump fails", "B": "the backup pump fails",
               "C": "the isolation valve fails closed", "D": "control power is lost",
               "E": "the operator fails to respond"}
TREES = (
    ("OR", ("AND", "A", "B"), "C"),
    ("AND", ("OR", "A", "B"), "C"),
    ("OR", ("AND", "A", "B"), ("AND", "C", "D")),
    ("OR", "A", ("AND", "B", ("OR", "C", "D"))),
    ("AND", ("OR", "A", "B"), ("OR", "C", "D")),
)
FT_BOUNDS = (1e-7, 0.9995)


# ---------------------------------------------------------------- gate trees

def tree_events(tree) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    return sorted({e for child in tree[1:] for e in tree_events(child)})


def tree_occurs(tree, state: dict[str, int]) -> bool:
    if isinstance(tree, str):
        return bool(state[tree])
    hits = [tree_occurs(child, state) for child in tree[1:]]
    return all(hits) if tree[0] == "AND" else any(hits)


def tree_expr(tree, top=True) -> str:
    if isinstance(tree, str):
        return tree
    inner = f" {tree[0]} ".join(tree_expr(child, False) for child in tree[1:])
    return inner if top else f"({inner})"


def tree_words(tree) -> str:
    if isinstance(tree, str):
        return EVENT_WORDS[tree]
    a, b = (tree_words(child) for child in tree[1:])
    return f"both {a} and {b}" if tree[0] == "AND" else f"either {a} or {b}"


def tree_solve(tree, q: dict[str, float]) -> tuple[float, list[str]]:
    """Probability gate by gate (independent events, no repeats) with one line per gate."""
    lines: list[str] = []

    def walk(node) -> tuple[float, str]:
        if isinstance(node, str):
            return q[node], node
        parts = [walk(child) for child in node[1:]]
        values = [v for v, _ in parts]
        name = f"G{len(lines) + 1}"
        if node[0] == "AND":
            value = math.prod(values)
            formula = " \\times ".join(tex(v) for v in values)
        else:
            value = 1 - math.prod(1 - v for v in values)
            formula = "1 - " + "".join(f"(1 - {tex(v)})" for v in values)
        lines.append(f"{name} = {node[0]}({', '.join(label for _, label in parts)}) = {formula}"
                     f" = {tex(value)}")
        return value, name

    value, _ = walk(tree)
    lines[-1] = "TOP" + lines[-1][lines[-1].index(" = "):]
    return value, lines


def tree_gates(tree) -> str:
    """'G1 = AND(A, B); TOP = OR(G1, C)' for a gate listing phrasing."""
    out: list[str] = []

    def walk(node) -> str:
        if isinstance(node, str):
            return node
        args = [walk(child) for child in node[1:]]
        out.append(f"{node[0]}({', '.join(args)})")
        return f"G{len(out)}"

    walk(tree)
    return "; ".join(f"{'TOP' if i == len(out) - 1 else f'G{i + 1}'} = {g}"
                     for i, g in enumerate(out))


def tree_check(tree, q: dict[str, float]) -> float:
    events = tree_events(tree)
    return enumerate_states([q[e] for e in events],
                            lambda s: tree_occurs(tree, dict(zip(events, s))))


def draw_tree(rng, lo=0.001, hi=0.1) -> dict:
    index = int(rng.integers(0, len(TREES)))
    events = tree_events(TREES[index])
    return {"tree": index, "q": tuple((e, nice(rng, lo, hi)) for e in events)}


def probs_text(q) -> str:
    return ", ".join(f"P({e}) = {txt(v)}" for e, v in q)


def _solve_tree(p):
    value, lines = tree_solve(TREES[p["tree"]], dict(p["q"]))
    return value, ["Independent basic events, no repeated events: AND multiplies, "
                   "OR is 1 - product of complements.", *lines]


GATES = Family(
    name="ft_gates_exact", topic="fault_trees", difficulty=2,
    asks="top-event probability of a small AND/OR fault tree, gate by gate",
    check_how="brute-force enumeration of all basic-event states",
    draw=draw_tree, solve=_solve_tree, bounds=FT_BOUNDS,
    phrasings=(
        lambda p: (f"A fault tree has TOP = {tree_expr(TREES[p['tree']])}, with independent "
                   f"basic events {probs_text(p['q'])}. Find the probability of the top event."),
        lambda p: (f"A cooling function is lost if {tree_words(TREES[p['tree']])}. Event "
                   f"probabilities: " + "; ".join(f"{EVENT_WORDS[e]}: {txt(v)}" for e, v in p["q"])
                   + ". Assuming independence, what is the probability the function is lost?"),
        lambda p: (f"Fault tree gates: {tree_gates(TREES[p['tree']])}. Basic event "
                   f"probabilities (independent): {probs_text(reversed(p['q']))}. Compute "
                   f"P(TOP)."),
    ),
    check=lambda p, rng: exact(tree_check(TREES[p["tree"]], dict(p["q"])), "state enumeration"),
)


# ---------------------------------------------------------------- minimal cut sets

def draw_cuts(rng, n_cuts: tuple[int, int], lo: float, hi: float) -> dict:
    """Random minimal cut sets over 4-5 events (at most one single-event cut set)."""
    while True:
        n_events = int(rng.integers(4, 6))
        letters = LETTERS[:n_events]
        k = int(rng.integers(n_cuts[0], n_cuts[1] + 1))
        cuts = []
        for _ in range(k):
            size = int(pick(rng, (1, 2, 2, 2, 3)))
            cuts.append(tuple(sorted(rng.choice(list(letters), size, replace=False).tolist())))
        sets = [set(c) for c in cuts]
        minimal = all(not (a <= b) for a, b in itertools.permutations(sets, 2))
        used = sorted(set().union(*sets))
        if minimal and sum(len(c) == 1 for c in cuts) <= 1 and len(used) >= 3:
            q = {e: nice(rng, lo / 10, hi / 10) if (e,) in cuts else nice(rng, lo, hi)
                 for e in used}
            return {"cuts": tuple(sorted(cuts)), "q": tuple(sorted(q.items()))}


def cut_prob(cut, q: dict[str, float]) -> float:
    return math.prod(q[e] for e in cut)


def cuts_sets(cuts) -> str:
    return ", ".join("{" + ", ".join(c) + "}" for c in cuts)


def cuts_boolean(cuts) -> str:
    return " + ".join("·".join(c) for c in cuts)


def cuts_words(cuts) -> str:
    parts = [f"{c[0]} occurs" if len(c) == 1 else " and ".join(c) + " all occur" if len(c) > 2
             else f"{c[0]} and {c[1]} both occur" for c in cuts]
    return ", or if ".join(parts)


TIMES = " \\times "


def cut_lines(cuts, q) -> list[str]:
    return [f"P({''.join(c)}) = {TIMES.join(txt(q[e]) for e in c)} = {tex(cut_prob(c, q))}"
            if len(c) > 1 else f"P({c[0]}) = {txt(q[c[0]])}" for c in cuts]


def expected_cut_count(cuts, q, weight=lambda cut: 1.0) -> float:
    """E[sum of weight(cut) over occurring cut sets], by enumerating every event state."""
    events = [e for e, _ in sorted(q.items())]
    total = 0.0
    for state in itertools.product((0, 1), repeat=len(events)):
        on = {e for e, s in zip(events, state) if s}
        prob = math.prod(q[e] if e in on else 1 - q[e] for e in events)
        total += prob * sum(weight(c) for c in cuts if set(c) <= on)
    return total


def _solve_rare(p):
    q = dict(p["q"])
    total = sum(cut_prob(c, q) for c in p["cuts"])
    return total, ["Rare-event approximation: P(TOP) \\approx \\sum P(C_i).",
                   *cut_lines(p["cuts"], q),
                   f"P(TOP) \\approx {' + '.join(tex(cut_prob(c, q)) for c in p['cuts'])} = "
                   f"{tex(total)}"]


RARE_EVENT = Family(
    name="ft_rare_event", topic="fault_trees", difficulty=2,
    asks="top-event probability from minimal cut sets by the rare-event approximation",
    check_how="enumerate all event states: the expected number of occurring cut sets",
    draw=lambda rng: draw_cuts(rng, (3, 4), 0.001, 0.05), solve=_solve_rare, bounds=FT_BOUNDS,
    phrasings=(
        lambda p: (f"A system has minimal cut sets {cuts_sets(p['cuts'])}. The independent "
                   f"basic events have probabilities {probs_text(p['q'])}. Using the rare-event "
                   f"approximation, estimate the top-event probability."),
        lambda p: (f"TOP = {cuts_boolean(p['cuts'])} (sum of minimal cut sets). With "
                   f"{probs_text(reversed(p['q']))}, give the rare-event approximation of "
                   f"P(TOP)."),
        lambda p: (f"The system fails if {cuts_words(p['cuts'])}. Basic event probabilities: "
                   f"{probs_text(p['q'])}. Estimate the system failure probability by summing "
                   f"the minimal cut set probabilities."),
    ),
    check=lambda p, rng: exact(expected_cut_count(p["cuts"], dict(p["q"])),
                               "enumeration: expected number of occurring cut sets"),
)


def _solve_cut_exact(p):
    q, cuts = dict(p["q"]), p["cuts"]
    lines = ["Inclusion-exclusion over the minimal cut sets:", *cut_lines(cuts, q)]
    total = 0.0
    for k in range(1, len(cuts) + 1):
        terms = []
        for combo in itertools.combinations(cuts, k):
            events = sorted(set().union(*combo))
            terms.append(math.prod(q[e] for e in events))
            if k > 1:
                lines.append(f"P({' '.join(''.join(c) for c in combo)}) = P({''.join(events)}) = "
                             f"{tex(terms[-1])}")
        total += (-1) ** (k + 1) * sum(terms)
    lines.append("P(TOP) = \\sum P(C_i) - \\sum P(C_iC_j)"
                 + (" + P(C_1C_2C_3)" if len(cuts) == 3 else "") + f" = {tex(total)}")
    return total, lines


CUT_EXACT = Family(
    name="ft_cutset_exact", topic="fault_trees", difficulty=3,
    asks="exact top-event probability from 2-3 minimal cut sets sharing events",
    check_how="brute-force enumeration of all basic-event states",
    draw=lambda rng: draw_cuts(rng, (2, 3), 0.02, 0.3), solve=_solve_cut_exact,
    bounds=FT_BOUNDS,
    phrasings=(
        lambda p: (f"A fault tree has minimal cut sets {cuts_sets(p['cuts'])} with independent "
                   f"basic events {probs_text(p['q'])}. Find the exact top-event probability."),
        lambda p: (f"TOP = {cuts_boolean(p['cuts'])}. Basic event probabilities: "
                   f"{probs_text(reversed(p['q']))}. Compute P(TOP) exactly (inclusion-"
                   f"exclusion), not with the rare-event approximation."),
        lambda p: (f"The system fails if {cuts_words(p['cuts'])}. With {probs_text(p['q'])} "
                   f"(independent), what is the exact probability of system failure?"),
    ),
    check=lambda p, rng: exact(enumerate_states(
        [v for _, v in p["q"]],
        lambda s: any(set(c) <= {e for (e, _), x in zip(p["q"], s) if x} for c in p["cuts"])),
        "state enumeration"),
)


# ---------------------------------------------------------------- event trees

# (initiating event, branch systems, end state, damage sequences); a sequence is a tuple of
# (system index, fails?) in branch order; systems not listed are not asked on that path.
SCENARIOS = (
    ("a loss of offsite power",
     ("the emergency diesel generator", "the steam-driven feedwater pump"),
     "core damage", (((0, True), (1, True)),), (0.02, 0.5)),
    ("a fire in the cable spreading room", ("fire detection", "the automatic sprinkler system",
                                            "manual fire fighting"),
     "loss of the room", (((0, True),), ((0, False), (1, True), (2, True))), (0.005, 0.1)),
    ("a flammable gas leak", ("gas detection", "automatic isolation", "ignition source control"),
     "an explosion", (((0, True), (2, True)), ((0, False), (1, True), (2, True))), (0.05, 1.0)),
)


def _draw_event_tree(rng):
    index = int(rng.integers(0, len(SCENARIOS)))
    lo, hi = SCENARIOS[index][4]
    return {"scenario": index, "f": nice(rng, lo, hi),
            "q": tuple(nice(rng, 0.005, 0.1) for _ in SCENARIOS[index][1])}


def _seq_words(seq, systems) -> str:
    parts = [f"{systems[i]} {'fails' if fails else 'succeeds'}" for i, fails in seq]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _scenario_rules(p) -> str:
    _, systems, end, seqs, _ = SCENARIOS[p["scenario"]]
    return f"{end[0].upper() + end[1:]} follows when " + "; or when ".join(
        _seq_words(s, systems) for s in seqs)


def _solve_event_tree(p):
    _, systems, end, seqs, _ = SCENARIOS[p["scenario"]]
    lines, total = [], 0.0
    for seq in seqs:
        factors = [p["q"][i] if fails else 1 - p["q"][i] for i, fails in seq]
        freq = p["f"] * math.prod(factors)
        total += freq
        shown = " \\times ".join([txt(p["f"]), *(tex(x) for x in factors)])
        lines.append(f"Sequence ({_seq_words(seq, systems)}): {shown} = {tex(freq)} per year")
    if len(seqs) > 1:
        lines.append(f"Total = {' + '.join(tex(x) for x in _seq_freqs(p))} = {tex(total)} per year")
    return total, lines


def _seq_freqs(p):
    seqs = SCENARIOS[p["scenario"]][3]
    return [p["f"] * math.prod(p["q"][i] if fails else 1 - p["q"][i] for i, fails in seq)
            for seq in seqs]


def _check_event_tree(p, rng):
    seqs = SCENARIOS[p["scenario"]][3]

    def damaged(state):  # state[i] = 1 when system i fails
        return any(all(bool(state[i]) == fails for i, fails in seq) for seq in seqs)

    return exact(p["f"] * enumerate_states(list(p["q"]), damaged),
                 "enumerate every combination of system outcomes")


EVENT_TREE = Family(
    name="event_tree", topic="fault_trees", difficulty=2,
    asks="frequency of an undesired end state from an initiating event and branch failures",
    check_how="enumerate every combination of branch outcomes and classify it",
    draw=_draw_event_tree, solve=_solve_event_tree, check=_check_event_tree, unit="per year",
    phrasings=(
        lambda p: (f"{SCENARIOS[p['scenario']][0][0].upper()}{SCENARIOS[p['scenario']][0][1:]} "
                   f"occurs {txt(p['f'])} times per year. "
                   + " ".join(f"{s[0].upper() + s[1:]} fails on demand with probability "
                              f"{txt(v)}." for s, v in zip(SCENARIOS[p['scenario']][1], p["q"]))
                   + f" {_scenario_rules(p)}. What is the frequency of "
                     f"{SCENARIOS[p['scenario']][2]} per year?"),
        lambda p: (f"Event tree. Initiating event: {SCENARIOS[p['scenario']][0]}, frequency "
                   f"{txt(p['f'])}/yr. Branch failure probabilities: "
                   + ", ".join(f"{s}: {txt(v)}" for s, v in zip(SCENARIOS[p['scenario']][1],
                                                                 p["q"]))
                   + f". {_scenario_rules(p)}. Compute the annual frequency of "
                     f"{SCENARIOS[p['scenario']][2]}."),
        lambda p: (f"How often per year should we expect {SCENARIOS[p['scenario']][2]}? "
                   f"{_scenario_rules(p)}. The failure probabilities on demand are "
                   + ", ".join(f"{txt(v)} for {s}" for s, v in zip(SCENARIOS[p['scenario']][1],
                                                                    p["q"]))
                   + f", and {SCENARIOS[p['scenario']][0]} happens at a rate of "
                     f"{txt(p['f'])} per year."),
    ),
)

FAMILIES = [GATES, RARE_EVENT, CUT_EXACT, EVENT_TREE]
