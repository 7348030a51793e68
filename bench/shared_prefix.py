"""The shared-prefix learner against the packed one: each group's prompt once instead of G times.

    python bench/shared_prefix.py            # SmolLM2-135M: the quickstart workload, then a long-document one
    python bench/shared_prefix.py --quick    # the tiny random model, both workloads, 1 timed pair each: < 1 minute
    python bench/shared_prefix.py --device cuda --model DIR   # on a GPU, any HF checkpoint of the same tokenizer

Two workloads, each on one `trainer.learner.DeepSpeedLearner` in one process, stepping the
same batches with batching "packed" (whole sequences end to end) and "shared_prefix"
(Prefix Grouper, arXiv:2506.05433: each group's prompt once, its completions after it, a
block attention mask) in alternating order (packed then shared, shared then packed, ...;
one warm-up pair, then `--steps` timed pairs), so both see the same machine load:

- **quickstart**: ``configs/quickstart.yaml`` with its own settings (today 8 prompts x 8,
  micro-batch 4, LoRA rank 16, the KL reference being the base with the adapter off), real
  rendered prompts of its mix, completions of random ids with the recorded quickstart's
  lengths (`bench.learner_mfu.completion_length`);
- **long document**: ``configs/long_context.yaml``'s domains (needle_haystack,
  financial_report; prompts ~1.5k tokens with the retrieved context), 1 prompt x 8 per
  step (G = 8), 64-token completions, micro-batch 2 (the packed path's memory bound is
  micro-batch x T tokens per forward: 2 x 1.7k here).

Per batching: learner tokens/s counted two ways, as the *logical* tokens the loss covers
(every sequence's prompt and completion: the same for both batchings) and as the tokens the
forward passes *compute* (a shared prompt counts once); the step time and the peak RSS of
its steps. The last line is ``ratio: X.XX`` = the median over the quickstart workload's
timed pairs of packed step seconds / shared-prefix step seconds (the long-document ratio is
printed on the line before). A benchmark, not a test: figures depend on the machine and on
what else runs on it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import (QUICK_CONFIG, allocator_line, build_batches, cpu_features, load_average,  # noqa: E402
                               measure, pick_device, step_flops)

MODES = ("packed", "shared_prefix")
# micro-batch 2: a packed micro-batch holds up to 2 x T tokens (T ~1.7k here); 8 such rows took 23 GB
LONG = {"prompts_per_step": 1, "group_size": 8, "micro_batch_size": 2, "max_new_tokens": 64}


def shared_prefix_flops(model, batch, with_ref: bool) -> float:
    """Model FLOPs of one learner step on `batch` (`LearnerBatch`) with each group's prompt
    computed once: `bench.learner_mfu.model_flops`'s counting over the shared-prefix layout,
    the prompt's tokens and its own attention block once per group, each completion token
    attending to the prompt and to its own earlier tokens, the same scored tokens.

    The packed step's model FLOPs over this is the step-time ratio the shared prefix would
    give if both paths ran at the same model FLOP/s: what is left (the LM head over the
    scored tokens, the completions' layers) is the same work on both. It is not a strict
    bound: model FLOPs leave out what each path computes beyond them (the packed rows'
    attention under a dense mask, the optimizer step, per-op overheads).
    """
    tokens = pairs = 0.0
    for micro in batch.shared_prefix_micro_batches(1):
        for row in micro.segments:
            for _offset, prefix, lengths in row:
                tokens += prefix + sum(lengths)
                pairs += prefix**2 + sum((prefix + n) ** 2 - prefix**2 for n in lengths)
    return step_flops(model, tokens, pairs, float(batch.completion_mask.sum()), with_ref)


def workload(name: str, cfg, tokenizer, steps: int, completion_tokens: int | None, model_path) -> float:
    """Step both batchings on `steps` + 1 batches of `cfg`; print the figures; return the
    median packed / shared-prefix step-time ratio over the timed pairs."""
    import torch

    from trainer.learner import DeepSpeedLearner
    from trainer.types import LearnerBatch

    batches = [LearnerBatch(**b) for b in build_batches(cfg, tokenizer, steps + 1, completion_tokens=completion_tokens)]
    prompt = [int(b.attention_mask.sum(1).float().mean()) for b in batches]
    print(f"\n{name}: {cfg.prompts_per_step} prompts x {cfg.group_size}, micro-batch {cfg.micro_batch_size}, "
          f"kl_coef {cfg.kl_coef:g}, {cfg.dtype}; mean sequence {statistics.mean(prompt):.0f} tokens; "
          f"{torch.get_num_threads()} threads", flush=True)
    learner = DeepSpeedLearner(model_path, cfg)
    print(f"  learner on {learner.device}", flush=True)
    try:
        runs = measure(learner, batches, MODES)
        shared = sum(shared_prefix_flops(learner.module, b, cfg.kl_coef > 0) for b in batches[1:])
    finally:
        learner.close()
    for mode, rows in runs.items():
        seconds = sum(r["seconds"] for r in rows)
        print(f"  {mode:13s} step {seconds / len(rows):7.2f} s  logical {sum(r['tokens'] for r in rows) / seconds:8.1f} "
              f"tok/s  computed {sum(r['computed'] for r in rows) / seconds:8.1f} tok/s  "
              f"({sum(r['computed'] for r in rows) / sum(r['tokens'] for r in rows):.2f} of the logical tokens)  "
              f"peak RSS {max(r['rss'] for r in rows) / 2**30:.2f} GiB"
              + (f", CUDA peak {max(r['gpu'] for r in rows) / 2**30:.2f} GiB" if rows[0]["gpu"] else ""), flush=True)
    pairs = [a["seconds"] / b["seconds"] for a, b in zip(runs["packed"], runs["shared_prefix"])]
    print(f"  packed / shared-prefix step time per pair: {' '.join(f'{r:.2f}' for r in pairs)}", flush=True)
    packed = sum(r["flops"] for r in runs["packed"])
    print(f"  packed / shared-prefix model FLOPs: {packed / shared:.2f} (the step-time ratio if both ran at the same "
          "model FLOP/s)", flush=True)
    return statistics.median(pairs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2, help="timed pairs per workload (after one warm-up pair)")
    ap.add_argument("--quick", action="store_true", help="the tiny random model, 1 timed pair per workload")
    ap.add_argument("--workload", choices=["both", "quickstart", "long"], default="both",
                    help="which workloads to run (the last line's ratio is the quickstart's, else the long one's)")
    ap.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"],
                    help="learner device (DeepSpeed's accelerator): auto picks CUDA when torch sees a GPU")
    ap.add_argument("--model", default=None,
                    help="an HF checkpoint directory to use instead of the quickstart's model (not with --quick)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    allocator = allocator_line(argv)  # first: it may restart the process
    if args.quick and args.model:
        ap.error("--model and --quick exclude each other (--quick builds the tiny random model)")
    if pick_device(args.device) == "cpu":
        os.environ["DS_ACCELERATOR"] = "cpu"  # DeepSpeed would pick CUDA where there is one
    from transformers import AutoTokenizer

    from trainer.config import load_config, parse_config
    from trainer.models import resolve_model

    print(cpu_features())
    print(allocator)
    print(load_average())
    with tempfile.TemporaryDirectory(prefix="rlwb-shared-prefix-") as tmp:
        if args.quick:
            from trainer.tiny import build_tiny_model

            model_path, args.steps = build_tiny_model(Path(tmp) / "tiny"), 1
            quick = parse_config({**QUICK_CONFIG, "model": str(model_path)})
        else:
            quick = load_config("configs/quickstart.yaml")
            model_path = resolve_model(args.model or quick.model)
            quick = parse_config({**quick.model_dump(), "model": str(model_path)})
        long_cfg = parse_config({**load_config("configs/long_context.yaml").model_dump(), **LONG,
                                 "model": str(model_path)})
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        short = long_ratio = None
        if args.workload in ("both", "quickstart"):
            short = workload("quickstart workload", quick, tokenizer, args.steps, None, model_path)
        if args.workload in ("both", "long"):
            long_ratio = workload("long-document workload", long_cfg, tokenizer, args.steps, 64, model_path)
    print(load_average())
    if long_ratio is not None:
        print(f"long-document workload: packed / shared-prefix step time {long_ratio:.2f}")
    print(f"ratio: {short if short is not None else long_ratio:.2f}")


if __name__ == "__main__":
    main()
