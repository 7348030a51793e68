"""The GRPO family beyond GRPO, Dr. GRPO and RLOO (`trainer.algorithms.grpo`): DAPO's
clip-higher and soft overlong punishment, GSPO's sequence-level ratio, CISPO's clipped
detached weights and REINFORCE++'s batch-normalised advantages, each against values worked
out by hand on a small batch; then a 3-step tiny run of each through the real learner."""

import math

import pytest
import torch

from trainer.algorithms.grpo import ALGORITHM_PARTS, batch_normalize, policy_loss
from trainer.groups import assign_advantages, normalize_over_batch
from trainer.overlong import soft_penalty, treat_overlong
from trainer.types import Completion, Sample

from core.choices import ALGORITHMS

NEW = ["dapo", "gspo", "cispo", "reinforce_pp", "reinforce_pp_baseline"]


def _leaf(values):
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


def test_every_algorithm_has_an_estimator_and_an_objective():
    assert set(ALGORITHM_PARTS) == set(ALGORITHMS) and set(NEW) <= set(ALGORITHMS)


def test_dapo_clip_higher_lets_a_positive_ratio_rise_further():
    # ratio 1.25 on an A = +1 token: clip 0.2 caps it at 1.2 (no gradient), clip-higher 0.28 doesn't
    lp = _leaf([[math.log(1.25)]])
    old, mask, adv = torch.zeros(1, 1, dtype=torch.float64), torch.ones(1, 1), torch.tensor([1.0])
    grpo = policy_loss(lp, old, adv, mask, clip_eps=0.2)
    assert grpo.loss.item() == pytest.approx(-1.2) and grpo.clipped_sum == 1.0
    grpo.loss.backward()
    assert lp.grad.item() == 0.0
    lp.grad = None
    dapo = policy_loss(lp, old, adv, mask, clip_eps=0.2, clip_eps_high=0.28)
    assert dapo.loss.item() == pytest.approx(-1.25) and dapo.clipped_sum == 0.0
    dapo.loss.backward()
    assert lp.grad.item() == pytest.approx(-1.25)  # d(-rho)/dlogp = -rho
    # the lower bound is still clip_eps: ratio 0.7 on an A = -1 token is held at 0.8
    low = policy_loss(_leaf([[math.log(0.7)]]), old, torch.tensor([-1.0]), mask, clip_eps=0.2, clip_eps_high=0.28)
    assert low.loss.item() == pytest.approx(0.8) and low.clipped_sum == 1.0


def test_dapo_defaults_to_eps_high_0_28_and_an_explicit_value_wins(tiny_model_dir):
    from trainer.config import parse_config

    base = {"model": str(tiny_model_dir), "domains": ["chain_sum"]}
    assert parse_config({**base, "algorithm": "grpo"}).clip_range == (0.2, 0.2)
    assert parse_config({**base, "algorithm": "dapo"}).clip_range == (0.2, 0.28)
    assert parse_config({**base, "algorithm": "grpo", "clip_eps_high": 0.3}).clip_range == (0.2, 0.3)


