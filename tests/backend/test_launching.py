"""The Launch form's logic: model choices, defaults and clones, and validation by field
with the CLI's rules; the ETA of a live run."""


import pytest

from backend import launching
from trainer.config import parse_config
from core.errors import ConfigError, RunNotFound
from backend.runs import eta_seconds
from backend.store import Store


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "wb.db") as s:
        yield s


def _valid(model_dir) -> dict:
    return {"name": "x", "model": str(model_dir), "domains": ["chain_sum"], "group_size": 2, "micro_batch_size": 2}


def test_check_launch_accepts_what_the_cli_accepts(store, tiny_model_dir):
    cfg, errors = launching.check_launch(_valid(tiny_model_dir), store)
    assert errors == {} and cfg.domains == {"chain_sum": 1.0}
    assert cfg == parse_config(_valid(tiny_model_dir))


def test_check_launch_reports_every_bad_field_at_once(store, tiny_model_dir):
    bad = {**_valid(tiny_model_dir), "learning_rate": -1e-5, "domains": [], "group_size": 1, "max_turns": 0}
    cfg, errors = launching.check_launch(bad, store)
    assert cfg is None
    assert set(errors) == {"learning_rate", "domains", "group_size", "max_turns"}
    assert "greater than 0" in errors["learning_rate"] and "the mix is empty" in errors["domains"]
    for field in errors:  # the CLI rejects each of them alone, naming the same field
        with pytest.raises(ConfigError, match=f"field '{field}"):
            parse_config({**_valid(tiny_model_dir), field: bad[field]})


def test_check_launch_model_and_mix_problems(store, tiny_model_dir, tmp_path):
    assert "pick a model" in launching.check_launch({**_valid(tiny_model_dir), "model": ""}, store)[1]["model"]
    empty_dir = tmp_path / "not-a-checkpoint"
    empty_dir.mkdir()
    _, errors = launching.check_launch({**_valid(tiny_model_dir), "model": str(empty_dir)}, store)
    assert "has no config.json" in errors["model"]
    _, errors = launching.check_launch({**_valid(tiny_model_dir), "mix": "no-such-mix"}, store)
    assert "no-such-mix" in errors["mix"]
    _, errors = launching.check_launch({**_valid(tiny_model_dir), "nonsense_field": 3}, store)
    assert "unknown field" in errors["other"]


def test_every_problem_of_the_yaml_box_names_its_key(store, tiny_model_dir):
    """The "Other settings" box holds many fields: each problem names its key (a typo with the
    field it probably meant), and all of them are shown, not the first alone."""
    _, errors = launching.check_launch({**_valid(tiny_model_dir), "temprature": 0.7, "top_p": "lots"}, store)
    assert set(errors) == {"other"}
    assert "`temprature`: unknown field 'temprature' (did you mean 'temperature'?)" in errors["other"]
    assert "`top_p`:" in errors["other"] and "valid number" in errors["other"]


def test_other_fields_lists_the_config_fields_without_a_form_field():
    rows = {r["field"]: r for r in launching.other_fields()}
    assert "temperature" in rows and "steps" not in rows and "mix_spec" not in rows
    assert rows["temperature"]["help"] and rows["temperature"]["default"] == "1.0"


@pytest.mark.parametrize("text, problem", [
    ("a: [1, 2", "malformed YAML"), ("- just\n- a list", "a mapping"), ("steps: 3", "has a field of its own"),
    ("", None), ("temperature: 0.7", None),
])
def test_parse_extra(text, problem):
    data, error = launching.parse_extra(text)
    if problem is None:
        assert error is None and (data == {} if not text else data == {"temperature": 0.7})
    else:
        assert problem in error and data == {}


def test_defaults_new_and_cloned(store):
    fresh = launching.form_defaults(store)
    assert fresh["name"] == "quickstart" and "mix_spec" not in fresh
    rid = store.create_run("mine", {"model": "m", "group_size": 4, "mix": "math", "domains": {"a": 1.0},
                                    "mix_spec": {"name": "math"}}, total_steps=3)
    cloned = launching.form_defaults(store, rid)
    assert cloned["name"] == "mine-clone" and cloned["group_size"] == 4 and cloned["mix"] == "math"
    assert "mix_spec" not in cloned and "domains" not in cloned  # the mix is re-pinned at launch
    assert "group_size" not in launching.extra_yaml(cloned) and "model" not in launching.extra_yaml(cloned)
    with pytest.raises(RunNotFound):
        launching.form_defaults(store, "r-missing")


