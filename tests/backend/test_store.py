"""Tests of backend.store: every verb round-trips on a tmp-file database."""

import sqlite3

import pytest

from backend.errors import RunNotFound, TrajectoryNotFound, WorkbenchError
from backend.store import Store, default_db_path
from trainer.types import Completion, Sample


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "rlwb.db")
    yield s
    s.close()


def make_samples(group: int, rewards: list[float], domain: str = "basic_arithmetic") -> list[Sample]:
    return [
        Sample(domain=domain, task_seed=100 + group, group=group, index=i, prompt=f"What is {group} + {i}?",
               prompt_ids=[1, 2, 3], completion=Completion([5, 6], [-0.1, -0.2], f"Answer: {group + i}", "stop"),
               reward=r, breakdown={"format": 1.0, "correct": r}, advantage=r - 0.5, answer=str(group + i))
        for i, r in enumerate(rewards)
    ]


def test_schema_version_wal_and_foreign_keys(tmp_path, store):
    conn = sqlite3.connect(tmp_path / "rlwb.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == Store.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    conn.close()
    Store(tmp_path / "rlwb.db").close()  # reopening an up-to-date db is a no-op


def test_newer_schema_refused(tmp_path):
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {Store.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(WorkbenchError, match="upgrade rl-workbench"):
        Store(path)


def test_rlwb_db_override(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "x.db"
    monkeypatch.setenv("RLWB_DB", str(target))
    assert default_db_path() == target and target.parent.is_dir()
    with Store() as s:
        assert s.path == str(target)
    assert target.exists()


def test_memory_store():
    with Store(":memory:") as s:
        assert s.get_run(s.create_run("m", {}, 1))["name"] == "m"


def test_run_round_trip(store):
    rid = store.create_run("demo", {"lr": 1e-6, "mix": {"basic_arithmetic": 1.0}}, total_steps=10)
    assert rid.startswith("r") and len(rid) == len("r20250101-120000-ab12")
    run = store.get_run(rid)
    assert run["status"] == "pending" and run["config"]["mix"] == {"basic_arithmetic": 1.0}
    assert run["total_steps"] == 10 and run["step"] == 0 and run["created_at"].endswith("+00:00")
    store.update_run(rid, pid=4242, config={"lr": 2e-6})
    store.heartbeat(rid, step=3)
    run = store.get_run(rid)
    assert run["pid"] == 4242 and run["config"] == {"lr": 2e-6} and run["step"] == 3
    assert run["heartbeat_at"] is not None
    rid2 = store.create_run("second", {}, 1)
    assert [r["id"] for r in store.list_runs()] == [rid2, rid]
    assert len(store.list_runs(limit=1)) == 1


def test_run_not_found(store):
    with pytest.raises(RunNotFound, match="rlwb runs list") as e:
        store.get_run("nope")
    assert str(e.value) == "run 'nope' not found; list runs with `rlwb runs list`"
    for call in (lambda: store.update_run("nope", pid=1), lambda: store.heartbeat("nope"),
                 lambda: store.set_status("nope", "running"),
                 lambda: store.record_metrics("nope", 1, {"kl": 0.0}),
                 lambda: store.record_trajectories("nope", 1, make_samples(0, [1.0])),
                 lambda: store.record_checkpoint("nope", 1, "/tmp/x"),
                 lambda: store.record_evaluation("nope", "before", "d", 1, 0, 0, 0, "m")):
        with pytest.raises(RunNotFound):
            call()


def test_status_transitions_set_timestamps(store):
    rid = store.create_run("demo", {}, 5)
    store.set_status(rid, "running")
    run = store.get_run(rid)
    assert run["status"] == "running" and run["started_at"] and run["finished_at"] is None
    store.set_status(rid, "failed", error="boom", traceback="Traceback ...")
    run = store.get_run(rid)
    assert run["status"] == "failed" and run["finished_at"] >= run["started_at"]
    assert run["error"] == "boom" and run["traceback"] == "Traceback ..."
    started = run["started_at"]
    store.set_status(rid, "running")  # resume keeps the first start, clears the failure
    run = store.get_run(rid)
    assert run["started_at"] == started and run["finished_at"] is None and run["error"] is None
    for status in ("completed", "stopped"):
        store.set_status(rid, status)
        assert store.get_run(rid)["finished_at"] is not None


def test_invalid_status_rejected(store):
    rid = store.create_run("demo", {}, 5)
    with pytest.raises(ValueError, match="invalid run status"):
        store.set_status(rid, "done")
    with pytest.raises(ValueError, match="invalid run status"):
        store.update_run(rid, status="done")
    with pytest.raises(ValueError, match="unknown run field"):
        store.update_run(rid, colour="red")
    assert store.get_run(rid)["status"] == "pending"


def test_metrics_round_trip(store):
    rid = store.create_run("demo", {}, 5)
    store.record_metrics(rid, 2, {"reward/mean": 0.5, "kl": 0.01})
    store.record_metrics(rid, 1, {"reward/mean": 0.25})
    store.record_metrics(rid, 2, {"kl": 0.02})  # re-recorded: replaced
    assert store.run_metrics(rid) == [
        {"step": 1, "name": "reward/mean", "value": 0.25},
        {"step": 2, "name": "kl", "value": 0.02},
        {"step": 2, "name": "reward/mean", "value": 0.5},
    ]


def test_trajectories_round_trip_and_filters(store):
    rid = store.create_run("demo", {}, 5)
    store.record_trajectories(rid, 1, make_samples(0, [0.0, 1.0]) + make_samples(1, [0.5, 0.5], "chain_sum"))
    store.record_trajectories(rid, 2, make_samples(0, [1.0, 1.0, 0.0]))
    rows = store.trajectories(rid)
    assert len(rows) == 7 and [r["step"] for r in rows] == [1, 1, 1, 1, 2, 2, 2]
    t = rows[1]
    assert t["domain"] == "basic_arithmetic" and t["completion"] == "Answer: 1" and t["answer"] == "1"
    assert t["breakdown"] == {"format": 1.0, "correct": 1.0} and t["advantage"] == 0.5
    assert t["prompt_tokens"] == 3 and t["completion_tokens"] == 2 and t["finish_reason"] == "stop"
    assert store.trajectory(t["id"]) == t
    assert len(store.trajectories(rid, step_min=2)) == 3
    assert len(store.trajectories(rid, step_max=1, domain="chain_sum")) == 2
    assert {r["reward"] for r in store.trajectories(rid, reward_min=0.4, reward_max=0.6)} == {0.5}
    assert len(store.trajectories(rid, limit=2, offset=6)) == 1
    assert [r["sample_idx"] for r in store.group(rid, 2, 0)] == [0, 1, 2]
    assert store.trajectory_domains(rid) == ["basic_arithmetic", "chain_sum"]
    assert store.trajectory_step_range(rid) == (1, 2)
    assert store.trajectory_step_range(store.create_run("empty", {}, 1)) is None
    with pytest.raises(TrajectoryNotFound):
        store.trajectory(10_000)


def test_checkpoints_and_evaluations_round_trip(store):
    rid = store.create_run("demo", {}, 5)
    store.record_checkpoint(rid, 5, "/ckpt/5")
    store.record_checkpoint(rid, 2, "/ckpt/2")
    assert [(c["step"], c["path"]) for c in store.checkpoints(rid)] == [(2, "/ckpt/2"), (5, "/ckpt/5")]
    store.record_evaluation(rid, "before", "basic_arithmetic", 50, 0.1, 0.12, 0.3, "smollm2")
    store.record_evaluation(rid, "after", "basic_arithmetic", 50, 0.4, 0.41, 0.9, "ckpt/5")
    evals = store.evaluations(rid)
    assert [(e["phase"], e["accuracy"], e["n"]) for e in evals] == [("before", 0.1, 50), ("after", 0.4, 50)]
    assert evals[1]["model"] == "ckpt/5" and evals[1]["format_rate"] == 0.9


def test_two_handles_share_the_file(tmp_path, store):
    rid = store.create_run("demo", {}, 5)
    with Store(tmp_path / "rlwb.db") as other:
        other.record_metrics(rid, 1, {"kl": 0.1})
    assert store.run_metrics(rid)[0]["value"] == 0.1
