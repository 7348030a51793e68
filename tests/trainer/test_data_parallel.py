"""The data-parallel learner (learner_processes: 2, trainer.learner_group): two real ranks under
torchrun over gloo give the same losses, gradient norms and weights as one process on the
same batches, each rank training on half the sequences, under ZeRO 0, 2 and 3 (parameters
partitioned, gathered a layer at a time for the sync and checkpoints); a run with it
completes, and a bad worker start fails clearly."""

from pathlib import Path

import pytest
import torch

from core.errors import ConfigError, EngineError
from trainer.config import RunConfig
from trainer.types import Completion, LearnerBatch, Sample

PROMPTS, GROUP = 4, 2


def _cfg(tiny_model_dir, **kw) -> RunConfig:
    return RunConfig(**{"domains": ["basic_arithmetic"], "prompts_per_step": PROMPTS, "group_size": GROUP,
                        "micro_batch_size": 2, "learning_rate": 1e-2, "kl_coef": 0.1, "model": str(tiny_model_dir),
                        **kw})


def _batch(seed: int) -> LearnerBatch:
    """4 groups of 2 with prompts and completions of different lengths."""
    g = torch.Generator().manual_seed(seed)
    samples = []
    for group in range(PROMPTS):
        prompt = torch.randint(3, 1000, (4 + 2 * group,), generator=g).tolist()
        for i in range(GROUP):
            n = 3 + int(torch.randint(0, 5, (1,), generator=g))
            ids = torch.randint(3, 1000, (n,), generator=g).tolist()
            samples.append(Sample("basic_arithmetic", group, group, i, "p", prompt,
                                  Completion(ids, (-torch.rand(n, generator=g) - 1).tolist(), "x", "length"),
                                  advantage=1.0 if i == 0 else -1.0))
    return LearnerBatch.from_samples(samples, pad_id=0)


def _long_batch() -> LearnerBatch:
    """2 groups of 2: the first with 300-token completions (600 scored tokens, more than one
    slice of the LM head's `LOGIT_CHUNK_TOKENS`), the second with 5-token ones."""
    g = torch.Generator().manual_seed(7)
    samples = []
    for group, n in enumerate((300, 5)):
        prompt = torch.randint(3, 1000, (6,), generator=g).tolist()
        for i in range(GROUP):
            ids = torch.randint(3, 1000, (n,), generator=g).tolist()
            samples.append(Sample("basic_arithmetic", group, group, i, "p", prompt,
                                  Completion(ids, (-torch.rand(n, generator=g) - 1).tolist(), "x", "length"),
                                  advantage=1.0 if i == 0 else -1.0))
    return LearnerBatch.from_samples(samples, pad_id=0)


def test_a_shard_keeps_groups_whole_and_covers_every_row_once():
    batch = _batch(0)
    shards = [batch.shard(r, 2) for r in range(2)]
    rows = sorted(tuple(row.tolist()) for s in shards for row in s.input_ids)
    assert rows == sorted(tuple(row.tolist()) for row in batch.input_ids)
    assert [s.input_ids.shape[0] for s in shards] == [4, 4]  # two groups each
    for s in shards:  # a group's two rows (same prompt) sit on one rank
        prompts = [tuple(r[:4].tolist()) for r in s.input_ids]
        assert all(prompts.count(p) == 2 for p in prompts)
    one = batch.rows([0])  # fewer groups than ranks: rows dealt out, a rank may get none
    assert one.shard(0, 2).input_ids.shape[0] == 1 and one.shard(1, 2) is None
    with pytest.raises(ValueError, match="rank must be in"):
        batch.shard(2, 2)


