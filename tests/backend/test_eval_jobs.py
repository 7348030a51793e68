"""Evaluations started as background jobs (`backend.eval_jobs`, the Evaluation page's form):
refused before a process starts, found through their log while starting, a dead start shown
with its log's end, progress and Stop on a real job, and the time estimate."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from backend import eval_jobs
from backend.evaluation import EvalSettings
from backend.runs import process_alive
from backend.store import Store
from core.errors import ConfigError, ModelNotFound


def test_bad_model_or_settings_start_no_process(tmp_path, tiny_model_dir):
    store = Store(tmp_path / "s.db")
    with pytest.raises(ModelNotFound):
        eval_jobs.start(store, "no-such-model", EvalSettings(domains=["chain_sum"]))
    with pytest.raises(ConfigError, match="no domain|unknown domain|not_a_domain"):
        eval_jobs.start(store, str(tiny_model_dir), EvalSettings(domains=["not_a_domain"]))
    with pytest.raises(ConfigError, match="field 'mix'"):
        eval_jobs.start(store, str(tiny_model_dir), EvalSettings())  # a base model brings no domains
    assert not eval_jobs.logs_dir(store).exists() and store.list_evals() == []


def _log(store, pid: int, at: datetime, text: str):
    folder = eval_jobs.logs_dir(store)
    folder.mkdir(exist_ok=True)
    path = folder / f"{at.strftime('%Y%m%dT%H%M%S')}-{pid}.log"
    path.write_text(text)
    return path


def test_starting_lists_live_and_recently_dead_jobs_without_a_row(tmp_path):
    store = Store(tmp_path / "s.db")
    now = datetime.now(timezone.utc)
    dead_pid = 2**22 + 4321
    _log(store, os.getpid(), now, "--- header\nmodel /m: hashing the weights\n")  # alive, no row yet
    _log(store, dead_pid, now, "--- header\nTriton is not installed\nerror: the store is locked\n")
    _log(store, dead_pid + 1, now - timedelta(hours=2), "error: long ago\n")  # dead and old: not shown
    jobs = {j["pid"]: j for j in eval_jobs.starting(store, now=now)}
    assert set(jobs) == {os.getpid(), dead_pid}
    assert jobs[os.getpid()]["alive"] and jobs[os.getpid()]["tail"] == ["model /m: hashing the weights"]
    assert not jobs[dead_pid]["alive"] and jobs[dead_pid]["tail"] == ["error: the store is locked"]  # harmless hidden
    eval_id = store.create_eval("m", "/m", {}, {"domains": {"chain_sum": [1, 1]}})  # this pid's row exists now
    assert {j["pid"] for j in eval_jobs.starting(store, now=now)} == {dead_pid}
    ev = store.get_eval(eval_id)
    assert eval_jobs.log_of(store, ev).name.endswith(f"-{os.getpid()}.log")
    assert eval_jobs.progress(store, ev)["last_line"] == "model /m: hashing the weights"


def test_the_estimate_learns_from_this_stores_finished_evaluations(tmp_path):
    store = Store(tmp_path / "s.db")
    settings = EvalSettings(domains=["chain_sum"], tasks_per_domain=10, samples=2, ks=[1, 2])
    seconds, basis = eval_jobs.estimate_seconds(store, 3, settings)
    assert seconds == pytest.approx(eval_jobs.DEFAULT_START_S + 60 * eval_jobs.DEFAULT_SECONDS_PER_COMPLETION)
    assert "none finished in this store" in basis
    # 2 domains x 5 tasks x 10 samples = 100 completions at 32 tokens in 45 + 100 s: 2 s per 64-token completion
    eval_id = store.create_eval("m", "/m", {}, {"domains": {"a": [1, 1], "b": [1, 1]}, "tasks_per_domain": 5,
                                                "samples": 10, "max_new_tokens": 32})
    store.finish_eval(eval_id, "completed", summary={}, extras={})
    created = datetime.now(timezone.utc) - timedelta(seconds=eval_jobs.DEFAULT_START_S + 100)
    store.db["eval_runs"].update(eval_id, {"created_at": created.isoformat()})
    seconds, basis = eval_jobs.estimate_seconds(store, 3, settings)
    assert seconds == pytest.approx(eval_jobs.DEFAULT_START_S + 60 * 2.0, rel=0.02)
    assert "1 finished evaluations" in basis


def test_a_started_job_records_its_evaluation_shows_progress_and_stops(tmp_path, tiny_model_dir):
    store = Store(tmp_path / "s.db")
    settings = EvalSettings(domains=["chain_sum", "basic_arithmetic", "letter_counting"], tasks_per_domain=400,
                            samples=4, ks=[1], rollout_engine="hf", max_new_tokens=8)
    job = eval_jobs.start(store, str(tiny_model_dir), settings)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not store.list_evals(statuses=("running",)):
            assert process_alive(job["pid"]), open(job["log"]).read()[-3000:]
            time.sleep(0.5)
        (ev,) = store.list_evals(statuses=("running",))
        assert ev["pid"] == job["pid"] and eval_jobs.starting(store) == []
        p = eval_jobs.progress(store, ev)
        assert p["log"] == job["log"] and p["domains"] == 3 and p["completions_total"] == 3 * 400 * 4
        assert eval_jobs.stop(store, ev["id"])
        deadline = time.monotonic() + 120
        while process_alive(job["pid"]) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        if process_alive(job["pid"]):
            os.kill(job["pid"], 9)
    ev = store.get_eval(ev["id"])
    assert ev["status"] == "failed" and "stopped by request" in ev["error"], ev["error"]
    assert "it is marked failed" in open(job["log"]).read()
    assert not eval_jobs.stop(store, ev["id"])  # not running any more
