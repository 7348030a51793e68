"""One-step off-policy overlap (`trainer.pipeline`): step t+1's rollout runs behind step t's
learner with the previous weights, is recorded as one step stale, samples the same tasks as
the on-policy loop, and never has the engine's weights changed under it."""

import pickle
import random
import threading

import pytest

from trainer.config import parse_config
from backend.store import Store
from trainer.checkpoints import ResumePoint
from trainer.groups import sample_tasks
from trainer.pipeline import StepPipeline

STEPS = 4


class WatchedEngine:
    """A real engine wrapped to record, per generate call, the weight version it ran with and
    its thread, and to fail if the weights change while a generate call runs."""

    def __init__(self, engine):
        self.engine, self.version, self.window = engine, 0, engine.window
        self.busy = threading.Lock()
        self.calls: list[tuple[int, str, list]] = []

    def generate(self, prompts, **kw):
        if not self.busy.acquire(blocking=False):
            raise AssertionError("two generate calls at once")
        try:
            out = self.engine.generate(prompts, **kw)
            self.calls.append((self.version, threading.current_thread().name, [prompts, out]))
            return out
        finally:
            self.busy.release()

    def reseed(self, seed):
        self.engine.reseed(seed)

    def sleep(self):
        if not self.busy.acquire(blocking=False):
            raise AssertionError("the engine was put to sleep while a rollout was generating")
        try:
            self.slept = getattr(self, "slept", 0) + 1
            return self.engine.sleep()
        finally:
            self.busy.release()

    def update_weights(self, weights):
        if not self.busy.acquire(blocking=False):
            raise AssertionError("weights updated while a rollout was generating")
        try:
            self.engine.update_weights(weights)
            self.version += 1
        finally:
            self.busy.release()


def _cfg(tiny_model_dir, overlap: bool, **kw):
    return parse_config({
        "model": str(tiny_model_dir), "domains": ["basic_arithmetic", "letter_counting"], "steps": STEPS,
        "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 8,
        "learning_rate": 1e-2, "kl_coef": 0.0, "rollout_engine": "hf", "overlap": overlap, **kw})


def _train(tiny_model_dir, db, overlap: bool):
    """STEPS steps through `StepPipeline` on the hf engine and the real learner; returns the
    metrics, the watched engine's calls, the saved sampler states and the recorded tasks."""
    from transformers import AutoTokenizer

    from trainer.learner import DeepSpeedLearner
    from trainer.rollout import open_engine

    cfg = _cfg(tiny_model_dir, overlap)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rng = random.Random(cfg.seed)
    learner = DeepSpeedLearner(tiny_model_dir, cfg)
    with Store(db) as store, open_engine("hf", tiny_model_dir, seed=0) as real:
        run_id = store.create_run("overlap" if overlap else "sequential", cfg.model_dump(), STEPS)
        engine = WatchedEngine(real)
        metrics, saved = [], []
        try:
            with StepPipeline(cfg, engine, learner, tok, rng, tok.eos_token_id, store, run_id) as pipe:
                for step in range(1, STEPS + 1):
                    metrics.append(pipe.step(step, prefetch_next=step < STEPS))
                    saved.append(pipe.checkpoint_state()[0].getstate())
        finally:
            learner.close()
        tasks = [(t["step"], t["domain"], t["task_seed"]) for t in store.trajectories(run_id, limit=1000)]
    return metrics, engine.calls, saved, tasks, getattr(engine, "slept", 0)