@pytest.mark.parametrize("zero_stage", [2, 0, 3])
def test_two_learner_processes_equal_one_on_the_same_batches(tiny_model_dir, zero_stage):
    from trainer.learner import DeepSpeedLearner
    from trainer.learner_group import LearnerGroup

    # the second step's batch holds one sequence: rank 1 has no share and runs zero-weight passes
    # (under ZeRO-3 a real forward and backward: the layers' gathers are collective); in the fourth
    # rank 0 scores 600 tokens and rank 1 ten (the LM head must be called as often on both)
    batches = [_batch(1), _batch(2).rows([0]), _batch(3), _long_batch()]
    one = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=2))  # the reference: no partitioning
    try:
        single = [one.step(b) for b in batches]
        want = {k: v.detach().clone() for k, v in one.named_weights()}
    finally:
        one.close()
    group = LearnerGroup(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=zero_stage, learner_processes=2))
    try:
        double = [group.step(b) for b in batches]
        got = dict(group.named_weights())
    finally:
        group.close()
    assert group._proc.returncode == 0
    for a, b in zip(single, double):
        assert b["learner_processes"] == 2 and a["learner_processes"] == 1
        for key in ("loss", "grad_norm", "kl", "pg_loss", "entropy", "learner_tokens", "learner_computed_tokens"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key  # ZeRO-0: the learner's own norm
    assert [b["learner_sequences_per_process"] for b in double] == [PROMPTS * GROUP / 2, 1, PROMPTS * GROUP / 2, 2]
    assert got.keys() == want.keys()
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).state_dict()
    moved = sum(((want[k] - base[k]) ** 2).sum().item() for k in base) ** 0.5
    differ = sum(((got[k] - want[k]) ** 2).sum().item() for k in want) ** 0.5
    # AdamW divides by sqrt(v): a near-zero gradient's rounding can move one weight's update by a
    # share of lr, so the weights agree (L2 over all of them) to within a small share of how far the
    # steps moved them
    assert moved > 1e-2 and differ < 0.01 * moved, (moved, differ)


@pytest.mark.parametrize("zero_stage", [2, 3])
def test_a_group_checkpoint_resumes_with_its_optimizer_state(tiny_model_dir, tmp_path, zero_stage):
    from trainer.learner import DeepSpeedLearner
    from trainer.learner_group import LearnerGroup

    cfg = _cfg(tiny_model_dir, learner_processes=2, zero_stage=zero_stage)
    group = LearnerGroup(tiny_model_dir, cfg)
    try:
        group.step(_batch(1))
        path = group.save_checkpoint(tmp_path / "step-1", tokenizer=object(), extra={"state.json": {"step": 1}})
        group.step(_batch(2))
        after_three = group.step(_batch(3))  # its loss depends on AdamW's moments from step 1
    finally:
        group.close()
    assert (path / "model.safetensors").exists() and (path / "tokenizer_config.json").exists()
    assert (path / "state.json").read_text() == '{"step": 1}' and not path.with_name("step-1.tmp").exists()
    resumed = LearnerGroup(tiny_model_dir, cfg, init_from=path, steps_done=1)
    try:  # AdamW's moments come back: the next step is the uninterrupted one's
        assert resumed.optimizer_restored and resumed.optimizer_note is None and resumed.steps_done == 1
        resumed.step(_batch(2))
        again = resumed.step(_batch(3))
    finally:
        resumed.close()
    assert again["loss"] == pytest.approx(after_three["loss"], rel=1e-5)
    assert again["grad_norm"] == pytest.approx(after_three["grad_norm"], rel=1e-5)
    one = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=zero_stage), init_from=path, steps_done=1)
    try:  # ZeRO's state is partitioned over 2 ranks: one process takes the weights, says why, and starts AdamW afresh
        assert not one.optimizer_restored
        assert one.optimizer_note.startswith("holds the optimizer state of 2 learner processes and this run has 1")
        one.step(_batch(2))
        fresh = one.step(_batch(3))
    finally:
        one.close()
    assert abs(fresh["loss"] - after_three["loss"]) > 1e-4 * abs(after_three["loss"])  # the moments mattered


def test_a_rank_that_fails_alone_stops_the_group_with_its_error(tiny_model_dir, tmp_path):
    """Rank 0 fails where the others don't (it alone creates the checkpoint directory): the run
    gets its traceback and the group ends, rather than the other ranks waiting at a barrier."""
    from trainer.learner_group import LearnerGroup

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    group = LearnerGroup(tiny_model_dir, _cfg(tiny_model_dir, learner_processes=2, zero_stage=3))
    try:
        group.step(_batch(1))
        with pytest.raises(EngineError, match="a learner process failed") as err:
            group.save_checkpoint(blocker / "step-1")
        assert "NotADirectoryError" in str(err.value) or "Not a directory" in str(err.value)
    finally:
        group.close()
    assert group._proc.returncode not in (0, None)


