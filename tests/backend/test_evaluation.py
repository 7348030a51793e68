"""The evaluation's set-up: settings, held-out tasks, model references and identity, the
CLI's `rlwb eval MODEL` form and its bad input (backend/evaluation.py, backend/cli_eval.py)."""

import shutil

import pytest

from backend.cli import main
from backend.cli_eval import FLAGS, normalize_argv
from domains.splits import HELDOUT_SEED_RANGE, TRAIN_SEED_RANGE, is_heldout
from core.errors import ConfigError, EvalNotFound, ModelNotFound
from backend.evaluation import (
    EvalSettings, model_identity, parse_settings, resolve_eval_model, resolve_eval_ref, suite_tasks,
)
from backend.store import Store


def test_suite_tasks_are_held_out_and_cycle_through_the_levels():
    tasks = suite_tasks({"chain_sum": (1, 3), "basic_arithmetic": (2, 2)}, 7, seed_offset=5)
    assert len(tasks) == 14
    seeds = [s for d, _, s in tasks if d == "chain_sum"]
    assert seeds == list(range(HELDOUT_SEED_RANGE[0] + 5, HELDOUT_SEED_RANGE[0] + 12))
    assert all(is_heldout(s) and not TRAIN_SEED_RANGE[0] <= s < TRAIN_SEED_RANGE[1] for _, _, s in tasks)
    assert [lv for d, lv, _ in tasks if d == "chain_sum"] == [1, 2, 3, 1, 2, 3, 1]
    assert {lv for d, lv, _ in tasks if d == "basic_arithmetic"} == {2}
    # the same suite is the same tasks every time
    assert suite_tasks({"chain_sum": (1, 3), "basic_arithmetic": (2, 2)}, 7, seed_offset=5) == tasks


def test_settings_refuse_k_above_samples_and_mix_with_domains():
    with pytest.raises(ConfigError, match="field 'ks': k 8 must be between 1 and the samples per task"):
        parse_settings({"samples": 4, "ks": [1, 8], "mix": "m"})
    with pytest.raises(ConfigError, match="^--k: k 3 must be .* raise the samples to at least 3"):
        parse_settings({"samples": 2, "ks": [3]}, names=FLAGS)
    with pytest.raises(ConfigError, match="^--domains: give either a mix or domains"):
        parse_settings({"mix": "m", "domains": ["chain_sum"]}, names=FLAGS)
    with pytest.raises(ConfigError, match="^--seed-offset: .*at most 99,999,950"):
        parse_settings({"tasks_per_domain": 50, "seed_offset": 999_999_999_999}, names=FLAGS)
    with pytest.raises(ConfigError, match="tasks_per_domain"):
        parse_settings({"tasks_per_domain": 0})
    assert EvalSettings(ks=[8, 1, 8]).ks == [1, 8]


