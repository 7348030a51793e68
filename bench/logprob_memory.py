"""Logprobs projected a slice of scored tokens at a time against the whole (tokens, vocabulary)
projection: the learner's peak memory and time for one forward and backward.

    python bench/logprob_memory.py            # SmolLM2-135M, 8 sequences of 64 + 512 tokens (4,096 scored)
    python bench/logprob_memory.py --quick    # 4 sequences on a 2-layer random model with SmolLM2's 49k vocabulary: < 1 minute

Each mode runs in its own fresh process (a process's peak RSS only grows): the model is
loaded, one packed micro-batch is built (R sequences of P prompt + C completion tokens, all C
scored), then `trainer.logprobs.packed_token_logprobs` and a backward through a loss over
every scored token are run twice; the second is measured. Modes:

- **whole**: ``LOGIT_CHUNK_TOKENS`` above the scored tokens, one (K, V) projection: the
  logits, their log-softmax and their gradient are each K x V floats (what the learner did
  before slicing);
- **sliced**: the default ``LOGIT_CHUNK_TOKENS`` (512), each slice checkpointed.

Printed per mode: the process's peak RSS during the measured pass (GiB, VmHWM reset
before it), the rise above the loaded model, and the seconds. The last line is ``ratio:`` =
whole's rise / sliced's rise. A benchmark, not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.learner_mfu import cpu_features, load_average  # noqa: E402


def _model(quick: bool):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    if quick:  # SmolLM2's vocabulary on 2 small layers: the head dominates, as on a small model's long batch
        cfg = LlamaConfig(vocab_size=49152, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True)
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    from trainer.models import resolve_model

    return AutoModelForCausalLM.from_pretrained(resolve_model("smollm2-135m"), dtype=torch.float32,
                                                attn_implementation="sdpa")


def child(mode: str, quick: bool, rows: int, prompt: int, completion: int) -> dict:
    """One mode in this process: load, build, warm up, measure; the figures as a dict."""
    import torch

    from trainer import logprobs
    from trainer.metrics import PeakRSS

    torch.set_num_threads(torch.get_num_threads())
    model = _model(quick).train()
    vocab = model.get_output_embeddings().weight.shape[0]
    g = torch.Generator().manual_seed(0)
    length = prompt + completion
    ids = torch.randint(0, vocab, (1, rows * length), generator=g)
    pos = torch.arange(length).repeat(rows).unsqueeze(0)
    index = torch.cat([torch.arange(r * length + prompt - 1, (r + 1) * length - 1) for r in range(rows)])
    targets = ids[0, index + 1]
    scored = int(index.numel())
    if mode == "whole":
        logprobs.LOGIT_CHUNK_TOKENS = scored + 1
    peak = PeakRSS()

    def once() -> float:
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        lp, ent = logprobs.packed_token_logprobs(model, model.get_output_embeddings(), ids, pos, index, targets,
                                                 with_entropy=True, temperature=0.8)
        (lp * torch.linspace(-1, 1, scored)).sum().backward()
        return time.perf_counter() - t0

    once()
    model.zero_grad(set_to_none=True)
    import gc

    gc.collect()
    peak.reset()
    base = peak.read_gb()
    seconds = once()
    return {"mode": mode, "scored": scored, "vocab": vocab, "chunk": logprobs.LOGIT_CHUNK_TOKENS,
            "base_gb": base, "peak_gb": peak.read_gb(), "seconds": seconds, "resettable": peak.resettable}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 2-layer random model with a 49k vocabulary")
    ap.add_argument("--rows", type=int, help="sequences in the micro-batch (default 8; 4 with --quick)")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens per sequence")
    ap.add_argument("--completion", type=int, default=512, help="scored completion tokens per sequence")
    ap.add_argument("--child", choices=["whole", "sliced"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.rows = args.rows or (4 if args.quick else 8)
    if args.child:
        print(json.dumps(child(args.child, args.quick, args.rows, args.prompt, args.completion)))
        return
    print(cpu_features())
    print(load_average())
    out = {}
    for mode in ("whole", "sliced"):
        cmd = [sys.executable, __file__, "--child", mode, "--rows", str(args.rows), "--prompt", str(args.prompt),
               "--completion", str(args.completion)] + (["--quick"] if args.quick else [])
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            sys.exit(f"the {mode} pass failed:\n{res.stderr[-3000:]}")
        out[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    first = out["whole"]
    print(f"{'quick: 2-layer random model' if args.quick else 'SmolLM2-135M'}, float32, {args.rows} sequences of "
          f"{args.prompt} + {args.completion} tokens: {first['scored']} scored tokens x {first['vocab']} vocabulary")
    if not first["resettable"]:
        print("note: this kernel does not allow resetting the RSS high-water mark; peaks include loading")
    for mode, r in out.items():
        print(f"  {mode:6s} slice {r['chunk']:5d} tokens  peak RSS {r['peak_gb']:.2f} GiB  rise above the loaded "
              f"model {r['peak_gb'] - r['base_gb']:.2f} GiB  forward+backward {r['seconds']:.2f} s")
    rise = {m: max(r["peak_gb"] - r["base_gb"], 1e-3) for m, r in out.items()}
    print(f"time sliced / whole: {out['sliced']['seconds'] / out['whole']['seconds']:.2f}")
    print(load_average())
    print(f"ratio: {rise['whole'] / rise['sliced']:.2f}")


if __name__ == "__main__":
    main()
