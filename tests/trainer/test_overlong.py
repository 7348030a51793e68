"""Truncated samples under `overlong: keep | mask | penalize` (trainer.overlong, DAPO's
overlong filtering) and the config field. No model: samples are synthetic."""

import random

import pytest
import torch

from trainer.config import RunConfig, config_errors, parse_config
from core.errors import ConfigError
from trainer.algorithms.grpo import group_advantages, leave_one_out_advantages
from trainer.groups import assign_advantages, collect_groups, zero_variance
from trainer.overlong import treat_overlong
from trainer.types import Completion, Sample

G = 4


def _sample(reward: float, finish: str = "stop", group: int = 0, index: int = 0, multi_turn: bool = False,
            fault: str | None = None, domain: str = "chain_sum", seed: int = 0) -> Sample:
    # a multi-turn episode cut by its token budget also ends with finish "length" (trainer.episodes)
    comp = Completion([3, 4, 5], [-0.5] * 3, "Answer: 2", finish, mask=[1, 0, 1] if multi_turn else None)
    return Sample(domain, seed, group, index, "p", [1, 2], comp, reward=reward,
                  breakdown={"format": 1.0, "correct": reward}, fault=fault)


def _group(multi_turn: bool = False) -> list[Sample]:
    """Sample 0 was cut at the token cap right after a correct answer; 1 passed, 2 and 3 failed."""
    return [_sample(1.0, "length", index=0, multi_turn=multi_turn),
            *(_sample(r, index=i) for i, r in enumerate([1.0, 0.0, 0.0], start=1))]


def _advantages(rewards: list[float], algorithm: str) -> list[float]:
    r = torch.tensor([rewards])
    if algorithm == "rloo":
        return leave_one_out_advantages(r).flatten().tolist()
    return group_advantages(r, normalize_std=algorithm == "grpo").flatten().tolist()


def test_keep_trains_a_truncated_sample_like_a_finished_one():
    samples = _group()
    assign_advantages(samples, G, "grpo", overlong="keep")
    assert samples[0].advantage > 0 and samples[0].advantage == pytest.approx(samples[1].advantage)
    assert samples[0].reward == 1.0 and "overlong" not in samples[0].breakdown


@pytest.mark.parametrize("algorithm", ["grpo", "dr_grpo", "rloo"])
@pytest.mark.parametrize("multi_turn", [False, True])
def test_mask_gives_advantage_zero_and_leaves_the_group_statistics(algorithm, multi_turn):
    samples = _group(multi_turn)
    assign_advantages(samples, G, algorithm, overlong="mask")
    assert samples[0].advantage == 0.0
    assert samples[0].reward == 1.0 and samples[0].breakdown["overlong"] == "masked"
    # the others' advantages are those of the group without the truncated sample
    assert [s.advantage for s in samples[1:]] == pytest.approx(_advantages([1.0, 0.0, 0.0], algorithm), abs=1e-6)
    assert all("overlong" not in s.breakdown for s in samples[1:])


def test_mask_can_leave_a_group_without_signal():
    samples = [_sample(1.0, "length", index=0), *(_sample(0.0, index=i) for i in range(1, G))]
    assert not zero_variance(samples)
    assign_advantages(samples, G, "grpo", overlong="mask")
    assert zero_variance(samples) and all(s.advantage == 0.0 for s in samples)


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_penalize_replaces_the_reward_by_zero_before_advantages(algorithm):
    samples = _group()
    assign_advantages(samples, G, algorithm, overlong="penalize")
    s = samples[0]
    assert s.reward == 0.0 and s.advantage < 0
    assert [x.advantage for x in samples] == pytest.approx(_advantages([0.0, 1.0, 0.0, 0.0], algorithm), abs=1e-6)
    assert s.breakdown["overlong"] == "penalized" and s.breakdown["unpenalized_reward"] == 1.0
    assert s.breakdown["correct"] == 1.0  # the verifier's verdict is kept


def test_treatment_skips_faults_and_is_not_applied_twice():
    faulted = _sample(0.0, "length", fault="harness")
    cut = _sample(1.0, "length")
    for _ in range(2):
        treat_overlong([faulted, cut], "penalize")
    assert "overlong" not in faulted.breakdown
    assert cut.reward == 0.0 and cut.breakdown["unpenalized_reward"] == 1.0
    with pytest.raises(ValueError, match="overlong mode"):
        treat_overlong([cut], "drop")


def _play(tasks):
    """Every group as `_group`: sample 0 truncated with reward 1."""
    return [_sample(r, "length" if i == 0 else "stop", group=g, index=i, domain=t.domain, seed=t.seed)
            for g, t in enumerate(tasks) for i, r in enumerate([1.0, 1.0, 0.0, 0.0])]


def _cfg(overlong: str) -> RunConfig:
    return RunConfig(domains=["chain_sum"], prompts_per_step=2, group_size=G, micro_batch_size=G, overlong=overlong)


def test_collect_groups_leaves_masked_samples_out_of_the_batch_and_counts_them():
    got = collect_groups(_cfg("mask"), random.Random(0), _play)
    assert len(got.samples) == 2 * G  # all recorded, marked
    assert [s.index for s in got.batch] == [1, 2, 3, 1, 2, 3]
    assert all(s.breakdown["overlong"] == "masked" for s in got.samples if s.index == 0)
    assert got.metrics["overlong/masked"] == 2.0 and "overlong/penalized" not in got.metrics


def test_collect_groups_trains_penalized_samples_and_counts_them():
    got = collect_groups(_cfg("penalize"), random.Random(0), _play)
    assert got.batch == got.samples and len(got.batch) == 2 * G
    assert all(s.reward == 0.0 and s.advantage < 0 for s in got.batch if s.index == 0)
    assert got.metrics["overlong/penalized"] == 2.0 and "overlong/masked" not in got.metrics


def test_collect_groups_keeps_truncated_samples_by_default():
    got = collect_groups(_cfg("keep"), random.Random(0), _play)
    assert got.batch == got.samples and not any(k.startswith("overlong/") for k in got.metrics)
    assert all(s.advantage > 0 for s in got.batch if s.index == 0)


def test_overlong_config_defaults_to_keep_and_rejects_bad_values():
    assert RunConfig().overlong == "keep"
    with pytest.raises(ConfigError, match="field 'overlong'"):
        parse_config({"domains": ["chain_sum"], "overlong": "drop"})
    msg = config_errors({"domains": ["chain_sum"], "overlong": "truncate"})["overlong"]
    assert all(mode in msg for mode in ("keep", "mask", "penalize"))
