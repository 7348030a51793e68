"""The evaluation report over evaluations stored through the real `Store`: verdicts and their
order, intervals, the warnings, the tables, the figures and the self-contained HTML file."""

import re

import pytest

from core.errors import ConfigError, EvalNotFound
from backend.eval_html import report_figures, report_html, write_html
from backend.eval_report import build_report
from backend.eval_tables import (
    capability_rows,
    delta_rows,
    domain_rows,
    evaluation_rows,
    family_rows,
    headline_rows,
    headline_text,
    transfer_rows,
)
from backend.evaluation import summary_of
from backend.store import Store

KS = [1, 4]
SAMPLES = 4
TASKS = 12
# correct samples (of SAMPLES) per task: A the baseline, B the checkpoint
BASE = {"humaneval": 3, "chain_sum": 0, "basic_arithmetic": 2}
CHECKPOINT = {"humaneval": 0, "chain_sum": 3, "basic_arithmetic": 2}  # humaneval regresses, chain_sum improves


def eval_rows(correct: dict[str, int], tasks: int = TASKS, samples: int = SAMPLES, seed0: int = 0,
              tool: dict | None = None) -> list[dict]:
    """Sample rows: in domain d, the first correct[d] samples of every task are correct.
    `tool`: {"calls", "valid_calls", "turns"} put on every row (a tool-use domain)."""
    rows = []
    for d, c in correct.items():
        for t in range(tasks):
            for i in range(samples):
                rows.append({"domain": d, "level": 1 + t % 2, "task_seed": seed0 + t, "sample_idx": i,
                             "reward": float(i < c), "correct": int(i < c), "format": 1.0,
                             "finish_reason": "stop", **(tool or {})})
    return rows


def add_eval(store: Store, model: str, rows: list[dict], sha: str | None = None, status: str = "completed",
             extras: dict | None = None, run_id: str | None = None, step: int | None = None, ks=KS) -> str:
    """An evaluation as `rlwb eval` stores it: created, samples recorded, finished."""
    domains = sorted({r["domain"] for r in rows})
    suite = {"mix": None, "mix_pinned": {"name": "quick", "version": 2}, "domains": {d: [1, 2] for d in domains},
             "tasks_per_domain": TASKS, "samples": SAMPLES, "ks": ks, "temperature": 1.0, "top_p": 1.0,
             "max_new_tokens": 64, "seed": 0, "seed_offset": 0, "rollout_engine": "vllm"}
    identity = {"sha256": sha or (model.encode().hex() * 64)[:64], "bytes": 1000, "files": ["model.safetensors"]}
    eval_id = store.create_eval(model, f"/models/{model}", identity, suite, run_id=run_id, step=step)
    store.record_eval_samples(eval_id, rows)
    if status == "failed":
        store.finish_eval(eval_id, "failed", error="EngineError: the engine died\nTraceback ...")
    elif status == "completed":
        store.finish_eval(eval_id, "completed", summary=summary_of(rows, ks), extras=extras or {})
    return eval_id


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s.db") as s:
        yield s


@pytest.fixture
def pair(store):
    a = add_eval(store, "smollm2-135m", eval_rows(BASE))
    b = add_eval(store, "r20261130-101010-abcd:20", eval_rows(CHECKPOINT), run_id="r20261130-101010-abcd", step=20)
    return store, a, b


def test_regression_sorted_first_and_improvement_marked(pair):
    store, a, b = pair
    report = build_report(store, [a, b], resamples=200)
    domains = report["comparison"]["domains"]
    assert domains["humaneval"]["pass@1"]["verdict"] == "regression"
    assert domains["chain_sum"]["pass@1"]["verdict"] == "improvement"
    assert domains["basic_arithmetic"]["pass@1"]["verdict"] == "no clear change"
    ranked = report["comparison"]["ranked"]
    assert ranked[0]["domain"] == "humaneval" and ranked[0]["verdict"] == "regression"
    assert [r["delta"] for r in ranked] == sorted(r["delta"] for r in ranked)
    assert ranked[-1]["domain"] == "chain_sum" and ranked[-1]["verdict"] == "improvement"
    assert report["comparison"]["families"]["code"]["pass@1"]["verdict"] == "regression"
    assert report["comparison"]["shared_tasks"] == 3 * TASKS
    assert report["comparison"]["only_a"] == report["comparison"]["only_b"] == 0
    assert report["warnings"] == []
    assert report["ks"] == KS and report["k"] == 4
    assert report["sides"][1]["label"] == "r20261130-101010-abcd:20 · sha " + report["sides"][1]["identity"]["sha256"][:8]

    headline = {r["domain"]: r for r in headline_rows(report)}
    assert list(headline) == ["basic_arithmetic", "chain_sum", "humaneval", "all domains"]
    assert headline["humaneval"]["verdict"] == "regression"
    assert headline["humaneval"]["pass@1 A"].startswith("75.0%") and headline["humaneval"]["pass@1 B"].startswith("0.0%")
    assert headline["humaneval"]["Δ pass@1 [95% CI]"].startswith("-75.0 pp")
    assert headline["chain_sum"]["verdict"] == "improvement"
    assert {"pass@4 A", "pass@4 B", "mean reward A", "mean reward B"} <= set(headline["chain_sum"])
    assert delta_rows(report)[0]["verdict"] == "regression" and delta_rows(report)[0]["domain"] == "humaneval"
    assert {r["family"]: r["verdict"] for r in family_rows(report)}["code"] == "regression"
    text = headline_text(report)
    assert text.splitlines()[0].startswith("B gains beyond the best baseline on 1 of 3 domains")  # the sentence
    assert text.splitlines()[2].startswith("| domain | pass@1 A | pass@1 B |") and "regression" in text


