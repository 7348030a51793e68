"""Learner throughput and MFU: padded micro-batches against packed (padding-free) ones.

    python bench/learner_mfu.py            # SmolLM2-135M, batches of configs/quickstart.yaml's shape
    python bench/learner_mfu.py --quick    # the tiny random model, 16 sequences, 1 timed pair: ~1 minute
    python bench/learner_mfu.py --steps 5 --device cuda   # on a GPU (bench/gpu_check.sh)

Measures, in one run:

- the machine's matmul peak: the best of several large square ``torch.matmul`` calls in the
  learner's dtype on the learner's device (all CPU threads torch uses), before and after the
  learner runs;
- for each batching of the real `trainer.learner.DeepSpeedLearner` ("padded", the earlier
  length-sorted right-padded micro-batches, and "packed"), on one learner in one process,
  stepping the same batches in alternating order (padded then packed, packed then padded,
  ...; one warm-up pair, then `--steps` timed pairs) so both see the same machine load:
  real tokens per second of ``learner.step``, model FLOPs utilisation, padding share
  (padding positions / all positions the forward passes computed) and the peak memory of
  its steps (RSS high-water mark, reset before each step through /proc/self/clear_refs;
  on CUDA also the allocator's peak).

MFU = model FLOPs / seconds / measured peak. Model FLOPs follow Chowdhery et al., 2022,
"PaLM", arXiv:2204.02311, appendix B (as in Hoffmann et al., 2022, "Chinchilla"):
6 N per token for forward + backward with N the non-embedding parameters, plus
12 L H Q T per token for attention (L layers, H heads of Q dims, T the sequence's own
length), plus 6 V d per *scored* token for the LM head (V x d), which the learner only
applies to completion tokens. With ``kl_coef > 0`` the frozen reference model's forward is
counted too (a third: 2 N, 4 L H Q T, 2 V d). Padding, recomputation and the logits the
padded path computes beyond the completions are not model FLOPs.

Batches: real quickstart prompts (``configs/quickstart.yaml``'s mix, `trainer.groups.sample_tasks`
and `render_prompt` with the chat template: 52-176 tokens), 8 completions each of random
token ids with lengths drawn as in the recorded quickstart run (640 samples: 28% hit the
64-token cap, 44% under 8 tokens, median 12).

Prints the figures (tokens/s over all timed steps, and of the fastest step), the load
averages, each pair's speed-up, and as its last line ``ratio: X.XX`` = the median over the
timed pairs of packed tokens/s / padded tokens/s (a paired comparison: both steps of a pair
run back to back on the same batch, which keeps most of the load's drift out). This is a
benchmark, not a test: figures depend on the machine and on what else runs on it (on a
shared 2-core machine single steps vary several-fold). Not covered: multi-process (ZeRO
across ranks) runs.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from core import allocator  # noqa: E402 - after the path line
from core.cpu import bf16_flags  # noqa: E402 - light (no torch); after the path line

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


def allocator_line(argv: list[str] | None) -> str:
    """The memory allocator this bench times with, as a line to print: started from the shell
    (`argv` None) it first restarts with the one runs use (`core.allocator.reexec`: TCMalloc
    where installed), so a learner step here costs what it costs in a run."""
    if argv is None:
        allocator.reexec()
    lib = allocator.loaded()
    return f"allocator: {f'TCMalloc ({lib})' if lib else allocator.fallback_reason()}"


def cpu_features() -> str:
    """What this CPU's kernels can use: PyTorch's dispatch level (DEFAULT, AVX2, AVX512,
    AVX512_VNNI...) and the bf16 instructions the kernel reports. Machines of the same kind
    differ here, and fp32 and bf16 speeds with them: compare figures only between like CPUs."""
    import torch

    bf16 = bf16_flags() or ["none"]
    return f"cpu: torch capability {torch.backends.cpu.get_cpu_capability()}, bf16 instructions: {' '.join(bf16)}"


def completion_length(rng: random.Random, cap: int) -> int:
    """A completion length (tokens) drawn as in the recorded quickstart run: 28% at the
    cap, 44% from 3-7 tokens, the rest uniform below the cap."""
    u = rng.random()
    if u < 0.28:
        return cap
    if u < 0.72:
        return rng.randint(3, min(7, cap))
    return rng.randint(min(8, cap), max(cap - 1, min(8, cap)))


def build_batches(cfg, tokenizer, steps: int, seed: int = 0, completion_tokens: int | None = None) -> list[dict]:
    """`steps` learner batches of quickstart shape, as dicts of tensors (`LearnerBatch` fields).

    Prompts are real rendered tasks; completions random token ids of quickstart lengths
    (`completion_length`), or of `completion_tokens` each;
    advantages group-normalised random rewards; old logprobs -2 nats (their values change
    which tokens are clipped, not the computation).
    """
    import torch

    from trainer.groups import sample_tasks
    from trainer.prompts import render_prompt
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
                n = completion_tokens or completion_length(rng, cfg.max_new_tokens)
                ids = [rng.randrange(3, vocab) for _ in range(n)]
                samples.append(Sample(task.domain, task.seed, g, i, text, prompt_ids,
                                      Completion(ids, [-2.0] * n, "", "length"), advantage=float(adv[i])))
        b = LearnerBatch.from_samples(samples, pad_id=tokenizer.pad_token_id or 0)
        out.append({k: getattr(b, k) for k in ("input_ids", "attention_mask", "completion_mask",
                                               "old_logprobs", "advantages")})
    return out


def flop_terms(model) -> tuple[int, int, int]:
    """(body parameters, output-head parameters, layers x query width) of an HF causal LM:
    a forward pass costs 2 x body per token, 2 x head per token given logits, and
    4 x layers x query width per (query, key) pair of attention (PaLM appendix B)."""
    c = model.config
    head = model.get_output_embeddings().weight.numel()
    body = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n and "lm_head" not in n)
    hq = c.num_attention_heads * (getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
    return body, head, c.num_hidden_layers * hq


def model_flops(model, batch, with_ref: bool) -> float:
    """Model FLOPs of one learner step on `batch` (PaLM appendix B; see the module docstring).

    Args:
        model: the HF causal LM (config and parameters are read).
        batch: the step's `LearnerBatch`.
        with_ref: count the frozen reference model's forward pass.
    """
    lengths = batch.attention_mask.sum(1).double()
    return step_flops(model, float(lengths.sum()), float((lengths ** 2).sum()), float(batch.completion_mask.sum()),
                      with_ref)


def step_flops(model, tokens: float, pairs: float, scored: float, with_ref: bool) -> float:
    """Model FLOPs of one learner step (PaLM appendix B) from its counts: `tokens` run
    through the body, `pairs` of attention (a sequence of T tokens counts T^2), `scored`
    tokens projected onto the vocabulary; training counts forward + backward (3 forwards),
    `with_ref` adds the reference model's forward."""
    body, head, layer_width = flop_terms(model)
    attn = layer_width * pairs
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


