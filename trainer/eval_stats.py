"""Statistics of an evaluation: pass@k, per-domain and per-family summaries with bootstrap
confidence intervals, and paired comparisons of two evaluations.

Torch-free (the page imports it). Input is the per-sample rows an evaluation stores
(`backend.eval_store`): dicts with at least ``domain, level, task_seed, sample_idx,
reward, correct`` and, for tool-use episodes, ``calls, valid_calls``; ``turns`` for
multi-turn episodes.

    per_task = task_results(rows)                            # one entry per (domain, level, seed)
    table = summarize(rows, ks=(1, 8))                       # domain -> metric -> Estimate
    diff = compare(rows_base, rows_ckpt, ks=(1, 8))          # paired deltas over shared tasks

pass@k is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
Trained on Code", the HumanEval paper, eq. 1): with n samples of a task of which c are
correct, pass@k = 1 - C(n-c, k) / C(n, k), averaged over tasks. Confidence intervals are
percentile bootstraps over tasks (`scipy.stats.bootstrap`); a comparison resamples the
tasks both evaluations share, so the two models' results on a task stay paired.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

import numpy as np
from domains.registry import get_domain
from core.errors import WorkbenchError

DEFAULT_RESAMPLES = 1000
CONFIDENCE = 0.95
#: Fewer shared tasks than this get no verdict: the bootstrap over tasks ignores the
#: sampling noise within a task, and with a handful of tasks its interval can collapse to
#: a point (every task changed by the same amount) and claim certainty it doesn't have.
MIN_TASKS_FOR_VERDICT = 10


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task (Chen et al. 2021, eq. 1): 1 - C(n-c, k) / C(n, k).

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which avoids huge binomials.

    Args:
        n: samples drawn for the task (>= 1).
        c: samples that were correct (0 <= c <= n).
        k: the k of pass@k (1 <= k <= n).

    Raises:
        ValueError: a count out of range (k > n, c > n, negatives).
    """
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs n >= 1, 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@dataclass(frozen=True)
class Estimate:
    """A mean over tasks with its bootstrap confidence interval.

    Attributes:
        value: the point estimate (mean over tasks).
        low, high: the CONFIDENCE percentile-bootstrap interval (equal to value for a
            single task or identical values).
        n: tasks the estimate is over.
    """

    value: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict:
        return asdict(self)


