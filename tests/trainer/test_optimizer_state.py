"""The learner's optimizer state across a resume (trainer.optimizer_state): the schedule's
multiplier, and where a resumed learner's learning rate stands when AdamW's state can't load.
DeepSpeed's own load and save run in tests/trainer/test_data_parallel.py and test_learner.py."""

import json
import math

import pytest
import torch

from trainer.checkpoints import OPTIMIZER_DIR
from trainer.config import RunConfig
from trainer.optimizer_state import LAYOUT_FILE, OPTIMIZER_TAG, lr_lambda, restore


def _cfg(**kw) -> RunConfig:
    return RunConfig(**{"domains": ["basic_arithmetic"], "steps": 11, "warmup_steps": 1, "learning_rate": 1e-3, **kw})


@pytest.mark.parametrize("schedule, at_6", [("constant", 1.0), ("linear", 0.5), ("cosine", 0.5)])
def test_the_schedule_warms_up_then_follows_its_shape(schedule, at_6):
    fn = lr_lambda(_cfg(lr_schedule=schedule))
    assert fn(0) == 1.0  # one warm-up step: (0 + 1) / 1
    assert fn(6) == pytest.approx(at_6)  # halfway through the 10 steps after warm-up
    assert fn(11) == pytest.approx(1.0 if schedule == "constant" else 0.0)
    assert fn(50) == fn(11)  # past the end it stays there


def test_the_cosine_schedule_follows_the_cosine():
    fn = lr_lambda(_cfg(lr_schedule="cosine"))
    assert [fn(s) for s in (3, 9)] == pytest.approx([0.5 * (1 + math.cos(math.pi * p)) for p in (0.2, 0.8)])


class _NoLoad:
    """A DeepSpeed engine stand-in that fails the test if asked to load anything."""

    def load_checkpoint(self, *a, **kw):
        raise AssertionError("nothing of another layout may be loaded")


def _scheduler(cfg: RunConfig):
    param = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([param], lr=cfg.learning_rate)
    return torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))


@pytest.mark.parametrize("layout", [None, "other_stage", "other_world"])
def test_a_resumed_learner_continues_the_schedule_when_adamw_starts_afresh(tmp_path, capsys, layout):
    """Without saved state, or with state of another ZeRO stage or process count, AdamW's
    moments start from zero, but the learning rate is the uninterrupted run's at that step; the
    reason returned (for the run's one [resume] note) names the setting that would continue
    exactly, and nothing else is printed."""
    cfg = _cfg(lr_schedule="linear", zero_stage=2)
    saved = tmp_path / "step-6" / OPTIMIZER_DIR
    (saved / OPTIMIZER_TAG).mkdir(parents=True)
    if layout == "other_stage":
        (saved / LAYOUT_FILE).write_text(json.dumps({"zero_stage": 3, "learner_processes": 1}))
    elif layout == "other_world":
        for rank in range(2):
            (saved / OPTIMIZER_TAG / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt").touch()
    else:
        (saved / OPTIMIZER_TAG).rmdir()
    sched = _scheduler(cfg)
    why = restore(_NoLoad(), sched, tmp_path / "step-6", cfg, world=1, steps_done=6, lora=False)
    assert sched.get_last_lr()[0] == pytest.approx(cfg.learning_rate * 0.5)
    assert sched.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.learning_rate * 0.5)
    sched.optimizer.step()
    sched.step()  # and it goes on from there: step 7 of 10 after warm-up
    assert sched.get_last_lr()[0] == pytest.approx(cfg.learning_rate * 0.4)
    assert capsys.readouterr().err == ""
    assert why == {None: "holds no optimizer state (written before checkpoints kept it, or not the newest)",
                   "other_stage": "holds ZeRO-3 optimizer state and this run uses ZeRO-2 (resume with zero_stage: 3 "
                                  "to continue exactly)",
                   "other_world": "holds the optimizer state of 2 learner processes and this run has 1 (resume "
                                  "with learner_processes: 2 to continue exactly)"}[layout]


def test_unreadable_saved_state_is_a_config_error_that_names_the_ways_on(tmp_path):
    from core.errors import ConfigError

    class _Unreadable:
        def load_checkpoint(self, *a, **kw):
            return None, None  # DeepSpeed's answer when it can't read the tag

    cfg = _cfg()
    (tmp_path / OPTIMIZER_DIR / OPTIMIZER_TAG).mkdir(parents=True)
    with pytest.raises(ConfigError, match="resume from an earlier checkpoint, or delete its optimizer/"):
        restore(_Unreadable(), _scheduler(cfg), tmp_path, cfg, world=1, steps_done=3, lora=False)


def test_a_checkpoint_without_optimizer_state_continues_the_schedule(tmp_path):
    """A checkpoint written before checkpoints kept the optimizer's state (no optimizer/ at all):
    AdamW starts afresh, the learning rate is the one at the checkpoint's step."""
    cfg = _cfg(lr_schedule="cosine", warmup_steps=2)
    sched = _scheduler(cfg)
    assert restore(_NoLoad(), sched, tmp_path, cfg, world=1, steps_done=7, lora=False).startswith(
        "holds no optimizer state")
    assert restore(_NoLoad(), _scheduler(cfg), None, cfg, world=1, steps_done=0, lora=False) == (
        "is no checkpoint: a fresh run")
    assert sched.get_last_lr()[0] == pytest.approx(cfg.learning_rate * lr_lambda(cfg)(7))
    assert lr_lambda(cfg)(7) < 1.0  # a point of the schedule other than its start


def test_state_of_the_same_layout_loads_and_gives_no_reason(tmp_path):
    """The same ZeRO stage and process count: DeepSpeed loads the state (the schedule with it),
    and `restore` returns None, so the run prints no [resume] note."""
    class _Loads:
        def __init__(self):
            self.calls = []

        def load_checkpoint(self, path, **kw):
            self.calls.append((path, kw["tag"], kw["load_optimizer_states"]))
            return path, {}

    cfg = _cfg(zero_stage=2)
    saved = tmp_path / OPTIMIZER_DIR
    (saved / OPTIMIZER_TAG).mkdir(parents=True)
    (saved / LAYOUT_FILE).write_text(json.dumps({"zero_stage": 2, "learner_processes": 1}))
    engine = _Loads()
    assert restore(engine, _scheduler(cfg), tmp_path, cfg, world=1, steps_done=4, lora=False) is None
    assert engine.calls == [(str(saved), OPTIMIZER_TAG, True)]
