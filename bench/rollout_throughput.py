"""Rollout throughput, vLLM vs transformers, on the same prompts and sampling settings.

    python bench/rollout_throughput.py            # SmolLM2-135M, 32 prompts x 8, 64 tokens
    python bench/rollout_throughput.py --quick    # smaller workload, vLLM eager: < 1 minute
    python bench/rollout_throughput.py --model /path/to/checkpoint --dtype bfloat16
    python bench/rollout_throughput.py --block-size 128   # vLLM's CPU default block size

Prints generated tokens per second for each engine (engine start-up and one warm-up call
excluded), how much of this machine's matmul peak (measured in the same run) each engine
turns into the rollout's *useful* model FLOPs (each prompt prefilled once, each generated
token decoded once: what any engine must compute, whatever it recomputes or pads), and, as
its last line, ``ratio: X.XX`` = vLLM tok/s / HF tok/s. Both engines
sample at temperature 1 with logprobs on, as in training. This is a benchmark, not a test:
numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout


def arithmetic_prompts(tokenizer, count: int, seed: int = 0) -> list[list[int]]:
    """`count` chat-templated arithmetic questions as token id lists."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice(["+", "-", "*"])
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": f"What is {a} {op} {b}? End with 'Answer: <number>'."}],
            add_generation_prompt=True, tokenize=False,
        )
        out.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return out


def useful_flops(terms: tuple[int, int, int], prompts: list[list[int]], groups) -> float:
    """Model FLOPs (PaLM appendix B forward pass) an ideal engine spends on this rollout:
    each prompt's tokens once, each generated token once (with logits from the output
    head), attention over its whole context. `terms` is `bench.learner_mfu.flop_terms`."""
    body, head, layer_width = terms
    flops = 0.0
    for prompt, group in zip(prompts, groups):
        p = len(prompt)
        flops += 2 * body * p + 4 * layer_width * p * (p + 1) / 2  # prefill, once
        for completion in group:  # token t (from 0) attends to p + t + 1 positions
            n = len(completion.token_ids)
            flops += n * (2 * body + 2 * head) + 4 * layer_width * (n * (p + 1) + n * (n - 1) / 2)
    return flops


def measure(engine, prompts, n: int, max_new_tokens: int) -> tuple[int, float]:
    """(groups, seconds) of one generate call after a small warm-up."""
    engine.generate(prompts[:2], n=2, max_new_tokens=4)
    t0 = time.perf_counter()
    groups = engine.generate(prompts, n=n, max_new_tokens=max_new_tokens, temperature=1.0)
    return groups, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    preload = os.environ.get("LD_PRELOAD") or "(none)"  # vLLM's CPU platform sets its own at import
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from trainer.models import resolve_model
    from bench.learner_mfu import cpu_features, flop_terms, load_average, matmul_peak
    from trainer.rollout import open_engine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="model name or checkpoint path")
    ap.add_argument("--prompts", type=int, default=32, help="number of prompts")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--eager", action="store_true",
                    help="start vLLM without torch.compile (seconds instead of ~50-125 s on CPU)")
    ap.add_argument("--block-size", type=int, default=None,
                    help="vLLM KV cache block size in tokens (default: the engine's, "
                         "trainer.rollout.vllm_engine.DEFAULT_BLOCK_SIZE)")
    ap.add_argument("--max-num-seqs", type=int, default=None,
                    help="vLLM sequences per step (default: vLLM's, 256 on CPU)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=None,
                    help="vLLM tokens per step (default: vLLM's, 4096 on CPU)")
    ap.add_argument("--no-prefix-caching", action="store_true",
                    help="turn vLLM's prefix caching off")
    ap.add_argument("--memory-fraction", type=float, default=None,
                    help="vLLM gpu_memory_utilization (on CPU: share of RAM for weights + "
                         "KV cache; default: the engine's, 0.3 on CPU)")
    ap.add_argument("--quick", action="store_true",
                    help="8 prompts x 4 samples, 32 tokens, --eager: under a minute")
    args = ap.parse_args(argv)
    if args.quick:
        args.prompts, args.n, args.max_new_tokens, args.eager = 8, 4, 32, True

    path = resolve_model(args.model)
    prompts = arithmetic_prompts(AutoTokenizer.from_pretrained(path), args.prompts)
    print(cpu_features())
    print(load_average())
    print(f"model {path}  {args.prompts} prompts x {args.n} samples, "
          f"{args.max_new_tokens} new tokens, {args.dtype}"
          f"{', vLLM eager' if args.eager else ''}")
    vllm_kw = {"enforce_eager": args.eager, "enable_prefix_caching": not args.no_prefix_caching}
    for name in ("block_size", "max_num_seqs", "max_num_batched_tokens"):
        if getattr(args, name) is not None:
            vllm_kw[name] = getattr(args, name)
    if args.memory_fraction is not None:
        vllm_kw["gpu_memory_utilization"] = args.memory_fraction
    print(f"vLLM options {vllm_kw} (others: the engine's defaults)")
    with torch.device("meta"):  # shapes only, for the FLOP count
        terms = flop_terms(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path)))
    peaks = [matmul_peak("cpu", args.dtype, 1024 if args.quick else 2048)]
    rates, utilisation = {}, {}
    for kind in ("vllm", "hf"):
        kw = vllm_kw if kind == "vllm" else {}
        t0 = time.perf_counter()
        with open_engine(kind, path, seed=0, dtype=args.dtype, **kw) as engine:
            start = time.perf_counter() - t0
            groups, seconds = measure(engine, prompts, args.n, args.max_new_tokens)
        tokens = sum(len(c.token_ids) for g in groups for c in g)
        rates[kind] = tokens / seconds
        utilisation[kind] = useful_flops(terms, prompts, groups) / seconds
        print(f"{kind:5s} start {start:5.1f} s  {tokens} tokens in {seconds:6.1f} s  "
              f"{rates[kind]:7.1f} tok/s  useful {utilisation[kind] / 1e9:5.1f} GFLOP/s", flush=True)
    peaks.append(matmul_peak("cpu", args.dtype, 1024 if args.quick else 2048))
    peak = max(peaks)
    print(f"matmul peak ({args.dtype}, best of before/after: {peaks[0] / 1e9:.1f} / {peaks[1] / 1e9:.1f} GFLOP/s): "
          + ", ".join(f"{k} {u / peak:.0%}" for k, u in utilisation.items())
          + " of it in useful model FLOPs")
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} on {len(os.sched_getaffinity(0))} cores, "
          f"LD_PRELOAD={preload} (as started)")
    # Other processes on a small machine skew both numbers (OpenMP threads spin-wait when
    # the cores are oversubscribed): the load averages say how busy it was.
    print(load_average())
    print(f"ratio: {rates['vllm'] / rates['hf']:.2f}")


if __name__ == "__main__":
    main()
