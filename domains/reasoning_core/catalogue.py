"""Every reasoning-core generator as a workbench domain, with numbered difficulty levels.

reasoning-core 0.5.0 ships 55 generators (`reasoning_core.list_tasks()`), grouped by its own
capability areas (`reasoning_core.registry.AREAS`), which become the families here. Each
generator's `Config.set_level(k)` raises its knobs with k = 0, 1, 2, ...; levels 1..n here
are k = 0..n-1, with n = `MAX_LEVELS` unless generation at a higher k was measured too
slow for rollouts (`LEVEL_CAPS`). Answers go between `<answer>` tags (some span lines:
proof traces, plans, table rows).

Not registered (`SKIPPED`): the two `metamath_*` generators download Metamath's database
at run time, the two `game_*` generators need `pyggp`, which no package index serves,
`table_qa` dates its rows relative to today (Faker), so its tasks change from day to day,
and three give another task for the same seed in one process (`SKIPPED` says why).

    from domains.reasoning_core.catalogue import build_rc_domains
    domains = build_rc_domains()          # name -> ReasoningCoreDomain
"""

from __future__ import annotations

from domains.reasoning_core.domain import ReasoningCoreDomain

MAX_LEVELS = 5

SKIPPED = {
    "metamath_entailment": "downloads Metamath's set.mm at run time (nothing is fetched at run time here)",
    "metamath_core_select": "downloads Metamath's set.mm at run time (nothing is fetched at run time here)",
    "game_best_move": "needs pyggp, which no package index serves",
    "game_forced_win": "needs pyggp, which no package index serves",
    "table_qa": "its tables hold Faker dates relative to today, so a seed's task changes from one day to the next",
    "code_runnability": "keeps the programs that ran within a time budget: its tasks depend on the machine's speed",
    "defeasible_nli": "a seed's task depends on what the process generated before it (make_task twice differs)",
    "multistep_nli": "a seed's task depends on what the process generated before it (make_task twice differs)",
}

# reasoning-core's capability areas -> the family they make here
FAMILIES = {
    "Logic & deduction": "logic",
    "State tracking & execution": "state_tracking",
    "Mathematics": "mathematics",
    "Spatial, causal & probabilistic": "spatial_causal",
    "Formal languages & parsing": "formal_languages",
    "Graphs, games & planning": "graphs_planning",
    "Sets & tables": "sets_tables",
}

# Highest 0-based level kept where a higher one was measured too slow to feed rollouts
# (`rlwb domains validate`, CPU seconds per task on this 2-core machine).
# Generation ran past GENERATION_TIMEOUT_S (10 s) within the first 15 seeds one level up.
LEVEL_CAPS: dict[str, int] = {"constraint_satisfaction": 0, "qualitative_reasoning": 3, "sequential_induction": 1}
# Lowest 0-based level kept where the easiest one hangs: parsing_derivation level 0 ran past
# 10 s at seed 12 of 100 (its grammar is too small to find a string with a unique parse).
LEVEL_FLOORS: dict[str, int] = {"parsing_derivation": 1}


def build_rc_domains() -> dict[str, ReasoningCoreDomain]:
    """A `ReasoningCoreDomain` for every reasoning-core generator not in `SKIPPED`, in name
    order; an empty dict when reasoning-core is not installed.

    Reads the catalogue without importing the generators (`task_catalog` parses their
    source), so building the registry stays cheap.
    """
    try:
        import reasoning_core  # on first use: ~20 ms, the generators load lazily
        from reasoning_core.registry import AREAS
    except ImportError:
        return {}
    family_of = {name: FAMILIES[area] for area, names in AREAS.items() for name in names}
    summaries = {row["name"]: row["summary"] for row in reasoning_core.task_catalog()}
    out = {}
    for name in sorted(reasoning_core.list_tasks()):
        if name in SKIPPED:
            continue
        top = min(MAX_LEVELS - 1, LEVEL_CAPS.get(name, MAX_LEVELS))
        levels = {n: k for n, k in enumerate(range(LEVEL_FLOORS.get(name, 0), top + 1), 1)}
        out[name] = ReasoningCoreDomain(
            name=name,
            family=family_of.get(name, "misc"),
            description=summaries.get(name) or f"reasoning-core's {name.replace('_', ' ')} tasks.",
            levels=levels,
            level_notes={n: f"reasoning-core level {k}" + (" (its easiest)" if k == 0 else "")
                         for n, k in levels.items()},
        )
    return out
