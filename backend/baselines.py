"""Baselines an evaluation's accuracy must beat, per domain, from the held-out tasks it played.

An accuracy means little on its own: on letter_counting level 1, 53 of 100 held-out
references are "1", so a model that answers "1" every time scores 53%. Per domain:

- **best constant**: the answer that, given to every task, scores best with the domain's
  own verifier (the CONSTANT_CANDIDATES most common references are tried; a constant may
  match several references, "1" and "1.0"). Its accuracy is what "answering '1' every
  time" would score.
- **copy from the question**: the best of COPY_RULES (the first or last number, word or
  double-quoted text of the task's question), one rule for every task of the domain,
  scored by the verifier. Like the constant it is chosen on the held-out set itself, so
  both are an upper bound on what that simple policy scores.
- **format-only reward**: the reward of a reply in the right format with a wrong answer
  (the constant's wrong replies; FORMAT_WEIGHT for the reasoning-gym domains): the floor
  a model that learned only the format reaches.
- **the model's own answers**: the most common extracted answer and its share of the
  samples, and the share that repeats a number, word or quoted text of the question.
- **format forgiven**: the model's own replies read as a person would, without the answer
  format: the last number of each reply, where the reference is one number
  (`forgiven_answer`). For the base model (the A side of a report) this is what a run that
  learned only the answer format would score: SmolLM2-135M never writes the `Answer:` line
  (0% strictly) but its last number is right on 28% of basic_arithmetic level 1.
- the **base model** is the A side of a report (`backend.eval_report`); `judge` weighs it,
  and its format-forgiven accuracy joins the task baselines (`best(b, base)`).

    table = suite_baselines(rows, {d: tasks})           # domain -> baselines (JSON), no model calls
    gain = baseline_gain(task_pass1(rows), table)       # paired gain above each domain's best baseline
    verdict = judge(gain, best_label(table[d]))         # "no gain beyond answering '1' every time"

`rows` are an evaluation's sample rows (`backend.eval_store`, with ``completion``); the
tasks are the `domains.contract.Task`s played, regenerated from (domain, level, seed) where
not given. Costs only verifier calls (CONSTANT_CANDIDATES + len(COPY_RULES) per task).

Not covered: multi-turn, code and sandboxed domains (`eligible`: their answer is a
trajectory or a program, not a string a constant could be); the context of retrieval
domains (copies are looked for in the question only).
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict

from domains.contract import FORMAT_WEIGHT, PASS_THRESHOLD, TextDomain
from trainer.eval_stats import MIN_TASKS_FOR_VERDICT, TaskKey, paired_delta, task_results
from trainer.audit import copied
from domains.answers import extract_answer, numeric_answer
from domains.registry import get_domain
from core.errors import WorkbenchError

CONSTANT_CANDIDATES = 5  # most common references tried as the constant answer
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_REPLY_NUMBER = re.compile(r"(?<![\w.,])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")  # "1,234" is one number
_WORD = re.compile(r"[^\W\d_]+")
_QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”')
#: rule name -> the candidates it picks from and which one (first or last)
COPY_RULES = {"first number": ("numbers", 0), "last number": ("numbers", -1),
              "first word": ("words", 0), "last word": ("words", -1),
              "first quoted text": ("quoted", 0), "last quoted text": ("quoted", -1)}
_LABEL_CHARS = 40
MAX_FORGIVEN_CHARS = 2_000  # `forgiven_answer` reads the reply's last this many characters
FORGIVEN_LABEL = "the base model's own last number (format forgiven)"
SHARE_WARNING = 0.5  # a share of a model's answers (one answer, copies) that gets a warning


def eligible(domain) -> bool:
    """True for a domain whose answer is one string the verifier scores (single-turn and
    retrieval kinds without a sandbox)."""
    return isinstance(domain, TextDomain) and not domain.needs_sandbox


def question_parts(question: str) -> dict[str, list[str]]:
    """The numbers, words (runs of letters) and double-quoted texts of a question, in order."""
    return {"numbers": _NUMBER.findall(question), "words": _WORD.findall(question),
            "quoted": [a or b for a, b in _QUOTED.findall(question)]}


def copy_answer(question: str, rule: str) -> str | None:
    """The answer COPY_RULES[rule] copies from `question`, None when it has no such part.

    Raises:
        KeyError: an unknown rule.
    """
    kind, index = COPY_RULES[rule]
    parts = question_parts(question)[kind]
    return parts[index] if parts else None


def is_copied(answer: str | None, question: str) -> bool:
    """True if `answer` (stripped, case-folded) occurs in `question` as a whole token: the
    training audit's test (`trainer.audit.copied`), so both reports count the same copies."""
    want = (answer or "").strip().casefold()
    return bool(want) and copied(want, question.casefold())


