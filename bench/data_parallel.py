"""The data-parallel learner: one process against two ranks under ZeRO-2 and under ZeRO-3.

    python bench/data_parallel.py            # SmolLM2-135M, quickstart batches (64 sequences), 2 timed steps
    python bench/data_parallel.py --quick    # the tiny random model, 16 sequences, 1 timed step: under a minute
    python bench/data_parallel.py --processes 4 --steps 3
    python bench/data_parallel.py --random-model 960:32:2560 --prompts 2 --group 4   # a random 362M model

Measures, in one run and on the same batches (one untimed warm-up step each, then `--steps`
timed ones):

- one `trainer.learner.DeepSpeedLearner` in this process (ZeRO-2): step seconds and this
  process's peak RSS during the steps;
- `--processes` ranks of `trainer.learner_group.LearnerGroup` under ZeRO-2, then under ZeRO-3
  (parameters, and the KL reference's, partitioned over the ranks): step seconds, the largest
  rank's peak RSS and the ranks' peaks added up (the step's ``memory/learner_*`` metrics: each
  rank's VmHWM, reset at the start of the step), and the time to gather the weights for a sync
  (``named_weights``, read whole).

The losses of the first timed step are printed for all three: they must agree (the same
step, up to float rounding). The batches are `bench.learner_mfu.build_batches`' (real rendered
quickstart prompts, random completions of quickstart lengths).

Prints the figures, the load averages and as its last line ``ratio: X.XX`` = the largest
ZeRO-2 rank's peak RSS / the largest ZeRO-3 rank's (> 1: ZeRO-3 needs less memory per rank).
What ZeRO-3 saves per rank is (N-1)/N of the parameters (policy and reference); the
optimizer's state and the gradients are partitioned under ZeRO-2 already, and activations
and the runtime (torch, DeepSpeed) are not partitioned at all. A benchmark, not a test: on a
2-core machine the ranks share the cores (each gets 2/N threads), so their step times say
little about a machine with a core or a GPU per rank.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import bench_model, build_batches, cpu_features, load_average  # noqa: E402


def timed(learner, batches) -> tuple[list[dict], list[float]]:
    """Step `learner` on a warm-up batch, then on the rest: (metrics of the timed steps, their seconds)."""
    learner.step(batches[0])
    metrics, seconds = [], []
    for b in batches[1:]:
        t = time.perf_counter()
        metrics.append(learner.step(b))
        seconds.append(time.perf_counter() - t)
    return metrics, seconds


def random_model(base: Path, sizes: str, out: Path) -> Path:
    """A randomly initialised (seed 0) model of `base`'s family and tokenizer with the hidden
    size, layer count and MLP size in `sizes` ("960:32:2560"; heads: hidden / 64), saved to `out`."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    hidden, layers, intermediate = (int(x) for x in sizes.split(":"))
    config = AutoConfig.from_pretrained(base)
    heads = max(1, hidden // 64)
    config.update({"hidden_size": hidden, "num_hidden_layers": layers, "intermediate_size": intermediate,
                   "num_attention_heads": heads, "num_key_value_heads": max(1, heads // 3) if heads % 3 == 0 else heads,
                   "head_dim": hidden // heads})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    for f in Path(base).iterdir():  # tokenizer and chat template
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, out / f.name)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.yaml", help="run config YAML (not with --quick)")
    ap.add_argument("--steps", type=int, default=2, help="timed steps per learner (after one warm-up step)")
    ap.add_argument("--processes", type=int, default=2, help="learner ranks of the data-parallel runs (>= 2)")
    ap.add_argument("--quick", action="store_true", help="the tiny random model, 1 timed step: under a minute")
    ap.add_argument("--random-model", metavar="HIDDEN:LAYERS:INTERMEDIATE",
                    help="a randomly initialised model of the config's model family with these sizes (what ZeRO-3 "
                         "saves grows with the parameters; no larger model ships offline)")
    ap.add_argument("--prompts", type=int, help="prompts per step (default: the config's)")
    ap.add_argument("--group", type=int, help="completions per prompt (default: the config's)")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.processes < 2:
        ap.error("--steps must be at least 1 and --processes at least 2")
    with tempfile.TemporaryDirectory(prefix="rlwb-bench-dp-") as tmp:
        run(args, Path(tmp))


def run(args, tmp: Path) -> None:
    from transformers import AutoTokenizer

    from trainer.learner import DeepSpeedLearner
    from trainer.learner_group import LearnerGroup
    from trainer.metrics import PeakRSS
    from trainer.types import LearnerBatch

    cfg, model_path = bench_model(args, tmp)
    if args.random_model and not args.quick:
        model_path = random_model(model_path, args.random_model, tmp / "random")
    # full fine-tuning: ZeRO partitions the weights, LoRA's adapters are too small to matter
    cfg = cfg.model_copy(update={"lora_rank": 0, "zero_stage": 2, "prompts_per_step": args.prompts or cfg.prompts_per_step,
                                 "group_size": args.group or cfg.group_size})
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    batches = [LearnerBatch(**b) for b in build_batches(cfg, tokenizer, args.steps + 1)]
    print(cpu_features())
    print(load_average())
    print(f"model {model_path}: {cfg.sequences_per_step} sequences per step (micro-batch {cfg.micro_batch_size}), "
          f"{cfg.dtype}, kl_coef {cfg.kl_coef:g}, {args.steps} timed steps after one warm-up", flush=True)

    rss = PeakRSS()
    one = DeepSpeedLearner(model_path, cfg)
    try:
        rss.reset()
        single, single_s = timed(one, batches)
        single_peak = rss.read_gb()
    finally:
        one.close()
    print(f"1 process, ZeRO-2: step {statistics.median(single_s):.2f} s (median), peak RSS {single_peak:.2f} GiB, "
          f"loss {single[0]['loss']:.6f}", flush=True)
    rank_peak = {}
    for stage in (2, 3):
        group = LearnerGroup(model_path, cfg.model_copy(update={"zero_stage": stage,
                                                                "learner_processes": args.processes}),
                             log_path=tmp / f"learners-zero{stage}.log")
        try:
            metrics, seconds = timed(group, batches)
            t = time.perf_counter()
            weights = sum(v.numel() for _, v in group.named_weights())
            gather = time.perf_counter() - t
        finally:
            group.close()
        rank_peak[stage] = max(m["memory/learner_rank_peak_gb"] for m in metrics)
        ranks = max(m["memory/learner_ranks_peak_gb"] for m in metrics)
        print(f"{args.processes} processes, ZeRO-{stage}: step {statistics.median(seconds):.2f} s (median), largest "
              f"rank's peak RSS {rank_peak[stage]:.2f} GiB, the ranks' together {ranks:.2f} GiB, weights for a "
              f"sync {gather:.2f} s ({weights / 1e6:.1f} M values), loss {metrics[0]['loss']:.6f}", flush=True)
    print(load_average())
    print(f"ratio: {rank_peak[2] / rank_peak[3]:.2f}")


if __name__ == "__main__":
    main()
