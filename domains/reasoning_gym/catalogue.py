"""Every reasoning-gym generator as a workbench domain, with numbered difficulty levels.

reasoning-gym ships 106 procedural generators (`reasoning_gym.factory.DATASETS`) and, for
102 of them, a curriculum (`reasoning_gym.factory.CURRICULA`) that names the generator's
difficulty knobs as attributes with ordered levels (for `basic_arithmetic`: `num_terms`
2, 3, 4, 5, 6 and `num_digits` 1, 2, 3, 4). This module turns each generator into a
`domains.reasoning_gym.domain.ReasoningGymDomain`:

- **family**: the generator's reasoning-gym category (the package it lives in:
  arithmetic, algorithmic, games, logic, ...).
- **levels**: global level g (0-based) sets every attribute to its level min(g, last).
  A scalar attribute takes `levels[g]`; a range attribute takes the window
  `[levels[g], levels[g + 1]]`, so every level is a real interval (reasoning-gym's own
  INCLUSIVE mode gives a single value at level 0, which makes some generators loop
  forever: puzzle24 with numbers 1..1 never reaches 24). Configurations that the
  generator's own `validate()` rejects are dropped; levels whose generation is measured
  too slow for rollouts are capped (`LEVEL_CAPS`). At most `MAX_LEVELS` levels are kept,
  evenly spaced from the easiest to the hardest, numbered 1..n.
- **answer format**: `<answer>...</answer>` tags (reasoning-gym's own convention; answers
  may span lines: grids, boards, move lists). The seven hand-made domains of
  `domains.reasoning_gym.hand_made` keep their one-line `Answer: ...` format.

`composite` is not registered: it combines other generators by weight, which is what a
workbench mix does (`domains.mixes`). Generators without a curriculum (acre,
list_functions) get one level with their default configuration; gsm_symbolic keeps its
hand-made levels in `domains.reasoning_gym.hand_made`.

    from domains.reasoning_gym.catalogue import build_rg_domains
    domains = build_rg_domains(skip={"basic_arithmetic"})   # name -> ReasoningGymDomain
"""

from __future__ import annotations

import re
from typing import Any
from domains.reasoning_gym.domain import ReasoningGymDomain

MAX_LEVELS = 5
SKIPPED = {"composite": "combines other generators by weight; use a mix instead"}

# Highest 0-based curriculum level kept, measured with `rlwb domains validate` on this
# machine (2-core CPU). Too slow to feed rollouts at the next level (mean generation time
# per task): zebra_puzzles 3.1 s (15 s above), jugs 6.2 s, bf 1.2 s, futoshiki 1.0 s.
# countdown fails upstream above level 0 ("Failed to generate valid expression after
# 100 attempts" within the first 100 seeds). game_of_life level 3 is a 100x100 grid:
# prompts over 20,000 characters and 0.7-4 s per task. Generation did not finish within
# 10 s on some of the first 100 seeds above: kakurasu level 1, number_sequence level 0,
# sokoban level 5 (seed 2 at level 6), puzzle24 level 2; letter_jumble raises "empty range for randrange"
# above level 1.
LEVEL_CAPS = {"zebra_puzzles": 3, "jugs": 1, "bf": 1, "futoshiki": 1, "countdown": 0, "game_of_life": 2,
              "kakurasu": 1, "number_sequence": 0, "sokoban": 5, "letter_jumble": 1, "puzzle24": 2}

# Tasks with several valid answers: another task's reference may be right here too, so
# validation tries only a corrupted reference as the wrong answer.
MULTIPLE_ANSWERS = {"n_queens", "jugs"}

# Generators that build a finite pool of items up front (indexing past `size` fails):
# seeds map onto the pool (`Domain.pooled`).
POOLED = {"acre", "list_functions", "word_ladder"}

