"""Overlapped (one step off-policy) against sequential training steps, in the same process.

    python bench/overlap.py            # configs/quickstart.yaml on SmolLM2-135M: 2 rounds x 3 steps each way
    python bench/overlap.py --quick    # the tiny random model, eager vLLM: under a minute
    python bench/overlap.py --config configs/other.yaml --steps 4 --rounds 3

One engine and one learner are started and warmed up with one untimed step; then, `--rounds` times, `--steps` real training
steps run sequentially (`overlap: false`: rollout, learner, sync) and `--steps` overlapped
(`overlap: true`, `trainer.pipeline`: step t+1's rollout runs behind step t's learner),
alternating so both see the same machine load. Each block starts its task sampler from the
same seed, so both modes train on the same tasks. An overlapped block's first step has
nothing prefetched (it is the on-policy start of a run); the figure compared is the
steady-state step time, steps 2.. of each overlapped block against every sequential step.

Prints per-step phase times, both medians, the block wall times, the quickstart run's
recorded step time when that run is in the store (read only), and as its last line
``ratio: X.XX`` = sequential step time / overlapped step time (medians; > 1 means the
overlap is faster). A benchmark, not a test: the times depend on what else runs on the
machine (the load average is printed). On a 2-core CPU both phases compete for the same
cores; the gain comes from the parts of a rollout that leave the cores idle (Python-side
scheduling, sandbox round trips) and grows with separate devices for rollout and learner.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import load_average  # noqa: E402
from bench.weight_sync import (  # noqa: E402
    QUICKSTART_RUN,
    recorded_times,
    run_config,
    spread,
)


def block(cfg, engine, learner, tokenizer, steps: int, overlap: bool) -> tuple[list[dict], float]:
    """`steps` training steps in one mode into a throwaway store: (metrics per step, wall seconds)."""
    from backend.store import Store
    from trainer.pipeline import StepPipeline

    cfg = cfg.model_copy(update={"overlap": overlap})
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out = []
    t0 = time.perf_counter()
    with Store(":memory:") as store:
        run_id = store.create_run(cfg.name, cfg.model_dump(), total_steps=steps)
        with StepPipeline(cfg, engine, learner, tokenizer, random.Random(cfg.seed), pad_id, store, run_id) as pipe:
            for step in range(1, steps + 1):
                m = pipe.step(step, prefetch_next=step < steps)
                out.append(m)
                print(f"  {'overlap   ' if overlap else 'sequential'} step {step}: rollout "
                      f"{m['time/generate'] + m['time/verify']:.2f} s (waited {m['time/rollout_wait']:.2f} s), "
                      f"learn {m['time/learn']:.2f} s, sync {m['time/sync']:.2f} s, "
                      f"step {m['time/step']:.2f} s, staleness {m['off_policy/staleness']:.0f}", flush=True)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.yaml", help="run config YAML (not with --quick)")
    ap.add_argument("--steps", type=int, default=3, help="steps per block (each mode, each round)")
    ap.add_argument("--rounds", type=int, default=2, help="blocks of each mode, alternating")
    ap.add_argument("--db", default="~/.local/share/rlwb/rlwb.db", help="store with the quickstart run (read only)")
    ap.add_argument("--memory-fraction", type=float, default=None,
                    help="vLLM's share of RAM for the KV cache instead of the config's (when RAM is shared)")
    ap.add_argument("--quick", action="store_true", help="tiny model, eager vLLM, 2 rounds of 4 steps")
    args = ap.parse_args(argv)
    if args.steps < 2 or args.rounds < 1:
        ap.error("--steps must be at least 2 (an overlapped block's first step has nothing to hide) "
                 "and --rounds at least 1")
    with tempfile.TemporaryDirectory(prefix="rlwb-overlap-") as tmp:
        if args.quick:
            from trainer.tiny import build_tiny_model

            args.model, args.steps, args.rounds = build_tiny_model(Path(tmp) / "tiny"), 4, 2
        run(args, run_config(args))


def run(args, cfg) -> None:
    from transformers import AutoTokenizer

    from trainer.models import resolve_model
    from trainer.learner import DeepSpeedLearner
    from trainer.loop import engine_options
    from trainer.rollout import open_engine

    model_path = resolve_model(cfg.model)
    print(load_average())
    print(f"model {model_path}  {cfg.prompts_per_step} tasks x {cfg.group_size} samples, "
          f"{cfg.max_new_tokens} new tokens, {cfg.dtype}, {cfg.rollout_engine}"
          f"{' compiled' if cfg.vllm_compile else ' eager'}; {args.rounds} round(s) x {args.steps} steps each way",
          flush=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    engine = open_engine(cfg.rollout_engine, model_path, seed=cfg.seed, dtype=cfg.dtype,
                         **engine_options(cfg, model_path))
    learner = DeepSpeedLearner(model_path, cfg)
    block(cfg, engine, learner, tokenizer, 1, False)  # warm-up: first-call costs out of the figures
    walls = {False: [], True: []}
    steps = {False: [], True: []}
    try:
        for r in range(args.rounds):
            for overlap in (False, True):
                metrics, wall = block(cfg, engine, learner, tokenizer, args.steps, overlap)
                walls[overlap].append(wall)
                steps[overlap] += [m["time/step"] for m in (metrics[1:] if overlap else metrics)]
                print(f"round {r + 1} {'overlapped' if overlap else 'sequential'}: {args.steps} steps in "
                      f"{wall:.1f} s", flush=True)
    finally:
        engine.close()
        learner.close()
    seq, ovl = statistics.median(steps[False]), statistics.median(steps[True])
    print(f"sequential step {spread(steps[False])}; blocks {spread(walls[False])}")
    print(f"overlapped step (steady state) {spread(steps[True])}; blocks {spread(walls[True])} "
          "(first step of each block not overlapped)")
    recorded = recorded_times(args.db, QUICKSTART_RUN).get("time/step")
    if recorded and not args.quick:
        print(f"quickstart run {QUICKSTART_RUN} as recorded (before this bench): step {spread(recorded)}")
    print(load_average())
    print(f"ratio: {seq / ovl:.2f}")


if __name__ == "__main__":
    main()