def test_model_identity_follows_the_weights_not_the_path(tiny_model_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    a, b = model_identity(tiny_model_dir), model_identity(copy)
    assert a["sha256"] == b["sha256"] and a["bytes"] == b["bytes"] > 0
    assert a["architecture"] == "LlamaForCausalLM"
    weights = copy / a["files"][0]
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one changed byte is another model
    weights.write_bytes(bytes(data))
    assert model_identity(copy)["sha256"] != a["sha256"]
    with pytest.raises(ModelNotFound, match="no weight files"):
        model_identity(tmp_path)


def _run_with_checkpoints(store: Store, model_dir, tmp_path) -> str:
    run_id = store.create_run("r", {"domains": {"chain_sum": 1.0}, "model": str(model_dir)}, total_steps=4)
    for step in (2, 4):
        ck = tmp_path / f"step-{step}"
        shutil.copytree(model_dir, ck)
        store.record_checkpoint(run_id, step, str(ck))
    return run_id


def test_model_references_run_step_directory_and_errors(tiny_model_dir, tmp_path):
    store = Store(tmp_path / "s.db")
    run_id = _run_with_checkpoints(store, tiny_model_dir, tmp_path)
    assert resolve_eval_model(store, run_id) == (tmp_path / "step-4", run_id, 4)
    assert resolve_eval_model(store, f"{run_id}:2") == (tmp_path / "step-2", run_id, 2)
    # a checkpoint named by its directory is recognised as that run's
    assert resolve_eval_model(store, str(tmp_path / "step-2")) == (tmp_path / "step-2", run_id, 2)
    assert resolve_eval_model(store, str(tiny_model_dir))[1:] == (None, None)
    with pytest.raises(ModelNotFound, match="no usable checkpoint at step 3"):
        resolve_eval_model(store, f"{run_id}:3")
    with pytest.raises(ModelNotFound, match="must be a number"):
        resolve_eval_model(store, f"{run_id}:last")
    with pytest.raises(ModelNotFound):
        resolve_eval_model(store, "r-no-such-run")
    with pytest.raises(ModelNotFound, match="give the step after ':'"):
        resolve_eval_model(store, f"{run_id}:")
    with pytest.raises(ModelNotFound, match="name a fetched model"):
        resolve_eval_model(store, str(tmp_path / ("a" * 300)))  # longer than a file name may be


def test_report_references_take_an_evaluation_or_a_run(tiny_model_dir, tmp_path):
    store = Store(tmp_path / "s.db")
    run_id = _run_with_checkpoints(store, tiny_model_dir, tmp_path)
    older = store.create_eval(run_id, "/p", {}, {}, run_id=run_id, step=2)
    store.finish_eval(older, "completed")
    newer = store.create_eval(run_id, "/p", {}, {}, run_id=run_id, step=4)
    store.finish_eval(newer, "failed", error="boom")
    assert resolve_eval_ref(store, newer) == newer  # an id is taken as is
    assert resolve_eval_ref(store, run_id) == older  # the newest *completed* one of the run
    with pytest.raises(EvalNotFound, match="rlwb eval list"):
        resolve_eval_ref(store, "e-nothing")


@pytest.mark.parametrize("argv,expected", [
    (["eval", "smollm2-135m", "--mix", "q"], ["eval", "run", "smollm2-135m", "--mix", "q"]),
    (["--db", "x.db", "eval", "r1:20"], ["--db", "x.db", "eval", "run", "r1:20"]),
    (["eval", "list"], ["eval", "list"]),
    (["eval", "report", "a", "b"], ["eval", "report", "a", "b"]),
    (["eval", "--help"], ["eval", "--help"]),
    (["runs", "show", "eval"], ["runs", "show", "eval"]),  # "eval" as another command's argument
    (["eval", "--mix", "q", "smollm2-135m"], ["eval", "run", "--mix", "q", "smollm2-135m"]),  # options first
])
def test_eval_model_is_eval_run_model(argv, expected):
    assert normalize_argv(argv) == expected


def test_cli_bad_input_names_the_field_and_stores_nothing(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["--db", db, "eval", "smollm2-135m", "--samples", "4", "--k", "1,8", "--mix", "m"]) == 2
    assert "error: --k: k 8 must be between 1 and the samples per task (4)" in capsys.readouterr().err
    assert main(["--db", db, "eval", "/no/such/model", "--mix", "m"]) == 2
    assert capsys.readouterr().err.startswith("error:")
    assert main(["--db", db, "eval", "report", "e-missing"]) == 2
    assert "rlwb eval list" in capsys.readouterr().err
    assert main(["--db", db, "eval", "smollm2-135m", "--mix", "m", "--tasks", "20000"]) == 2
    assert "error: --tasks:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--db", db, "eval", "smollm2-135m", "--k", "one"])
    assert "positive whole numbers" in capsys.readouterr().err
    assert Store(db).list_evals() == []


