"""Curriculum levels, task sampling over level ranges, zero-variance keep/skip/resample and
the config fields that drive them. No model: samples are synthetic, rollouts are faked."""

import random
from collections import Counter

import pytest

from trainer.config import RunConfig, parse_config
from core.errors import ConfigError
from backend.store import Store
from trainer import pipeline
from trainer.curriculum import Curriculum
from trainer.groups import collect_groups, sample_tasks
from trainer.loop import train_step
from trainer.types import Completion, Sample

G = 4


def _sample(domain: str, correct: bool, group: int = 0, index: int = 0, fault: str | None = None,
            seed: int = 0) -> Sample:
    r = float(correct)
    return Sample(domain, seed, group, index, "p", [1, 2], Completion([3, 4], [-0.5, -0.5], "x", "stop"),
                  reward=r, breakdown={"format": 1.0, "correct": r}, fault=fault)


def _mix_cfg(domains: dict[str, tuple[float, int, int]], **kw) -> RunConfig:
    spec = {"name": "test", "version": 1,
            "domains": {d: {"weight": w, "levels": [lo, hi]} for d, (w, lo, hi) in domains.items()}}
    return RunConfig(mix="test", mix_spec=spec, **kw)


# ---- Curriculum ------------------------------------------------------------------------


def _simulate(cur: Curriculum, pass_every: dict[str, int], steps: int, per_step: int = 4) -> list[dict]:
    """Feed `steps` steps of `per_step` samples per domain; a domain passes 1 in `pass_every`
    samples (1: always, 0: never). Returns the level of every domain after each step."""
    history, k = [], 0
    for _ in range(steps):
        batch = []
        for d, every in pass_every.items():
            for _ in range(per_step):
                batch.append(_sample(d, every > 0 and k % every == 0))
                k += 1
        cur.update(batch)
        history.append({d: cur.level(d) for d in pass_every})
    return history


def test_levels_follow_fixed_pass_rates_and_stay_in_range():
    specs = {"easy": (1.0, 1, 5), "hard": (1.0, 2, 4), "even": (1.0, 1, 3)}
    cur = Curriculum(specs, window=8, raise_above=0.8, lower_below=0.2)
    assert {d: cur.level(d) for d in specs} == {"easy": 1, "hard": 2, "even": 1}  # start at lo
    # always pass: climbs one level per full window (8 samples = 2 steps), then holds at hi
    history = _simulate(cur, {"easy": 1, "hard": 1, "even": 2}, steps=12)
    assert [h["easy"] for h in history] == [1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 5, 5]
    assert history[-1] == {"easy": 5, "hard": 4, "even": 1}  # 50% neither raises nor lowers
    # now always fail: drops back to lo and stays there
    history += _simulate(cur, {"easy": 0, "hard": 0, "even": 2}, steps=12)
    assert history[-1] == {"easy": 1, "hard": 2, "even": 1}
    for h in history:
        for d, lvl in h.items():
            assert specs[d][1] <= lvl <= specs[d][2]
    state = cur.state()
    assert state["curriculum/level/easy"] == 1.0 and state["curriculum/pass_rate/even"] == 0.5


def test_window_must_fill_and_is_cleared_by_a_move():
    cur = Curriculum({"a": (1.0, 1, 3)}, window=4)
    assert cur.update([_sample("a", True)] * 3) == {}  # 3 of 4: not full yet
    assert cur.state()["curriculum/pass_rate/a"] == 1.0
    assert cur.update([_sample("a", True)]) == {"a": 1} and cur.level("a") == 2
    assert cur.update([_sample("a", True)] * 3) == {}  # the window restarted at the new level
    assert cur.update([_sample("a", False)] * 4) == {"a": -1} and cur.level("a") == 1


def test_faults_and_unknown_domains_are_ignored():
    cur = Curriculum({"a": (1.0, 1, 3)}, window=4)
    cur.update([_sample("a", True, fault="harness")] * 8 + [_sample("other", True)] * 8)
    assert cur.level("a") == 1 and "curriculum/pass_rate/a" not in cur.state()


def test_curriculum_is_deterministic():
    runs = []
    for _ in range(2):
        cur = Curriculum({"a": (1.0, 1, 5), "b": (2.0, 1, 3)}, window=5)
        runs.append(_simulate(cur, {"a": 1, "b": 3}, steps=10, per_step=3))
    assert runs[0] == runs[1]


