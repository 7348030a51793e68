"""Baselines in the evaluation report: synthetic models (sample rows scored by the real
verifiers, no model) that answer a constant, the right answer, or a copy of the question are
judged against the best constant answer and copying from the question, not against zero."""

import pytest

from backend.baselines import (
    COPY_RULES,
    copy_answer,
    domain_baselines,
    forgiven_answer,
    is_copied,
    judge,
    question_parts,
    suite_baselines,
)
from domains.contract import FORMAT_WEIGHT, PASS_THRESHOLD
from domains.registry import get_domain
from domains.splits import heldout_seeds
from backend.eval_html import report_html
from backend.eval_report import build_report
from backend.eval_tables import baselines_table, headline_rows, headline_text
from backend.evaluation import baseline_extras, summary_of
from backend.store import Store

TASKS = 40
SAMPLES = 2


def tasks_of(name: str, level: int = 1, n: int = TASKS):
    domain = get_domain(name)
    return domain, [domain.make_task(seed, level) for seed in heldout_seeds(n)]


def model_rows(name: str, answer, level: int = 1, n: int = TASKS, reply=None) -> list[dict]:
    """Sample rows of a synthetic model whose reply to a task is `answer(task)` in the
    domain's format (or `reply(task)`, any text), scored by the domain's own verifier, as
    `rlwb eval` stores them."""
    domain, tasks = tasks_of(name, level, n)
    rows = []
    for t in tasks:
        for i in range(SAMPLES):
            completion = reply(t) if reply else f"Let me think.\n{domain.wrap_answer(answer(t))}"
            reward, b = domain.score(t, completion)
            rows.append({"domain": name, "level": t.difficulty, "task_seed": t.seed, "sample_idx": i,
                         "reward": reward, "correct": int(b["correct"] >= PASS_THRESHOLD), "format": b["format"],
                         "finish_reason": "stop", "completion": completion})
    return rows


def add_eval(store: Store, model: str, rows: list[dict], extras: dict | None = None) -> str:
    suite = {"mix": None, "mix_pinned": None, "domains": {r["domain"]: [1, 1] for r in rows},
             "tasks_per_domain": TASKS, "samples": SAMPLES, "ks": [1], "temperature": 1.0, "top_p": 1.0,
             "max_new_tokens": 64, "seed": 0, "seed_offset": 0, "rollout_engine": "vllm"}
    eval_id = store.create_eval(model, f"/models/{model}", {"sha256": model.encode().hex().ljust(64, "0")}, suite)
    store.record_eval_samples(eval_id, rows)
    store.finish_eval(eval_id, "completed", summary=summary_of(rows, [1]), extras=extras or {})
    return eval_id


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s.db") as s:
        yield s


def headline(report) -> dict:
    return {r["domain"]: r for r in headline_rows(report)}


def test_answering_one_every_time_is_no_gain_beyond_the_constant(store):
    rows = model_rows("letter_counting", lambda t: "1")
    report = build_report(store, [add_eval(store, "always-one", rows)], resamples=200)
    table = report["baselines"][0]["letter_counting"]
    # "1" is the most common reference of these held-out tasks, and the best constant
    refs = [t.answer for t in tasks_of("letter_counting")[1]]
    assert table["constant"]["answer"] == "1" and refs.count("1") == max(refs.count(a) for a in set(refs))
    solved = sum(r["correct"] for r in rows) / len(rows)
    assert solved > 0.4 and table["constant"]["accuracy"] == pytest.approx(solved)  # the verifier's count
    assert table["format_reward"] == pytest.approx(FORMAT_WEIGHT)
    assert table["answers"]["modal"] == "1" and table["answers"]["modal_share"] == 1.0

    row = headline(report)["letter_counting"]
    assert row["verdict"] == "no gain beyond answering '1' every time"
    assert row["best baseline"] == f"answering '1' every time: {100 * solved:.1f}%"
    assert row["gain above baseline [95% CI]"].startswith("+0.0 pp")
    text = headline_text(report)
    assert "no gain beyond answering '1' every time" in text
    assert "100% of its letter_counting answers are '1'" in text  # the collapse is called out
    html = report_html(report)
    assert "Baselines" in html and "no gain beyond answering &#39;1&#39; every time" in html