def bootstrap_mean(values, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Estimate:
    """Mean of `values` (shape [tasks]) with a percentile-bootstrap CI (`scipy.stats.bootstrap`).

    Raises:
        ValueError: no values.
    """
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to estimate a mean from")
    mean = float(x.mean())
    if x.size < 2 or np.all(x == x[0]):
        return Estimate(mean, mean, mean, int(x.size))
    ci = bootstrap((x,), np.mean, n_resamples=resamples, confidence_level=CONFIDENCE, method="percentile",
                   random_state=np.random.default_rng(seed), vectorized=True).confidence_interval
    return Estimate(mean, float(ci.low), float(ci.high), int(x.size))


TaskKey = tuple  # (domain, level, task_seed)


def task_results(rows: list[dict]) -> dict[TaskKey, dict]:
    """Group sample rows by task: (domain, level, task_seed) -> {"n", "c", "reward" (mean),
    "format" (mean), "calls", "valid_calls", "turns" (mean)}. Rows with a harness fault are left out.
    """
    acc: dict[TaskKey, dict] = {}
    for r in rows:
        if r.get("fault"):
            continue
        t = acc.setdefault((r["domain"], int(r["level"]), int(r["task_seed"])),
                           {"n": 0, "c": 0, "reward": 0.0, "format": 0.0, "calls": 0, "valid_calls": 0, "turns": 0.0})
        t["n"] += 1
        t["c"] += int(bool(r["correct"]))
        t["reward"] += float(r["reward"])
        t["format"] += float(r.get("format") or 0.0)
        t["calls"] += int(r.get("calls") or 0)
        t["valid_calls"] += int(r.get("valid_calls") or 0)
        t["turns"] += float(r.get("turns") or 0)
    for t in acc.values():
        for key in ("reward", "format", "turns"):
            t[key] /= t["n"]
    return acc


def metric_names(ks) -> list[str]:
    """Per-task metrics a summary reports, in display order: pass@k for each k, then the
    mean reward and the answer-format rate."""
    return [f"pass@{k}" for k in ks] + ["mean_reward", "format_rate"]


def _task_metrics(t: dict, ks) -> dict[str, float]:
    out = {f"pass@{k}": pass_at_k(t["n"], t["c"], k) for k in ks if k <= t["n"]}
    out["mean_reward"] = t["reward"]
    out["format_rate"] = t["format"]
    return out


def _per_task(rows: list[dict], ks) -> dict[TaskKey, dict[str, float]]:
    return {key: _task_metrics(t, ks) for key, t in task_results(rows).items()}


def _estimates(per_task: dict[TaskKey, dict[str, float]], keys, names, resamples: int) -> dict[str, Estimate]:
    out = {}
    for name in names:
        values = [per_task[k][name] for k in keys if name in per_task[k]]
        if values:
            out[name] = bootstrap_mean(values, resamples)
    return out


def summarize(rows: list[dict], ks=(1,), families: dict[str, str] | None = None,
              resamples: int = DEFAULT_RESAMPLES) -> dict:
    """Per-domain (and per-family) results of one evaluation.

    Args:
        rows: the evaluation's sample rows (see the module docstring).
        ks: the k values of pass@k; a task with fewer than k samples has no pass@k.
        families: domain -> family; None groups nothing.
        resamples: bootstrap resamples per interval.

    Returns:
        {"domains": {domain: {metric: Estimate, "tasks", "samples", "faults" (samples left out
        for a harness fault or a prompt over the engine's window; a task with fewer than k scored
        samples has no pass@k), "context_faults" (of which over the window), "tool_call_validity"
        (valid calls / calls, None without calls), "calls", "mean_turns"}}, "families":
        {family: {metric: Estimate, "tasks", "domains"}}, "overall": {metric: Estimate}}.
        Family and overall estimates weigh every task alike.
    """
    per_task = _per_task(rows, ks)
    stats = task_results(rows)
    names = metric_names(ks)
    faults: dict[str, int] = defaultdict(int)  # samples left out of every metric: harness faults, ...
    context: dict[str, int] = defaultdict(int)  # ... of which prompts over the engine's window (never sent)
    for r in rows:
        faults[r["domain"]] += bool(r.get("fault"))
        context[r["domain"]] += r.get("fault") == "context"
    by_domain: dict[str, list[TaskKey]] = defaultdict(list)
    for key in per_task:
        by_domain[key[0]].append(key)
    domains = {}
    for d, keys in sorted(by_domain.items()):
        calls = sum(stats[k]["calls"] for k in keys)
        domains[d] = {**_estimates(per_task, keys, names, resamples), "tasks": len(keys), "faults": faults[d],
                      "context_faults": context[d],
                      "samples": sum(stats[k]["n"] for k in keys), "calls": calls,
                      "tool_call_validity": (sum(stats[k]["valid_calls"] for k in keys) / calls) if calls else None,
                      "mean_turns": sum(stats[k]["turns"] for k in keys) / len(keys)}
    fams: dict[str, list[TaskKey]] = defaultdict(list)
    for key in per_task:
        if families is not None:
            fams[families.get(key[0], "other")].append(key)
    family_table = {f: {**_estimates(per_task, keys, names, resamples), "tasks": len(keys),
                        "domains": sorted({k[0] for k in keys})} for f, keys in sorted(fams.items())}
    overall = _estimates(per_task, list(per_task), names, resamples) if per_task else {}
    return {"domains": domains, "families": family_table, "overall": overall}


@dataclass(frozen=True)
class Delta:
    """A paired difference B - A of one metric over the tasks both evaluations share.

    Attributes:
        a, b: the two means over the shared tasks.
        delta: b - a, with its bootstrap interval `low`..`high` (tasks resampled in pairs).
        n: shared tasks.
        verdict: "regression" (the whole interval below 0), "improvement" (above 0),
            "no clear change", or "too few tasks" (under MIN_TASKS_FOR_VERDICT shared tasks).
    """

    a: float
    b: float
    delta: float
    low: float
    high: float
    n: int
    verdict: str

    def as_dict(self) -> dict:
        return asdict(self)


def paired_delta(a_values, b_values, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Delta:
    """B - A over paired per-task values (same length, same task order).

    Raises:
        ValueError: lengths differ or there are no pairs.
    """
    a, b = np.asarray(a_values, dtype=float), np.asarray(b_values, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired values need equal lengths, got {a.size} and {b.size}")
    est = bootstrap_mean(b - a, resamples, seed)
    if est.n < MIN_TASKS_FOR_VERDICT:
        verdict = "too few tasks"
    else:
        verdict = "regression" if est.high < 0 else "improvement" if est.low > 0 else "no clear change"
    return Delta(float(a.mean()), float(b.mean()), est.value, est.low, est.high, est.n, verdict)


def compare(rows_a: list[dict], rows_b: list[dict], ks=(1,), families: dict[str, str] | None = None,
            resamples: int = DEFAULT_RESAMPLES) -> dict:
    """Paired comparison of evaluation B against evaluation A (e.g. checkpoint vs base).

    Only tasks (domain, level, seed) present in both are compared, so two evaluations of
    the same suite compare task by task.

    Returns:
        {"domains": {domain: {metric: Delta}}, "families": {family: {metric: Delta}},
        "overall": {metric: Delta}, "shared_tasks": int, "only_a": int, "only_b": int,
        "ranked": [(domain, metric, Delta)] sorted by delta (worst first) over every domain
        and metric}.
    """
    ta, tb = _per_task(rows_a, ks), _per_task(rows_b, ks)
    shared = sorted(set(ta) & set(tb))
    names = metric_names(ks)

    def deltas(keys) -> dict[str, Delta]:
        out = {}
        for name in names:
            pairs = [(ta[k][name], tb[k][name]) for k in keys if name in ta[k] and name in tb[k]]
            if pairs:
                out[name] = paired_delta([p[0] for p in pairs], [p[1] for p in pairs], resamples)
        return out

    groups: dict[str, list[TaskKey]] = defaultdict(list)
    fams: dict[str, list[TaskKey]] = defaultdict(list)
    for key in shared:
        groups[key[0]].append(key)
        if families is not None:
            fams[families.get(key[0], "other")].append(key)
    domains = {d: deltas(keys) for d, keys in sorted(groups.items())}
    ranked = sorted(((d, m, v) for d, per in domains.items() for m, v in per.items()),
                    key=lambda x: (x[2].delta, x[0], x[1]))
    return {"domains": domains, "families": {f: deltas(keys) for f, keys in sorted(fams.items())},
            "overall": deltas(shared) if shared else {}, "shared_tasks": len(shared),
            "only_a": len(set(ta) - set(tb)), "only_b": len(set(tb) - set(ta)), "ranked": ranked}


def usable_context(cells: list[dict], threshold: float = 0.5, mode: str = "full", key: str = "accuracy") -> int | None:
    """Usable context length from a needle sweep (`trainer.context_length.run_sweep` cells):
    the longest haystack length L such that the model's accuracy, averaged over depths, is
    at least `threshold` at L and at every shorter length measured (RULER's reading, Hsieh
    et al. 2024). None when even the shortest length falls short or nothing was answered.
    `key` = "mention_rate" reads the looser needle-in-a-haystack score instead (the number
    anywhere in the reply, whatever the answer format).
    """
    by_len: dict[int, list[float]] = defaultdict(list)
    for c in cells:
        if c.get("mode") == mode and c.get(key) is not None:
            by_len[int(c["length"])].append(float(c[key]))
    usable = None
    for length in sorted(by_len):
        if sum(by_len[length]) / len(by_len[length]) < threshold:
            break
        usable = length
    return usable


def jsonable(obj):
    """Estimates and Deltas as dicts, tuples as lists, through any nesting: plain JSON."""
    if hasattr(obj, "as_dict"):
        return obj.as_dict()
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def domain_families(domains) -> dict[str, str]:
    """domain -> its family in the registry ("other" for a name the registry lacks)."""

    out = {}
    for d in sorted(domains):
        try:
            out[d] = get_domain(d).family
        except WorkbenchError:
            out[d] = "other"
    return out