def test_a_group_that_cannot_start_says_why(tmp_path):
    from trainer.learner_group import LearnerGroup

    missing = tmp_path / "no-model"
    cfg = RunConfig(domains=["basic_arithmetic"], prompts_per_step=2, group_size=2, micro_batch_size=2,
                    model=str(missing), learner_processes=2)
    with pytest.raises(EngineError, match="did not start") as err:
        LearnerGroup(missing, cfg, log_path=tmp_path / "learners.log")
    assert "no-model" in str(err.value)  # the workers' own error is quoted
    with pytest.raises(ConfigError, match="learner_processes"):
        LearnerGroup(missing, cfg.model_copy(update={"learner_processes": 1}))


@pytest.mark.parametrize("zero_stage", [2, 3])
def test_a_run_with_two_learner_processes(tiny_model_dir, tmp_path, request, zero_stage):
    """`rlwb run`'s loop with learner_processes: 2: vLLM rollouts in the run's process, the
    update on two torchrun ranks, the weights synced back each step (the learner's importance
    ratio on each step's fresh samples is 1: the engine sampled with the learner's weights), a
    checkpoint, and the ranks' log beside it; its first step equals a one-process run's. Under
    ZeRO-3 (both runs) the synced weights are gathered a layer at a time."""
    from backend.runs import run_foreground
    from backend.store import Store
    from core.paths import run_dir
    from domains import registry
    from domains.user import library
    from tests.reliability.test_exact_resume import DOMAIN
    from trainer.config import parse_config

    def run(store, processes: int):
        cfg = parse_config({
            "name": f"dp{processes}", "model": str(tiny_model_dir), "steps": 3, "seed": 5, "domains": [DOMAIN["name"]],
            "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 2, "max_new_tokens": 8,
            "learning_rate": 1e-2, "eval_tasks_per_domain": 0, "vllm_compile": False, "vllm_memory_fraction": 0.05,
            "checkpoint_every": 0, "learner_processes": processes, "zero_stage": zero_stage,
            "output_dir": str(tmp_path / f"out{processes}")})
        run_id = run_foreground(cfg, store)
        run = store.get_run(run_id)
        assert run["status"] == "completed", run["error"]
        by = {(m["step"], m["name"]): m["value"] for m in store.run_metrics(run_id)}
        rows = sorted((r["step"], r["group_idx"], r["sample_idx"], r["completion"], r["reward"])
                      for r in store.trajectories(run_id, limit=1000))
        return cfg, run_id, by, rows

    with Store(tmp_path / "run.db") as store:
        library.add_domain(store, DOMAIN, rows=[{"id": f"r{i}", "question": f"Say something about {i}.",
                                                 "answer": "0"} for i in range(40)])
        request.addfinalizer(lambda: registry.unregister(DOMAIN["name"]))
        _, _, one, one_rows = run(store, 1)
        cfg, run_id, two, two_rows = run(store, 2)
        ckpts = store.checkpoints(run_id)
    steps = (1, 2, 3)
    assert [two[(s, "learner_processes")] for s in steps] == [2.0] * 3
    for s in steps:  # the ranks' own memory (the run's process measures only itself)
        if (s, "grad_norm") in two:
            assert 0 < two[(s, "memory/learner_rank_peak_gb")] < two[(s, "memory/learner_ranks_peak_gb")]
    learned = [s for s in steps if (s, "grad_norm") in two and two[(s, "grad_norm")] > 0]
    assert learned, "no step had a group with unequal rewards"
    for s in learned:  # each rank trained on its share, and the engine sampled with the learner's weights
        assert two[(s, "learner_sequences_per_process")] < two[(s, "learner_sequences")]
        assert abs(two[(s, "ratio_mean")] - 1.0) < 1e-3, (s, two[(s, "ratio_mean")])
    for s in (s for s in steps if one.get((s, "grad_norm"), 0) > 0):  # the one-process run's sync too
        assert abs(one[(s, "ratio_mean")] - 1.0) < 1e-3, (s, one[(s, "ratio_mean")])
    assert [r for r in two_rows if r[0] == 1] == [r for r in one_rows if r[0] == 1]
    assert two[(1, "loss")] == pytest.approx(one[(1, "loss")], rel=1e-4, abs=1e-7)
    assert ckpts[-1]["step"] == 3 and (Path(ckpts[-1]["path"]) / "model.safetensors").exists()
    assert (run_dir(cfg.output_dir, run_id) / "learners.log").stat().st_size > 0