def test_gspo_clips_and_averages_per_sequence_by_hand():
    # sequence 0: two tokens, log-ratios 0.1 and 0.3 -> s0 = e^0.2 = 1.2214, A = +1
    # sequence 1: one token, log-ratio -0.1 -> s1 = e^-0.1 = 0.9048, A = -1
    old = torch.zeros(2, 2, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    seq = torch.tensor([[0, 0], [1, 1]])
    adv = torch.tensor([1.0, -1.0])
    s0, s1 = math.exp(0.2), math.exp(-0.1)

    lp = _leaf([[0.1, 0.3], [-0.1, 0.0]])
    out = policy_loss(lp, old, adv, mask, clip_eps=0.2, objective="gspo", sequence_index=seq)
    # s0 > 1.2 with A > 0: clipped to 1.2 for both its tokens; s1 inside the range
    assert out.loss.item() == pytest.approx((-1.2 + s1) / 2)
    assert out.clipped_sum == 2.0 and out.ratio_sum == pytest.approx(2 * s0 + s1)
    out.loss.backward()
    # clipped sequence: no gradient; sequence 1: d(s1 * w)/dlogp = s1 / (1 token * 2 sequences)
    assert lp.grad.flatten().tolist() == pytest.approx([0.0, 0.0, s1 / 2, 0.0])

    lp = _leaf([[0.1, 0.3], [-0.1, 0.0]])
    wide = policy_loss(lp, old, adv, mask, clip_eps=0.5, objective="gspo", sequence_index=seq)
    assert wide.loss.item() == pytest.approx((-s0 + s1) / 2) and wide.clipped_sum == 0.0
    wide.loss.backward()
    # GSPO's gradient: -A s0 * (1/|y0|) per token, over 2 sequences: -s0 / 4 each
    assert lp.grad.flatten().tolist() == pytest.approx([-s0 / 4, -s0 / 4, s1 / 2, 0.0])


def test_gspo_is_the_same_in_the_packed_layout_and_in_micro_batches():
    torch.manual_seed(0)
    lp_pad = _leaf(torch.randn(3, 4).mul(0.1).tolist())
    old = torch.randn(3, 4, dtype=torch.float64).mul(0.1)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    adv = torch.tensor([0.5, -1.0, 2.0])
    rows = torch.arange(3).unsqueeze(1).expand(3, 4)
    full = policy_loss(lp_pad, old, adv, mask, objective="gspo", sequence_index=rows)
    full.loss.backward()
    # the packed layout: the 9 scored tokens as one-token rows, each naming its sequence
    keep = mask.bool()
    lp_flat = _leaf(lp_pad.detach()[keep].tolist())
    packed = policy_loss(lp_flat.unsqueeze(1), old[keep].unsqueeze(1), adv.repeat_interleave(mask.sum(1).long()),
                         torch.ones(9, 1), objective="gspo", sequence_index=rows[keep].unsqueeze(1),
                         num_sequences_total=3)
    packed.loss.backward()
    assert packed.loss.item() == pytest.approx(full.loss.item())
    assert lp_flat.grad.tolist() == pytest.approx(lp_pad.grad[keep].tolist())
    # two micro-batches (rows 0-1, then row 2) with the step's totals: the same loss
    parts = [policy_loss(lp_pad[a:b], old[a:b], adv[a:b], mask[a:b], objective="gspo",
                         sequence_index=rows[a:b] - a, num_sequences_total=3).loss.item() for a, b in ((0, 2), (2, 3))]
    assert sum(parts) == pytest.approx(full.loss.item())
    with pytest.raises(ValueError, match="sequence_index"):
        policy_loss(lp_pad, old, adv, mask, objective="gspo")


def test_cispo_keeps_the_gradient_of_clipped_tokens_through_a_detached_weight():
    # token 0: ratio 1.5, A = +1 -> weight min(1.5, 1.2) = 1.2; token 1: ratio 0.5, A = -1 -> 0.5 (no lower bound)
    lp = _leaf([[math.log(1.5)], [math.log(0.5)]])
    old, mask = torch.zeros(2, 1, dtype=torch.float64), torch.ones(2, 1)
    out = policy_loss(lp, old, torch.tensor([1.0, -1.0]), mask, clip_eps=0.2, objective="cispo")
    expected = (-1.2 * 1.0 * math.log(1.5) + 0.5 * math.log(0.5)) / 2
    assert out.loss.item() == pytest.approx(expected) and out.clipped_sum == 1.0
    out.loss.backward()
    assert lp.grad.flatten().tolist() == pytest.approx([-1.2 / 2, 0.5 / 2])
    # PPO's clip drops token 0's gradient altogether
    lp2 = _leaf([[math.log(1.5)], [math.log(0.5)]])
    policy_loss(lp2, old, torch.tensor([1.0, -1.0]), mask, clip_eps=0.2).loss.backward()
    assert lp2.grad.flatten()[0].item() == 0.0


def _sample(group, index, reward, tokens=4, finish="stop"):
    return Sample("chain_sum", 0, group, index, "p", [1, 2], Completion([5] * tokens, [-0.1] * tokens, "x", finish),
                  reward=reward, breakdown={})


def test_reinforce_pp_normalises_rewards_over_the_batch_by_hand():
    # group 0 rewards [1, 1] (zero variance), group 1 [0, 1]
    samples = [_sample(0, 0, 1.0), _sample(0, 1, 1.0), _sample(1, 0, 0.0), _sample(1, 1, 1.0)]
    assert assign_advantages(samples, 2, "reinforce_pp") == 1
    normalize_over_batch(samples, samples, "reinforce_pp")
    std = math.sqrt(0.1875)  # rewards' population std: mean 0.75
    assert [s.advantage for s in samples] == pytest.approx([0.25 / std, 0.25 / std, -0.75 / std, 0.25 / std], rel=1e-5)  # eps 1e-6

    samples = [_sample(0, 0, 1.0), _sample(0, 1, 1.0), _sample(1, 0, 0.0), _sample(1, 1, 1.0)]
    assign_advantages(samples, 2, "reinforce_pp_baseline")
    assert [s.advantage for s in samples] == [0.0, 0.0, -0.5, 0.5]  # group mean subtracted
    normalize_over_batch(samples, samples, "reinforce_pp_baseline")
    assert [s.advantage for s in samples] == pytest.approx([0.0, 0.0, -math.sqrt(2), math.sqrt(2)], rel=1e-5)
    # a sample outside the learner batch (skipped) is recorded with advantage 0
    samples = [_sample(0, 0, 1.0), _sample(0, 1, 0.0), _sample(1, 0, 0.0), _sample(1, 1, 1.0)]
    assign_advantages(samples, 2, "reinforce_pp")
    normalize_over_batch(samples, samples[:2], "reinforce_pp")
    assert [s.advantage for s in samples] == pytest.approx([1.0, -1.0, 0.0, 0.0], rel=1e-5)
    assert batch_normalize(torch.tensor([3.0])).tolist() == [0.0]


def test_grpo_advantages_are_left_alone_by_the_batch_step():
    samples = [_sample(0, 0, 1.0), _sample(0, 1, 0.0)]
    assign_advantages(samples, 2, "dapo")
    before = [s.advantage for s in samples]
    normalize_over_batch(samples, samples[:1], "dapo")
    assert [s.advantage for s in samples] == before == pytest.approx([1.0, -1.0], abs=1e-5)


def test_soft_overlong_punishment_by_hand():
    # L_max 64, L_cache 16: no penalty up to 48 tokens, -0.5 at 56, -1 at the cap
    assert [soft_penalty(n, 64, 16) for n in (10, 48, 56, 64)] == [0.0, 0.0, -0.5, -1.0]
    samples = [_sample(0, 0, 1.0, tokens=56), _sample(0, 1, 1.0, tokens=30), _sample(0, 2, 1.0, tokens=64, finish="length")]
    treat_overlong(samples, "soft", 64, 16)
    assert [s.reward for s in samples] == [0.5, 1.0, 0.0]
    assert samples[0].breakdown == {"overlong": "shaped", "overlong_penalty": -0.5, "unpenalized_reward": 1.0}
    assert "overlong" not in samples[1].breakdown
    treat_overlong(samples, "soft", 64, 16)  # twice changes nothing
    assert [s.reward for s in samples] == [0.5, 1.0, 0.0]
    with pytest.raises(ValueError, match="overlong_buffer"):
        treat_overlong(samples, "soft", 64, 100)


def test_a_soft_buffer_larger_than_the_cap_is_refused_naming_the_field(tiny_model_dir):
    from core.errors import ConfigError
    from trainer.config import parse_config

    with pytest.raises(ConfigError, match="overlong_buffer"):
        parse_config({"model": str(tiny_model_dir), "domains": ["chain_sum"], "overlong": "soft",
                      "max_new_tokens": 8, "overlong_buffer": 16})


class FormatOnceEngine:
    """A real engine whose first completion of each group is rewritten to "Answer: 0" (format
    credit, 0.2, and sometimes right): a random tiny model scores 0 everywhere, and a group of
    equal rewards gives these algorithms nothing to learn from."""

    def __init__(self, engine):
        self.engine, self.window = engine, engine.window

    def generate(self, prompts, on_group=None, **kw):
        def hook(j, comps):
            comps[0].text = "Answer: 0"
            if on_group is not None:
                on_group(j, comps)

        return self.engine.generate(prompts, on_group=hook, **kw)

    def reseed(self, seed):
        self.engine.reseed(seed)

    def sleep(self):
        return self.engine.sleep()

    def update_weights(self, weights):
        self.engine.update_weights(weights)


@pytest.mark.parametrize("algorithm", NEW)
def test_a_three_step_tiny_run_trains_with_each_algorithm(algorithm, tiny_model_dir, tmp_path):
    """The real step (transformers rollouts, scoring, advantages, the DeepSpeed learner, the
    weight sync) for 3 steps: every step has a finite loss and a gradient, the weights move,
    REINFORCE++'s recorded advantages are centred over each batch and DAPO's long
    completions are shaped."""
    import random

    from transformers import AutoTokenizer

    from backend.store import Store
    from trainer.config import parse_config
    from trainer.learner import DeepSpeedLearner
    from trainer.pipeline import StepPipeline
    from trainer.rollout import open_engine

    cfg = parse_config({
        "model": str(tiny_model_dir), "domains": ["basic_arithmetic", "chain_sum"], "steps": 3, "seed": 3,
        "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 8,
        "learning_rate": 1e-3, "kl_coef": 0.01, "rollout_engine": "hf", "algorithm": algorithm,
        "overlong": "soft" if algorithm == "dapo" else "keep", "overlong_buffer": 4})
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    learner = DeepSpeedLearner(tiny_model_dir, cfg)
    before = {k: v.detach().clone() for k, v in learner.module.state_dict().items()}
    with Store(tmp_path / "run.db") as store, open_engine("hf", tiny_model_dir, seed=0) as real:
        run_id = store.create_run(algorithm, cfg.model_dump(), 3)
        try:
            with StepPipeline(cfg, FormatOnceEngine(real), learner, tok, random.Random(cfg.seed), tok.eos_token_id,
                              store, run_id) as pipe:
                metrics = [pipe.step(step, prefetch_next=False) for step in (1, 2, 3)]
            moved = any(not torch.equal(before[k], v) for k, v in learner.module.state_dict().items())
        finally:
            learner.close()
        rows = store.trajectories(run_id, limit=100)
    assert all(math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]) for m in metrics), metrics
    assert all(m["grad_norm"] > 0 for m in metrics), [m["grad_norm"] for m in metrics]
    assert moved
    if algorithm.startswith("reinforce_pp"):  # normalised over each step's batch: mean 0, std 1
        for step in (1, 2, 3):
            adv = torch.tensor([r["advantage"] for r in rows if r["step"] == step])
            assert abs(adv.mean().item()) < 1e-4 and adv.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-3)
    if algorithm == "dapo":  # an 8-token cap and a 4-token buffer: a completion of over 4 tokens was shaped
        for r in rows:
            penalty = soft_penalty(r["completion_tokens"], 8, 4)
            assert r["breakdown"].get("overlong_penalty", 0.0) == pytest.approx(penalty), r
            assert (r["breakdown"].get("overlong") == "shaped") == (penalty < 0), r
        assert sum(soft_penalty(r["completion_tokens"], 8, 4) < 0 for r in rows) > len(rows) / 2, rows
        assert -0.8 in {r["reward"] for r in rows}  # the format credit survives the full penalty


@pytest.mark.parametrize("name, algorithm, clip", [("dapo", "dapo", (0.2, 0.28)), ("gspo", "gspo", (3e-4, 4e-4))])
def test_the_shipped_recipes_parse_with_their_papers_settings(name, algorithm, clip, tiny_model_dir):
    from pathlib import Path

    import yaml

    from trainer.config import parse_config

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs" / f"{name}.yaml").read_text())
    cfg = parse_config({**data, "model": str(tiny_model_dir)})  # the recipe's model need not be fetched here
    assert cfg.algorithm == algorithm and cfg.clip_range == pytest.approx(clip)
    if name == "dapo":
        assert (cfg.overlong, cfg.zero_variance, cfg.kl_coef) == ("soft", "resample", 0.0)