def test_intervals_contain_their_point(store):
    # noisy per-task results so that the intervals have width
    def noisy(shift):
        rows = eval_rows({"chain_sum": 0, "basic_arithmetic": 0})
        for r in rows:
            r["correct"] = int((r["task_seed"] * 7 + r["sample_idx"] * 3 + shift) % 5 < 2)
            r["reward"] = float(r["correct"])
        return rows

    report = build_report(store, [add_eval(store, "a", noisy(0)), add_eval(store, "b", noisy(1))], resamples=300)
    widths = []
    for summary in report["summaries"]:
        for table in ("domains", "families"):
            for metrics in summary[table].values():
                for name in ("pass@1", "pass@4", "mean_reward"):
                    e = metrics[name]
                    assert e["low"] <= e["value"] <= e["high"], (name, e)
                    widths.append(e["high"] - e["low"])
    assert max(widths) > 0
    cmp = report["comparison"]
    for per in [*cmp["domains"].values(), *cmp["families"].values(), cmp["overall"]]:
        for d in per.values():
            assert d["low"] <= d["delta"] <= d["high"], d
            assert d["delta"] == pytest.approx(d["b"] - d["a"])


def test_html_is_one_self_contained_file(pair, tmp_path):
    store, a, b = pair
    (tmp_path / "reports").mkdir()
    out = tmp_path / "reports" / "out.html"
    report = write_html(store, [a, b], out, resamples=100)
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert not re.search(r"<script[^>]+src=", html) and not re.search(r"<link[^>]+href=", html)
    markup = re.sub(r"<script>.*?</script>", "", html, flags=re.DOTALL)  # the inlined plotly.js names URLs in its code
    assert "http://" not in markup and "https://" not in markup
    assert html.count("* plotly.js v") == 1 and len(html) > 1_000_000  # bundle inlined once
    assert html.count("Plotly.newPlot(") == len(report_figures(report))
    for domain in BASE:
        assert domain in html
    regression_rows = re.findall(r'<tr class="regression">(.*?)</tr>', html, re.DOTALL)
    assert regression_rows and all("humaneval" in r or "code" in r for r in regression_rows)
    assert '<tr class="improvement">' in html
    assert [p.name for p in out.parent.iterdir()] == ["out.html"]  # no temporary file left


def test_html_escapes_names(store):
    evil = add_eval(store, "<script>alert(1)</script>", eval_rows(BASE))
    html = report_html(build_report(store, [evil], resamples=50))
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_write_html_refuses_a_missing_directory(pair, tmp_path):
    store, a, b = pair
    with pytest.raises(ConfigError, match="does not exist"):
        write_html(store, [a, b], tmp_path / "nowhere" / "out.html")
    with pytest.raises(ConfigError, match="is a directory"):
        write_html(store, [a, b], tmp_path)


def test_one_evaluation_alone(store):
    a = add_eval(store, "smollm2-135m", eval_rows(BASE))
    report = build_report(store, [a], resamples=100)
    assert report["comparison"] is None and report["warnings"] == []
    rows = headline_rows(report)
    assert list(rows[0]) == ["domain", "pass@1", "best baseline", "gain above baseline [95% CI]", "pass@4",
                             "mean reward", "verdict"]
    assert {r["domain"]: r["pass@1"][:5] for r in rows}["humaneval"] == "75.0%"
    assert delta_rows(report) == []
    assert [r["domain"] for r in domain_rows(report, 0)] == sorted(BASE)
    assert [t for t, _ in report_figures(report)] == ["pass@1 per domain", "pass@4 per domain",
                                                       "pass@1 per family", "pass@4 per family"]
    html = report_html(report)
    assert "humaneval" in html and 'class="regression"' not in html and html.count("* plotly.js v") == 1


