"""A peer, side by side: TRL's GRPOTrainer against `rlwb run` on the quickstart's workload.

    python bench/peer_trl.py           # configs/quickstart.yaml's workload, 1 warm-up + 3 timed steps each
    python bench/peer_trl.py --quick   # 2 prompts x 4, 16 new tokens, 1 warm-up + 1 timed step each: ~2 min
                                       # (vLLM's start and TRL's model load are most of it; not under a minute)

TRL (``trl==1.16.0``) runs in its own virtual environment under the cache
(``~/.cache/rlwb/peer-trl``), which this bench creates and installs on first use, never
`make setup`. That environment sees this checkout's site-packages through a ``.pth`` file,
so both sides run the same torch, transformers, peft and accelerate builds; pip installs
only trl itself. The install's time is printed apart and not part of any figure.

Matched: the model (SmolLM2-135M-Instruct, float32), the quickstart's domains and levels,
the same prompts (the domains' chat messages through the model's chat template), prompts x
group size per step, max new tokens, temperature, learning rate (constant), KL coefficient
(beta), clip epsilon, LoRA rank/alpha/target modules, max grad norm, and the reward: each
completion scored by its domain's own verifier (`Domain.score`) in both. TRL's
``loss_type="dapo"`` (its default) is our token-level aggregation over the step;
``use_bias_correction_kl=False`` is our k3 KL gradient. Both use all the machine's threads
and the same memory allocator: `rlwb run` restarts itself with TCMalloc where it is installed
(`core.allocator`), and TRL's process gets the same ``LD_PRELOAD`` (it speeds HF ``generate``
and a padded learner far more than ours: ratio 3.89 so on an Intel Xeon, 6.72 with glibc's malloc
on both; 5.59-5.67 so on an AMD EPYC: README, "Measured").

Not matched, as each tool ships it: TRL generates with HF ``generate`` (padded batches; TRL's
vLLM path needs CUDA), we with vLLM (the CPU build); TRL pads its learner batches, we pack
each group's prompt once (shared prefix); TRL's advantage std uses n - 1 (we use n); TRL
computes the reference logprobs with the adapter disabled as we do. The tasks are drawn from
the same mix with the same seed by each side's own sampler (not the same task stream).

Per side: the median step time over the timed steps (seconds, wall), its generation and
learner parts where the tool reports them, and tokens per second (prompt + completion tokens
of the step / step time). The last line is ``ratio:`` = TRL's median step time / ours. A
benchmark, not a test: figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout

from bench.learner_mfu import cpu_features, load_average  # noqa: E402
from core import allocator  # noqa: E402

TRL_VERSION = "1.16.0"
PEER_ENV = Path(os.environ.get("RLWB_CACHE", Path.home() / ".cache" / "rlwb")) / "peer-trl"
QUICK = {"prompts_per_step": 2, "group_size": 4, "micro_batch_size": 8, "max_new_tokens": 16}


def peer_python() -> tuple[Path, float]:
    """The peer environment's python, created and given trl on first use; (path, install seconds)."""
    py = PEER_ENV / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", f"import trl; assert trl.__version__ == '{TRL_VERSION}'"],
                                      capture_output=True).returncode == 0:
        return py, 0.0
    t0 = time.perf_counter()
    print(f"installing trl=={TRL_VERSION} into {PEER_ENV} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEER_ENV)], check=True)
    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    peer_site = next((PEER_ENV / "lib").glob("python*/site-packages"))
    (peer_site / "rlwb_stack.pth").write_text(site + "\n")  # the same torch/transformers/peft as ours
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"trl=={TRL_VERSION}"],
                   check=True)
    return py, time.perf_counter() - t0


def workload(args) -> dict:
    """The run config both sides follow: the quickstart's, at the bench's size."""
    import yaml

    cfg = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    cfg.update({"name": "peer-trl-bench", "steps": args.warmup + args.steps, "eval_tasks_per_domain": 0,
                "checkpoint_every": 0})
    if args.quick:
        cfg.update(QUICK)
    return cfg