def model_answer(domain, task, completion: str | None) -> str | None:
    """The answer a completion gives, as the domain's verifier reads it (`extract_answer`,
    numbers normalised by `numeric_answer`); None without one."""

    if not isinstance(completion, str):
        return None
    got = extract_answer(completion, tags_only=domain.answer_format == "tag")
    return None if got is None else numeric_answer(got, task.answer)[0]


def _policy(domain, tasks, reply) -> dict:
    """Score `reply(task)` (an answer string or None: no reply) on every task: {"accuracy",
    "mean_reward", "hits" ([level, seed] of the tasks it gets right), "wrong_rewards"}."""

    hits, rewards, wrong = [], [], []
    for t in tasks:
        answer = reply(t)
        reward, correct = 0.0, False
        if answer is not None:
            reward, breakdown = domain.score(t, domain.wrap_answer(answer))
            correct = float(breakdown.get("correct", 0.0)) >= PASS_THRESHOLD
            if not correct and breakdown.get("format"):
                wrong.append(reward)
        rewards.append(reward)
        if correct:
            hits.append([t.difficulty, t.seed])
    n = max(len(tasks), 1)
    return {"accuracy": len(hits) / n, "mean_reward": sum(rewards) / n, "hits": hits, "wrong_rewards": wrong}


def _answer_stats(domain, tasks, rows) -> dict | None:
    """The model's answers over its scored samples: {"samples", "answered", "modal",
    "modal_share", "copied_share"}; None when the rows carry no completions."""
    by_key = {(t.difficulty, t.seed): t for t in tasks}
    rows = [r for r in rows if not r.get("fault") and (int(r["level"]), int(r["task_seed"])) in by_key]
    if not rows or all(r.get("completion") is None for r in rows):
        return None
    answers = []
    copied = 0
    for r in rows:
        task = by_key[(int(r["level"]), int(r["task_seed"]))]
        a = model_answer(domain, task, r.get("completion"))
        answers.append(a)
        copied += is_copied(a, task.question)
    counts = Counter(a for a in answers if a is not None)
    modal, times = counts.most_common(1)[0] if counts else (None, 0)
    return {"samples": len(rows), "answered": sum(counts.values()), "modal": modal,
            "modal_share": times / len(rows), "copied_share": copied / len(rows)}


def forgiven_answer(task, completion: str | None) -> str | None:
    """The last number of a reply, format or not, where the task's reference is one number:
    the answer a person reading the reply would take. None for other references or a reply
    without a number."""
    if not isinstance(completion, str) or not _NUMBER.fullmatch(task.answer.strip()):
        return None
    found = _REPLY_NUMBER.findall(completion[-MAX_FORGIVEN_CHARS:])
    return found[-1] if found else None


def _forgiven(domain, tasks, rows) -> dict | None:
    """The model's replies scored on `forgiven_answer`: {"accuracy" (over `tasks`), "scores"
    ([level, seed, share of its samples right])}; None when the rows carry no completions."""
    by_key = {(t.difficulty, t.seed): t for t in tasks}
    per: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in rows:
        key = (int(r["level"]), int(r["task_seed"]))
        if r.get("fault") or key not in by_key or r.get("completion") is None:
            continue
        answer = forgiven_answer(by_key[key], r["completion"])
        right = False
        if answer is not None:
            _, breakdown = domain.score(by_key[key], domain.wrap_answer(answer))
            right = float(breakdown.get("correct", 0.0)) >= PASS_THRESHOLD
        per[key].append(float(right))
    if not per:
        return None
    scores = [[lv, seed, sum(v) / len(v)] for (lv, seed), v in sorted(per.items())]
    return {"accuracy": sum(s[2] for s in scores) / max(len(by_key), 1), "scores": scores}


def with_forgiven(table: dict[str, dict], rows: list[dict]) -> dict[str, dict]:
    """`table` (stored `suite_baselines`) with each domain's "forgiven" entry computed from
    `rows` where it lacks one (evaluations stored before that baseline existed)."""
    out = dict(table)
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_domain[r["domain"]].append(r)
    for name, b in table.items():
        if "forgiven" not in b and by_domain.get(name):
            tasks = regenerated(name, by_domain[name])
            out[name] = {**b, "forgiven": None if tasks is None else _forgiven(get_domain(name), tasks, by_domain[name])}
    return out


