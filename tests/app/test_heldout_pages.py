"""The Runs page's held-out figures (interval or "too few tasks", format rate, baseline,
verdict, links) and the Evaluation page's held-out answers they link to, on scripted runs
whose in-run evaluations were recorded as the loop records them (`tests.backend.heldout_runs`)."""

from urllib.parse import parse_qs

from streamlit.testing.v1 import AppTest

from backend.store import Store
from tests.app.test_pages import MAIN, TIMEOUT, _app, _texts
from tests.backend.heldout_runs import heldout_store
from tests.backend.test_eval_report import add_eval, eval_rows

EVAL_PAGE = "screens/evaluation.py"


def _runs_page(db, monkeypatch, run_id: str) -> AppTest:
    at = _app(db, monkeypatch)
    at.selectbox(key="runs_run").select(run_id).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _table(at: AppTest, column: str):
    """The page's first table with `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _links(at: AppTest) -> dict[str, dict]:
    """label -> query of the page's links to the Evaluation page."""
    return {e.proto.label: {k: v[0] for k, v in parse_qs(e.proto.query_string).items()}
            for e in at.get("page_link") if "evaluation" in e.proto.page}


def test_the_runs_page_gives_each_held_out_figure_its_interval_baseline_verdict_and_link(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    rid, ids = heldout_store(db, tasks=12)
    at = _runs_page(db, monkeypatch, rid)
    assert "Held-out evaluation" in _texts(at)
    rows = _table(at, "accuracy before").set_index("domain")
    arith = rows.loc["basic_arithmetic"]
    assert arith["accuracy before"] == "0.0% [0.0, 0.0]" and arith["accuracy after"] == "100.0% [100.0, 100.0]"
    assert arith["format rate"] == "100% → 100%"
    assert arith["best baseline"].startswith("answering '") and arith["verdict"] == "improvement"
    assert rows.loc["chain_sum", "verdict"].startswith("no gain beyond answering '")
    assert "greedy" in _texts(at) and "`rlwb eval` samples several completions" in _texts(at)
    links = _links(at)
    assert links["chain_sum: held-out answers"] == {"a": ids["before"], "b": ids["after"], "domain": "chain_sum"}
    assert links["Full comparison and held-out answers (Evaluation page)"] == {"a": ids["before"], "b": ids["after"]}


def test_the_runs_page_says_too_few_tasks_instead_of_an_interval(tmp_path, monkeypatch):
    db = tmp_path / "few.db"
    rid, _ = heldout_store(db, tasks=3)
    rows = _table(_runs_page(db, monkeypatch, rid), "accuracy before").set_index("domain")
    assert rows.loc["chain_sum", "accuracy after"].endswith("(too few tasks: 3)")
    assert set(rows["verdict"]) == {"too few tasks"}


def test_the_runs_page_lists_its_checkpoints_rlwb_evaluations(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    rid, _ = heldout_store(db, tasks=12)
    with Store(db) as store:
        ckpt = add_eval(store, f"{rid}:4", eval_rows({"chain_sum": 1}), run_id=rid, step=4)
    at = _runs_page(db, monkeypatch, rid)
    listed = _table(at, "pass@1 (sampled)")
    assert list(listed["evaluation"]) == [ckpt] and list(listed["step"]) == [4]
    assert "samples, T=1.0" in listed["setting"][0]
    assert _links(at)[f"{ckpt} (step 4)"] == {"b": ckpt}


def _evaluation_page(db, monkeypatch, **query) -> AppTest:
    monkeypatch.setenv("RLWB_DB", str(db))
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run().switch_page(EVAL_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _completions(at: AppTest) -> list[str]:
    return [c.value for c in at.code]


def test_a_held_out_link_opens_the_answers_before_and_after_side_by_side(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    rid, ids = heldout_store(db, tasks=12)
    at = _evaluation_page(db, monkeypatch, a=ids["before"], b=ids["after"], domain="chain_sum")
    assert at.toggle(key="eval_in_run").value  # the link names in-run evaluations
    assert at.selectbox(key="eval_a").value == ids["before"] and at.selectbox(key="eval_b").value == ids["after"]
    assert at.selectbox(key="eval_answers_domain").value == "chain_sum"
    table = _table(at, "answer A")
    assert len(table) == 12 and {"answer A", "answer B", "correct A", "correct B", "reference"} <= set(table.columns)
    first = table.iloc[0]
    assert first["answer A"] == "0" and first["answer B"] == first["reference"] and first["correct B"] == "right"
    shown = _completions(at)  # the question, the prompt's messages, then A's and B's completions of the same task
    assert shown[0].startswith("State the final answer") and shown[2:] == [
        "Let me think.\nAnswer: 0", f"Let me think.\nAnswer: {first['reference']}"]
    assert shown[1].startswith("system: ") and f"user: {shown[0]}\n" in shown[1]
    assert f"seed {first['seed']}" in _texts(at)

    at.selectbox(key="eval_answers_filter").select("wrong after").run()
    wrong = _table(at, "answer A")
    assert len(wrong) == 6 and set(wrong["correct B"]) == {"wrong"} and set(wrong["answer B"]) == {"0"}
    assert _completions(at)[2] == "Let me think.\nAnswer: 0"


def test_in_run_evaluations_are_hidden_until_asked_for(tmp_path, monkeypatch):
    db = tmp_path / "held.db"
    heldout_store(db, tasks=12)
    at = _app(db, monkeypatch, EVAL_PAGE)
    assert "3 in-run evaluations of training runs are hidden" in at.info[0].value
    at.toggle(key="eval_in_run").set_value(True).run()
    listed = _table(at, "kind")
    assert set(listed["kind"]) == {"in-run before, greedy", "in-run step-2, greedy", "in-run after, greedy"}
    assert "(in-run, greedy)" in at.selectbox(key="eval_b").format_func(at.selectbox(key="eval_b").value)