def tasks_file(cfg: dict, path: Path) -> None:
    """The peer's dataset: one row per prompt the run will take, drawn from the mix with the
    run's seed (domain, level, seed and the chat messages the policy sees)."""
    from transformers import AutoTokenizer

    from domains.registry import build_messages
    from trainer.config import parse_config
    from trainer.groups import sample_tasks
    from trainer.models import resolve_model

    run = parse_config(cfg)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(run.model))
    tasks = sample_tasks(run, random.Random(run.seed), run.prompts_per_step * run.steps)
    with path.open("w") as f:
        for t in tasks:
            f.write(json.dumps({"prompt": build_messages(t, tokenizer), "domain": t.domain, "seed": t.seed,
                                "level": t.difficulty}) + "\n")


def ours(cfg: dict, tmp: Path) -> list[dict]:
    """`rlwb run` on the workload; one dict per step (seconds, generate, learn, tokens)."""
    import yaml

    (tmp / "ours.yaml").write_text(yaml.safe_dump(cfg))
    db = tmp / "ours.db"
    rlwb = Path(sys.executable).parent / "rlwb"
    res = subprocess.run([str(rlwb), "--db", str(db), "run", str(tmp / "ours.yaml")], capture_output=True,
                         text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    if res.returncode != 0:
        sys.exit(f"rlwb run failed:\n{res.stderr[-3000:]}")
    with sqlite3.connect(db) as con:
        rows = con.execute("select step, name, value from metrics where name in ('time/step', 'time/generate', "
                           "'time/learn', 'learner_tokens')").fetchall()
    steps: dict[int, dict] = {}
    for step, name, value in rows:
        steps.setdefault(step, {})[name] = value
    return [{"seconds": m["time/step"], "generate": m.get("time/generate"), "learn": m.get("time/learn"),
             "tokens": m.get("learner_tokens", 0.0)} for _, m in sorted(steps.items())]


def peer(cfg: dict, py: Path, tmp: Path) -> list[dict]:
    """TRL's GRPOTrainer on the workload in the peer environment; one dict per step."""
    out = tmp / "trl_steps.json"
    res = subprocess.run([str(py), __file__, "--child", json.dumps(cfg), "--tasks", str(tmp / "tasks.jsonl"),
                          "--out", str(out)], capture_output=True, text=True, cwd=REPO,
                         # `rlwb run` restarts itself with TCMalloc where installed: the same on both sides
                         env=allocator.environment({**os.environ, "PYTHONPATH": str(REPO),
                                                    "TOKENIZERS_PARALLELISM": "false"}))
    if res.returncode != 0:
        sys.exit(f"TRL failed:\n{res.stderr[-3000:]}")
    return json.loads(out.read_text())


def child(cfg: dict, tasks: Path, out: Path) -> None:
    """In the peer environment: train with TRL's GRPOTrainer and write each step's times."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from domains.registry import get_domain
    from trainer.config import parse_config
    from trainer.models import resolve_model

    run = parse_config(cfg)
    path = resolve_model(run.model)
    rows = [json.loads(line) for line in tasks.read_text().splitlines()]
    seqs = run.prompts_per_step * run.group_size
    steps: list[dict] = []
    marks: dict[str, float] = {}

    def reward(prompts, completions, domain, seed, level, **_):
        out = []
        for text, name, s, lv in zip(completions, domain, seed, level):
            d = get_domain(name)
            reply = text[-1]["content"] if isinstance(text, list) else text
            out.append(float(d.score(d.make_task(s, lv), reply)[0]))
        return out

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            marks["t0"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            steps.append({"seconds": time.perf_counter() - marks["t0"]})

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and steps and "num_tokens" in logs:
                steps[-1]["num_tokens_total"] = logs["num_tokens"]

    args = GRPOConfig(
        output_dir=str(out.parent / "trl"), max_steps=run.steps, per_device_train_batch_size=seqs,
        gradient_accumulation_steps=1, num_generations=run.group_size, max_completion_length=run.max_new_tokens,
        temperature=run.temperature, top_p=1.0, learning_rate=run.learning_rate, lr_scheduler_type="constant",
        warmup_steps=0, beta=run.kl_coef, epsilon=run.clip_eps, loss_type="dapo", use_bias_correction_kl=False,
        max_grad_norm=run.max_grad_norm, bf16=False, fp16=False, use_cpu=True, logging_steps=1, report_to="none",
        save_strategy="no", seed=run.seed, shuffle_dataset=False, dataloader_num_workers=0,
        remove_unused_columns=False, disable_dropout=True,
    )
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    lora = (LoraConfig(r=run.lora_rank, lora_alpha=run.lora_alpha, target_modules=list(run.lora_target_modules),
                       task_type="CAUSAL_LM") if run.lora_rank else None)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=AutoTokenizer.from_pretrained(path), peft_config=lora,
                          callbacks=[Timer()])
    trainer.train()
    previous = 0.0
    for s in steps:  # TRL logs a running total of prompt + completion tokens
        total = s.pop("num_tokens_total", previous)
        s["tokens"], previous = total - previous, total
    out.write_text(json.dumps(steps))


def summary(name: str, steps: list[dict], warmup: int) -> float:
    timed = steps[warmup:]
    med = statistics.median(s["seconds"] for s in timed)
    tokens = sum(s.get("tokens") or 0 for s in timed) / sum(s["seconds"] for s in timed)
    parts = "".join(f"  {k} {statistics.median(s[k] for s in timed):.2f} s" for k in ("generate", "learn")
                    if all(s.get(k) is not None for s in timed))
    each = " ".join(f"{s['seconds']:.1f}" for s in timed)
    print(f"  {name:5s} median step {med:7.2f} s over {len(timed)} ({each})"
          f"{parts}  {tokens:7.1f} tok/s", flush=True)
    return med


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="timed steps per side (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed first steps per side")
    ap.add_argument("--quick", action="store_true", help="2 prompts x 4, 16 new tokens, 1 timed step")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tasks", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(json.loads(args.child), args.tasks, args.out)
        return
    if args.quick:
        args.steps = 1
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be at least 1 and --warmup at least 0")
    py, install = peer_python()
    if install:
        print(f"peer environment ready in {install:.0f} s (not counted)")
    print(cpu_features())
    preload = allocator.environment(os.environ).get("LD_PRELOAD")
    print(f"allocator, both sides: {f'LD_PRELOAD={preload}' if preload else allocator.fallback_reason()}")
    print(load_average())
    cfg = workload(args)
    print(f"workload: {cfg['model']}, {', '.join(cfg['domains'])} at level {cfg['difficulty']}; "
          f"{cfg['prompts_per_step']} prompts x {cfg['group_size']}, {cfg['max_new_tokens']} new tokens, "
          f"LoRA rank {cfg.get('lora_rank', 0)}, {cfg['dtype']}; {args.warmup} warm-up + {args.steps} timed steps",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="rlwb-peer-trl-") as tmp:
        tmp = Path(tmp)
        tasks_file(cfg, tmp / "tasks.jsonl")
        t0 = time.perf_counter()
        mine = ours(cfg, tmp)
        t1 = time.perf_counter()
        theirs = peer(cfg, py, tmp)
        t2 = time.perf_counter()
    print(f"wall, start to end: rlwb run {t1 - t0:.0f} s (engine start and checkpoint included), "
          f"TRL {t2 - t1:.0f} s (model load included)")
    a = summary("rlwb", mine, args.warmup)
    b = summary("TRL", theirs, args.warmup)
    print(load_average())
    print(f"ratio: {b / a:.2f}")


if __name__ == "__main__":
    main()
