"""The learner's AdamW step over a whole model: torch's default (a loop of elementwise ops per
parameter) against the fused kernel the learner uses (``fused=True``).

    python bench/optimizer_step.py           # SmolLM2-135M's 135M weights (full fine-tuning), 6 timed pairs
    python bench/optimizer_step.py --quick   # the same, 3 timed pairs: < 1 minute

In one process: SmolLM2-135M's parameters (float32) with random gradients, two
``torch.optim.AdamW`` over them (the learner's betas, weight decay 0.01), stepped in
alternating order (default then fused, fused then default, ...; one warm-up pair, whose step
also allocates the moments) so both see the same load. With LoRA only the adapters step
(about 2% of these weights), so this is full fine-tuning's cost, e.g.
``configs/long_context.yaml``'s. Printed per variant: the median and range of the step's
seconds; then the largest difference between the two variants' weights after the same
steps (float rounding). The last line is ``ratio:`` = default median / fused median. A
benchmark, not a test: figures depend on the machine and its load (the default's many
OpenMP regions suffer most when the cores are shared).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import cpu_features, load_average  # noqa: E402

VARIANTS = ("default", "fused")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 timed pairs")
    ap.add_argument("--pairs", type=int, help="timed pairs after the warm-up (default 6; 3 with --quick)")
    args = ap.parse_args(argv)
    pairs = args.pairs or (3 if args.quick else 6)

    import torch
    from transformers import AutoModelForCausalLM

    from trainer.models import resolve_model

    print(cpu_features())
    print(load_average())
    model = AutoModelForCausalLM.from_pretrained(resolve_model("smollm2-135m"), dtype=torch.float32)
    base = [p.detach() for p in model.parameters()]
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(p.shape, generator=g) * 1e-3 for p in base]
    params = {v: [torch.nn.Parameter(p.clone()) for p in base] for v in VARIANTS}
    for v in VARIANTS:
        for p, grad in zip(params[v], grads):
            p.grad = grad
    opts = {v: torch.optim.AdamW(params[v], lr=1e-5, betas=(0.9, 0.999), weight_decay=0.01,
                                 fused=v == "fused") for v in VARIANTS}
    count = sum(p.numel() for p in base)
    print(f"SmolLM2-135M: {count / 1e6:.1f}M float32 weights in {len(base)} tensors, {torch.get_num_threads()} threads",
          flush=True)
    seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for i in range(pairs + 1):
        for v in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
            t0 = time.perf_counter()
            opts[v].step()
            took = time.perf_counter() - t0
            print(f"  pair {i} {v:7s} {took:6.3f} s{'  (warm-up)' if i == 0 else ''}", flush=True)
            if i:
                seconds[v].append(took)
    for v in VARIANTS:
        print(f"{v:7s} step median {statistics.median(seconds[v]):.3f} s (min {min(seconds[v]):.3f}, "
              f"max {max(seconds[v]):.3f})")
    diff = max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(params["default"], params["fused"]))
    print(f"largest weight difference after {pairs + 1} steps: {diff:.2e} (lr 1e-5)")
    print(load_average())
    print(f"ratio: {statistics.median(seconds['default']) / statistics.median(seconds['fused']):.2f}")


if __name__ == "__main__":
    main()