def domain_baselines(domain, tasks, rows=()) -> dict:
    """The baselines of one domain over its held-out `tasks` (see the module docstring).

    Args:
        domain: an `eligible` registry domain.
        tasks: the `Task`s the evaluation played in this domain.
        rows: this domain's sample rows (``level, task_seed, completion, fault``) for the
            model's answer statistics; () for none.

    Returns:
        {"tasks", "constant": {"answer", "accuracy", "mean_reward", "hits"}, "copy": {"rule",
        "accuracy", "mean_reward", "hits"}, "format_reward", "answers" (`_answer_stats`, or
        None), "forgiven" (`_forgiven`: these rows' replies, format forgiven, or None)};
        accuracies and rewards in [0, 1], hits as [level, seed] pairs.
    """

    tasks = list(tasks)
    refs = [a for a, _ in Counter(t.answer for t in tasks).most_common(CONSTANT_CANDIDATES)]
    constants = {a: _policy(domain, tasks, lambda _t, a=a: a) for a in refs}
    copies = {rule: _policy(domain, tasks, lambda t, rule=rule: copy_answer(t.question, rule)) for rule in COPY_RULES}
    answer = max(refs, key=lambda a: constants[a]["accuracy"]) if refs else None  # ties: the most common
    rule = max(COPY_RULES, key=lambda r: copies[r]["accuracy"])  # ties: COPY_RULES order
    wrong = [w for p in [*constants.values(), *copies.values()] for w in p["wrong_rewards"]]
    const = constants.get(answer) or {"accuracy": 0.0, "mean_reward": 0.0, "hits": []}
    return {"tasks": len(tasks),
            "constant": {"answer": answer, **{k: const[k] for k in ("accuracy", "mean_reward", "hits")}},
            "copy": {"rule": rule, **{k: copies[rule][k] for k in ("accuracy", "mean_reward", "hits")}},
            "format_reward": min(wrong) if wrong else FORMAT_WEIGHT,
            "answers": _answer_stats(domain, tasks, rows), "forgiven": _forgiven(domain, tasks, rows)}


@functools.lru_cache(maxsize=4096)
def _task(name: str, level: int, seed: int):
    return get_domain(name).make_task(seed, level)


def regenerated(name: str, rows: list[dict]) -> list | None:
    """The tasks of a domain's sample rows, regenerated from (level, seed), in (level, seed)
    order; None if the generator no longer gives the tasks that were played: a row's stored
    reference ``answer`` (kept since store version 13) differs from the regenerated one. A
    baseline over other tasks than the model answered would be silently wrong."""
    keys = sorted({(int(r["level"]), int(r["task_seed"])) for r in rows})
    tasks = {k: _task(name, *k) for k in keys}
    for r in rows:
        stored = r.get("answer")
        if stored is not None and tasks[(int(r["level"]), int(r["task_seed"]))].answer != stored:
            return None
    return [tasks[k] for k in keys]


def suite_baselines(rows: list[dict], tasks: dict[str, list] | None = None) -> dict[str, dict]:
    """`domain_baselines` of every eligible domain in an evaluation's sample rows.

    Args:
        rows: the sample rows (with ``completion`` for the answer statistics).
        tasks: domain -> the `Task`s played; None regenerates them from the rows' (domain,
            level, seed) (deterministic; the report does this for evaluations stored without
            baselines).

    Returns:
        domain -> baselines; a domain that is not eligible, unknown to the registry, or
        whose tasks can't be regenerated is left out.
    """

    by_domain: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_domain[r["domain"]].append(r)
    out = {}
    for name, drows in sorted(by_domain.items()):
        try:
            domain = get_domain(name)
            if not eligible(domain):
                continue
            played = tasks.get(name) if tasks is not None else regenerated(name, drows)
            if played:  # None: the generator changed since the evaluation (no baseline rather than a wrong one)
                out[name] = domain_baselines(domain, played, drows)
        except WorkbenchError:  # unknown domain, a generator past its time limit: no baseline
            continue
    return out


# ---------------------------------------------------------------- judging a model against them

