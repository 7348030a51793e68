"""The Domains page with AppTest: catalogue and filters, one domain in detail (sample task,
try-the-verifier, validation report and its plots, Validate now) and the mix editor."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from domains.registry import get_domain, registry
from backend.store import Store
from tests.app.test_pages import _app

PAGE = "screens/domains.py"


def _report(domain: str, passed: bool, reasons: list[str] | None = None) -> dict:
    """A validation report of the documented shape (3 levels), as `validate` returns it."""
    levels = [{"level": lv, "n": 30, "gen_ms_per_task": 0.02 * lv, "distinct_per_100": 100.0,
               "distinct_prompts_per_100": 90.0 + lv,
               "prompt_chars": {"min": 60 + lv, "p10": 65 + lv, "p50": 70 + 5 * lv, "p90": 80 + 5 * lv,
                                "max": 90 + 5 * lv, "mean": 72.0 + 5 * lv},
               "deterministic": True, "reference_pass": 5, "reference_n": 5, "wrong_rejected": 10, "wrong_n": 10,
               "blank_zero": 20, "blank_n": 20, "malformed_zero": 30, "malformed_n": 30, "verifier_errors": 0,
               "problems": []} for lv in (1, 2, 3)]
    return {"domain": domain, "family": "arithmetic", "kind": "single_turn", "passed": passed,
            "reasons": reasons or [], "levels": levels, "n_tasks": 30, "duration_s": 0.5,
            "cross_process_deterministic": True}


def _db(tmp_path, reports=()):
    path = tmp_path / "domains.db"
    with Store(path) as store:
        for r in reports:
            store.record_validation(r)
    return path


def _open(path, monkeypatch) -> AppTest:
    return _app(path, monkeypatch, PAGE)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _table(at: AppTest):
    return _frame_with(at, "validation")


def _frame_with(at: AppTest, column: str):
    [frame] = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def _reward(at: AppTest) -> float:
    [metric] = [m for m in at.metric if m.label == "Reward"]
    return float(metric.value)


def test_renders_without_validations(tmp_path, monkeypatch):
    at = _open(_db(tmp_path), monkeypatch)
    n = len(registry())
    assert at.title[0].value == "Domains"
    families = len({d.family for d in registry().values()})
    assert any(c.value.startswith(f"{n} domains in {families} families from ") and
               f": 0 passed, 0 failed, {n} not validated" in c.value for c in at.caption)
    assert len(_table(at)) == n
    assert at.selectbox(key="dom_domain").value == "chain_sum"
    assert any("Give your final answer on the last line as: Answer: <answer>" in c.value for c in at.code)
    assert any("has not been validated yet" in i.value for i in at.info)
    assert not at.get("plotly_chart")  # no report, no difficulty plots; the empty mix draws nothing


def test_renders_stored_validations_with_plots_and_failure(tmp_path, monkeypatch):
    path = _db(tmp_path, [_report("chain_sum", True),
                          _report("basic_arithmetic", False, ["level 2: only 12 distinct tasks per 100 (need 20)"])])
    at = _open(path, monkeypatch)
    n = len(registry())
    assert any(f"{n} domains in " in c.value and f": 1 passed, 1 failed, {n - 2} not validated" in c.value
               for c in at.caption)
    assert any(s.value.startswith("Passed validation") for s in at.success)
    assert {c.key for c in at.get("plotly_chart")} >= {"dom_plot_chars", "dom_plot_gen", "dom_plot_distinct"}
    levels = _frame_with(at, "chars_p50")
    assert list(levels["level"]) == [1, 2, 3] and list(levels["chars_p50"]) == [75, 80, 85]

    at.selectbox(key="dom_domain").select("basic_arithmetic").run()
    _ok(at)
    errors = " ".join(e.value for e in at.error)
    assert "can't join a mix" in errors and "only 12 distinct tasks per 100" in errors

    at.multiselect(key="dom_status").select("failed").run()
    assert list(_table(at)["name"]) == ["basic_arithmetic"]


def test_catalogue_filters_narrow_the_table(tmp_path, monkeypatch):
    at = _open(_db(tmp_path), monkeypatch)
    everything = len(_table(at))
    at.text_input(key="dom_search").input("chain").run()
    _ok(at)
    assert "chain_sum" in set(_table(at)["name"]) and len(_table(at)) < everything
    assert any(c.value.startswith("Showing ") for c in at.caption)

    at.text_input(key="dom_search").input("").run()
    at.multiselect(key="dom_kind").select("multi_turn").run()
    kinds = _table(at)
    assert set(kinds["kind"]) == {"multi_turn"}
    assert all(n.startswith(("terminal_", "tool_", "cad_", "play_")) for n in kinds["name"])
    at.multiselect(key="dom_family").select("arithmetic").run()
    assert _table(at).empty  # no multi-turn arithmetic domain
    _ok(at)

    at.multiselect(key="dom_family").set_value([]).run()
    at.multiselect(key="dom_kind").set_value([]).run()
    at.multiselect(key="dom_source").select("reasoning-core").run()
    rc = _table(at)
    assert len(rc) >= 45 and set(rc["source"]) == {"reasoning-core"} and set(rc["license"]) == {"MIT"}
    at.multiselect(key="dom_license").select("Apache-2.0").run()
    assert _table(at).empty  # reasoning-core is MIT
    _ok(at)


def test_family_overview_counts_every_domain(tmp_path, monkeypatch):
    at = _open(_db(tmp_path, [_report("chain_sum", True)]), monkeypatch)
    families = _frame_with(at, "median gen ms").set_index("family")
    assert families["domains"].sum() == len(registry()) and families.loc["arithmetic", "passed"] == 1
    assert families.loc["puzzles", "sources"] == "chuk-puzzles-gym" and families.loc["finance", "domains"] >= 10
    assert not any("Config(" in d.description or "](" in d.description for d in registry().values())


def test_try_the_verifier_scores_reference_and_wrong_answers(tmp_path, monkeypatch):
    at = _open(_db(tmp_path), monkeypatch)
    at.number_input(key="dom_seed").set_value(3).run()
    answer = get_domain("chain_sum").make_task(3, 1).answer

    at.button(key="dom_try_fill").click().run()
    assert at.text_area(key="dom_try_text").value == f"Answer: {answer}"
    at.button(key="dom_try_score").click().run()
    _ok(at)
    assert _reward(at) == 1.0

    at.text_area(key="dom_try_text").input(f"I think\nAnswer: {int(answer) + 1}").run()
    assert not [m for m in at.metric if m.label == "Reward"]  # an old score is not shown for new text
    at.button(key="dom_try_score").click().run()
    _ok(at)
    assert _reward(at) < 1.0


def test_validate_now_stores_a_report(tmp_path, monkeypatch):
    path = _db(tmp_path)
    at = _open(path, monkeypatch)
    at.button(key="dom_validate").click().run()
    _ok(at)
    with Store(path) as store:
        assert store.latest_validations()["chain_sum"]["passed"]
    assert any(s.value.startswith("Passed validation") for s in at.success)
    assert len(at.get("plotly_chart")) == 3


def _pick_domains(at: AppTest, *names: str) -> None:
    box = at.multiselect(key="dom_mix_domains")
    for name in names:
        box.select(name)
    at.run()


def test_mix_with_zero_weights_is_refused(tmp_path, monkeypatch):
    path = _db(tmp_path, [_report("chain_sum", True), _report("basic_arithmetic", True)])
    at = _open(path, monkeypatch)
    _pick_domains(at, "chain_sum", "basic_arithmetic")
    at.number_input(key="dom_mix_w_chain_sum").set_value(0.0).run()
    at.number_input(key="dom_mix_w_basic_arithmetic").set_value(0.0).run()
    assert any("weights sum to 0" in e.value for e in at.error)
    at.text_input(key="dom_mix_name").input("nothing").run()
    at.button(key="dom_mix_save").click().run()
    _ok(at)
    assert any(e.value.startswith("Not saved") and "weights sum to 0" in e.value for e in at.error)
    with Store(path) as store:
        assert store.list_mixes() == []


def test_valid_mix_saves_version_1_then_2(tmp_path, monkeypatch):
    path = _db(tmp_path, [_report("chain_sum", True), _report("basic_arithmetic", True)])
    at = _open(path, monkeypatch)
    _pick_domains(at, "chain_sum", "basic_arithmetic")
    at.number_input(key="dom_mix_w_chain_sum").set_value(3.0).run()
    at.slider(key="dom_mix_lv_basic_arithmetic").set_value((2, 3)).run()
    _ok(at)
    assert {c.key for c in at.get("plotly_chart")} >= {"dom_mix_preview_domains", "dom_mix_preview_levels"}
    at.text_input(key="dom_mix_name").input("arith").run()
    at.button(key="dom_mix_save").click().run()
    _ok(at)
    assert any(s.value == "Saved arith version 1." for s in at.success)
    assert at.selectbox(key="dom_mix_pick").value == "arith"

    at.number_input(key="dom_mix_w_basic_arithmetic").set_value(2.0).run()
    at.text_input(key="dom_mix_note").input("more basic").run()
    at.button(key="dom_mix_save").click().run()
    _ok(at)
    assert any(s.value == "Saved arith version 2." for s in at.success)
    assert list(_frame_with(at, "note")["version"]) == [2, 1]
    with Store(path) as store:
        v1, v2 = store.mix_versions("arith")
    assert v1["spec"]["domains"] == {"chain_sum": {"weight": 3.0, "levels": [1, 3]},
                                     "basic_arithmetic": {"weight": 1.0, "levels": [2, 3]}}
    assert v2["spec"]["domains"]["basic_arithmetic"]["weight"] == 2.0 and v2["note"] == "more basic"

    at.selectbox(key="dom_mix_pick").select("(new mix)").run()
    assert at.multiselect(key="dom_mix_domains").value == []
    at.selectbox(key="dom_mix_pick").select("arith").run()  # loads the newest version into the editor
    _ok(at)
    assert at.number_input(key="dom_mix_w_basic_arithmetic").value == 2.0
    assert at.slider(key="dom_mix_lv_basic_arithmetic").value == (2, 3)


def test_a_retrieval_domain_shows_its_question_and_points_to_the_retrieval_page(tmp_path, monkeypatch):
    at = _open(_db(tmp_path), monkeypatch)
    at.selectbox(key="dom_domain").set_value("needle_haystack").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("What is the secret code" in c.value or "What are the secret codes" in c.value for c in at.code)
    assert any("Retrieval page" in c.value for c in at.caption)


def test_tool_and_cad_domains_show_their_demonstration_and_score_the_reference(tmp_path, monkeypatch, docker_engine):
    at = _open(_db(tmp_path), monkeypatch)
    at.selectbox(key="dom_domain").set_value("tool_sql").run()
    _ok(at)
    assert any('"name": "sql"' in c.value for c in at.code)  # the demonstration's assistant call
    at.button(key="dom_try_fill").click().run()
    at.button(key="dom_try_score").click().run()
    _ok(at)
    assert _reward(at) == 1.0
    at.selectbox(key="dom_domain").set_value("cad_table").run()
    _ok(at)
    at.button(key="dom_try_fill").click().run()
    at.button(key="dom_try_score").click().run()  # plays the reference in a Docker sandbox
    _ok(at)
    assert _reward(at) == 1.0
    lines = at.text_area(key="dom_try_text").value.splitlines()
    at.text_area(key="dom_try_text").input("\n".join(get_domain("cad_table").wrong_turns(
        get_domain("cad_table").make_task(0, 1)))).run()
    at.button(key="dom_try_score").click().run()
    _ok(at)
    assert _reward(at) < 1.0 and len(lines) >= 3
