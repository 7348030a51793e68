"""The Sandboxes page and the turn-by-turn trajectory view, rendered with AppTest."""


from backend.store import Store
from tests.app.test_pages import _app, _texts
from trainer.types import Completion, Sample

TURNS = [
    {"turn": 1, "action": "command", "text": "```bash\nls\n```", "command": "ls", "stdout": "app.log\n",
     "stderr": "", "exit_code": 0, "duration_ms": 12.5, "timed_out": False},
    {"turn": 2, "action": "invalid", "text": "hmm"},
    {"turn": 3, "action": "command", "text": "```bash\nsleep 99\n```", "command": "sleep 99", "stdout": "",
     "stderr": "", "exit_code": 137, "duration_ms": 10000.0, "timed_out": True},
]


def _sandbox_db(tmp_path):
    path = tmp_path / "sbx.db"
    with Store(path) as store:
        rid = store.create_run("episodes", {"model": "tiny"}, total_steps=1)
        sample = Sample(domain="terminal_count_matches", task_seed=3, group=0, index=0, prompt="<prompt>",
                        prompt_ids=[1] * 5, completion=Completion([2] * 9, [-0.1] * 9, "<transcript>", "length",
                                                                  mask=[1] * 9),
                        reward=0.0, breakdown={"correct": 0.0, "check": "FAIL: answer.txt missing"},
                        answer="7", turns=TURNS)
        store.record_trajectories(rid, 1, [sample])
        store.record_sandbox_executions([
            {"kind": "humaneval", "outcome": "ok", "exit_code": 0, "latency_ms": 30.0, "backend": "docker",
             "command": "python3 -I solution.py"},
            {"kind": "humaneval", "outcome": "harness", "exit_code": None, "latency_ms": 900.0, "backend": "docker",
             "error": "sandbox stopped answering"},
            {"kind": "terminal_count_matches", "outcome": "timeout", "exit_code": 137, "latency_ms": 10000.0,
             "backend": "docker", "command": "sleep 99"},
        ], run_id=rid, step=1)
        store.record_pool_state(rid, {"backend": "docker", "isolation": "container", "size": 8, "idle": 8,
                                      "busy": 0, "replaced": 1, "orphans_collected": 2})
    return path, rid


def test_sandboxes_page_shows_backends_executions_and_failures(tmp_path, monkeypatch):
    path, rid = _sandbox_db(tmp_path)
    at = _app(path, monkeypatch, "screens/sandboxes.py")
    text = _texts(at)
    assert at.title[0].value == "Sandboxes"
    assert "docker" in text and "local" in text  # both backends are reported, with their isolation
    assert "Executions (last 1000) 3" in text and "Failures 2" in text
    assert len(at.get("plotly_chart")) == 1
    [pools] = [d.value for d in at.dataframe if "orphans_collected" in d.value.columns]
    assert list(pools["size"]) == [8] and list(pools["replaced"]) == [1]
    at.selectbox(key="sbx_run").select(rid).run()
    assert not at.exception


def test_sandboxes_page_without_executions_says_how_to_get_some(tmp_path, monkeypatch):
    at = _app(tmp_path / "empty.db", monkeypatch, "screens/sandboxes.py")
    assert any("configs/sandbox.yaml" in i.value for i in at.info)
    what = at.caption[0].value  # what sandboxes are for, and which domains use them
    assert "isolated from this machine" in what and "humaneval" in what and "terminal (" in what


def test_trajectory_view_shows_each_turn(tmp_path, monkeypatch):
    path, _ = _sandbox_db(tmp_path)
    at = _app(path, monkeypatch, "screens/trajectories.py")
    labels = [e.label for e in at.expander]
    assert "turn 1 · command · exit 0" in labels
    assert "turn 2 · invalid · invalid" in labels
    assert "turn 3 · command · timed out" in labels
    codes = [c.value for c in at.code]
    assert "sleep 99" in codes and "app.log" in codes