def best(b: dict, base: dict | None = None) -> dict:
    """The strongest of a domain's constant and copy baselines and, in a comparison, the base
    model's format-forgiven replies (`base`: A's `domain_baselines`): {"kind", "label",
    "accuracy", "scores" ({(level, seed): score in [0, 1]})} (ties: constant, copy, base)."""
    candidates = [("constant", b["constant"]["accuracy"]), ("copy", b["copy"]["accuracy"])]
    forgiven = (base or {}).get("forgiven")
    if forgiven:
        candidates.append(("forgiven", forgiven["accuracy"]))
    kind = max(candidates, key=lambda c: c[1])[0]  # the first of equals
    if kind == "forgiven":
        scores = {(int(lv), int(seed)): share for lv, seed, share in forgiven["scores"]}
        return {"kind": kind, "label": FORGIVEN_LABEL, "accuracy": forgiven["accuracy"], "scores": scores}
    return {"kind": kind, "label": best_label(b, kind), "accuracy": b[kind]["accuracy"],
            "scores": {(int(lv), int(seed)): 1.0 for lv, seed in b[kind]["hits"]}}


def best_label(b: dict, kind: str | None = None, base: dict | None = None) -> str:
    """How a verdict names a baseline: "answering '1' every time", "copying the question's
    last number", "the base model's own last number (format forgiven)"."""
    kind = kind or best(b, base)["kind"]
    if kind == "forgiven":
        return FORGIVEN_LABEL
    if kind == "copy":
        return f"copying the question's {b['copy']['rule']}"
    answer = str(b["constant"]["answer"])
    answer = answer if len(answer) <= _LABEL_CHARS else answer[: _LABEL_CHARS - 1] + "…"
    return f"answering {answer!r} every time"


def task_pass1(rows: list[dict]) -> dict[TaskKey, float]:
    """pass@1 (correct samples / scored samples) per task (domain, level, seed)."""
    return {k: t["c"] / t["n"] for k, t in task_results(rows).items()}


def baseline_gain(pass1: dict[TaskKey, float], table: dict[str, dict], keys=None, resamples: int = 1000,
                  base_table: dict[str, dict] | None = None) -> dict | None:
    """The paired gain of a model's pass@1 above each domain's best baseline (`best`, with
    the base model's format-forgiven replies from `base_table` where given), over the
    tasks `keys` (default: all) of domains that have baselines.

    Returns:
        `eval_stats.Delta` as a dict ("a" the baseline's accuracy, "b" the model's,
        "delta" with its 95% bootstrap interval "low".."high", "n" tasks, "verdict"), or
        None when no task has a baseline.
    """
    scores = {d: best(b, (base_table or {}).get(d))["scores"] for d, b in table.items()}
    keys = [k for k in (pass1 if keys is None else keys) if k[0] in scores and k in pass1]
    if not keys:
        return None
    base = [scores[k[0]].get((k[1], k[2]), 0.0) for k in keys]
    return paired_delta(base, [pass1[k] for k in keys], resamples).as_dict()


def judge(gain: dict | None, label: str, vs_base: dict | None = None) -> str | None:
    """The verdict of a model against its baselines: the task baseline (`gain`, named by
    `label`) and, in a comparison, the base model A (`vs_base`, the paired delta B - A).

    "improvement" only when every interval lies above 0; "regression" below A; "no gain
    beyond LABEL" / "below LABEL" when the task baseline isn't cleared; "no clear change"
    against A; "too few tasks" under MIN_TASKS_FOR_VERDICT tasks. None without either.
    """
    checks = [c for c in (vs_base, gain) if c]
    if not checks:
        return None
    if any(c["n"] < MIN_TASKS_FOR_VERDICT for c in checks):
        return "too few tasks"
    if vs_base and vs_base["high"] < 0:
        return "regression"
    if gain and gain["low"] <= 0:
        return f"below {label}" if gain["high"] < 0 else f"no gain beyond {label}"
    if vs_base and vs_base["low"] <= 0:
        return "no clear change"
    return "improvement"


