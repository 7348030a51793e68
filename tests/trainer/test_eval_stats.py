"""pass@k, bootstrap intervals, summaries and paired comparisons (trainer/eval_stats.py)."""

import math
import random

import numpy as np
import pytest

from trainer.eval_stats import (
    bootstrap_mean, compare, paired_delta, pass_at_k, summarize, task_results, usable_context,
)


def test_pass_at_k_matches_the_closed_form_on_every_small_count():
    for n in range(1, 31):
        for c in range(n + 1):
            for k in range(1, n + 1):
                closed = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12), (n, c, k)


def test_pass_at_k_on_large_counts_where_binomials_overflow_floats():
    n, c, k = 2000, 3, 100
    closed = 1 - math.comb(n - c, k) / math.comb(n, k)  # exact integers, then one division
    assert pass_at_k(n, c, k) == pytest.approx(closed, rel=1e-9)


def test_pass_at_1_is_the_share_correct_and_edges():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 8, 1) == 1.0
    assert pass_at_k(8, 1, 8) == 1.0  # n - c < k: some draw of k always holds the correct one


def test_pass_at_k_is_unbiased_for_the_true_pass_at_k():
    # tasks with success probability p; the estimator averaged over many tasks approaches 1 - (1-p)^k
    rng = np.random.default_rng(0)
    n, k = 10, 4
    for p in (0.05, 0.3, 0.7):
        counts = rng.binomial(n, p, size=20_000)
        mean = np.mean([pass_at_k(n, int(c), k) for c in counts])
        assert mean == pytest.approx(1 - (1 - p) ** k, abs=0.01)


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 2, 5), (4, 2, 0)])
def test_pass_at_k_rejects_counts_out_of_range(n, c, k):
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_bootstrap_interval_holds_the_mean_and_narrows_with_more_tasks():
    rng = random.Random(0)
    small = bootstrap_mean([rng.random() < 0.4 for _ in range(20)])
    large = bootstrap_mean([rng.random() < 0.4 for _ in range(2000)])
    for e in (small, large):
        assert e.low <= e.value <= e.high
    assert (large.high - large.low) < (small.high - small.low) / 3
    assert large.low < 0.4 < large.high
    same = bootstrap_mean([1.0] * 5)
    assert (same.value, same.low, same.high, same.n) == (1.0, 1.0, 1.0, 5)
    with pytest.raises(ValueError):
        bootstrap_mean([])


def _rows(domain: str, tasks: int, samples: int, p_correct, seed: int = 0, level: int = 1) -> list[dict]:
    """Synthetic sample rows: task t of `domain` solved by each sample with probability p_correct(t)."""
    rng = random.Random(seed)
    rows = []
    for t in range(tasks):
        for i in range(samples):
            ok = rng.random() < p_correct(t)
            rows.append({"domain": domain, "level": level, "task_seed": 1_000_000_000 + t, "sample_idx": i,
                         "reward": 0.2 + 0.8 * ok, "correct": int(ok), "format": 1.0})
    return rows


def test_summarize_per_domain_family_and_overall():
    rows = _rows("a", 30, 8, lambda t: 0.5) + _rows("b", 30, 8, lambda t: 0.0, seed=1)
    rows.append({**rows[0], "sample_idx": 99, "correct": 1, "fault": "harness"})  # a fault is left out
    out = summarize(rows, ks=(1, 8), families={"a": "fam", "b": "fam"})
    a, b = out["domains"]["a"], out["domains"]["b"]
    assert a["tasks"] == 30 and a["samples"] == 240
    correct_a = sum(r["correct"] for r in rows if r["domain"] == "a" and not r.get("fault"))
    assert a["pass@1"].value == pytest.approx(correct_a / 240)
    assert a["pass@8"].value >= a["pass@1"].value
    assert b["pass@1"].value == 0.0 and b["pass@8"].value == 0.0
    assert out["families"]["fam"]["tasks"] == 60
    assert out["overall"]["pass@1"].value == pytest.approx((a["pass@1"].value + b["pass@1"].value) / 2)
    assert a["tool_call_validity"] is None