def test_a_model_that_answers_correctly_is_an_improvement(store):
    rows = model_rows("letter_counting", lambda t: t.answer)
    report = build_report(store, [add_eval(store, "oracle", rows)], resamples=200)
    row = headline(report)["letter_counting"]
    assert row["pass@1"].startswith("100.0%") and row["verdict"] == "improvement"
    gain = report["verdicts"]["domains"]["letter_counting"]["gain"]
    constant = report["baselines"][0]["letter_counting"]["constant"]["accuracy"]
    assert gain["low"] > 0 and gain["delta"] == pytest.approx(1 - constant)
    assert headline(report)["all domains"]["verdict"] == "improvement"
    assert "collapse" not in headline_text(report)


def test_copying_from_the_question_is_detected(store):
    # prime_factorization: the question's first number is sometimes prime, so copying it
    # beats every constant answer; a model that copies it gains nothing beyond the copy rule
    rows = model_rows("prime_factorization", lambda t: copy_answer(t.question, "first number"))
    report = build_report(store, [add_eval(store, "copier", rows)], resamples=200)
    table = report["baselines"][0]["prime_factorization"]
    assert table["copy"]["rule"] == "first number" and table["copy"]["accuracy"] > table["constant"]["accuracy"]
    assert table["answers"]["copied_share"] == 1.0
    row = headline(report)["prime_factorization"]
    assert row["verdict"] == "no gain beyond copying the question's first number"
    assert row["best baseline"].startswith("copying the question's first number: ")
    text = headline_text(report)
    assert "100% of its prime_factorization answers are copied from the question" in text
    assert baselines_table(report)[0]["copied from the question"] == "100%"


def test_checkpoint_above_its_base_but_not_above_the_constant(store):
    """A/B: the base answers at random, the checkpoint answers '1' every time: a clear gain
    over A, none beyond the constant."""
    base = model_rows("letter_counting", lambda t: "7")
    ckpt = model_rows("letter_counting", lambda t: "1")
    a, b = add_eval(store, "base", base), add_eval(store, "ckpt", ckpt)
    report = build_report(store, [a, b], resamples=200)
    assert report["comparison"]["domains"]["letter_counting"]["pass@1"]["verdict"] == "improvement"
    row = headline(report)["letter_counting"]
    assert row["verdict"] == "no gain beyond answering '1' every time"
    assert row["best baseline"].startswith("answering '1' every time")
    assert {"most common answer A", "most common answer B"} <= set(baselines_table(report)[0])


def test_a_checkpoint_that_learned_only_the_format_gains_nothing_beyond_its_base(store):
    """The base knows the sums but never writes the `Answer:` line (0% strictly); the
    checkpoint writes the line with the same sums: its gain over A is the format alone, and
    the verdict says so. One that also fixes the base's wrong sums is an improvement."""
    def knows(t):  # right on even seeds, off by one on odd ones
        return t.answer if t.seed % 2 == 0 else str(int(t.answer) + 1)

    base = model_rows("chain_sum", None, reply=lambda t: f"The sum is {knows(t)}.")
    same = model_rows("chain_sum", knows)
    better = model_rows("chain_sum", lambda t: t.answer)
    a = add_eval(store, "base", base)
    assert sum(r["correct"] for r in base) == 0
    report = build_report(store, [a, add_eval(store, "format-only", same)], resamples=200)
    forgiven = report["baselines"][0]["chain_sum"]["forgiven"]
    assert forgiven["accuracy"] == pytest.approx(0.5) and len(forgiven["scores"]) == TASKS
    assert report["comparison"]["domains"]["chain_sum"]["pass@1"]["verdict"] == "improvement"  # vs A, strictly
    row = headline(report)["chain_sum"]
    assert row["verdict"] == "no gain beyond the base model's own last number (format forgiven)"
    assert row["best baseline"] == "the base model's own last number (format forgiven): 50.0%"
    assert row["gain above baseline [95% CI]"].startswith("+0.0 pp")
    assert baselines_table(report)[0]["last number, format forgiven A"] == "50.0%"

    report = build_report(store, [a, add_eval(store, "learned", better)], resamples=200)
    verdict = report["verdicts"]["domains"]["chain_sum"]
    assert verdict["verdict"] == "improvement" and verdict["gain"]["delta"] == pytest.approx(0.5)


