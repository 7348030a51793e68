"""The rollout engine asleep through the learner step against awake: the step's peak memory.

    python bench/engine_sleep.py           # SmolLM2-135M, the quickstart's run (LoRA r16, 8 prompts x 8), 3 timed pairs
    python bench/engine_sleep.py --quick   # the same with 2 prompts x 8 and 2 timed pairs: about a minute

One process holds what a run's process holds: the in-process vLLM engine (sized as a run of
``configs/quickstart.yaml`` sizes it, `trainer.loop.engine_options`, in eager mode) and the
DeepSpeed learner. Each step generates the step's prompts (G samples each: the KV cache in
use), then runs the learner on a batch of those prompts (`bench.learner_mfu.build_batches`)
and syncs the weights into the engine, in one of two modes, alternating A B, B A, ... after
a warm-up pair so both see the same load:

- **awake**: the engine keeps its weights and KV cache through the learner step (what runs
  did before ``engine_sleep``);
- **asleep**: ``engine.sleep()`` before the learner step (`RolloutEngine.sleep`), the sync
  loads the weights back (a run's default, ``engine_sleep: true``).

Printed per mode: the learner phase's peak RSS (VmHWM reset at its start, as the run's
``memory/learn_peak_gb``), the sync's seconds and peak, the seconds of the rollout after it (where an
asleep engine's KV cache comes back), and for asleep the resident memory the sleep gave back (each read after glibc returned its free pages). The last line is ``ratio:`` = awake's
learner-phase peak / asleep's (medians over the timed steps). A benchmark, not a test:
figures depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import build_batches, cpu_features, load_average  # noqa: E402

MODES = ("awake", "asleep")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 prompts x 8 and 2 timed pairs")
    ap.add_argument("--pairs", type=int, help="timed pairs after the warm-up (default 3; 2 with --quick)")
    args = ap.parse_args(argv)
    pairs = args.pairs or (2 if args.quick else 3)

    from transformers import AutoTokenizer

    from trainer.config import load_config
    from trainer.learner import DeepSpeedLearner
    from trainer.loop import engine_options
    from trainer.metrics import PeakRSS, release_free_memory, resident_gb
    from trainer.models import resolve_model
    from trainer.rollout import open_engine
    from trainer.types import LearnerBatch

    root = Path(__file__).resolve().parents[1]
    cfg = load_config(root / "configs" / "quickstart.yaml")
    if args.quick:
        cfg = cfg.model_copy(update={"prompts_per_step": 2})
    print(cpu_features())
    print(load_average())
    model_path = resolve_model(cfg.model)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    batches = [LearnerBatch(**b) for b in build_batches(cfg, tokenizer, 2 * (pairs + 1) + 1)]
    kw = engine_options(cfg, model_path, tokenizer)
    kw["enforce_eager"] = True  # the engine's memory is the same compiled or not; eager starts in seconds
    engine = open_engine("vllm", model_path, seed=cfg.seed, dtype=cfg.dtype, **kw)
    learner = DeepSpeedLearner(model_path, cfg)
    print(f"{cfg.model}: LoRA r{cfg.lora_rank}, {cfg.prompts_per_step} prompts x {cfg.group_size}, "
          f"KV cache for {kw['kv_cache_tokens']} tokens, {cfg.max_new_tokens} new tokens", flush=True)
    peak = PeakRSS()
    rows: dict[str, list[dict]] = {m: [] for m in MODES}
    previous = None  # the row of the step before: its mode left the engine as the next rollout finds it
    try:
        for i, batch in enumerate(batches):
            mode = MODES[(i + i // 2) % 2]  # awake asleep, asleep awake, ...
            firsts = batch.completion_mask.float().argmax(dim=1).tolist()
            prompts = [batch.input_ids[r, :firsts[r]].tolist() for r in range(0, len(firsts), cfg.group_size)]
            t0 = time.perf_counter()
            engine.generate(prompts, cfg.group_size, cfg.max_new_tokens, temperature=cfg.temperature)
            if previous is not None:
                previous["next_rollout"] = time.perf_counter() - t0
            released = 0.0
            if mode == "asleep":
                release_free_memory()
                before = resident_gb()
                assert engine.sleep(), "this engine can't sleep (not vLLM's CPU build)"
                release_free_memory()
                released = before - resident_gb()
            peak.reset()
            learner.step(batch)
            learn_peak = peak.read_gb()
            peak.reset()
            t0 = time.perf_counter()
            engine.update_weights(learner.named_weights())
            sync = time.perf_counter() - t0
            sync_peak = peak.read_gb()
            warm = i < 2
            print(f"  step {i} {mode:6s} learner peak {learn_peak:.2f} GiB  sync "
                  f"{sync:.2f} s (peak {sync_peak:.2f} GiB)" + (f"  released {released:.2f} GiB" if released else "")
                  + ("  (warm-up)" if warm else ""), flush=True)
            previous = {"learn_peak": learn_peak, "sync": sync, "sync_peak": sync_peak, "released": released}
            if not warm and i < len(batches) - 1:  # the last step has no next rollout
                rows[mode].append(previous)
    finally:
        learner.close()
        engine.close()
    med = {m: {k: statistics.median(r[k] for r in rows[m]) for k in rows[m][0]} for m in MODES}
    for m in MODES:
        print(f"{m:6s} learner-phase peak {med[m]['learn_peak']:.2f} GiB  sync {med[m]['sync']:.2f} s "
              f"(peak {med[m]['sync_peak']:.2f} GiB)  next rollout {med[m]['next_rollout']:.2f} s"
              + (f"  released by sleep {med[m]['released']:.2f} GiB" if m == "asleep" else ""))
    print(load_average())
    print(f"ratio: {med['awake']['learn_peak'] / med['asleep']['learn_peak']:.2f}")


if __name__ == "__main__":
    main()
