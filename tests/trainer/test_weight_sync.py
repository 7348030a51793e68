"""Weight sync: after a DeepSpeed step, the running vLLM engine scores fixed tokens exactly
as the learner does, and differently from before the update."""

import pytest
import torch

from trainer.config import RunConfig
from trainer.types import Completion, LearnerBatch, Sample


@pytest.fixture(scope="module")
def learner_and_engine(tiny_model_dir):
    from trainer.learner import DeepSpeedLearner
    from trainer.rollout import open_engine

    cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=2,
                    learning_rate=5e-3, kl_coef=0.0, model=str(tiny_model_dir))
    learner = DeepSpeedLearner(tiny_model_dir, cfg)
    engine = open_engine("vllm", tiny_model_dir, seed=0, enforce_eager=True)
    yield learner, engine
    engine.close()
    learner.close()


def _batch() -> LearnerBatch:
    samples = []
    for i in range(4):
        prompt = [1, 10 + i, 20 + i, 30 + i]
        comp = [40 + i, 50 + i, 60 + i, 70 + i, 80 + i]
        samples.append(Sample("basic_arithmetic", i, i // 2, i % 2, "p", prompt,
                              Completion(comp, [-2.0] * len(comp), "x", "length"),
                              advantage=1.0 if i % 2 == 0 else -1.0))
    return LearnerBatch.from_samples(samples, pad_id=0)


def _engine_scores(engine, batch: LearnerBatch) -> torch.Tensor:
    out = torch.zeros_like(batch.old_logprobs)
    for i in range(batch.input_ids.shape[0]):
        cols = batch.completion_mask[i].nonzero().flatten()
        ids = batch.input_ids[i].tolist()
        p = int(cols[0])
        out[i, cols] = torch.tensor(engine.score(ids[:p], ids[p:int(cols[-1]) + 1]))
    return out


def test_weights_synced_in_place(learner_and_engine):
    learner, engine = learner_and_engine
    batch = _batch()
    before_engine = _engine_scores(engine, batch)
    before_learner = learner.logprobs(batch)
    assert torch.allclose(before_engine, before_learner, atol=1e-3)

    metrics = learner.step(batch)
    assert metrics["grad_norm"] > 0
    after_learner = learner.logprobs(batch)
    assert (after_learner - before_learner).abs().max() > 1e-2, "the step should move the policy"

    engine.update_weights(learner.named_weights())
    after_engine = _engine_scores(engine, batch)
    assert torch.allclose(after_engine, after_learner, atol=1e-3), (after_engine - after_learner).abs().max()
    assert (after_engine - before_engine).abs().max() > 1e-2