def test_zero3_partitions_the_parameters_and_gathers_them_for_sync_and_checkpoints(tiny_model_dir, tmp_path):
    """One process under ZeRO-3 (LoRA and full): parameters partitioned, `named_weights` gives
    what a ZeRO-2 learner's gives after the same steps (merged LoRA weights, tied lm_head
    included), and a checkpoint holds full HF weights and the adapter a resumed run loads."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from trainer.learner import DeepSpeedLearner
    from trainer.weights import ADAPTER_DIR

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).state_dict()
    full = {}
    for lora in (0, 4):
        weights, saved = {}, {}
        for stage in (2, 3):
            learner = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=stage, lora_rank=lora))
            try:
                if stage == 3:  # a partitioned parameter holds nothing outside a gather
                    partitioned = [p for p in learner.module.parameters() if p.numel() == 0 and p.ds_numel > 0]
                    assert partitioned, "ZeRO-3 partitioned no parameter"
                    if not lora:  # the frozen KL reference too
                        assert any(p.numel() == 0 for p in learner.ref_model.module.parameters())
                for s in (1, 2):
                    learner.step(_batch(s))
                weights[stage] = {k: v.detach().clone() for k, v in learner.named_weights()}
                path = learner.save_checkpoint(tmp_path / f"lora{lora}-z{stage}")
                saved[stage] = load_file(path / "model.safetensors")
                if lora:
                    assert (path / ADAPTER_DIR / "adapter_model.safetensors").exists()
            finally:
                learner.close()
        assert weights[3].keys() == weights[2].keys() and "lm_head.weight" in weights[3]
        assert not any(".lora_" in k or "base_layer" in k for k in weights[3])
        moved = max((weights[2][k] - base[k]).abs().max().item() for k in base)
        differ = max((weights[3][k] - weights[2][k]).abs().max().item() for k in base)
        assert moved > 1e-3 and differ < 0.02 * moved, (lora, moved, differ)  # as in the two-process test
        assert saved[3].keys() == saved[2].keys()
        assert max((saved[3][k] - weights[3][k]).abs().max().item() for k in saved[3]) == 0.0
        resumed = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=3, lora_rank=lora),
                                   init_from=tmp_path / f"lora{lora}-z3", steps_done=2)
        try:  # the adapter (LoRA) or the weights, and AdamW's state, come back
            assert resumed.optimizer_restored
            back = {k: v.clone() for k, v in resumed.named_weights()}
            assert all(torch.allclose(back[k], weights[3][k], atol=1e-6) for k in weights[3])
        finally:
            resumed.close()
        full = full or weights[3]  # the full fine-tuning's
    other = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=2), init_from=tmp_path / "lora0-z3",
                             steps_done=2)
    try:  # ZeRO-3's optimizer state can't be read into ZeRO-2's layout: the weights load, AdamW starts afresh
        assert not other.optimizer_restored
        assert other.optimizer_note.startswith("holds ZeRO-3 optimizer state and this run uses ZeRO-2")
        assert torch.allclose(dict(other.named_weights())["lm_head.weight"], full["lm_head.weight"])
    finally:
        other.close()


def test_zero3_calls_the_lm_head_once_per_pass(tiny_model_dir):
    """ZeRO-3 gathers the head's weight at each call (a collective), so every rank must call it
    as often as the others: one slice of scored tokens per pass, where ZeRO-2 takes them
    `LOGIT_CHUNK_TOKENS` at a time (and again in the backward)."""
    from trainer.learner import DeepSpeedLearner

    calls = {}
    for stage in (2, 3):
        learner = DeepSpeedLearner(tiny_model_dir, _cfg(tiny_model_dir, zero_stage=stage, kl_coef=0.0))
        try:
            n = [0]
            handle = learner.module.get_output_embeddings().register_forward_hook(lambda *a: n.__setitem__(0, n[0] + 1))
            metrics = learner.step(_long_batch().rows([0, 1]))  # 600 scored tokens in one micro-batch
            handle.remove()
        finally:
            learner.close()
        assert metrics["learner_micro_batches"] == 1
        calls[stage] = n[0]
    assert calls[3] == 2  # the forward's pass-through, then one slice
    assert calls[2] > calls[3]  # two slices, each recomputed in the backward