def test_eval_config_takes_the_mix_the_domains_or_the_runs_own(tiny_model_dir, tmp_path):
    from backend.evaluation import eval_config
    store = Store(tmp_path / "s.db")  # a mix as `rlwb mix create` stores it (its domains validated then)
    store.save_mix("arith", {"domains": {"chain_sum": {"weight": 1.0, "levels": [1, 2]},
                                         "basic_arithmetic": {"weight": 1.0, "levels": [3, 3]}}})
    run_id = store.create_run("r", {"domains": {"letter_counting": 1.0}, "difficulty": 2, "model": "x",
                                    "max_turns": 7}, total_steps=2)
    specs = lambda cfg: {d: (lo, hi) for d, (_, lo, hi) in cfg.domain_specs().items()}
    # a stored mix, for a base model and for a run's checkpoint (the run's domains and level make way)
    for rid in (None, run_id):
        cfg = eval_config(store, EvalSettings(mix="arith"), tiny_model_dir, rid)
        assert specs(cfg) == {"chain_sum": (1, 2), "basic_arithmetic": (3, 3)}
        assert cfg.mix_spec["name"] == "arith" and cfg.mix_spec["version"] == 1
    cfg = eval_config(store, EvalSettings(domains=["chain_sum"], difficulty=3), tiny_model_dir, run_id)
    assert specs(cfg) == {"chain_sum": (3, 3)} and cfg.max_turns == 7  # the run's budgets stay
    cfg = eval_config(store, EvalSettings(domains=["play_sudoku"], max_turns=12, max_episode_tokens=4096),
                      tiny_model_dir, run_id)
    assert cfg.max_turns == 12 and cfg.max_episode_tokens == 4096
    assert eval_config(store, EvalSettings(domains=["play_sudoku"]), tiny_model_dir, None).max_turns == 4
    cfg = eval_config(store, EvalSettings(), tiny_model_dir, run_id)
    assert specs(cfg) == {"letter_counting": (2, 2)} and cfg.model == str(tiny_model_dir)
    with pytest.raises(ConfigError, match="field 'mix'"):
        eval_config(store, EvalSettings(), tiny_model_dir, None)
    with pytest.raises(ConfigError, match="mix"):
        eval_config(store, EvalSettings(mix="nope"), tiny_model_dir, None)