def group_verdicts(rows: list[dict], table: dict[str, dict], families: dict[str, str],
                   comparison: dict | None = None, resamples: int = 1000,
                   base_table: dict[str, dict] | None = None) -> dict:
    """Per domain, family and overall: the strongest baseline, the gain above it and the
    verdict (`judge`) of the model whose sample `rows` these are.

    Args:
        rows: the judged model's sample rows (B of a comparison, or the only evaluation).
        table: `suite_baselines` of its tasks.
        families: domain -> family.
        comparison: `eval_stats.compare` as JSON (A vs B), or None.
        base_table: `suite_baselines` of A's rows in a comparison: its format-forgiven
            replies join the baselines (`best`).

    Returns:
        {"domains": {d: entry}, "families": {f: entry}, "overall": entry} with entry =
        {"baseline" (label), "value" (its accuracy), "gain" (Delta dict above the strongest
        baseline, or None), "verdict"}; groups without any baseline are left out.
    """
    pass1 = task_pass1(rows)
    groups: dict[tuple[str, str | None], list[TaskKey]] = defaultdict(list)
    for key in pass1:
        groups[("domains", key[0])].append(key)
        groups[("families", families.get(key[0], "other"))].append(key)
        groups[("overall", None)].append(key)
    out: dict = {"domains": {}, "families": {}, "overall": None}
    for (table_name, name), keys in groups.items():
        gain = baseline_gain(pass1, table, keys, resamples, base_table)
        vs_base = None
        if comparison is not None:
            vs_base = ((comparison[table_name].get(name) if name else comparison["overall"]) or {}).get("pass@1")
        if table_name == "domains":
            label = best_label(table[name], base=(base_table or {}).get(name)) if name in table else ""
        else:
            names = {k[0] for k in keys}
            label = "each domain's best baseline" + (
                "" if names <= set(table) else f" ({len(names & set(table))} of {len(names)} domains)")
        if gain is None and vs_base is None:
            continue
        entry = {"baseline": label, "value": gain["a"] if gain else None, "gain": gain,
                 "verdict": judge(gain, label, vs_base)}
        if vs_base and (gain is None or vs_base["a"] > gain["a"]):  # A is the stronger baseline here
            entry.update(baseline="A (base)", value=vs_base["a"], gain=vs_base)
        if name is None:
            out["overall"] = entry
        else:
            out[table_name][name] = entry
    return out


def answer_warnings(label: str, table: dict[str, dict]) -> list[str]:
    """Notes on a model's answers (`domain_baselines` "answers"): a domain where more than
    SHARE_WARNING of its samples give one answer, more often than that answer is right,
    or repeat a number, word or quoted text of the question (two different answers out of
    two are not a collapse)."""
    out = []
    for d, b in sorted(table.items()):
        a = b.get("answers")
        if not a:
            continue
        if a["modal"] is not None and a["modal_share"] > SHARE_WARNING:
            right = b["constant"]["accuracy"] if b["constant"]["answer"] == a["modal"] else None
            if right is None or a["modal_share"] > right:
                modal = str(a["modal"])[:_LABEL_CHARS]
                out.append(f"{label}: {100 * a['modal_share']:.0f}% of its {d} answers are {modal!r}"
                           + (f" (the right answer on {100 * right:.0f}% of the tasks)" if right is not None else "")
                           + "; a collapse onto one answer.")
        if a["copied_share"] > SHARE_WARNING:
            out.append(f"{label}: {100 * a['copied_share']:.0f}% of its {d} answers are copied from the question "
                       f"(a number, word or quoted text of it); the best copy rule ({b['copy']['rule']}) scores "
                       f"{100 * b['copy']['accuracy']:.1f}%.")
    return out


def baseline_rows(table: dict[str, dict], answers: list[tuple[str, dict[str, dict]]] = ()) -> list[dict]:
    """The baselines table of a report: per domain the tasks, the best constant and copy
    rule with their accuracies (percent), the format-only reward and, per evaluation in
    `answers` ((tag, its `suite_baselines`)), the model's most common answer, the share
    of its answers copied from the question and its accuracy with the format forgiven."""
    out = []
    for d, b in sorted(table.items()):
        constant = str(b["constant"]["answer"])[:_LABEL_CHARS]
        row = {"domain": d, "tasks": b["tasks"],
               "best constant": f"{constant!r}: {100 * b['constant']['accuracy']:.1f}%",
               "copy from the question": f"{b['copy']['rule']}: {100 * b['copy']['accuracy']:.1f}%",
               "format-only reward": f"{b['format_reward']:.2f}"}
        for tag, side in answers:
            a = (side.get(d) or {}).get("answers")
            row[f"most common answer {tag}".strip()] = (
                f"{str(a['modal'])[:_LABEL_CHARS]!r} in {100 * a['modal_share']:.0f}%" if a and a["modal"] is not None
                else "—")
            row[f"copied from the question {tag}".strip()] = f"{100 * a['copied_share']:.0f}%" if a else "—"
            forgiven = (side.get(d) or {}).get("forgiven")
            row[f"last number, format forgiven {tag}".strip()] = (f"{100 * forgiven['accuracy']:.1f}%" if forgiven
                                                                  else "—")
        out.append(row)
    return out