def test_no_evaluations_is_an_empty_report(store):
    report = build_report(store, [])
    assert report["sides"] == [] and report["comparison"] is None
    assert headline_rows(report) == [] and report_figures(report) == [] and capability_rows(report) == []
    assert headline_text(report) == "No completed evaluations to report."
    html = report_html(report)
    assert "No evaluations in this report" in html and "plotly.js" not in html


@pytest.mark.parametrize("status, said", [("running", "is running"), ("failed", "is failed (EngineError")])
def test_unfinished_evaluation_refused(pair, status, said):
    store, a, _ = pair
    bad = add_eval(store, "half", eval_rows(BASE), status=status)
    with pytest.raises(ConfigError, match=re.escape(said)) as err:
        build_report(store, [a, bad])
    assert bad in str(err.value) and "only completed" in str(err.value)


def test_bad_ids_refused(pair):
    store, a, b = pair
    with pytest.raises(EvalNotFound, match="e-missing"):
        build_report(store, [a, "e-missing"])
    with pytest.raises(ConfigError, match="same evaluation"):
        build_report(store, [a, a])
    with pytest.raises(ConfigError, match="at most two"):
        build_report(store, [a, b, a])


def test_differing_task_sets_and_same_weights_warned(store):
    a = add_eval(store, "base", eval_rows(BASE), sha="f" * 64)
    # B: tasks 4..15 of the three domains (8 shared per domain), plus a domain (and family) A lacks;
    # same weights
    b = add_eval(store, "base-again", eval_rows({"humaneval": 3, "chain_sum": 0, "basic_arithmetic": 2}, seed0=4)
                 + eval_rows({"tool_sql": 1}), sha="f" * 64)
    report = build_report(store, [a, b], resamples=100)
    cmp = report["comparison"]
    assert cmp["shared_tasks"] == 3 * (TASKS - 4)
    assert cmp["only_a"] == 3 * 4 and cmp["only_b"] == 3 * 4 + TASKS
    text = " ".join(report["warnings"])
    assert "task sets differ: 12 tasks only in A, 24 only in B" in text
    assert "same weights" in text
    assert {r["domain"]: r["verdict"] for r in headline_rows(report)}["tool_sql"] == "only in B"
    assert {r["family"]: r["verdict"] for r in family_rows(report)}["tool_use"] == "only in B"
    assert report_figures(report) and report_html(report)


def test_ks_shared_and_settings_difference_warned(store):
    a = add_eval(store, "a", eval_rows(BASE), ks=[1, 2])
    b = add_eval(store, "b", eval_rows(BASE), ks=[4])
    report = build_report(store, [a, b], resamples=50)
    assert report["ks"] == [1] and report["k"] is None
    assert "pass@4 A" not in headline_rows(report)[0]
    with store.db.conn:  # B sampled cooler
        suite = store.get_eval(b)["suite"]
        store.db["eval_runs"].update(b, {"suite": __import__("json").dumps({**suite, "temperature": 0.2})})
    assert any("temperature 1.0 vs 0.2" in w for w in build_report(store, [a, b], resamples=50)["warnings"])


def test_tool_multi_turn_and_context_rows(store):
    tool_a = eval_rows({"tool_sql": 2}, tool={"calls": 2, "valid_calls": 2, "turns": 3})
    tool_b = eval_rows({"tool_sql": 3}, tool={"calls": 2, "valid_calls": 1, "turns": 2})
    context = {"sweep_id": 1, "usable_tokens": 4000, "usable_tokens_retrieval": 16000,
               "lengths": [1000, 2000, 4000, 8000, 16000], "cells": [{"length": 1000}]}
    a = add_eval(store, "a", tool_a, extras={"context": context})
    b = add_eval(store, "b", tool_b)
    report = build_report(store, [a, b], resamples=100)
    rows = {r["metric"]: r for r in capability_rows(report)}
    assert rows["tool-call validity"]["A"] == f"100.0% ({2 * TASKS * SAMPLES}/{2 * TASKS * SAMPLES})"
    assert rows["tool-call validity"]["B"].startswith("50.0%")
    assert rows["multi-turn success"]["A"].startswith("50.0%") and rows["multi-turn success"]["B"].startswith("75.0%")
    assert rows["mean turns"]["A"] == "3.0"
    assert rows["usable context, full (tokens)"]["A"] == "4,000" and rows["usable context, full (tokens)"]["B"] == "—"
    assert rows["usable context, retrieval (tokens)"]["A"] == "16,000"
    assert "cells" not in report["extras"][0]["context"]
    assert domain_rows(report, 1)[0]["tool-call validity"].startswith("50.0%")
    html = report_html(report)
    assert "multi-turn success" in html and "16,000" in html


