"""The DeepSpeed learner on batches smaller than N (zero-variance groups skipped): one
optimizer step per call whatever the number of micro-batches, with the same gradient as
one big micro-batch."""

import pytest

from trainer.config import RunConfig
from trainer.types import Completion, LearnerBatch, Sample


def _batch(rows: int) -> LearnerBatch:
    samples = [Sample("basic_arithmetic", i, i // 2, i % 2, "p", [1, 10 + i, 20 + i],
                      Completion([40 + i, 50 + i, 60 + i + (i % 2)], [-2.0, -1.5, -2.5], "x", "length"),
                      advantage=1.0 if i % 2 == 0 else -1.0)
               for i in range(rows)]
    return LearnerBatch.from_samples(samples, pad_id=0)


@pytest.fixture(scope="module")
def learners(tiny_model_dir):
    """Two learners from the same weights, N = 4: micro-batches of 1 and of 4 sequences."""
    from trainer.learner import DeepSpeedLearner

    out = [DeepSpeedLearner(tiny_model_dir, RunConfig(
        domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=mb,
        learning_rate=1e-3, kl_coef=0.0, model=str(tiny_model_dir))) for mb in (1, 4)]
    yield out
    for learner in out:
        learner.close()


def _max_diff(a, b) -> float:
    sa, sb = a.module.state_dict(), b.module.state_dict()
    return max((sa[k] - sb[k]).abs().max().item() for k in sa)


def test_partial_batches_take_one_exact_step(learners):
    small, big = learners
    before = {k: v.clone() for k, v in small.module.state_dict().items()}
    for rows, steps in ((3, 1), (4, 2), (1, 3)):  # 3 micro-batches of 1 vs one of 3; then full; then one row
        m_small, m_big = small.step(_batch(rows)), big.step(_batch(rows))
        assert small.engine.global_steps == big.engine.global_steps == steps
        assert "kl" not in m_small  # kl_coef 0: no reference, so no KL measured (not a KL of 0)
        assert m_small["grad_norm"] == pytest.approx(m_big["grad_norm"], rel=1e-4)
        assert m_small["loss"] == pytest.approx(m_big["loss"], rel=1e-4, abs=1e-6)
        # Adam's first steps turn rounding in near-zero gradients into visible moves: 5% of lr 1e-3
        # (measured 8e-6 under the dense mask, 1.5e-5 attending by parts; a wrong gradient moves ~lr)
        assert _max_diff(small, big) < 5e-5
    moved = max((v - before[k]).abs().max().item() for k, v in small.module.state_dict().items())
    assert moved > 1e-4, "three optimizer steps should move the weights"


def test_empty_or_oversized_batches_are_rejected(learners):
    small, _ = learners
    with pytest.raises(ValueError, match="1 to 4 sequences"):
        small.step(_batch(5))
    with pytest.raises(ValueError, match="at least one sample"):
        LearnerBatch.from_samples([], pad_id=0)


def test_extension_builds_are_per_environment_and_a_dead_builders_lock_is_cleared(tmp_path, monkeypatch, capsys):
    import os
    import sys
    import time

    from trainer import deepspeed_env

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    stale, fresh = tmp_path / "old_op" / "lock", tmp_path / "building_op" / "lock"
    for lock in (stale, fresh):
        lock.parent.mkdir()
        lock.touch()
    old = time.time() - deepspeed_env.STALE_BUILD_LOCK_S - 60
    os.utime(stale, (old, old))
    deepspeed_env.extensions_dir()
    assert not stale.exists() and fresh.exists()  # a build in progress keeps its lock
    assert "stale extension build lock" in capsys.readouterr().err
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    deepspeed_env.extensions_dir()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == os.path.join(sys.prefix, "torch_extensions")


@pytest.mark.parametrize("batching", ["packed", "padded"])
def test_step_scores_policy_and_reference_at_the_runs_temperature(tiny_model_dir, batching):
    # The engine's logprobs at T = 0.7 are log_softmax(logits / 0.7) (tests/trainer/test_rollout.py);
    # with those as old logprobs the first step's importance ratio is exactly 1, no token is
    # clipped, and the KL to the reference (the same weights, scored at the same T) is 0.
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.learner import DeepSpeedLearner

    temp = 0.7
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    samples = []
    for i in range(4):
        prompt, comp = [1, 10 + i, 20 + i], [40 + i, 50 + i, 60 + i, 70 + i]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + comp])).logits[0, len(prompt) - 1:-1].float()
        lps = (logits / temp).log_softmax(-1).gather(-1, torch.tensor(comp)[:, None])[:, 0].tolist()
        samples.append(Sample("basic_arithmetic", i, i // 2, i % 2, "p", prompt, Completion(comp, lps, "x", "length"),
                              advantage=1.0 if i % 2 == 0 else -1.0))
    cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=2,
                    learning_rate=1e-3, kl_coef=0.1, temperature=temp, model=str(tiny_model_dir))
    learner = DeepSpeedLearner(tiny_model_dir, cfg, batching=batching)
    try:
        m = learner.step(LearnerBatch.from_samples(samples, pad_id=0))
    finally:
        learner.close()
    assert m["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert m["clip_frac"] == 0.0
    assert abs(m["kl"]) < 1e-6


@pytest.mark.parametrize("zero_stage, lora_rank", [(0, 0), (2, 4)])
def test_a_closed_learner_gives_its_model_and_optimizer_back(tiny_model_dir, zero_stage, lora_rank):
    """After `close` and the caller's last reference, nothing keeps the model, the DeepSpeed
    engine or the optimizer alive (a ZeRO-2 optimizer's hooks did before `close` called
    DeepSpeed's destroy; the plain ZeRO-0 optimizer has none, the control)."""
    import gc
    import weakref

    from trainer.learner import DeepSpeedLearner

    learner = DeepSpeedLearner(tiny_model_dir, RunConfig(
        domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=4, learning_rate=1e-3,
        kl_coef=0.05, zero_stage=zero_stage, lora_rank=lora_rank, model=str(tiny_model_dir)))
    learner.step(_batch(4))
    held = [weakref.ref(x) for x in (learner.module, learner.engine, learner.optimizer)]
    learner.close()
    del learner
    gc.collect()
    assert [ref() is None for ref in held] == [True, True, True]


def test_without_zero_the_step_reports_the_gradient_norm_zero_2_reports(tiny_model_dir):
    """DeepSpeed keeps no gradient norm without ZeRO (a long_context run's grad_norm was NaN):
    the learner measures it before the step, the same pre-clipping norm ZeRO-2 reports."""
    from trainer.learner import DeepSpeedLearner

    out = []
    for stage in (0, 2):
        learner = DeepSpeedLearner(tiny_model_dir, RunConfig(
            domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=1,
            learning_rate=1e-3, kl_coef=0.0, max_grad_norm=1e-3, zero_stage=stage, model=str(tiny_model_dir)))
        try:
            out.append([learner.step(_batch(4))["grad_norm"] for _ in range(2)])
        finally:
            learner.close()
    assert all(n > 1e-3 for n in out[0])  # the norm before clipping, not after it
    assert out[0] == pytest.approx(out[1], rel=1e-4)