def test_curriculum_rejects_bad_settings():
    with pytest.raises(ValueError, match="lower_below < raise_above"):
        Curriculum({"a": (1.0, 1, 3)}, lower_below=0.8, raise_above=0.8)
    with pytest.raises(ValueError, match="empty"):
        Curriculum({"a": (1.0, 3, 2)})
    with pytest.raises(ValueError, match="at least one domain"):
        Curriculum({})


# ---- sample_tasks ----------------------------------------------------------------------


def test_sample_tasks_respects_level_ranges_and_weights():
    cfg = _mix_cfg({"chain_sum": (3.0, 2, 3), "leg_counting": (1.0, 1, 5)})
    tasks = sample_tasks(cfg, random.Random(0), 200)
    by_domain = Counter(t.domain for t in tasks)
    assert 0.65 < by_domain["chain_sum"] / len(tasks) < 0.85  # weight 3 : 1
    levels = {d: Counter(t.difficulty for t in tasks if t.domain == d) for d in by_domain}
    assert set(levels["chain_sum"]) == {2, 3}
    assert set(levels["leg_counting"]) == {1, 2, 3, 4, 5}  # uniform over the range
    again = sample_tasks(cfg, random.Random(0), 200)
    assert [(t.domain, t.seed, t.difficulty) for t in again] == [(t.domain, t.seed, t.difficulty) for t in tasks]


def test_sample_tasks_uses_the_curriculum_level_and_fixed_difficulty():
    cfg = _mix_cfg({"chain_sum": (1.0, 1, 3), "leg_counting": (1.0, 2, 5)}, curriculum=True)
    cur = Curriculum.from_config(cfg)
    cur.update([_sample("leg_counting", True)] * cfg.curriculum_window)
    tasks = sample_tasks(cfg, random.Random(1), 40, cur)
    assert {(t.domain, t.difficulty) for t in tasks} == {("chain_sum", 1), ("leg_counting", 3)}
    plain = RunConfig(domains=["chain_sum", "basic_arithmetic"], difficulty=2)
    assert {t.difficulty for t in sample_tasks(plain, random.Random(0), 20)} == {2}


# ---- zero-variance groups --------------------------------------------------------------


class ScriptedPlay:
    """A fake rollout: call k gets the k-th list of outcomes, one per task: "zero" (all G
    samples fail) or "mixed" (half pass). Records the tasks it was given."""

    def __init__(self, script: list[list[str]]):
        self.script, self.calls = list(script), []

    def __call__(self, tasks):
        outcomes = self.script.pop(0)
        assert len(outcomes) == len(tasks)
        self.calls.append(tasks)
        return [_sample(t.domain, kind == "mixed" and i % 2 == 0, group=g, index=i, seed=t.seed)
                for g, (t, kind) in enumerate(zip(tasks, outcomes)) for i in range(G)]


SCRIPT = [["mixed", "zero", "zero", "mixed"], ["mixed", "zero"], ["zero"]]


def _cfg(mode: str, **kw) -> RunConfig:
    return RunConfig(domains=["chain_sum", "basic_arithmetic"], prompts_per_step=4, group_size=G,
                     micro_batch_size=G, zero_variance=mode, **kw)


def _groups(samples) -> list[int]:
    return sorted({s.group for s in samples})


def test_keep_leaves_zero_variance_groups_in_the_batch():
    play = ScriptedPlay(SCRIPT)
    got = collect_groups(_cfg("keep"), random.Random(0), play)
    assert len(play.calls) == 1 and got.batch == got.samples == got.rolled and len(got.batch) == 4 * G
    assert all(s.advantage == 0.0 for s in got.samples if s.group in (1, 2))
    m = got.metrics
    assert m["zero_variance/groups"] == m["zero_variance_groups"] == 0.5
    assert (m["zero_variance/resampled"], m["zero_variance/skipped"], m["zero_variance/discarded_samples"]) == (0, 0, 0)
    tasks = play.calls[0]
    for d in {t.domain for t in tasks}:  # per domain: share of that domain's groups
        mine = [g for g, t in enumerate(tasks) if t.domain == d]
        assert m[f"zero_variance/{d}"] == sum(g in (1, 2) for g in mine) / len(mine)


def test_skip_drops_zero_variance_groups_from_the_batch():
    got = collect_groups(_cfg("skip"), random.Random(0), ScriptedPlay(SCRIPT))
    assert _groups(got.samples) == [0, 1, 2, 3]  # all recorded
    assert _groups(got.batch) == [0, 3]
    assert got.metrics["zero_variance/skipped"] == 2 and got.metrics["zero_variance/resampled"] == 0


