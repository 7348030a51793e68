"""A real 3-step run of the tiny model through vLLM + DeepSpeed + SQLite, checked from the store."""

import json
from pathlib import Path

import pytest

from backend import views
from backend.store import Store
from tests.conftest import TINY_RUN_STEPS
from trainer.checkpoints import ResumePoint


def test_tiny_run_completes_and_records_everything(tiny_run):
    db, run_id = tiny_run
    store = Store(db)
    run = store.get_run(run_id)
    assert run["status"] == "completed" and run["error"] is None
    assert run["step"] == TINY_RUN_STEPS and run["started_at"] and run["finished_at"]
    assert run["config"]["group_size"] == 4  # the resolved config is stored

    names = {m["name"] for m in store.run_metrics(run_id)}
    for required in ("reward/mean", "kl", "entropy", "response_length", "rollout_tokens_per_s",
                     "learner_tokens_per_s", "time/sync", "time/verify", "zero_variance_groups"):
        assert required in names, required
    steps = sorted({m["step"] for m in store.run_metrics(run_id) if m["name"] == "reward/mean"})
    assert steps == list(range(1, TINY_RUN_STEPS + 1))
    # peak memory per phase: a real process's RSS (above 100 MiB with torch loaded, below this machine's RAM);
    # rollout, learner and sync each step, each checkpoint's writing and each held-out evaluation at its step
    peaks = {(m["step"], m["name"]): m["value"] for m in store.run_metrics(run_id) if m["name"].endswith("_peak_gb")}
    assert all(0.1 < v < 1024 for v in peaks.values())
    per_step = ("memory/rollout_peak_gb", "memory/learn_peak_gb", "memory/sync_peak_gb")
    assert {(s, n) for s, n in peaks if n in per_step} == {(s, n) for s in steps for n in per_step}
    assert {s for s, name in peaks if name == "memory/checkpoint_peak_gb"} == {2, TINY_RUN_STEPS}
    assert {s for s, name in peaks if name == "memory/eval_peak_gb"} == {0, 2, TINY_RUN_STEPS}
    assert {name for s, name in peaks if s == 0} == {"memory/eval_peak_gb"}  # the baseline evaluation alone
    # the engine slept through each learner step (engine_sleep's default): what the process gave back
    released = {m["step"]: m["value"] for m in store.run_metrics(run_id) if m["name"] == "memory/engine_released_gb"}
    trained = {m["step"] for m in store.run_metrics(run_id) if m["name"] == "learner_sequences" and m["value"] > 0}
    assert trained and set(released) == trained and all(0.0 <= v < 1024 for v in released.values())
    # the shared-prefix learner computes fewer tokens than the sequences hold (groups of 4 share a prompt)
    learn = {m["step"]: m["value"] for m in store.run_metrics(run_id) if m["name"] == "learner_computed_tokens"}
    tokens = {m["step"]: m["value"] for m in store.run_metrics(run_id) if m["name"] == "learner_tokens"}
    assert learn and all(learn[s] < tokens[s] for s in learn)

    rows = store.trajectories(run_id, limit=1000)
    assert len(rows) == TINY_RUN_STEPS * 2 * 4
    for r in rows:
        assert 0.0 <= r["reward"] <= 1.0
        assert set(r["breakdown"]) >= {"format", "correct"}
        assert r["completion_tokens"] >= 1 and r["prompt_tokens"] > 0
        assert r["finish_reason"] in ("stop", "length")
        assert r["difficulty"] == 1  # the task's level is stored with its trajectory
    # advantages are group-normalised: they sum to ~0 within each group
    group = store.group(run_id, 1, 0)
    assert len(group) == 4
    assert abs(sum(g["advantage"] for g in group)) < 1e-4


