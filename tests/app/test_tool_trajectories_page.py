"""The Trajectories page shows tool-use episodes call by call and a cad episode's mesh and
checks, from episodes played through the real episode loop (cad in a Docker sandbox)."""

import pytest
from transformers import AutoTokenizer

from domains.registry import get_domain
from backend.store import Store
from trainer.episodes import rollout_episodes

from tests.app.test_pages import _app, _texts
from tests.trainer.test_episodes import ScriptedEngine, docker_runtime


def _episodes(tokenizer, task, scripts, runtime=None):
    return rollout_episodes(ScriptedEngine(tokenizer, scripts), tokenizer, [task], len(scripts), runtime,
                            max_turns=6, max_new_tokens=600, max_episode_tokens=8192, temperature=1.0, top_p=1.0,
                            command_timeout_s=20.0)


@pytest.fixture(scope="module")
def tool_db(tiny_model_dir, docker_engine, tmp_path_factory):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    sql = get_domain("tool_sql")
    t = sql.make_task(3, 1)
    bad = '<tool_call>{"name": "sql", "arguments": {"sql": 1}}</tool_call>'
    samples = _episodes(tok, t, [sql.reference_turns(t), [bad, "Answer: 3"]])

    rt = docker_runtime(pool_size=1, memory_mb=512, command_timeout_s=20.0)
    try:
        cad = get_domain("cad_shaft")
        c = cad.make_task(1, 1)
        cad_samples = _episodes(tok, c, [cad.reference_turns(c)], rt)
    finally:
        rt.close()
    for s in cad_samples:
        s.group = 1
    path = tmp_path_factory.mktemp("tooldb") / "tools.db"
    with Store(path) as store:
        rid = store.create_run("tools", {"model": "tiny"}, total_steps=1)
        store.record_trajectories(rid, 1, samples + cad_samples)
    return path, rid


def _open(path, rid, monkeypatch, domain, index):
    at = _app(path, monkeypatch, "screens/trajectories.py")
    at.selectbox(key="traj_run").select(rid).run()
    with Store(path) as store:
        picked = store.trajectories(rid, domain=domain)[index]
    at.selectbox(key="traj_selected").select(picked["id"]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at, picked


def test_tool_calls_are_listed_with_arguments_validation_and_observation(tool_db, monkeypatch):
    path, rid = tool_db
    at, picked = _open(path, rid, monkeypatch, "tool_sql", 1)
    calls = next(d.value for d in at.dataframe if "arguments" in d.value.columns)
    assert list(calls["name"]) == ["sql"] and list(calls["error"]) == ["schema_violation"]
    assert not calls["valid"].iloc[0]
    assert "1 tool calls · 0 valid (0%)" in _texts(at)
    at, picked = _open(path, rid, monkeypatch, "tool_sql", 0)
    calls = next(d.value for d in at.dataframe if "arguments" in d.value.columns)
    assert calls["valid"].all() and calls["error"].iloc[0] == "" and "select" in calls["arguments"].iloc[0]


def test_cad_episode_shows_its_mesh_and_checks(tool_db, monkeypatch):
    path, rid = tool_db
    at, picked = _open(path, rid, monkeypatch, "cad_shaft", 0)
    assert picked["reward"] == 1.0
    assert "every check passed" in _texts(at)
    checks = next(d.value for d in at.dataframe if "passed" in d.value.columns)
    assert set(checks["name"]) >= {"volume", "bounding_box", "watertight", "one_body"} and checks["passed"].all()
    charts = at.get("plotly_chart")
    assert charts and '"type":"mesh3d"' in charts[0].proto.spec.replace(" ", "")