def _family(module: str) -> str:
    """reasoning-gym category from a generator's module, e.g. "reasoning_gym.games.maze" -> "games"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else "misc"


# Generators whose docstrings say nothing a user can act on ("Generates BF tasks.", a
# dataclass's field list): described here instead.
DESCRIPTIONS = {
    "ab": "Rewrite an A::B token sequence with its four rules until no rule applies (Victor Taelin's A::B problem).",
    "acre": "Infer which objects switch on a machine from observed trials (ACRE: abstract causal reasoning).",
    "arc_agi": "Solve an ARC-AGI grid puzzle: infer the transformation from the example input/output grids.",
    "bf": "Run a short Brainf*ck program and give its output.",
    "boxnet": "Plan the moves that bring boxes to their goal cells in a grid worked by several agents.",
    "calendar_arithmetic": "Calendar questions: weekdays of dates, days between dates, leap years, counting weekdays.",
    "puzzle24": "Combine four numbers with + - * / to make 24.",
    "rearc": "Solve a generated ARC grid puzzle (re-ARC): infer the transformation from example grids.",
    "survo": "Fill a Survo grid so that each row and column sums to its given total.",
}
_MD_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")  # [text](url) -> text
_MD_EMPHASIS = re.compile(r"(?<!\w)[_*]+([^_*]+?)[_*]+(?!\w)")  # _text_, **text** -> text


def _description(ds_cls: type, cfg_cls: type, name: str) -> str:
    """One readable line for the page: `DESCRIPTIONS`, else the first line of the dataset's
    or config's own docstring (not a dataclass's generated signature), with markdown links
    and emphasis reduced to their text."""
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    for cls in (ds_cls, cfg_cls):  # own docstrings, not inherited ones
        doc = (cls.__doc__ or "").strip()
        line = doc.splitlines()[0].strip() if doc else ""
        if line.startswith(cls.__name__ + "("):  # a dataclass's generated docstring: its fields
            continue
        line = line.removeprefix("Configuration for ").removeprefix("Config for ").rstrip(".")
        line = _MD_EMPHASIS.sub(r"\1", _MD_LINK.sub(r"\1", line))
        if line and not line.lower().startswith(("initialize", "args")):
            return line[0].upper() + line[1:] + "."
    return f"reasoning-gym's {name.replace('_', ' ')} tasks."


def _level_kwargs(curriculum: Any, level: int) -> tuple[dict[str, Any], str]:
    """Generator config kwargs and a one-line note for 0-based global `level`."""
    from reasoning_gym.coaching.attributes import RangeAttributeDefinition

    kwargs: dict[str, Any] = {}
    notes = []
    for name, attr in curriculum.attributes.items():
        vals = attr.levels
        if isinstance(attr, RangeAttributeDefinition):
            i = min(level, max(len(vals) - 2, 0))
            lo, hi = vals[i], vals[min(i + 1, len(vals) - 1)]
            lo, hi = (lo, hi) if _le(lo, hi) else (hi, lo)
            kwargs[attr.lower_field_name], kwargs[attr.upper_field_name] = lo, hi
            notes.append(f"{name} {lo}-{hi}" if lo != hi else f"{name} {lo}")
        else:
            v = vals[min(level, len(vals) - 1)]
            kwargs[attr.field_name] = v
            notes.append(f"{name} {_short(v)}")
    return kwargs, "; ".join(notes)


def _le(a: Any, b: Any) -> bool:
    try:
        return a <= b
    except TypeError:
        return True


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 30 else s[:27] + "..."


def _n_levels(curriculum: Any) -> int:
    from reasoning_gym.coaching.attributes import RangeAttributeDefinition

    return max((max(len(a.levels) - 1, 1) if isinstance(a, RangeAttributeDefinition) else len(a.levels)
                for a in curriculum.attributes.values()), default=1)


def _valid(cfg_cls: type, kwargs: dict) -> bool:
    """True if the generator's own config validation accepts kwargs."""
    try:
        cfg = cfg_cls(**kwargs)
        if hasattr(cfg, "validate"):
            cfg.validate()
        return True
    except Exception:  # noqa: BLE001 - any rejection means the level is not usable
        return False


def curriculum_levels(name: str) -> tuple[dict[int, dict], dict[int, str]]:
    """Numbered levels of a reasoning-gym generator from its curriculum.

    Returns:
        (levels, notes): level number (1 easy .. n hard, n <= MAX_LEVELS) -> generator
        config kwargs, and -> a note naming the knob values ("num_terms 2-3; num_digits 1-2").
        A generator without a curriculum gets {1: {}} (its default configuration).
    """
    from reasoning_gym.factory import CURRICULA, DATASETS

    if name not in CURRICULA:
        return {1: {}}, {1: "default configuration (no curriculum upstream)"}
    cfg_cls = DATASETS[name][1]
    cur = CURRICULA[name]()
    top = min(_n_levels(cur) - 1, LEVEL_CAPS.get(name, 10**9))
    usable = []
    for g in range(top + 1):
        kwargs, note = _level_kwargs(cur, g)
        if _valid(cfg_cls, kwargs) and (not usable or usable[-1][1] != kwargs):
            usable.append((g, kwargs, note))
    if len(usable) > MAX_LEVELS:  # evenly spaced, keeping the easiest and the hardest
        idx = sorted({round(i * (len(usable) - 1) / (MAX_LEVELS - 1)) for i in range(MAX_LEVELS)})
        usable = [usable[i] for i in idx]
    if not usable:
        return {1: {}}, {1: "default configuration (no curriculum level validates)"}
    return ({n: kw for n, (_, kw, _) in enumerate(usable, 1)},
            {n: f"curriculum level {g}: {note}" for n, (g, _, note) in enumerate(usable, 1)})


def build_rg_domains(skip: set[str] = frozenset()) -> dict:
    """A `ReasoningGymDomain` for every reasoning-gym generator not in `skip` (and not in `SKIPPED`).

    Returns:
        name -> `domains.reasoning_gym.domain.ReasoningGymDomain`, in name order.
    """
    from reasoning_gym.factory import DATASETS


    out = {}
    for name in sorted(DATASETS):
        if name in skip or name in SKIPPED:
            continue
        ds_cls, cfg_cls = DATASETS[name]
        levels, notes = curriculum_levels(name)
        out[name] = ReasoningGymDomain(
            name=name,
            family=_family(ds_cls.__module__),
            description=_description(ds_cls, cfg_cls, name),
            levels=levels,
            level_notes=notes,
            answer_format="tag",
            pooled=name in POOLED,
            multiple_answers=name in MULTIPLE_ANSWERS,
        )
    return out
