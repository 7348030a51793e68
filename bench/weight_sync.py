"""Weight sync: the in-place update's share of a training step, against a checkpoint + engine restart.

    python bench/weight_sync.py            # configs/quickstart.yaml on SmolLM2-135M: 3 real steps
    python bench/weight_sync.py --quick    # the tiny random model, eager vLLM, 2 steps: ~1 minute
    python bench/weight_sync.py --config configs/other.yaml --steps 5 --restarts 3
    python bench/weight_sync.py --memory-fraction 0.1   # a smaller KV cache when RAM is shared

Runs real training steps (`trainer.loop.train_step`: rollouts on the vLLM engine, the
DeepSpeed learner step, then ``engine.update_weights(learner.named_weights())``) and takes
each step's ``time/sync`` and ``time/step`` (generate + verify + learn + sync). After the
steps, with the same final weights, it measures in the same process:

- the baseline, the naive way to sync: save an HF checkpoint (weights + tokenizer), close
  the engine and start a fresh one on the checkpoint with the run's engine options
  (torch.compile included when the config asks for it), `--restarts` times;
- for reference, a disk round trip into the running engine: save the checkpoint, read the
  safetensors back and hand them to ``update_weights`` (serialisation without the restart).

Each path's result is checked: the engine scores a fixed greedy completion and the
largest logprob difference to the learner's is printed (a wrong or partial sync shows up
as tenths of a nat). Prints the quickstart's recorded sync share from the store when
that run is there (read-only), and as its last line ``ratio: X.X`` = baseline seconds /
in-place seconds (medians). This is a benchmark, not a test: times depend on the machine
and on what else runs on it (the load average is printed). It does not cover ZeRO-3
(gathered weights) or a rollout engine in another process or on another machine.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import load_average  # noqa: E402

QUICKSTART_RUN = "r20261129-161545-a23c"  # the quickstart run the README's figures come from
QUICK_CONFIG = {  # the tiny run of the tests (tests/conftest.py), without evaluations
    "name": "weight-sync-quick", "domains": ["basic_arithmetic", "chain_sum", "letter_counting"],
    "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 16,
    "learning_rate": 1e-3, "kl_coef": 0.05, "eval_tasks_per_domain": 0, "vllm_compile": False,
    "vllm_memory_fraction": 0.05,  # a small KV cache: the tiny model needs little, and others share the RAM
}


def share(part: float, whole: float) -> float:
    """`part` / `whole` (0 when `whole` is not positive)."""
    return part / whole if whole > 0 else 0.0


def spread(values: list[float], unit: str = "s") -> str:
    """"median (min-max) unit" of a non-empty list, e.g. ``0.52 s (0.40-0.62)``."""
    return f"{statistics.median(values):.3g} {unit} ({min(values):.3g}-{max(values):.3g})"


def recorded_times(db_path: str | Path, run_id: str) -> dict[str, list[float]]:
    """The ``time/*`` metrics a run recorded, step by step, read from the store without
    writing to it (SQLite opened read-only).

    Returns:
        metric name (e.g. "time/sync") -> values in step order; empty when the database or
        the run is missing.
    """
    path = Path(db_path).expanduser()
    if not path.is_file():
        return {}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, value FROM metrics WHERE run_id = ? AND name LIKE 'time/%' "
                            "ORDER BY name, step", [run_id]).fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    out: dict[str, list[float]] = {}
    for name, value in rows:
        out.setdefault(name, []).append(float(value))
    return out


def sync_share_line(times: dict[str, list[float]]) -> str | None:
    """One line on a recorded run's sync share (sum of time/sync / sum of time/step), or
    None when it lacks those metrics."""
    sync, step = times.get("time/sync"), times.get("time/step")
    if not sync or not step:
        return None
    return (f"{len(step)} steps, sync {spread(sync)}, step {spread(step)}, "
            f"sync share {100 * share(sum(sync), sum(step)):.2f}% of step time")


def run_config(args):
    """The RunConfig the bench trains with: `--config` (default the quickstart's) or, with
    --quick, the tiny model's, with the model path set (and evaluations off)."""
    from trainer.config import load_config, parse_config

    if args.quick:
        return parse_config({**QUICK_CONFIG, "model": str(args.model)})
    cfg = load_config(args.config)
    data = {**cfg.model_dump(), "eval_tasks_per_domain": 0, "eval_every": 0}
    if getattr(args, "memory_fraction", None):
        data["vllm_memory_fraction"] = args.memory_fraction
    return parse_config({k: v for k, v in data.items() if v is not None})


def make_probe(engine, tokenizer, tokens: int = 16) -> tuple[list[int], list[int]]:
    """A fixed chat-templated question and the engine's greedy completion of it: token ids
    that every sync path is scored on."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": "What is 12 + 7?"}],
                                         add_generation_prompt=True, tokenize=False)
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    (group,) = engine.generate([prompt], n=1, max_new_tokens=tokens, temperature=0.0)
    return prompt, list(group[0].token_ids) or [tokenizer.eos_token_id]


def learner_scores(learner, probe: tuple[list[int], list[int]]) -> list[float]:
    """The learner's logprobs of the probe's completion tokens."""
    from trainer.types import Completion, LearnerBatch, Sample

    prompt, comp = probe
    s = Sample("probe", 0, 0, 0, "probe", list(prompt), Completion(list(comp), [0.0] * len(comp), "", "length"))
    lp = learner.logprobs(LearnerBatch.from_samples([s], pad_id=0))
    return lp[0, len(prompt):len(prompt) + len(comp)].tolist()


def max_diff(engine, probe, reference: list[float]) -> float:
    """Largest |engine logprob - reference| over the probe's completion, nats."""
    return max(abs(a - b) for a, b in zip(engine.score(*probe), reference))


def disk_round_trip(engine, learner, tokenizer, directory: Path) -> float:
    """Seconds to save an HF checkpoint and load it back into the running engine.

    ``save_pretrained`` drops the tied ``lm_head.weight``; it is sent again (vLLM keeps a
    stale tied head otherwise, see `DeepSpeedLearner.named_weights`).
    """
    from safetensors.torch import load_file

    t0 = time.perf_counter()
    path = learner.save_checkpoint(directory, tokenizer)
    weights = {}
    for f in sorted(path.glob("*.safetensors")):
        weights.update(load_file(str(f)))
    if "lm_head.weight" not in weights and "model.embed_tokens.weight" in weights:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    engine.update_weights(weights.items())
    return time.perf_counter() - t0


def restart(engine, learner, tokenizer, cfg, model_path, directory: Path) -> tuple[object, dict[str, float]]:
    """The naive sync: save an HF checkpoint, close the engine, start a fresh one on it.

    Returns:
        The new engine and the seconds of each part ("save", "close", "start", "total").
    """
    from trainer.loop import engine_options
    from trainer.rollout import open_engine

    t0 = time.perf_counter()
    path = learner.save_checkpoint(directory, tokenizer)
    t1 = time.perf_counter()
    engine.close()
    t2 = time.perf_counter()
    engine = open_engine(cfg.rollout_engine, path, seed=cfg.seed, dtype=cfg.dtype,
                         **engine_options(cfg, model_path))
    t3 = time.perf_counter()
    return engine, {"save": t1 - t0, "close": t2 - t1, "start": t3 - t2, "total": t3 - t0}


def train_steps(cfg, engine, learner, tokenizer, steps: int) -> list[dict[str, float]]:
    """`steps` real training steps (`trainer.loop.train_step`) into a throwaway store."""
    import random

    from backend.store import Store
    from trainer.loop import train_step

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rng, out = random.Random(cfg.seed), []
    with Store(":memory:") as store:
        run_id = store.create_run(cfg.name, cfg.model_dump(), total_steps=steps)
        for step in range(1, steps + 1):
            m = train_step(cfg, engine, learner, tokenizer, rng, pad_id, store, run_id, step)
            out.append(m)
            print(f"step {step}: generate {m['time/generate']:.2f} s, verify {m['time/verify']:.2f} s, "
                  f"learn {m['time/learn']:.2f} s, in-place sync {m['time/sync']:.3f} s, "
                  f"step {m['time/step']:.2f} s (sync {100 * share(m['time/sync'], m['time/step']):.2f}%)",
                  flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.yaml", help="run config YAML (not with --quick)")
    ap.add_argument("--steps", type=int, default=3, help="training steps (each one syncs in place)")
    ap.add_argument("--restarts", type=int, default=2, help="baseline rounds: checkpoint + engine restart")
    ap.add_argument("--db", default="~/.local/share/rlwb/rlwb.db", help="store with the quickstart run (read only)")
    ap.add_argument("--memory-fraction", type=float, default=None,
                    help="vLLM's share of RAM for the KV cache instead of the config's (when RAM is shared)")
    ap.add_argument("--quick", action="store_true", help="tiny model, eager vLLM, 2 steps, 1 restart: ~1 minute")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.restarts < 1:
        ap.error("--steps and --restarts must be at least 1")
    with tempfile.TemporaryDirectory(prefix="rlwb-weight-sync-") as tmp:
        if args.quick:
            from trainer.tiny import build_tiny_model

            args.model, args.steps, args.restarts = build_tiny_model(Path(tmp) / "tiny"), 2, 1
        run(args, run_config(args), Path(tmp))


def run(args, cfg, tmp: Path) -> None:
    """Start the engine and learner, train, measure both sync paths, print the figures."""
    from transformers import AutoTokenizer

    from trainer.models import resolve_model
    from trainer.learner import DeepSpeedLearner
    from trainer.loop import engine_options
    from trainer.rollout import open_engine

    model_path = resolve_model(cfg.model)
    print(load_average())
    print(f"model {model_path}  {cfg.prompts_per_step} tasks x {cfg.group_size} samples, "
          f"{cfg.max_new_tokens} new tokens, {cfg.dtype}, ZeRO-{cfg.zero_stage}, "
          f"{cfg.rollout_engine}{' compiled' if cfg.vllm_compile else ' eager'} "
          f"(KV cache: {cfg.vllm_memory_fraction:g} of RAM)", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    t0 = time.perf_counter()
    engine = open_engine(cfg.rollout_engine, model_path, seed=cfg.seed, dtype=cfg.dtype,
                         **engine_options(cfg, model_path))
    t1 = time.perf_counter()
    learner = DeepSpeedLearner(model_path, cfg)
    print(f"engine start {t1 - t0:.1f} s, learner start {time.perf_counter() - t1:.1f} s", flush=True)
    try:
        steps = train_steps(cfg, engine, learner, tokenizer, args.steps)
        probe = make_probe(engine, tokenizer)
        ref = learner_scores(learner, probe)
        print(f"in-place sync checked: max |logprob - learner's| {max_diff(engine, probe, ref):.2e} nats")
        disk = disk_round_trip(engine, learner, tokenizer, tmp / "disk")
        print(f"disk round trip into the running engine (save + read + update_weights): {disk:.2f} s, "
              f"max |logprob - learner's| {max_diff(engine, probe, ref):.2e} nats", flush=True)
        base = []
        for i in range(args.restarts):
            engine, t = restart(engine, learner, tokenizer, cfg, model_path, tmp / f"restart-{i}")
            base.append(t["total"])
            print(f"baseline {i + 1}: checkpoint {t['save']:.2f} s + engine close {t['close']:.2f} s + "
                  f"engine start {t['start']:.2f} s = {t['total']:.2f} s, "
                  f"max |logprob - learner's| {max_diff(engine, probe, ref):.2e} nats", flush=True)
    finally:
        engine.close()
        learner.close()
    report(steps, base, args.db)


def report(steps: list[dict[str, float]], base: list[float], db: str) -> None:
    """Print the summary lines; the last one is the ratio."""
    sync = [m["time/sync"] for m in steps]
    whole = [m["time/step"] for m in steps]
    rest = [w - s for w, s in zip(whole, sync)]  # generate + verify + learn
    in_place, baseline = statistics.median(sync), statistics.median(base)
    print(f"in-place sync {spread(sync)} over {len(sync)} steps; step {spread(whole)}")
    print(f"in-place sync share of step time: {100 * share(sum(sync), sum(whole)):.2f}% (goal <= 5%)")
    print(f"baseline (checkpoint + engine restart) {spread(base)}; its share of a step would be "
          f"{100 * share(baseline, statistics.median(rest) + baseline):.1f}%")
    line = sync_share_line(recorded_times(db, QUICKSTART_RUN))
    if line:
        print(f"quickstart run {QUICKSTART_RUN} as recorded: {line}")
    print(load_average())
    print(f"ratio: {share(baseline, in_place):.1f}")


if __name__ == "__main__":
    main()