def test_seen_in_training_counts_prompts_the_run_sampled_exactly(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    from domains.registry import get_domain
    from backend.evaluation import seen_in_training
    from tests.backend.test_store import make_samples
    from trainer.prompts import render_prompt

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    store = Store(tmp_path / "s.db")
    run_id = store.create_run("r", {}, total_steps=1)
    d = get_domain("chain_sum")
    tasks = [d.make_task(seed, 1) for seed in (1_000_000_000, 1_000_000_001)]
    samples = make_samples(0, [1.0, 0.0], "chain_sum")
    samples[0].prompt = render_prompt(tok, tasks[0])[0]  # as training stored it
    samples[1].prompt = render_prompt(tok, tasks[1])[0] + " and more"  # containing it is not the same prompt
    store.record_trajectories(run_id, 1, samples)
    assert seen_in_training(store, run_id, tasks, tok) == {"chain_sum": {"tasks": 2, "seen": 1}}
    assert seen_in_training(store, None, tasks, tok) == {}


def test_runs_show_lists_the_capability_evaluations_of_its_checkpoints(tmp_path, capsys):
    db = tmp_path / "s.db"
    store = Store(db)
    run_id = store.create_run("r", {"domains": {"chain_sum": 1.0}}, total_steps=4)
    other = store.create_run("o", {}, total_steps=1)
    done = store.create_eval(run_id, "/ck", {}, {}, run_id=run_id, step=4)
    store.finish_eval(done, "completed", summary={"overall": {"pass@1": {"value": 0.25, "low": 0.1, "high": 0.4,
                                                                          "n": 10}}})
    store.create_eval(other, "/ck2", {}, {}, run_id=other, step=1)
    assert main(["--db", str(db), "runs", "show", run_id]) == 0
    out = capsys.readouterr().out
    assert f"rlwb eval {done} of step 4: completed, —, pass@1 (sampled) 25.0% [10.0, 40.0]" in out
    assert "/ck2" not in out and out.count(" of step ") == 1


def test_an_evaluation_whose_pid_was_reused_is_marked_failed(tmp_path):
    from backend.evaluation import refresh_eval_liveness

    store = Store(tmp_path / "s.db")
    mine = store.create_eval("m", "/m", {}, {})  # this process: alive, started before the row
    reused = store.create_eval("m", "/m", {}, {})
    store.db["eval_runs"].update(reused, {"pid": 1, "created_at": "2020-01-01T00:00:00.000+00:00"})
    gone = store.create_eval("m", "/m", {}, {})
    store.db["eval_runs"].update(gone, {"pid": 2**22 + 12345})
    assert sorted(refresh_eval_liveness(store)) == sorted([reused, gone])
    assert store.get_eval(mine)["status"] == "running"
    assert "process ended" in store.get_eval(reused)["error"]


def test_sigterm_marks_the_evaluation_failed(tmp_path, tiny_model_dir):
    import os
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "s.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend.cli", "--db", str(db), "eval", str(tiny_model_dir), "--domains",
         "chain_sum,basic_arithmetic,letter_counting", "--tasks", "400", "--samples", "4", "--k", "1",
         "--engine", "hf", "--max-new-tokens", "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and Store(db).list_evals(statuses=("running",)):
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        time.sleep(2)  # inside the evaluation
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "marked failed" in err and "Traceback" not in err
    ev = Store(db).list_evals()[0]
    assert ev["status"] == "failed" and ev["error"].startswith("KeyboardInterrupt")


def test_eval_every_needs_tasks_and_fewer_steps_than_the_run():
    from trainer.config import config_errors

    base = {"domains": ["chain_sum"], "steps": 10}
    assert config_errors({**base, "eval_every": 2, "eval_tasks_per_domain": 5}) == {}
    assert "eval_tasks_per_domain" in config_errors({**base, "eval_every": 2})["eval_every"]
    assert "below 10" in config_errors({**base, "eval_every": 10, "eval_tasks_per_domain": 5})["eval_every"]


def test_a_run_id_from_another_store_says_so(tmp_path):
    store = Store(tmp_path / "s.db")
    with pytest.raises(ModelNotFound, match=r"no run r20261129-161545-a23c in the store .*pass --db"):
        resolve_eval_model(store, "r20261129-161545-a23c")


def test_report_names_a_and_b_and_explains_too_few_tasks(tmp_path, capsys):
    from tests.backend.test_eval_report import BASE, CHECKPOINT, add_eval, eval_rows

    db = tmp_path / "s.db"
    with Store(db) as store:
        a = add_eval(store, "base-model", eval_rows(BASE, tasks=4))
        b = add_eval(store, "the-checkpoint", eval_rows(CHECKPOINT, tasks=4))
    assert main(["--db", str(db), "eval", "report", a, b]) == 0
    out = capsys.readouterr().out
    assert f"A: base-model" in out and f"(evaluation {a})" in out and f"B: the-checkpoint" in out
    assert "'too few tasks': fewer than 10 shared tasks" in out


def test_an_evaluation_whose_prompts_cant_fit_is_refused_before_it_is_recorded(tiny_model_dir, tmp_path):
    # rotate_matrix level 2 prompts are over the tiny model's 1024 positions (tests/trainer/test_window.py):
    # refused as `rlwb run` refuses it, before the weights are hashed and an evaluation row exists
    from backend.evaluation import evaluate_model

    with Store(tmp_path / "s.db") as store:
        with pytest.raises(ConfigError, match="rotate_matrix level 2 needs .* window of 1024 tokens"):
            evaluate_model(store, str(tiny_model_dir),
                           EvalSettings(domains=["rotate_matrix"], difficulty=2, tasks_per_domain=2, samples=1, ks=[1]))
        assert store.list_evals() == []


def test_the_needle_sweep_sizes_the_kv_cache_to_the_window_it_opens(tiny_model_dir, tmp_path, monkeypatch):
    """The sweep opens the engine at the model's whole window; its KV cache must hold one
    sequence of it (vLLM's minimum), not the run's smaller step-sized cache."""
    import json

    from backend import evaluation
    from trainer.config import RunConfig

    model = tmp_path / "long-window"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    config["max_position_embeddings"] = 32768  # beyond the run's KV cache (8,192 tokens at least)
    (model / "config.json").write_text(json.dumps(config))
    opened = {}

    class Opened(Exception):
        pass

    def fake_open(cfg, model_path, seed, engine_kw):
        opened.update(engine_kw)
        raise Opened

    monkeypatch.setattr(evaluation, "_open", fake_open)
    cfg = RunConfig(domains=["needle_haystack"], model=str(model), rollout_engine="vllm", prompts_per_step=1,
                    group_size=2)  # a small step: its KV cache (about 8k tokens) is below the window
    settings = evaluation.EvalSettings(domains=["needle_haystack"], tasks_per_domain=1, context_sweep=True)
    with pytest.raises(Opened):
        evaluation._play(Store(tmp_path / "s.db"), "e1", cfg, model, [("needle_haystack", 1, 7)], settings,
                         lambda line: None, None)
    assert opened["max_model_len"] == 32768
    assert opened["kv_cache_tokens"] >= opened["max_model_len"]