def test_forgiven_answer_reads_the_last_number_of_numeric_references_only():
    domain, (task,) = tasks_of("chain_sum", n=1)
    assert forgiven_answer(task, "3 + 4 = 7, so 7") == "7" and forgiven_answer(task, "no idea") is None
    word = get_domain("spell_backward").make_task(heldout_seeds(1)[0], 1)
    assert forgiven_answer(word, "It is 42") is None  # a word reference: nothing to forgive


def test_stored_baselines_are_used_and_match_the_regenerated_ones(store):
    rows = model_rows("letter_counting", lambda t: "2")
    domain, tasks = tasks_of("letter_counting")
    extras = baseline_extras(rows, {"letter_counting": tasks})
    assert extras["baselines"] == suite_baselines(rows)  # regenerated from the seeds: the same
    assert extras["baseline_verdicts"]["domains"]["letter_counting"]["verdict"].startswith("below answering '1'")
    extras["baselines"]["letter_counting"]["constant"]["answer"] = "stored"
    report = build_report(store, [add_eval(store, "two", rows, extras=extras)], resamples=100)
    assert report["baselines"][0]["letter_counting"]["constant"]["answer"] == "stored"


def test_a_generator_changed_since_the_evaluation_gives_no_baseline_rather_than_a_wrong_one(store):
    """Rows keep their task's reference answer: when the regenerated task's differs (the
    generator changed), the domain gets no baseline instead of one over other tasks."""
    rows = [{**r, "answer": get_domain("chain_sum").make_task(r["task_seed"], r["level"]).answer}
            for r in model_rows("chain_sum", lambda t: "1")]
    assert "chain_sum" in suite_baselines(rows)  # the stored answers match: baselines as before
    changed = [{**r, "answer": "not what the generator gives now"} if i == 0 else r for i, r in enumerate(rows)]
    assert "chain_sum" not in suite_baselines(changed)
    eval_id = add_eval(store, "m", rows)
    assert {r["answer"] for r in store.eval_samples(eval_id)} == {r["answer"] for r in rows}  # stored and read back


def test_multi_turn_and_sandboxed_domains_have_no_baselines():
    rows = [{"domain": d, "level": 1, "task_seed": 0, "sample_idx": 0, "reward": 0.0, "correct": 0}
            for d in ("humaneval", "tool_sql", "no_such_domain")]
    assert suite_baselines(rows) == {}


def test_copy_rules_and_copied_answers():
    q = 'How many times does the letter "u" appear in the text: "free 12 works" -3?'
    assert question_parts(q)["numbers"] == ["12", "-3"] and question_parts(q)["quoted"] == ["u", "free 12 works"]
    assert [copy_answer(q, r) for r in COPY_RULES] == ["12", "-3", "How", "works", "u", "free 12 works"]
    assert copy_answer("Spell this", "first number") is None
    assert is_copied("Works", q) and is_copied(" -3", q) and not is_copied("7", q) and not is_copied(None, q)
    domain, tasks = tasks_of("spell_backward", n=12)
    b = domain_baselines(domain, tasks)
    assert b["tasks"] == 12 and b["answers"] is None and b["copy"]["accuracy"] == 0.0