def test_resample_replaces_groups_then_skips_what_is_left():
    play = ScriptedPlay(SCRIPT)
    got = collect_groups(_cfg("resample", max_resample_rounds=2), random.Random(0), play)
    assert [len(c) for c in play.calls] == [4, 2, 1]
    first, second, third = play.calls
    seeds = {g: {s.task_seed for s in got.samples if s.group == g} for g in range(4)}
    # group 1 replaced in round 1 (mixed); group 2 redrawn twice and still zero-variance
    assert seeds == {0: {first[0].seed}, 1: {second[0].seed}, 2: {third[0].seed}, 3: {first[3].seed}}
    assert _groups(got.batch) == [0, 1, 3]
    assert sorted(s.index for s in got.samples if s.group == 1) == list(range(G))
    assert any(s.advantage != 0.0 for s in got.samples if s.group == 1)
    assert len(got.rolled) == 7 * G and len(got.samples) == 4 * G
    m = got.metrics
    assert m["zero_variance/groups"] == 0.5  # of the originally sampled groups
    assert (m["zero_variance/resampled"], m["zero_variance/skipped"], m["zero_variance/discarded_samples"]) \
        == (3, 1, 3 * G)


def test_resample_rounds_stop_when_nothing_is_left():
    play = ScriptedPlay([["mixed", "zero", "mixed", "mixed"], ["mixed"]])
    got = collect_groups(_cfg("resample", max_resample_rounds=5), random.Random(0), play)
    assert len(play.calls) == 2 and len(got.batch) == 4 * G and got.metrics["zero_variance/skipped"] == 0


class RefusingLearner:
    def step(self, batch):
        raise AssertionError("no learner step when every group is skipped")


class RefusingEngine:
    def reseed(self, seed):  # every step's rollout is seeded: allowed
        pass

    def update_weights(self, weights):
        raise AssertionError("no weight sync when every group is skipped")


def test_a_step_with_every_group_skipped_records_but_does_not_learn(tmp_path, monkeypatch):
    cfg = _cfg("skip", curriculum=True, curriculum_window=4)
    script = ScriptedPlay([["zero"] * 4])
    monkeypatch.setattr(pipeline, "rollout", lambda engine, tok, tasks, *a, **kw: script(tasks))
    cur = Curriculum.from_config(cfg)
    with Store(tmp_path / "t.db") as store:
        rid = store.create_run("skip", cfg.model_dump(), total_steps=1)
        metrics = train_step(cfg, RefusingEngine(), RefusingLearner(), None, random.Random(0), 0, store, rid, 1,
                             curriculum=cur)
        assert len(store.trajectories(rid)) == 4 * G
        recorded = {m["name"]: m["value"] for m in store.run_metrics(rid)}
    assert recorded == pytest.approx(metrics)
    assert metrics["learner_sequences"] == 0 and "loss" not in metrics
    assert metrics["zero_variance/skipped"] == 4 and metrics["zero_variance/groups"] == 1.0
    for d in cfg.domain_list:
        assert metrics[f"curriculum/level/{d}"] == 1.0
    assert any(k.startswith("curriculum/pass_rate/") for k in metrics)
    assert metrics["accuracy/mean"] == 0.0 and metrics["reward/mean"] == 0.0


# ---- config ----------------------------------------------------------------------------


def test_new_fields_have_safe_defaults():
    cfg = RunConfig()
    assert (cfg.curriculum, cfg.zero_variance, cfg.curriculum_window, cfg.max_resample_rounds) == (False, "keep", 32, 2)


@pytest.mark.parametrize("fields, named", [
    ({"curriculum_raise_above": 0.5, "curriculum_lower_below": 0.6}, "curriculum_lower_below"),
    ({"curriculum_lower_below": 0.8}, "curriculum_lower_below"),  # equal to the default raise
    ({"curriculum_raise_above": 0.0}, "curriculum_raise_above"),
    ({"curriculum_raise_above": 1.5}, "curriculum_raise_above"),
    ({"curriculum_lower_below": -0.1}, "curriculum_lower_below"),
    ({"curriculum_window": 3}, "curriculum_window"),
    ({"zero_variance": "drop"}, "zero_variance"),
    ({"max_resample_rounds": 11}, "max_resample_rounds"),
])
def test_bad_curriculum_and_zero_variance_settings_name_the_field(fields, named):
    with pytest.raises(ConfigError, match=f"field '{named}'"):
        parse_config({"domains": ["chain_sum"], **fields})