def test_task_results_counts_tool_calls_and_turns():
    rows = [{"domain": "t", "level": 1, "task_seed": 5, "sample_idx": i, "reward": 1.0, "correct": 1,
             "calls": 2, "valid_calls": i % 2 + 1, "turns": 3} for i in range(4)]
    t = task_results(rows)[("t", 1, 5)]
    assert (t["n"], t["c"], t["calls"], t["valid_calls"], t["turns"]) == (4, 4, 8, 6, 3.0)
    assert summarize(rows)["domains"]["t"]["tool_call_validity"] == pytest.approx(6 / 8)


def test_compare_finds_the_regression_and_the_improvement_and_ranks_them():
    base = _rows("up", 40, 8, lambda t: 0.1) + _rows("down", 40, 8, lambda t: 0.8, seed=1) + \
        _rows("flat", 40, 8, lambda t: 0.5, seed=2)
    ckpt = _rows("up", 40, 8, lambda t: 0.7, seed=3) + _rows("down", 40, 8, lambda t: 0.1, seed=4) + \
        _rows("flat", 40, 8, lambda t: 0.5, seed=2)
    out = compare(base, ckpt, ks=(1, 8))
    assert out["domains"]["up"]["pass@1"].verdict == "improvement"
    assert out["domains"]["down"]["pass@1"].verdict == "regression"
    flat = out["domains"]["flat"]["pass@1"]
    assert flat.delta == 0.0 and flat.verdict == "no clear change"
    worst = out["ranked"][0]
    assert worst[0] == "down" and worst[2].delta < -0.5
    d = out["domains"]["down"]["pass@1"]
    assert d.low <= d.delta <= d.high and d.delta == pytest.approx(d.b - d.a)
    assert out["shared_tasks"] == 120 and out["only_a"] == out["only_b"] == 0


def test_compare_pairs_only_shared_tasks():
    a = _rows("x", 10, 4, lambda t: 0.5)
    b = [r for r in _rows("x", 10, 4, lambda t: 0.5) if r["task_seed"] < 1_000_000_006]
    out = compare(a, b)
    assert out["shared_tasks"] == 6 and out["only_a"] == 4 and out["only_b"] == 0
    assert out["domains"]["x"]["pass@1"].n == 6


def test_no_verdict_from_a_handful_of_tasks():
    # three tasks each one sample worse: the interval collapses to a point, but 3 tasks settle nothing
    d = paired_delta([1.0, 0.5, 0.25], [0.875, 0.375, 0.125])
    assert d.low == d.high and d.verdict == "too few tasks"
    many = paired_delta([0.5] * 10, [0.375] * 10)
    assert many.verdict == "regression"


def test_faults_are_counted_and_left_out():
    rows = _rows("x", 2, 4, lambda t: 1.0 if t == 0 else 0.0)
    rows[0] = {**rows[0], "fault": "harness"}
    out = summarize(rows, ks=(1, 4))["domains"]["x"]
    assert out["faults"] == 1 and out["samples"] == 7
    assert out["pass@1"].n == 2 and out["pass@4"].n == 1  # task 0 has 3 scored samples: no pass@4


def test_usable_context_is_the_longest_length_before_the_first_failure():
    cells = [{"mode": "full", "length": n, "depth": d, "accuracy": acc}
             for n, acc in ((1000, 1.0), (2000, 0.75), (4000, 0.25), (8000, 0.9)) for d in (10, 90)]
    cells.append({"mode": "retrieval", "length": 8000, "depth": 10, "accuracy": 1.0})
    assert usable_context(cells) == 2000  # 8000 passes again, but 4000 failed first
    assert usable_context(cells, threshold=0.9) == 1000
    assert usable_context(cells, mode="retrieval") == 8000
    assert usable_context([{"mode": "full", "length": 1000, "accuracy": 0.0}]) is None
    assert usable_context([]) is None


def test_usable_context_by_mention_rate():
    cells = [{"mode": "full", "length": n, "accuracy": 0.0, "mention_rate": m}
             for n, m in ((1000, 1.0), (2000, 0.5), (4000, 0.0))]
    assert usable_context(cells) is None
    assert usable_context(cells, key="mention_rate") == 2000