@pytest.mark.parametrize("gain, vs_base, want", [
    ({"n": 40, "low": 0.01, "high": 0.2}, None, "improvement"),
    ({"n": 40, "low": -0.1, "high": 0.1}, None, "no gain beyond X"),
    ({"n": 40, "low": -0.3, "high": -0.1}, None, "below X"),
    ({"n": 5, "low": 0.1, "high": 0.2}, None, "too few tasks"),
    ({"n": 40, "low": 0.1, "high": 0.2}, {"n": 40, "low": -0.3, "high": -0.1}, "regression"),
    ({"n": 40, "low": 0.1, "high": 0.2}, {"n": 40, "low": -0.1, "high": 0.1}, "no clear change"),
    ({"n": 40, "low": -0.1, "high": 0.1}, {"n": 40, "low": 0.1, "high": 0.2}, "no gain beyond X"),
    (None, {"n": 40, "low": 0.1, "high": 0.2}, "improvement"),
    (None, None, None),
])
def test_judge(gain, vs_base, want):
    assert judge(gain, "X", vs_base) == want


def test_rlwb_eval_show_prints_the_baselines_and_the_verdict(tmp_path, capsys):
    from backend.cli import main

    rows = model_rows("letter_counting", lambda t: "1")
    db = tmp_path / "s.db"
    with Store(db) as store:
        _, tasks = tasks_of("letter_counting")
        eval_id = add_eval(store, "always-one", rows, extras=baseline_extras(rows, {"letter_counting": tasks}))
    assert main(["--db", str(db), "eval", "show", eval_id]) == 0
    out = capsys.readouterr().out
    assert "constant '1'" in out and "format-only reward 0.20" in out
    assert "gain +0.000 [+0.00, +0.00]: no gain beyond answering '1' every time" in out
    assert "100% of its letter_counting answers are '1'" in out
    assert main(["--db", str(db), "eval", "report", eval_id]) == 0
    assert "no gain beyond answering '1' every time" in capsys.readouterr().out


@pytest.mark.slow
def test_rlwb_eval_stores_the_baselines_of_the_tasks_it_played(tmp_path, tiny_model_dir):
    """A real `evaluate_model` (tiny model, HF engine, ~20 s): the baselines of the tasks it
    played go with the result, equal to those regenerated from its stored rows."""
    from backend.evaluation import evaluate_model, parse_settings

    with Store(tmp_path / "s.db") as store:
        settings = parse_settings({"domains": ["letter_counting"], "tasks_per_domain": 12, "samples": 1, "ks": [1],
                                   "max_new_tokens": 4, "rollout_engine": "hf", "context_sweep": False})
        eval_id = evaluate_model(store, str(tiny_model_dir), settings)
        extras = store.get_eval(eval_id)["extras"]
        regenerated = suite_baselines(store.eval_samples(eval_id, with_completions=True))
    b = extras["baselines"]["letter_counting"]
    assert b == regenerated["letter_counting"]
    assert b["tasks"] == 12 and b["constant"]["answer"] == "1" and b["answers"]["samples"] == 12
    assert extras["baseline_verdicts"]["domains"]["letter_counting"]["verdict"]


def test_half_of_the_answers_alike_is_not_called_a_collapse():
    from backend.baselines import answer_warnings

    def table(modal_share, copied_share):
        return {"chain_sum": {"answers": {"modal": "4", "modal_share": modal_share, "copied_share": copied_share},
                              "constant": {"answer": "7", "accuracy": 0.1}, "copy": {"rule": "last", "accuracy": 0.0}}}

    assert answer_warnings("m", table(0.5, 0.5)) == []  # two different answers out of two
    notes = answer_warnings("m", table(0.51, 0.51))
    assert len(notes) == 2 and "51% of its chain_sum answers are '4'" in notes[0] and "copied" in notes[1]
