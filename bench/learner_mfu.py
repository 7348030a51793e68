"""Learner throughput and MFU: padded micro-batches against packed (padding-free) ones.

    python bench/learner_mfu.py            # SmolLM2-135M, quickstart batches: 32 sequences, micro-batch 8
    python bench/learner_mfu.py --quick    # the tiny random model, 16 sequences, 1 timed step: ~1 minute
    python bench/learner_mfu.py --steps 5 --device cuda   # on a GPU (bench/gpu_check.sh)

Measures, in one run:

- the machine's matmul peak: the best of several large square ``torch.matmul`` calls in the
  learner's dtype on the learner's device (all CPU threads torch uses), before and after the
  learner runs;
- for each batching of the real `trainer.learner.DeepSpeedLearner` ("padded", the earlier
  length-sorted right-padded micro-batches, then "packed"), each in a fresh process: real
  tokens per second of ``learner.step`` (one warm-up step, then `--steps` timed steps on the
  same batches for both), model FLOPs utilisation, padding share (padding positions / all
  positions the forward passes computed) and the peak memory (RSS high-water mark of that
  process; on CUDA also the allocator's peak).

MFU = model FLOPs / seconds / measured peak. Model FLOPs follow Chowdhery et al., 2022,
"PaLM", arXiv:2204.02311, appendix B (as in Hoffmann et al., 2022, "Chinchilla"):
6 N per token for forward + backward with N the non-embedding parameters, plus
12 L H Q T per token for attention (L layers, H heads of Q dims, T the sequence's own
length), plus 6 V d per *scored* token for the LM head (V x d), which the learner only
applies to completion tokens. With ``kl_coef > 0`` the frozen reference model's forward is
counted too (a third: 2 N, 4 L H Q T, 2 V d). Padding, recomputation and the logits the
padded path computes beyond the completions are not model FLOPs.

Batches: real quickstart prompts (``configs/quickstart.yaml``'s mix, `trainer.loop.sample_tasks`
and `render_prompt` with the chat template: 52-176 tokens), 8 completions each of random
token ids with lengths drawn as in the recorded quickstart run (640 samples: 28% hit the
64-token cap, 44% under 8 tokens, median 12); old logprobs are the learner's own (ratio ~1).

Prints the figures, the load averages, and as its last line ``ratio: X.XX`` = packed
tokens/s / padded tokens/s. This is a benchmark, not a test: figures depend on the
machine and on what else runs on it. Not covered: multi-process (ZeRO across ranks) runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

QUICK_CONFIG = {  # the tiny model, half the quickstart's batch
    "name": "learner-mfu-quick", "domains": ["basic_arithmetic", "chain_sum", "gsm_symbolic",
                                             "letter_counting", "spell_backward"],
    "prompts_per_step": 2, "group_size": 8, "micro_batch_size": 4, "max_new_tokens": 64,
    "learning_rate": 1e-5, "kl_coef": 0.02,
}


def load_average() -> str:
    """The machine's load averages: other processes on a small machine skew every time here."""
    one, five, fifteen = os.getloadavg()
    return f"load average (1, 5, 15 min): {one:.1f} {five:.1f} {fifteen:.1f}"


def completion_length(rng: random.Random, cap: int) -> int:
    """A completion length (tokens) drawn as in the recorded quickstart run: 28% at the
    cap, 44% from 3-7 tokens, the rest uniform below the cap."""
    u = rng.random()
    if u < 0.28:
        return cap
    if u < 0.72:
        return rng.randint(3, min(7, cap))
    return rng.randint(min(8, cap), max(cap - 1, min(8, cap)))


def build_batches(cfg, tokenizer, steps: int, seed: int = 0) -> list[dict]:
    """`steps` learner batches of quickstart shape, as dicts of tensors (`LearnerBatch` fields).

    Prompts are real rendered tasks; completions random token ids of quickstart lengths;
    advantages group-normalised random rewards; old logprobs 0 (filled in by the worker).
    """
    import torch

    from trainer.loop import render_prompt, sample_tasks
    from trainer.types import Completion, LearnerBatch, Sample

    rng = random.Random(seed)
    vocab = len(tokenizer)
    out = []
    for _ in range(steps):
        samples = []
        for g, task in enumerate(sample_tasks(cfg, rng, cfg.prompts_per_step)):
            text, prompt_ids = render_prompt(tokenizer, task)
            rewards = torch.tensor([float(rng.random() < 0.3) for _ in range(cfg.group_size)])
            adv = (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-6)
            for i in range(cfg.group_size):
                n = completion_length(rng, cfg.max_new_tokens)
                ids = [rng.randrange(3, vocab) for _ in range(n)]
                samples.append(Sample(task.domain, task.seed, g, i, text, prompt_ids,
                                      Completion(ids, [0.0] * n, "", "length"), advantage=float(adv[i])))
        b = LearnerBatch.from_samples(samples, pad_id=tokenizer.pad_token_id or 0)
        out.append({k: getattr(b, k) for k in ("input_ids", "attention_mask", "completion_mask",
                                               "old_logprobs", "advantages")})
    return out