def test_evaluation_rows_list_every_status(pair):
    store, a, b = pair
    failed = add_eval(store, "broken", eval_rows(BASE), status="failed")
    rows = {r["evaluation"]: r for r in evaluation_rows(store.list_evals())}
    assert rows[failed]["status"] == "failed" and rows[failed]["error"] == "EngineError: the engine died"
    assert rows[b]["run / step"] == "r20261130-101010-abcd / 20" and rows[a]["run / step"] == "—"
    assert rows[a]["mix"] == "quick@2" and rows[a]["tasks × samples"] == f"3 domains × {TASKS} × {SAMPLES}"


def test_questions_the_run_trained_on_are_noted(tmp_path):
    store = Store(tmp_path / "s.db")
    a = add_eval(store, "base", eval_rows(BASE))
    b = add_eval(store, "ckpt", eval_rows(CHECKPOINT), extras={"seen_in_training": {
        "chain_sum": {"tasks": TASKS, "seen": 3}, "humaneval": {"tasks": TASKS, "seen": 0}}})
    notes = [w for w in build_report(store, [a, b])["warnings"] if "training run also sampled" in w]
    assert len(notes) == 1 and f"chain_sum 3/{TASKS}" in notes[0] and "humaneval" not in notes[0]
    assert not [w for w in build_report(store, [a])["warnings"] if "training run" in w]


def test_write_html_never_clobbers_what_isnt_a_new_report(pair, tmp_path):
    import os

    store, a, b = pair
    with pytest.raises(ConfigError, match="store's database"):
        write_html(store, [a, b], store.path, overwrite=True)
    assert store.list_evals()  # the store is intact
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me")
    with pytest.raises(ConfigError, match="exists; pass --force"):
        write_html(store, [a, b], existing)
    assert existing.read_text() == "keep me"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        write_html(store, [a, b], fifo, overwrite=True)
    with pytest.raises(ConfigError, match="needs a file name"):
        write_html(store, [a, b], "")
    target, link = tmp_path / "target.html", tmp_path / "link.html"
    link.symlink_to(target)
    write_html(store, [a, b], link, resamples=50)  # a link to a new file: the target is written
    assert link.is_symlink() and "<html" in target.read_text()[:300].lower()
    write_html(store, [a, b], existing, resamples=50, overwrite=True)
    assert "<html" in existing.read_text()[:300].lower()


def test_one_sentence_says_where_b_gains_and_where_not(pair, tmp_path):
    """The sentence over the headline (page, CLI, HTML) follows each domain's verdict."""
    from backend.eval_tables import summary_sentence

    store, a, b = pair
    report = build_report(store, [a, b], resamples=100)
    verdicts = {r["domain"]: r["verdict"] for r in headline_rows(report)}
    assert verdicts["chain_sum"] == "improvement" and verdicts["humaneval"] == "regression"
    sentence = summary_sentence(report)
    assert sentence.startswith("B gains beyond the best baseline on 1 of 3 domains (chain_sum); not on ")
    assert "humaneval (regression)" in sentence and f"basic_arithmetic ({verdicts['basic_arithmetic']})" in sentence
    assert sentence in headline_text(report)
    assert summary_sentence(build_report(store, [], resamples=10)) == ""


def test_transfer_splits_trained_from_unseen_domains(tmp_path):
    """B's run trained on chain_sum only (its trajectories say so): the report's transfer
    section pools the domains it never saw, per family, and counts improved/regressed."""
    store = Store(tmp_path / "s.db")
    run_id = store.create_run("broad", {"domains": ["chain_sum"]}, total_steps=20)
    store.db["trajectories"].insert_all([{"run_id": run_id, "step": s, "domain": "chain_sum", "task_seed": s,
                                          "group_idx": 0, "sample_idx": 0, "prompt": "p", "completion": "c",
                                          "answer": "1", "reward": 1.0, "breakdown": "{}"} for s in (1, 2)])
    a = add_eval(store, "base", eval_rows(BASE))
    b = add_eval(store, f"{run_id}:20", eval_rows(CHECKPOINT), run_id=run_id, step=20)
    report = build_report(store, [a, b], resamples=200)
    assert report["transfer"]["trained"] == ["chain_sum"]
    assert report["transfer"]["unseen"] == ["basic_arithmetic", "humaneval"]
    rows = {r["group"]: r for r in transfer_rows(report)}
    assert rows["trained"]["domains"] == 1 and rows["trained"]["improved"] == 1 and rows["trained"]["regressed"] == 0
    assert rows["unseen"]["domains"] == 2 and rows["unseen"]["regressed"] == 1 and rows["unseen"]["improved"] == 0
    assert rows["unseen"]["tasks"] == 2 * TASKS and rows["unseen"]["Δ [95% CI]"].startswith("-37.5 pp")
    assert {"unseen · code", "unseen · arithmetic"} <= set(rows)
    assert "Transfer: the domains B's training run trained on" in headline_text(report)
    # weights from no run: no transfer section
    assert build_report(store, [a, add_eval(store, "other", eval_rows(CHECKPOINT))])["transfer"] is None