class PeakMemory:
    """Peak memory of one step: the RSS high-water mark (`trainer.metrics.PeakRSS`, reset
    before the step) and, on CUDA, the allocator's peak."""

    def __init__(self, cuda: bool):
        from trainer.metrics import PeakRSS

        self.cuda, self.rss = cuda, PeakRSS()

    def reset(self) -> None:
        import torch

        self.rss.reset()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def read(self) -> tuple[int, int | None]:
        """(peak RSS bytes, peak CUDA bytes or None) since the last reset (since start-up
        where the kernel doesn't allow the reset)."""
        import torch

        return int(self.rss.read_gb() * 2**30), torch.cuda.max_memory_allocated() if self.cuda else None


def measure(learner, batches, modes: tuple[str, ...]) -> dict[str, list[dict]]:
    """Step the learner on every batch once per batching, alternating the order (A B, B A,
    ...) so that both see the same load over time; the first pair is a warm-up.

    Returns:
        batching -> one dict per timed step (tokens, seconds, padding share, micro-batches,
        model FLOPs, peak RSS / CUDA bytes).
    """
    import torch

    memory = PeakMemory(learner.device.type == "cuda")
    out: dict[str, list[dict]] = {m: [] for m in modes}
    for i, batch in enumerate(batches):
        for mode in (modes if i % 2 == 0 else modes[::-1]):
            learner.batching = mode
            memory.reset()
            m = learner.step(batch)
            if memory.cuda:
                torch.cuda.synchronize()
            rss, gpu = memory.read()
            print(f"  step {i} {mode:13s} {m['learner_seconds']:7.2f} s  {m['learner_tokens_per_s']:7.1f} tok/s"
                  f"{'  (warm-up)' if i == 0 else ''}", flush=True)
            if i == 0:
                continue
            out[mode].append({"tokens": m["learner_tokens"], "seconds": m["learner_seconds"],
                              "computed": m.get("learner_computed_tokens", m["learner_tokens"]),
                              "padding": m["learner_padding_share"], "micro_batches": m["learner_micro_batches"],
                              "flops": model_flops(learner.module, batch, learner.cfg.kl_coef > 0),
                              "rss": rss, "gpu": gpu})
    return out


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


