"""Gradient checkpointing that keeps the attention's output (trainer/recompute.py) against
recomputing all of each layer.

    python bench/recompute.py            # configs/long_context.yaml: SmolLM2-135M, 1.5k-token prompts, G = 4
    python bench/recompute.py --quick    # the tiny random model: < 1 minute
    python bench/recompute.py --config configs/quickstart.yaml --steps 4

One `trainer.learner.DeepSpeedLearner` (``gradient_checkpointing: true``; ZeRO off, so the
gradients stay readable) runs the forward and backward of every micro-batch of the same
batches (real rendered prompts of the config's mix, random completions of ``max_new_tokens``
tokens) twice: with each decoder layer's checkpoint function set to plain recomputation
(``use_reentrant=False``: the whole layer runs again in the backward, as before) and to the
selective one the learner now uses, in alternating order (plain then selective, selective
then plain, ...; the first batch a warm-up), so both see the same machine load and the same
weights (no optimizer step). Per micro-batch and mode: the seconds, the peak RSS and the
gradient norm (the same up to float rounding). The last line is ``ratio: X.XX`` = the median
over the timed pairs of plain seconds / selective seconds; the optimizer step, the same for
both, is left out. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import QUICK_CONFIG, allocator_line, build_batches, cpu_features, load_average  # noqa: E402

MODES = {"plain": {"use_reentrant": False}, "selective": None}  # None: trainer.recompute.checkpointing_kwargs()


def set_mode(model, kwargs: dict) -> None:
    """Make every checkpointed layer of the HF `model` recompute with `checkpoint(**kwargs)`."""
    from torch.utils.checkpoint import checkpoint

    for layer in model.modules():
        if getattr(layer, "gradient_checkpointing", False):
            layer._gradient_checkpointing_func = functools.partial(checkpoint, **kwargs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/long_context.yaml", help="run config YAML (not with --quick)")
    ap.add_argument("--steps", type=int, default=3, help="timed pairs (after one warm-up pair)")
    ap.add_argument("--quick", action="store_true", help="the tiny random model, 1 timed pair")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    allocator = allocator_line(argv)  # first: it may restart the process
    os.environ["DS_ACCELERATOR"] = "cpu"
    import torch
    from transformers import AutoTokenizer

    from trainer.config import load_config, parse_config
    from trainer.learner import DeepSpeedLearner
    from trainer.metrics import PeakRSS
    from trainer.models import resolve_model
    from trainer.recompute import checkpointing_kwargs
    from trainer.types import LearnerBatch

    print(cpu_features())
    print(allocator)
    print(load_average())
    with tempfile.TemporaryDirectory(prefix="rlwb-recompute-") as tmp:
        if args.quick:
            from trainer.tiny import build_tiny_model

            model_path, args.steps = build_tiny_model(Path(tmp) / "tiny"), 1
            cfg = parse_config({**QUICK_CONFIG, "model": str(model_path), "gradient_checkpointing": True,
                               "zero_stage": 0})
        else:
            cfg = load_config(args.config)
            model_path = resolve_model(cfg.model)
            cfg = parse_config({**cfg.model_dump(), "model": str(model_path), "gradient_checkpointing": True,
                               "zero_stage": 0})
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        batches = [LearnerBatch(**b) for b in build_batches(cfg, tokenizer, args.steps + 1,
                                                             completion_tokens=cfg.max_new_tokens)]
        print(f"{cfg.name}: {cfg.prompts_per_step} prompts x {cfg.group_size}, micro-batch {cfg.micro_batch_size}, "
              f"{cfg.max_new_tokens}-token completions, mean sequence "
              f"{statistics.mean(float(b.attention_mask.sum(1).float().mean()) for b in batches):.0f} tokens, "
              f"lora_rank {cfg.lora_rank}, {cfg.dtype}", flush=True)
        learner = DeepSpeedLearner(model_path, cfg)
        kwargs = {name: kw or checkpointing_kwargs() for name, kw in MODES.items()}
        rss, seconds, peaks, grads = PeakRSS(), {m: [] for m in MODES}, {m: 0.0 for m in MODES}, {}
        try:
            engine = learner.engine
            engine.train()
            engine.set_gradient_accumulation_boundary(False)  # no optimizer step: the weights stay as they are
            for i, batch in enumerate(batches):
                total = float(batch.completion_mask.sum())
                groups = float((batch.completion_mask.sum(dim=1) > 0).sum())
                for j, micro in enumerate(batch.shared_prefix_micro_batches(cfg.micro_batch_size)):
                    for mode in (list(MODES) if (i + j) % 2 == 0 else list(MODES)[::-1]):
                        set_mode(learner.module, kwargs[mode])
                        rss.reset()
                        t0 = time.perf_counter()
                        out, _ = learner._packed_micro_step(micro, total, groups)
                        engine.backward(out.loss, scale_wrt_gas=False)
                        took = time.perf_counter() - t0
                        peak = rss.read_gb()
                        params = [p for p in learner.module.parameters() if p.grad is not None]
                        grads[mode] = float(torch.nn.utils.get_total_norm([p.grad for p in params]))
                        learner.module.zero_grad(set_to_none=True)
                        print(f"  batch {i} micro-batch {j} ({micro.num_tokens} tokens) {mode:9s} {took:7.2f} s  "
                              f"peak RSS {peak:.2f} GiB  gradient norm {grads[mode]:.6g}"
                              f"{'  (warm-up)' if i == 0 else ''}", flush=True)
                        if i:
                            seconds[mode].append(took)
                            peaks[mode] = max(peaks[mode], peak)
        finally:
            learner.close()
    for mode in MODES:
        print(f"{mode:9s} median forward+backward {statistics.median(seconds[mode]):7.2f} s  "
              f"peak RSS {peaks[mode]:.2f} GiB")
    print(load_average())
    pairs = [a / b for a, b in zip(seconds["plain"], seconds["selective"])]
    print(f"plain / selective time per pair: {' '.join(f'{r:.2f}' for r in pairs)}")
    print(f"ratio: {statistics.median(pairs):.2f}")


if __name__ == "__main__":
    main()
