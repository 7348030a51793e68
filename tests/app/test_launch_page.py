"""Home and Launch pages (AppTest): status and coverage; the form's inline errors launch
nothing; a valid form starts a background run; ?clone= fills the form from a run."""

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from domains.registry import registry
from backend.runs import process_alive, refresh_liveness, stop
from backend.store import Store

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
TIMEOUT = 60


def _page(db, monkeypatch, page: str, query: dict | None = None) -> AppTest:
    monkeypatch.setenv("RLWB_DB", str(db))
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _submit(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label == "Launch").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.error)


def test_home_page_shows_runs_coverage_and_system(filled_db, monkeypatch):
    at = _page(filled_db, monkeypatch, None)  # Home is the default page
    assert at.title[0].value == "RL Workbench"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Runs"] == "3" and metrics["Failed"] == "1"
    assert metrics["Domains"] == str(len(registry()))
    text = "\n".join(m.value for m in at.markdown)
    for part in ("vLLM (rollouts)", "DeepSpeed (learner)", "Docker (sandboxes)", "GPU", "Native bf16 (dtype: auto)"):
        assert part in text


def _fill_valid(at: AppTest, model_dir) -> None:
    at.selectbox(key="launch_model").select("Other: a checkpoint directory")
    at.text_input(key="launch_model_path").input(str(model_dir))
    at.multiselect(key="launch_domains").set_value(["chain_sum"])
    at.selectbox(key="launch_mix").select("(none: pick domains)")


@pytest.mark.parametrize("field, change, expected", [
    ("learning_rate", lambda at: at.number_input(key="launch_learning_rate").set_value(-0.001),
     "greater than 0"),
    ("domains", lambda at: at.multiselect(key="launch_domains").set_value([]), "the mix is empty"),
    ("model", lambda at: at.text_input(key="launch_model_path").input(""), "pick a model"),
    ("model", lambda at: at.text_input(key="launch_model_path").input("/nonexistent/ckpt"),
     "neither a known model name nor an existing directory"),
    ("group_size", lambda at: at.number_input(key="launch_group_size").set_value(1), "group_size must be >= 2"),
    ("other", lambda at: at.text_area(key="launch_other").input("temperature: [unclosed"), "malformed YAML"),
])
def test_bad_input_shows_an_inline_error_and_launches_nothing(tmp_path, monkeypatch, tiny_model_dir,
                                                              field, change, expected):
    db = tmp_path / "wb.db"
    at = _page(db, monkeypatch, "screens/launch.py")
    _fill_valid(at, tiny_model_dir)
    change(at)
    _submit(at)
    assert expected in _errors(at), _errors(at)
    assert at.title[0].value == "Launch a run"  # still on the form
    with Store(db) as store:
        assert store.list_runs() == []  # nothing launched


def test_a_valid_form_launches_a_background_run(tmp_path, monkeypatch, tiny_model_dir):
    db = tmp_path / "wb.db"
    at = _page(db, monkeypatch, "screens/launch.py")
    _fill_valid(at, tiny_model_dir)
    at.text_input(key="launch_name").input("from-the-form")
    at.selectbox(key="launch_algorithm").select("rloo")
    at.number_input(key="launch_steps").set_value(50)
    at.number_input(key="launch_group_size").set_value(2)
    at.number_input(key="launch_micro_batch_size").set_value(2)
    at.checkbox(key="launch_overlap").check()
    at.number_input(key="launch_lora_rank").set_value(8)
    at.text_area(key="launch_other").input(f"output_dir: {tmp_path / 'out'}\nvllm_compile: false\n")
    _submit(at)
    assert not _errors(at)
    with Store(db) as store:
        (run,) = store.list_runs()
        try:
            assert run["name"] == "from-the-form" and run["pid"]
            assert run["config"]["algorithm"] == "rloo" and run["config"]["domains"] == {"chain_sum": 1.0}
            assert run["config"]["overlap"] is True and run["config"]["lora_rank"] == 8
            assert run["config"]["steps"] == 50 and run["config"]["output_dir"] == str(tmp_path / "out")
            assert process_alive(run["pid"])  # a process of its own, not the page's
        finally:
            stop(store, run["id"])
            deadline = time.monotonic() + 120
            while process_alive(run["pid"]) and time.monotonic() < deadline:
                time.sleep(0.5)
        assert not process_alive(run["pid"])
        refresh_liveness(store)  # as the page does before each render
        assert store.get_run(run["id"])["status"] == "stopped"


@pytest.mark.parametrize("pinned", ["bfloat16", "float32"])
def test_dtype_auto_says_beside_the_button_what_the_run_computes_in(tmp_path, monkeypatch, tiny_model_dir, pinned):
    import trainer.precision

    monkeypatch.setattr(trainer.precision, "auto_dtype", lambda lora=False: (pinned, "the reason"))
    at = _page(tmp_path / "wb.db", monkeypatch, "screens/launch.py")
    _fill_valid(at, tiny_model_dir)
    at.text_area(key="launch_other").input("dtype: auto\n").run()
    captions = "\n".join(c.value for c in at.caption)
    assert f"Runs in {pinned} (`dtype: auto -> {pinned}: the reason`)" in captions, captions
    at.text_area(key="launch_other").input("dtype: float32\n").run()
    captions = "\n".join(c.value for c in at.caption)
    assert "Takes about" in captions and "dtype: auto" not in captions


def test_clone_fills_the_form_from_a_run(filled_db, monkeypatch):
    with Store(filled_db) as store:
        demo = next(r for r in store.list_runs() if r["name"] == "demo")
    at = _page(filled_db, monkeypatch, None, query={"clone": demo["id"]})
    at.switch_page("screens/launch.py").run()
    assert not at.exception
    assert at.text_input(key="launch_name").value == "demo-clone"
    assert at.number_input(key="launch_group_size").value == 4  # the demo run's config
    assert "Cloned from run" in "\n".join(c.value for c in at.caption)


def test_the_form_offers_the_choice_lists_of_their_one_owner(filled_db, monkeypatch):
    from core.choices import ALGORITHMS, ROLLOUT_ENGINES, SANDBOX_BACKENDS

    at = _page(filled_db, monkeypatch, "screens/launch.py")
    for key, owner in [("launch_algorithm", ALGORITHMS), ("launch_rollout_engine", ROLLOUT_ENGINES),
                       ("launch_sandbox_backend", SANDBOX_BACKENDS)]:
        assert at.selectbox(key=key).options == list(owner), key