def summary(name: str, steps: list[dict], peak: float) -> dict:
    """Print one batching's line; return its figures."""
    tokens = sum(r["tokens"] for r in steps)
    seconds = sum(r["seconds"] for r in steps)
    flops = sum(r["flops"] for r in steps)
    padding = sum(r["padding"] for r in steps) / len(steps)
    micro = sum(r["micro_batches"] for r in steps) / len(steps)
    fig = {"tokens_per_s": tokens / seconds, "mfu": flops / seconds / peak, "padding": padding,
           "step_s": seconds / len(steps), "flops_per_s": flops / seconds,
           "best": max(r["tokens"] / r["seconds"] for r in steps)}
    gpu = max(r["gpu"] or 0 for r in steps)
    print(f"{name:7s} {fig['tokens_per_s']:8.1f} tok/s (best step {fig['best']:7.1f})  step {fig['step_s']:6.2f} s  "
          f"model {fig['flops_per_s'] / 1e9:7.1f} GFLOP/s  MFU {100 * fig['mfu']:5.1f}%  "
          f"padding {100 * padding:4.1f}%  micro-batches {micro:.1f}  "
          f"peak RSS {max(r['rss'] for r in steps) / 2**30:.2f} GiB"
          f"{f', CUDA peak {gpu / 2**30:.2f} GiB' if gpu else ''}", flush=True)
    return fig


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/quickstart.yaml", help="run config YAML (not with --quick)")
    ap.add_argument("--steps", type=int, default=3, help="timed learner steps per batching (after one warm-up step each)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                    help="learner device: auto picks CUDA when torch sees a GPU")
    ap.add_argument("--quick", action="store_true", help="the tiny random model, 16 sequences, 1 timed step: about a minute")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    args.allocator = allocator_line(argv)  # first: it may restart the process
    device = pick_device(args.device)
    with tempfile.TemporaryDirectory(prefix="rlwb-learner-mfu-") as tmp:
        run(args, device, Path(tmp))


def bench_model(args, tmp: Path):
    """(run config, model directory) of a bench: with ``args.quick`` the tiny random model
    built into `tmp` and `QUICK_CONFIG` (``args.steps`` set to 1), else ``args.config`` and
    its model."""
    from trainer.config import load_config, parse_config
    from trainer.models import resolve_model

    if args.quick:
        from trainer.tiny import build_tiny_model

        model_path, args.steps = build_tiny_model(tmp / "tiny"), 1
        return parse_config({**QUICK_CONFIG, "model": str(model_path)}), model_path
    cfg = load_config(args.config)
    return cfg, resolve_model(cfg.model)


def run(args, device: str, tmp: Path) -> None:
    """Build the batches, measure the peak, step both batchings, print the figures."""
    if device == "cpu":
        os.environ["DS_ACCELERATOR"] = "cpu"  # DeepSpeed would pick CUDA where there is one
    import torch
    from transformers import AutoTokenizer

    from trainer.learner import DeepSpeedLearner
    from trainer.types import LearnerBatch

    cfg, model_path = bench_model(args, tmp)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    batches = [LearnerBatch(**b) for b in build_batches(cfg, tokenizer, args.steps + 1)]
    lengths = torch.cat([b.attention_mask.sum(1) for b in batches])
    naive = 1 - sum(b.num_tokens for b in batches) / sum(b.input_ids.numel() for b in batches)
    print(cpu_features())
    print(args.allocator)
    print(load_average())
    print(f"model {model_path}  {cfg.sequences_per_step} sequences per step (micro-batch {cfg.micro_batch_size}), "
          f"{cfg.dtype}, ZeRO-{cfg.zero_stage}, kl_coef {cfg.kl_coef:g} (reference forward counted: "
          f"{'yes' if cfg.kl_coef > 0 else 'no'}), device {device}, {torch.get_num_threads()} threads")
    print(f"sequences {int(lengths.min())}-{int(lengths.max())} tokens (median {int(lengths.median())}); "
          f"padding share if every sequence were padded to its step's longest: {100 * naive:.1f}%", flush=True)
    n = 8192 if device == "cuda" else 2048
    peaks = [matmul_peak(device, cfg.dtype, n)]
    print(f"matmul peak ({n}^3 {cfg.dtype}, best of 5): {peaks[0] / 1e9:.1f} GFLOP/s", flush=True)
    learner = DeepSpeedLearner(model_path, cfg, batching="packed")
    try:
        steps = measure(learner, batches, ("padded", "packed"))
    finally:
        learner.close()
    peaks.append(matmul_peak(device, cfg.dtype, n))
    peak = max(peaks)
    print(f"matmul peak after: {peaks[1] / 1e9:.1f} GFLOP/s; MFU below is against the best, {peak / 1e9:.1f} GFLOP/s")
    figs = {name: summary(name, runs, peak) for name, runs in steps.items()}
    pairs = [a["seconds"] / b["seconds"] for a, b in zip(steps["padded"], steps["packed"])]
    print(f"packed / padded tokens/s per pair: {' '.join(f'{r:.2f}' for r in pairs)}; "
          f"over all timed steps: {figs['packed']['tokens_per_s'] / figs['padded']['tokens_per_s']:.2f}")
    print(load_average())
    print(f"ratio: {statistics.median(pairs):.2f}")


if __name__ == "__main__":
    main()