@pytest.fixture(scope="module")
def both(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("overlap")
    return _train(tiny_model_dir, root / "seq.db", False), _train(tiny_model_dir, root / "ovl.db", True)


def test_overlapped_batches_are_one_step_stale(both):
    (seq_metrics, seq_calls, _, _, seq_slept), (ovl_metrics, ovl_calls, _, _, ovl_slept) = both
    assert [m["off_policy/staleness"] for m in seq_metrics] == [0.0] * STEPS
    assert [m["off_policy/staleness"] for m in ovl_metrics] == [0.0] + [1.0] * (STEPS - 1)
    # on-policy: step t generates with the weights of t-1 syncs; overlapped: step 2 still with
    # the base weights (it ran behind step 1's learner), then one version behind
    assert [v for v, _, _ in seq_calls] == [0, 1, 2, 3]
    assert [v for v, _, _ in ovl_calls] == [0, 0, 1, 2]
    assert ovl_calls[0][1] == threading.main_thread().name
    assert all(name.startswith("rollout") for _, name, _ in ovl_calls[1:])  # behind the learner
    for m in ovl_metrics:
        assert m["learner_sequences"] == 8 and m["time/learn"] > 0 and m["time/rollout_wait"] >= 0
    # engine_sleep: asked before every learner step on-policy; overlapped only where nothing was prefetched
    # (the last step), never while a rollout generated (WatchedEngine.sleep)
    assert seq_slept == STEPS and ovl_slept == 1


def test_overlap_samples_the_same_tasks_and_saves_the_state_after_the_prefetch(both):
    (_, _, seq_saved, seq_tasks, _), (_, _, ovl_saved, ovl_tasks, _) = both
    assert seq_tasks == ovl_tasks and len(seq_tasks) == STEPS * 8
    # a checkpoint of step t stores step t+1's prefetched rollout, so the sampler as the
    # on-policy loop had it after step t+1; the last step prefetches nothing: as on-policy
    assert ovl_saved[:-1] == seq_saved[1:] and ovl_saved[-1] == seq_saved[-1]
    assert len(set(map(str, seq_saved))) == STEPS  # each step moved the sampler on


def test_a_checkpoint_holds_the_next_steps_prefetched_rollout(tiny_model_dir, tmp_path):
    """A real run (vLLM rollouts, DeepSpeed learner) with overlap: its step-2 checkpoint holds
    the rollout step 3 trained on (generated one step stale), so a resumed run trains on the
    same samples; the sampler is past step 3's draws; the optimizer state is beside it."""
    from backend.runs import run_foreground

    cfg = parse_config({
        "model": str(tiny_model_dir), "domains": ["basic_arithmetic", "chain_sum"], "steps": 3,
        "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 8,
        "learning_rate": 1e-3, "kl_coef": 0.0, "overlap": True, "checkpoint_every": 2, "vllm_compile": False,
        "vllm_memory_fraction": 0.05, "output_dir": str(tmp_path / "out")})
    with Store(tmp_path / "run.db") as store:
        run_id = run_foreground(cfg, store)
        assert store.get_run(run_id)["status"] == "completed"
        staleness = {m["step"]: m["value"] for m in store.run_metrics(run_id) if m["name"] == "off_policy/staleness"}
        point = ResumePoint.load(next(c["path"] for c in store.checkpoints(run_id) if c["step"] == 2))
        step3 = [(t["domain"], t["task_seed"], t["completion"]) for t in store.trajectories(run_id, step_min=3,
                                                                                               step_max=3)]
    assert staleness == {1: 0.0, 2: 1.0, 3: 1.0}
    rolled = pickle.loads(point.next_rollout.read_bytes())
    assert rolled.step == 3 and rolled.policy_version == 1
    assert sorted((s.domain, s.task_seed, s.completion.text) for s in rolled.groups.samples) == sorted(step3)
    # the newest checkpoint keeps the optimizer state (what an exact resume loads); older ones drop it
    assert not (point.path / "optimizer").exists() and (point.path.parent / "step-3" / "optimizer" / "state").is_dir()
    rng, replay = random.Random(), random.Random(cfg.seed)
    rng.setstate(point.rng_state)
    for _ in range(3):
        sample_tasks(cfg, replay, 2)
    assert rng.getstate() == replay.getstate()  # past steps 1-3's draws


class HangingAnswerEngine(WatchedEngine):
    """A watched engine whose first completion generated on the rollout thread (behind the
    learner) answers "hang", which `HangingVerifier` never finishes scoring; its weights
    are never updated (the stand-in learner has none)."""

    hung: tuple[int, str] | None = None  # (engine call, thread name) of the rewritten completion

    def generate(self, prompts, on_group=None, **kw):
        def hook(j, comps):
            if self.hung is None and threading.current_thread().name.startswith("rollout"):
                comps[0].text = "Answer: hang"
                self.hung = (len(self.calls), threading.current_thread().name)
            on_group(j, comps)

        return super().generate(prompts, on_group=hook, **kw)

    def update_weights(self, weights):
        self.version += 1


class CountingLearner:
    """Stands in for the learner (this test is about the rollout thread): counts its steps."""

    steps_done = 0

    def step(self, batch):
        self.steps_done += 1
        return {"loss": 0.0}

    def named_weights(self):
        return {}


def test_a_verifier_that_hangs_behind_the_learner_times_out_that_sample_and_the_run_goes_on(
        tiny_model_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from domains import registry
    from domains.contract import FORMAT_WEIGHT
    from domains.reasoning_gym import domain as rg
    from tests.domains.test_upstream import hanging_verifier
    from trainer.rollout import open_engine

    registry.registry()
    monkeypatch.setitem(registry._REGISTRY, "basic_arithmetic", hanging_verifier())
    monkeypatch.setattr(rg, "SCORE_TIMEOUT_S", 0.5)
    steps = 3
    cfg = _cfg(tiny_model_dir, True, domains=["basic_arithmetic"], steps=steps)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with Store(tmp_path / "hang.db") as store, open_engine("hf", tiny_model_dir, seed=0) as real:
        run_id = store.create_run("hang", cfg.model_dump(), steps)
        engine = HangingAnswerEngine(real)
        with StepPipeline(cfg, engine, CountingLearner(), tok, random.Random(cfg.seed), tok.eos_token_id, store,
                          run_id) as pipe:
            for step in range(1, steps + 1):
                pipe.step(step, prefetch_next=step < steps)
        rows = store.trajectories(run_id, limit=1000)
        recorded = {m["step"] for m in store.run_metrics(run_id) if m["name"] == "off_policy/staleness"}
    assert engine.hung is not None and engine.hung[1].startswith("rollout")
    timed_out = [r for r in rows if "took over" in (r["breakdown"] or {}).get("verifier_error", "")]
    assert len(timed_out) == 1 and timed_out[0]["completion"] == "Answer: hang"
    assert timed_out[0]["step"] == engine.hung[0] + 1 >= 2  # a step rolled out behind the learner
    assert timed_out[0]["breakdown"]["verifier_error"] == (
        "GenerationTimeout: scoring a basic_arithmetic answer took over 0.5 s")
    assert timed_out[0]["reward"] == pytest.approx(FORMAT_WEIGHT)
    assert recorded == set(range(1, steps + 1)) and len(rows) == steps * 8  # every step went on