def test_model_choices_list_checkpoints_of_runs(store, tiny_model_dir, tmp_path):
    rid = store.create_run("trained", {}, total_steps=2)
    store.record_checkpoint(rid, 2, str(tiny_model_dir))
    store.record_checkpoint(rid, 1, str(tmp_path / "deleted"))  # gone from disk: not offered
    choices = dict(launching.model_choices(store))
    assert choices[str(tiny_model_dir)] == f"trained · {rid} · step 2"
    assert str(tmp_path / "deleted") not in choices


def test_eta_seconds():
    run = {"status": "running", "step": 4, "total_steps": 10}
    assert eta_seconds(run, [100.0, 10.0, 20.0, 10.0, 20.0, 10.0]) == pytest.approx(6 * 14.0)
    assert eta_seconds(run, []) is None
    assert eta_seconds({**run, "status": "completed"}, [10.0]) is None
    assert eta_seconds({**run, "step": 12}, [10.0]) == 0.0


def test_mix_spec_without_a_mix_is_refused(store, tiny_model_dir):
    """"Other settings" could carry a mix_spec that nothing checks without a mix: a
    10-line YAML alias bomb there passed validation and hung the page while the run's
    config was dumped to JSON (gigabytes)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    extra, problem = launching.parse_extra("mix_spec:\n  " + "\n  ".join(lines) + "\n")
    assert problem is None
    cfg, errors = launching.check_launch({**extra, **_valid(tiny_model_dir)}, store)
    assert cfg is None and "mix_spec is filled in" in errors["other"]
    with pytest.raises(ConfigError, match="field 'mix_spec'"):
        parse_config({**_valid(tiny_model_dir), "mix_spec": {"name": "math", "version": 1, "domains": {}}})


def test_the_run_estimate_learns_from_finished_runs_of_the_same_model_and_kind(store, tiny_model_dir):
    cfg = parse_config({"model": str(tiny_model_dir), "domains": {"chain_sum": 1.0, "products": 1.0}, "steps": 10,
                        "prompts_per_step": 2, "group_size": 4, "max_new_tokens": 16, "eval_tasks_per_domain": 5,
                        "eval_every": 4, "lora_rank": 0})
    d = launching.DEFAULT_COSTS
    guess = launching.estimate_run(store, cfg)
    # 4 evaluations: before, at steps 4 and 8, after; 2 domains x 5 tasks each
    assert guess["steps"] == pytest.approx(10 * 2 * 4 * 16 * d["step_per_slot"])
    assert guess["evaluations"] == pytest.approx(4 * 10 * d["eval_per_task"])
    assert guess["seconds"] == pytest.approx(d["start"] + guess["steps"] + guess["evaluations"])
    assert "no finished full fine-tuning run" in guess["basis"]
    # a finished run of the same model: 10 s start, 2 steps of 8 s (slots 2 x 4 x 16 = 128), evaluations 3 s each
    run_id = store.create_run("done", cfg.model_dump(mode="json"), 2)
    timeline = [("engine start", 0, 0), ("learner start", 0, 6), ("baseline evaluation", 0, 10), ("step", 1, 13),
                ("step", 2, 21), ("checkpoint", 2, 28), ("final evaluation", 2, 29), ("ended", 2, 32)]
    for phase, step, at in timeline:
        store.db["run_phases"].insert({"run_id": run_id, "phase": phase, "at_step": step,
                                       "started_at": f"2026-12-04T10:00:{at:02d}.000+00:00"})
    store.db["runs"].update(run_id, {"status": "completed"})
    other = store.create_run("lora", {**cfg.model_dump(mode="json"), "lora_rank": 8}, 2)  # another kind: not used
    store.db["run_phases"].insert({"run_id": other, "phase": "step", "at_step": 1,
                                   "started_at": "2026-12-04T10:00:00.000+00:00"})
    learned = launching.estimate_run(store, cfg)
    assert learned["start"] == pytest.approx(10.0)
    assert learned["steps"] == pytest.approx(10 * 8.0)  # same slots per step as the finished run
    assert learned["evaluations"] == pytest.approx(4 * 3.0)  # each evaluation also 2 x 5 tasks
    assert learned["basis"].startswith("1 finished full fine-tuning run of this model")