def test_tiny_run_checkpoints_and_evaluations(tiny_run):
    db, run_id = tiny_run
    store = Store(db)
    ckpts = store.checkpoints(run_id)
    assert [c["step"] for c in ckpts] == [2, TINY_RUN_STEPS]
    final = Path(ckpts[-1]["path"])
    assert (final / "model.safetensors").is_file() and (final / "tokenizer_config.json").is_file()
    assert json.loads((final / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    # a resume continues the lr schedule from the optimizer steps taken, not from the step number
    learned = sum(m["value"] > 0 for m in store.run_metrics(run_id) if m["name"] == "learner_sequences" and m["step"] <= 2)
    assert ResumePoint.load(ckpts[0]["path"]).learner_steps == learned
    evals = store.evaluations(run_id)
    assert {e["phase"] for e in evals} == {"before", "step-2", "after"}  # eval_every: 2 of 3 steps
    assert all(e["n"] == 2 for e in evals)
    # the Runs page's curves: before at step 0, step-2 at 2, after at the last step; a mean line
    curves = views.evaluation_curves(store, run_id)
    domains = {e["domain"] for e in evals}
    assert set(curves["name"]) == domains | {"mean"}
    assert sorted(curves[curves["name"] == "mean"]["step"]) == [0, 2, TINY_RUN_STEPS]
    after = {e["domain"]: e["accuracy"] for e in evals if e["phase"] == "after"}
    last = curves[curves["step"] == TINY_RUN_STEPS].set_index("name")["value"]
    assert last["mean"] == pytest.approx(sum(after.values()) / len(after))


def test_tiny_run_records_its_phases_in_order(tiny_run):
    """The phases the Runs page shows: engines, baseline evaluation, each step (with the
    step-2 evaluation and checkpoint after step 2), the last checkpoint, the final evaluation;
    each ends where the next starts and the last at the run's finish."""
    db, run_id = tiny_run
    store = Store(db)
    phases = store.run_phases(run_id)
    assert [(p["phase"], p["step"]) for p in phases] == [
        ("engine start", 0), ("learner start", 0), ("baseline evaluation", 0), ("step", 1), ("step", 2),
        ("evaluation", 2), ("checkpoint", 2), ("step", 3), ("checkpoint", 3), ("final evaluation", 3)]
    assert all(a["ended_at"] == b["started_at"] for a, b in zip(phases, phases[1:]))
    assert phases[-1]["ended_at"] == store.get_run(run_id)["finished_at"]
    timeline = views.phase_timeline(phases, TINY_RUN_STEPS)
    assert [e["label"] for e in timeline] == [
        "starting the rollout engine", "starting the learner", "held-out evaluation before training", "steps 1-2",
        "held-out evaluation at step 2", "saving a checkpoint (step 2)", "step 3 (1 checkpoint)",
        "held-out evaluation after training"]
    assert not any(e["live"] for e in timeline) and all(e["seconds"] >= 0 for e in timeline)
    assert views.current_phase(store.get_run(run_id), phases) is None  # finished: no current phase


def test_resume_point_of_steps_without_a_learner_step(tmp_path):
    """zero_variance skip/resample can leave a step with no optimizer step: the schedule's
    position is the count recorded in the checkpoint; older checkpoints fall back to the step."""
    state = {"step": 3, "rng_state": [3, [1, 2, 624], None], "curriculum": None}
    (tmp_path / "trainer_state.json").write_text(json.dumps({**state, "learner_steps": 1}))
    assert ResumePoint.load(tmp_path).learner_steps == 1
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    assert ResumePoint.load(tmp_path).learner_steps is None


def test_the_final_evaluation_runs_after_the_learner_is_gone(tiny_model_dir, tmp_path, monkeypatch):
    """A real 1-step run: the held-out evaluation after training starts once the learner is
    closed and garbage (its model and optimizer back with the system); the one before
    training runs beside the learner, as the step needs it next."""
    import gc
    import weakref

    import trainer.loop as loop
    from backend.runs import run_foreground
    from trainer.config import parse_config

    opened, seen = [], {}

    def open_learner(*args, **kw):
        learner = real_open(*args, **kw)
        opened.append(weakref.ref(learner.module))
        return learner

    def run_evaluation(engine, tokenizer, cfg, store, run_id, phase, *args):
        gc.collect()
        seen[phase] = opened[0]() is not None
        return real_eval(engine, tokenizer, cfg, store, run_id, phase, *args)

    real_open, real_eval = loop.open_learner, loop.run_evaluation
    monkeypatch.setattr(loop, "open_learner", open_learner)
    monkeypatch.setattr(loop, "run_evaluation", run_evaluation)
    cfg = parse_config({
        "model": str(tiny_model_dir), "domains": ["basic_arithmetic"], "steps": 1, "prompts_per_step": 2,
        "group_size": 2, "micro_batch_size": 4, "max_new_tokens": 8, "kl_coef": 0.05, "eval_tasks_per_domain": 2,
        "eval_max_new_tokens": 8, "vllm_compile": False, "vllm_memory_fraction": 0.05,
        "output_dir": str(tmp_path / "out")})
    with Store(tmp_path / "run.db") as store:
        run_id = run_foreground(cfg, store)
        assert store.get_run(run_id)["status"] == "completed"
        assert {e["phase"] for e in store.evaluations(run_id)} == {"before", "after"}
    assert seen == {"before": True, "after": False}
