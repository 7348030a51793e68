"""`rlwb run`'s progress bar (backend.cli_runs._progress): its first rate is the first step's own
time, not the engine start and baseline evaluation before it."""

import time
from types import SimpleNamespace

import pytest

from backend.cli_runs import _progress

METRICS = {"reward/mean": 0.5, "accuracy/mean": 0.25, "rollout_tokens_per_s": 300.0, "kl": 0.01}


@pytest.mark.parametrize("start", [0, 5], ids=["new run", "resumed run"])
def test_the_first_rate_is_the_steps_own_not_the_set_up_before_it(start, capsys):
    bar, on_step, _ = _progress(SimpleNamespace(steps=30, name="t"), SimpleNamespace(path=":memory:"), start)
    try:
        time.sleep(2.0)  # the engine start and the baseline evaluation
        on_step(start + 1, {**METRICS, "time/step": 0.25})  # over tqdm's 0.1 s between refreshes
        # 1 step / 0.25 s; counting the set-up it would be 1 / 2 s
        assert bar.format_dict["rate"] > 2
        assert bar.format_dict["elapsed"] >= 2.0  # elapsed still counts the set-up
        assert bar.n == start + 1
        on_step(start + 2, {**METRICS, "time/step": 0.25})  # later steps: tqdm's own clock
        assert bar.n == start + 2
    finally:
        bar.close()
    assert "acc=0.25" in capsys.readouterr().err


def test_a_run_without_a_reference_shows_no_kl():
    bar, on_step, _ = _progress(SimpleNamespace(steps=3, name="t"), SimpleNamespace(path=":memory:"))
    try:
        on_step(1, {k: v for k, v in METRICS.items() if k != "kl"})  # kl_coef 0: the learner measures none
        assert "acc=0.25" in bar.postfix and "kl=" not in bar.postfix
        on_step(2, METRICS)
        assert "kl=0.0100" in bar.postfix
    finally:
        bar.close()
