"""The Evaluation page with AppTest over stores holding 0, 1 and 2+ completed evaluations
(written through the real `Store`, as `rlwb eval` writes them)."""

import json
import re

from backend.store import Store
from tests.app.test_pages import _app, _texts
from tests.backend.test_eval_report import BASE, CHECKPOINT, add_eval, eval_rows

PAGE = "screens/evaluation.py"
RED, GREEN = "#f8d0d0", "#d4f0d4"  # app.screens.evaluation.ROW_COLORS


TABLES = {  # the page's tables by their first column and columns they have or lack
    "list": ("evaluation", {"status"}, set()),
    "headline": ("domain", set(), {"metric", "samples"}),
    "deltas": ("domain", {"metric"}, set()),
    "baselines": ("domain", {"best constant"}, set()),
}


def _element(at, name: str):
    first, has, lacks = TABLES[name]
    for d in at.dataframe:
        cols = list(d.value.columns)
        if cols and cols[0] == first and has <= set(cols) and not lacks & set(cols):
            return d
    raise AssertionError(f"no {name} table among {[list(d.value.columns) for d in at.dataframe]}")


def _table(at, name: str):
    return _element(at, name).value


def _rows_colored(element, color: str) -> set[int]:
    """Row numbers the table's pandas Styler paints `color`."""
    rows = set()
    for rule in element.proto.arrow_data.styler.styles.splitlines():
        if color in rule:
            rows |= {int(n) for n in re.findall(r"_row(\d+)_col", rule)}
    return rows


def _page_texts(at) -> str:
    return _texts(at) + "\n" + "\n".join(w.value for w in at.warning)


def test_no_evaluations_points_at_the_command(tmp_path, monkeypatch):
    at = _app(tmp_path / "empty.db", monkeypatch, PAGE)
    assert at.title[0].value == "Evaluation"
    assert "rlwb eval smollm2-135m --mix NAME" in at.info[0].value
    assert not at.dataframe and not at.get("download_button")
    shows = at.caption[0].value  # one sentence: what the quickstart does and does not show
    assert "learns the Answer: format" in shows and "does not show general arithmetic" in shows


def test_only_unfinished_evaluations_are_listed_not_reported(tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    with Store(db) as store:
        broken = add_eval(store, "broken-model", eval_rows(BASE), status="failed")
    at = _app(db, monkeypatch, PAGE)
    listed = _table(at, "list")
    assert list(listed["evaluation"]) == [broken] and list(listed["status"]) == ["failed"]
    assert "EngineError: the engine died" in listed["error"][0]
    assert "rlwb eval smollm2-135m --mix NAME" in at.info[0].value
    assert not at.get("download_button")


def test_one_evaluation_alone(tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    with Store(db) as store:
        add_eval(store, "smollm2-135m", eval_rows(BASE))
    at = _app(db, monkeypatch, PAGE)
    assert not [b for b in at.selectbox if b.key in ("eval_a", "eval_b")]  # nothing to pick
    assert "its results alone" in _page_texts(at)
    headline = _table(at, "headline")
    assert list(headline.columns) == ["domain", "pass@1", "best baseline", "gain above baseline [95% CI]", "pass@4",
                                      "mean reward", "verdict"]
    assert list(headline["domain"]) == ["basic_arithmetic", "chain_sum", "humaneval", "all domains"]
    assert headline.set_index("domain").loc["humaneval", "pass@1"].startswith("75.0%")
    assert headline.set_index("domain").loc["basic_arithmetic", "best baseline"].startswith("answering '")
    assert list(_table(at, "baselines")["domain"]) == ["basic_arithmetic", "chain_sum"]  # humaneval has none
    assert len(at.get("plotly_chart")) == 4  # pass@1 and pass@4 per domain and per family
    assert len(at.get("download_button")) == 1


def test_two_evaluations_compared_with_the_regression_shown(tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    with Store(db) as store:
        base = add_eval(store, "smollm2-135m", eval_rows(BASE))
        add_eval(store, "half-done", eval_rows(BASE), status="running")  # listed, not selectable
        ckpt = add_eval(store, "r20261130-101010-abcd:20", eval_rows(CHECKPOINT), run_id="r20261130-101010-abcd",
                        step=20)
    at = _app(db, monkeypatch, PAGE)
    assert len(_table(at, "list")) == 3
    a, b = at.selectbox(key="eval_a"), at.selectbox(key="eval_b")
    assert a.value == base and b.value == ckpt  # B the newest, A the one before
    assert len(a.options) == 2 and not any("half-done" in o for o in a.options)
    headline = _table(at, "headline").set_index("domain")
    assert headline.loc["humaneval", "verdict"] == "regression"
    assert headline.loc["chain_sum", "verdict"] == "improvement"
    assert headline.loc["humaneval", "Δ pass@1 [95% CI]"].startswith("-75.0 pp")
    assert any(m.value.startswith("**B gains beyond the best baseline on 1 of 3 domains (chain_sum); not on ")
               for m in at.markdown)  # the one sentence over the headline
    red, green = _rows_colored(_element(at, "headline"), RED), _rows_colored(_element(at, "headline"), GREEN)
    assert red == {list(headline.index).index("humaneval")} and green == {list(headline.index).index("chain_sum")}
    deltas = _table(at, "deltas")
    assert deltas.iloc[0]["domain"] == "humaneval" and deltas.iloc[0]["verdict"] == "regression"
    assert _rows_colored(_element(at, "deltas"), RED) == set(deltas.index[deltas["verdict"] == "regression"])
    charts = at.get("plotly_chart")
    assert len(charts) == 5
    delta_fig = json.loads(charts[-1].proto.spec)
    bars = delta_fig["data"][0]
    assert bars["y"][0].startswith("humaneval") and bars["marker"]["color"][0] == "#d62728"  # red, on top
    assert len(at.get("download_button")) == 1

    at.button(key="eval_swap").click().run()  # swap: the checkpoint becomes the baseline
    assert not at.exception
    assert at.selectbox(key="eval_a").value == ckpt and at.selectbox(key="eval_b").value == base
    swapped = _table(at, "headline").set_index("domain")
    assert swapped.loc["humaneval", "verdict"] == "improvement"
    assert swapped.loc["chain_sum", "verdict"] == "regression"

    at.selectbox(key="eval_b").select(ckpt).run()  # the same evaluation on both sides
    assert not at.exception
    assert "same evaluation" in _page_texts(at)
    assert "Δ pass@1 [95% CI]" not in _table(at, "headline").columns