def model_flops(model, batch, with_ref: bool) -> float:
    """Model FLOPs of one learner step on `batch` (PaLM appendix B; see the module docstring).

    Args:
        model: the HF causal LM (config and parameters are read).
        batch: the step's `LearnerBatch`.
        with_ref: count the frozen reference model's forward pass.
    """
    c = model.config
    head = model.get_output_embeddings().weight.numel()
    body = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n and "lm_head" not in n)
    hq = c.num_attention_heads * (getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
    lengths = batch.attention_mask.sum(1).double()
    tokens, scored = float(lengths.sum()), float(batch.completion_mask.sum())
    attn = c.num_hidden_layers * hq * float((lengths ** 2).sum())
    train = 6 * body * tokens + 12 * attn + 6 * head * scored
    ref = 2 * body * tokens + 4 * attn + 2 * head * scored
    return train + (ref if with_ref else 0.0)


def matmul_peak(device: str, dtype_name: str, n: int, repeats: int = 5) -> float:
    """Best FLOP/s of an n x n x n matmul (2 n^3 FLOPs) in `dtype_name` on `device`."""
    import torch

    dtype = torch.bfloat16 if dtype_name == "bfloat16" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    a @ b
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def worker(args) -> None:
    """One batching in this process: warm-up step, timed steps; JSON figures to --out."""
    import torch

    from backend.config import parse_config
    from trainer.learner import DeepSpeedLearner
    from trainer.types import LearnerBatch

    spec = torch.load(args.workload, weights_only=False)
    cfg = parse_config(spec["config"])
    batches = [LearnerBatch(**b) for b in spec["batches"]]
    learner = DeepSpeedLearner(spec["model_path"], cfg, batching=args.worker)
    for b in batches:  # sampled by the policy itself: importance ratios ~1, as on-policy
        b.old_logprobs = learner.logprobs(b)
    on_cuda = learner.device.type == "cuda"
    learner.step(batches[0])  # warm-up: first-call allocations and kernel choices
    if on_cuda:
        torch.cuda.synchronize()
    runs = []
    for b in batches[1:]:
        m = learner.step(b)
        runs.append({"tokens": m["learner_tokens"], "seconds": m["learner_seconds"],
                     "padding": m["learner_padding_share"], "micro_batches": m["learner_micro_batches"],
                     "flops": model_flops(learner.module, b, learner.ref_model is not None),
                     "loss": m["loss"]})
    out = {"runs": runs, "device": str(learner.device), "threads": torch.get_num_threads(),
           "rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "cuda_peak_bytes": torch.cuda.max_memory_allocated() if on_cuda else None}
    learner.close()
    Path(args.out).write_text(json.dumps(out))


def run_worker(batching: str, workload: Path, tmp: Path, device: str) -> dict:
    """Run `worker` for one batching in a fresh process (its own RSS high-water mark)."""
    out = tmp / f"{batching}.json"
    env = dict(os.environ)
    if device == "cpu":
        env["DS_ACCELERATOR"] = "cpu"  # DeepSpeed would pick CUDA where there is one
    cmd = [sys.executable, __file__, "--worker", batching, "--workload", str(workload), "--out", str(out)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"learner_mfu: the {batching} worker failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}")
    return json.loads(out.read_text())


def pick_device(requested: str) -> str:
    """'cpu' or 'cuda' for `requested` ('auto', 'cpu', 'cuda'); exits when CUDA is asked for
    and torch sees no GPU."""
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        sys.exit("learner_mfu: --device cuda, but torch.cuda.is_available() is False (no GPU, or a CPU-only "
                 "torch build); run on a GPU machine or pass --device cpu")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def summary(name: str, res: dict, peak: float) -> dict:
    """Print one batching's line; return its figures."""
    tokens = sum(r["tokens"] for r in res["runs"])
    seconds = sum(r["seconds"] for r in res["runs"])
    flops = sum(r["flops"] for r in res["runs"])
    padding = sum(r["padding"] for r in res["runs"]) / len(res["runs"])
    micro = sum(r["micro_batches"] for r in res["runs"]) / len(res["runs"])
    fig = {"tokens_per_s": tokens / seconds, "mfu": flops / seconds / peak, "padding": padding,
           "step_s": seconds / len(res["runs"]), "flops_per_s": flops / seconds}
    gpu = f", CUDA peak {res['cuda_peak_bytes'] / 2**30:.2f} GiB" if res["cuda_peak_bytes"] else ""
    print(f"{name:7s} {fig['tokens_per_s']:8.1f} tok/s  step {fig['step_s']:6.2f} s  "
          f"model {fig['flops_per_s'] / 1e9:7.1f} GFLOP/s  MFU {100 * fig['mfu']:5.1f}%  "
          f"padding {100 * padding:4.1f}%  micro-batches {micro:.1f}  "
          f"peak RSS {res['rss_peak_bytes'] / 2**30:.2f} GiB{gpu}", flush=True)
    return fig


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.yaml", help="run config YAML (not with --quick)")
    ap.add_argument("--steps", type=int, default=3, help="timed learner steps per batching (after 1 warm-up)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                    help="learner device: auto picks CUDA when torch sees a GPU")
    ap.add_argument("--quick", action="store_true", help="the tiny random model, 16 sequences, 1 timed step: about a minute")
    ap.add_argument("--worker", choices=["padded", "packed"], help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    device = pick_device(args.device)
    with tempfile.TemporaryDirectory(prefix="rlwb-learner-mfu-") as tmp:
        run(args, device, Path(tmp))


def run(args, device: str, tmp: Path) -> None:
    """Build the batches, measure the peak, run both batchings, print the figures."""
    import torch
    from transformers import AutoTokenizer

    from backend.config import load_config, parse_config
    from backend.models import resolve_model

    if args.quick:
        from trainer.tiny import build_tiny_model

        model_path, args.steps = build_tiny_model(tmp / "tiny"), 1
        cfg = parse_config({**QUICK_CONFIG, "model": str(model_path)})
    else:
        cfg = load_config(args.config)
        model_path = resolve_model(cfg.model)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    batches = build_batches(cfg, tokenizer, args.steps + 1)
    workload = tmp / "workload.pt"
    torch.save({"config": {**cfg.model_dump(), "model": str(model_path)}, "model_path": str(model_path),
                "batches": batches}, workload)
    lengths = torch.cat([b["attention_mask"].sum(1) for b in batches])
    naive = 1 - float(sum(b["attention_mask"].sum() for b in batches)) / sum(b["input_ids"].numel() for b in batches)
    print(load_average())
    print(f"model {model_path}  {cfg.sequences_per_step} sequences per step (micro-batch {cfg.micro_batch_size}), "
          f"{cfg.dtype}, ZeRO-{cfg.zero_stage}, kl_coef {cfg.kl_coef:g} (reference forward counted: "
          f"{'yes' if cfg.kl_coef > 0 else 'no'}), device {device}, {torch.get_num_threads()} threads")
    print(f"sequences {int(lengths.min())}-{int(lengths.max())} tokens (median {int(lengths.median())}); "
          f"padding share if every sequence were padded to its step's longest: {100 * naive:.1f}%", flush=True)
    n = 8192 if device == "cuda" else 2048
    peaks = [matmul_peak(device, cfg.dtype, n)]
    print(f"matmul peak ({n}^3 {cfg.dtype}, best of 5): {peaks[0] / 1e9:.1f} GFLOP/s", flush=True)
    results = {}
    for name in ("padded", "packed"):
        results[name] = run_worker(name, workload, tmp, device)
        print(f"{name} done; {load_average()}", flush=True)
    peaks.append(matmul_peak(device, cfg.dtype, n))
    peak = max(peaks)
    print(f"matmul peak after: {peaks[1] / 1e9:.1f} GFLOP/s; MFU below is against the best, {peak / 1e9:.1f} GFLOP/s")
    figs = {name: summary(name, res, peak) for name, res in results.items()}
    print(load_average())
    print(f"ratio: {figs['packed']['tokens_per_s'] / figs['padded']['tokens_per_s']:.2f}")


if __name__ == "__main__":
    main()
