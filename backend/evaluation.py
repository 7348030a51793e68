"""Capability evaluation of one model or checkpoint over a mix (`rlwb eval MODEL --mix NAME`).

For every domain of the mix, `tasks_per_domain` held-out tasks (`domains.registry.heldout_tasks`:
seeds from a range training never samples, distinct questions, the levels of the mix's
range in turn) are each sampled `samples` times at `temperature`; every completion is
scored by its domain's verifier and stored (`backend.eval_store`) with its task's exact
(domain, level, seed). The summary holds, per domain and family, pass@k for each k (the
unbiased estimator of Chen et al. 2021), mean reward and answer-format rate with bootstrap
intervals (`trainer.eval_stats`); the baselines of the tasks played (best constant answer,
copying from the question, format-only reward, `backend.baselines`) and the verdict
against the strongest; tool-call validity (valid calls / calls) for tool-use
domains; multi-turn success (the share of episodes solved) for multi-turn domains; and,
when the mix has `needle_haystack`, the usable context length from a needle sweep.

    eval_id = evaluate_model(store, "smollm2-135m", EvalSettings(mix="quickstart"))
    eval_id = evaluate_model(store, "r20261129-161545-a23c", EvalSettings())   # its last checkpoint, its domains

The model is named as a fetched model (``smollm2-135m``), a checkpoint directory, a
training run (``RUN_ID``: its newest checkpoint) or ``RUN_ID:STEP``. Its identity (the
weights' sha256 and size) is stored with the results, so two evaluations of the same
weights can be recognised whatever path they were loaded from.

The trainer's engines, loop and evaluation (torch, vLLM) and the run manager are imported
inside the functions that run them: the CLI and the page import this module at start-up.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from collections.abc import Callable
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from core.choices import EngineKind
from core.errors import ConfigError, EngineError, EvalNotFound, ModelNotFound, RunNotFound, WorkbenchError
from retrieval.context import DEFAULT_BUDGET_TOKENS
from domains.mixes import resolve_mix
from domains.registry import get_domain, heldout_tasks
from domains.splits import HELDOUT_SEED_RANGE
from trainer.models import context_window, resolve_model, weights_problem
from trainer.prompts import render_prompt
from trainer.context_length import SweepConfig, model_window, run_sweep

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
RUN_ID_RE = re.compile(r"r\d{8}-\d{6}-[0-9a-f]{4}")  # `backend.store` run ids
NEEDLE_DOMAIN = "needle_haystack"
SWEEP_LENGTHS = (1_000, 2_000, 4_000, 8_000, 16_000)  # SmolLM2 tokens; cut at the model's window
SWEEP_DEPTHS = (10, 50, 90)  # percent


class EvalSettings(BaseModel):
    """What `evaluate_model` runs. Domains come from `mix` (a stored mix, NAME[@VERSION]),
    else `domains` (names, at `difficulty`), else the training run the checkpoint came from.

    Raises (through construction): pydantic ValidationError naming the field; use
    `parse_settings` for a ConfigError.
    """
    model_config = ConfigDict(extra="forbid")

    mix: str | None = Field(None, description="A stored mix, NAME or NAME@VERSION (`rlwb mix list`).")
    domains: list[str] | None = Field(None, description="Domain names, when no mix is given.")
    difficulty: int = Field(1, ge=1, le=5, description="Level of the tasks of `domains`.")
    tasks_per_domain: int = Field(50, ge=1, le=10_000, description="Held-out tasks per domain (1 to 10,000).")
    samples: int = Field(8, ge=1, le=256, description="Completions sampled per task (n of pass@k).")
    ks: list[int] = Field([1, 8], min_length=1, description="The k values of pass@k, each 1..samples.")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description="Sampling temperature.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(64, ge=1, le=768, description="Cap on generated tokens per answer (per turn).")
    seed_offset: int = Field(0, ge=0, description="Start this many seeds into the held-out range.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seeds the rollout engine's sampling.")
    rollout_engine: EngineKind = Field("vllm", description="vllm (default) or hf.")
    context_sweep: bool = Field(True, description="Measure usable context length when the mix has needle_haystack.")

    max_turns: int | None = Field(
        None, ge=1, le=32, description="Multi-turn domains: turns per episode (default: the run's, else 4).")
    max_episode_tokens: int | None = Field(
        None, ge=64, le=4096, description="Multi-turn domains: tokens per episode (default: the run's, else 1024).")
    context_budget_tokens: int | None = Field(
        None, ge=128, le=131_072,
        description=f"Retrieval domains: context budget (default: the run's or {DEFAULT_BUDGET_TOKENS}).")

    @field_validator("domains")
    @classmethod
    def _mix_or_domains(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("give at least one domain, e.g. chain_sum,basic_arithmetic")
        if v and info.data.get("mix") is not None:
            raise ValueError("give either a mix or domains, not both")
        return v

    @field_validator("ks")
    @classmethod
    def _ks_within_samples(cls, v: list[int], info: ValidationInfo) -> list[int]:
        samples = info.data.get("samples")
        bad = [k for k in v if samples is not None and not 1 <= k <= samples]
        if bad:
            raise ValueError(f"k {', '.join(map(str, bad))} must be between 1 and the samples per task ({samples}); "
                             f"raise the samples to at least {max(bad)} or drop those k")
        return sorted(set(v))

    @field_validator("seed_offset")
    @classmethod
    def _seeds_in_range(cls, v: int, info: ValidationInfo) -> int:
        room = HELDOUT_SEED_RANGE[1] - HELDOUT_SEED_RANGE[0]
        tasks = info.data.get("tasks_per_domain") or 0
        if v + tasks > room:
            raise ValueError(f"the seed offset plus the tasks per domain must stay within the {room:,} held-out "
                             f"seeds; use an offset of at most {room - tasks:,}")
        return v


def parse_settings(data: dict, names: dict[str, str] | None = None) -> EvalSettings:
    """`EvalSettings` from a dict; raises ConfigError naming the first bad field and the fix.

    Args:
        names: how the caller calls the fields (e.g. the CLI's flags: {"ks": "--k"}), for the message.
    """
    try:
        return EvalSettings.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        field = (names or {}).get(field, f"field '{field}'")
        raise ConfigError(f"{field}: {err['msg'].removeprefix('Value error, ')}") from None


def resolve_eval_model(store, ref: str) -> tuple[Path, str | None, int | None]:
    """The checkpoint directory a model reference names, and the training run and step it
    came from (None, None for a base model or a directory no run recorded).

    `ref` is a fetched model name, a checkpoint directory, ``RUN_ID`` (the run's newest
    checkpoint) or ``RUN_ID:STEP``.

    Raises:
        ModelNotFound: nothing by that name, or a run without (that) checkpoint.
    """
    run_id, colon, step = ref.partition(":")
    try:
        exists = Path(ref).exists()
    except OSError as e:  # a name too long for the file system, ...
        raise ModelNotFound(f"model {ref[:80]!r}…: {e.strerror}; name a fetched model, a checkpoint directory, "
                            "RUN_ID or RUN_ID:STEP") from None
    if colon and not step and not exists:
        raise ModelNotFound(f"'{ref}': give the step after ':', e.g. {run_id}:20, or just {run_id} for its newest "
                            "checkpoint")
    if RUN_ID_RE.fullmatch(run_id) and not exists and not _has_run(store, run_id):
        raise ModelNotFound(f"no run {run_id} in the store {getattr(store, 'path', '')}; list runs with "
                            "`rlwb runs list` (a run in another store: pass --db before the command)")
    if run_id.startswith("r") and not exists:
        try:
            checkpoints = store.checkpoints(run_id)
            store.get_run(run_id)
        except RunNotFound:
            checkpoints = None
        if checkpoints is not None:
            if step:
                if not step.isdigit():
                    raise ModelNotFound(f"'{ref}': the step after ':' must be a number, e.g. {run_id}:20")
                checkpoints = [c for c in checkpoints if c["step"] == int(step)]
            usable = [c for c in checkpoints if Path(c["path"], "config.json").is_file()]
            if not usable:
                have = ", ".join(str(c["step"]) for c in store.checkpoints(run_id)) or "none"
                raise ModelNotFound(f"run {run_id} has no usable checkpoint{' at step ' + step if step else ''} "
                                    f"(checkpoints on record: {have}); see `rlwb runs show {run_id}`")
            return _readable(Path(usable[-1]["path"])), run_id, usable[-1]["step"]
    path = _readable(resolve_model(ref))
    found = store.checkpoint_at(path)  # a checkpoint given by its directory: its run and step
    return (Path(path), *found) if found else (Path(path), None, None)


def _readable(path: Path) -> Path:
    """`path`, once its weights files read (`trainer.models.weights_problem`).

    Raises:
        ModelNotFound: a weights file is cut short or corrupt.
    """
    problem = weights_problem(path)
    if problem:
        raise ModelNotFound(problem)
    return path


def _has_run(store, run_id: str) -> bool:
    try:
        store.get_run(run_id)
        return True
    except RunNotFound:
        return False


def model_identity(path: Path) -> dict:
    """What identifies a model's weights whatever path they load from: the sha256 over its
    weight files (name and content, in name order), their total size in bytes and names,
    and the architecture from config.json.

    Raises:
        ModelNotFound: the directory holds no weight files.
    """
    import json

    files = sorted(p for p in Path(path).iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not files:
        raise ModelNotFound(f"{path} holds no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    digest, size = hashlib.sha256(), 0
    for f in files:
        digest.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
                size += len(chunk)
    config = {}
    if Path(path, "config.json").is_file():
        config = json.loads(Path(path, "config.json").read_text())
    return {"sha256": digest.hexdigest(), "bytes": size, "files": [f.name for f in files],
            "architecture": (config.get("architectures") or [None])[0],
            "name_or_path": config.get("_name_or_path")}


def eval_config(store, settings: EvalSettings, model_path: Path, run_id: str | None):
    """The `RunConfig` an evaluation plays its tasks under: the training run's config when
    the checkpoint has one (its multi-turn budgets and sandbox backend), with the model,
    the domains (mix or list) and the answer budget replaced; the mix pinned.

    Raises:
        ConfigError: no domains given and no run to take them from; an unknown mix or domain.
    """
    # on first use: it pulls in yaml
    from trainer.config import parse_config

    data = dict(store.get_run(run_id)["config"]) if run_id else {}
    if settings.mix is None and not settings.domains and not data:
        raise ConfigError("field 'mix': name a stored mix (`--mix NAME`, see `rlwb mix list`) or domains "
                          "(`--domains chain_sum,basic_arithmetic`); only a training run's checkpoint brings its own")
    if settings.context_budget_tokens is not None:
        data["context_budget_tokens"] = settings.context_budget_tokens
    for key in ("max_turns", "max_episode_tokens"):
        if getattr(settings, key) is not None:
            data[key] = getattr(settings, key)
    if settings.mix is not None:  # a config with a mix names neither domains nor difficulty
        for key in ("domains", "difficulty", "mix_spec", "curriculum"):
            data.pop(key, None)
        data["mix"] = settings.mix
    elif settings.domains:
        for key in ("mix", "mix_spec"):
            data.pop(key, None)
        data.update(domains=dict.fromkeys(settings.domains, 1.0), difficulty=settings.difficulty, curriculum=False)
    # else: the run's own mix or domains (with a curriculum, every level it could reach)
    data.update(model=str(model_path), max_new_tokens=settings.max_new_tokens,
                rollout_engine=settings.rollout_engine, seed=settings.seed)
    for key in ("output_dir", "name"):
        data.pop(key, None)
    return resolve_mix(parse_config(data, source="evaluation"), store)


def suite_tasks(domains: dict[str, tuple[int, int]], tasks_per_domain: int, seed_offset: int = 0):
    """The held-out tasks of a suite as (domain, level, seed): for each domain up to
    `tasks_per_domain` held-out tasks with distinct questions, from the held-out seeds at
    `seed_offset` on, the levels lo..hi taken in turn (`domains.registry.heldout_tasks`).

    Raises:
        ConfigError: the seeds would leave the held-out range.
    """
    return [(d, t.difficulty, t.seed) for d, (lo, hi) in domains.items()
            for t in heldout_tasks(d, list(range(lo, hi + 1)), tasks_per_domain, seed_offset)]


def evaluate_model(store, ref: str, settings: EvalSettings, progress: Callable[[str], None] | None = None) -> str:
    """Evaluate a model or checkpoint and store everything; returns the evaluation's id.

    The evaluation is recorded (status "running") before the engine starts, each domain's
    samples as soon as they are scored, and the summary at the end; a failure marks it
    "failed" with the error and re-raises.

    Args:
        store: a `backend.store.Store`.
        ref: the model (see `resolve_eval_model`).
        settings: the suite.
        progress: optional callback for status lines.

    Raises:
        ModelNotFound, ConfigError: before anything is recorded.
        EngineError, SandboxUnavailable: the engine or sandboxes can't start (recorded as failed).
    """
    # on first use: it pulls in torch, gymnasium, numpy, yaml
    from trainer.loop import check_model_fits

    say = progress or (lambda _msg: None)
    model_path, run_id, step = resolve_eval_model(store, ref)
    cfg = eval_config(store, settings, model_path, run_id)
    check_model_fits(cfg)  # prompts the model can't hold are refused before the evaluation row exists
    specs = {d: (lo, hi) for d, (_, lo, hi) in cfg.domain_specs().items()}
    tasks = suite_tasks(specs, settings.tasks_per_domain, settings.seed_offset)
    say(f"model {model_path}: hashing the weights")
    identity = model_identity(model_path)
    suite = {**settings.model_dump(), "domains": {d: list(r) for d, r in specs.items()},
             "mix_pinned": ({"name": cfg.mix_spec["name"], "version": cfg.mix_spec["version"]}
                            if cfg.mix_spec else None),
             "seeds": sorted({s for _, _, s in tasks}), "max_turns": cfg.max_turns,
             "sandbox_backend": cfg.sandbox_backend if cfg.needs_sandbox else None}
    eval_id = store.create_eval(ref, str(model_path), identity, suite, run_id=run_id, step=step)
    try:
        summary, extras = _play(store, eval_id, cfg, model_path, tasks, settings, say, run_id)
    except BaseException as e:
        store.finish_eval(eval_id, "failed", error=f"{type(e).__name__}: {e}\n{_clipped(traceback.format_exc())}")
        raise
    store.finish_eval(eval_id, "completed", summary=summary, extras=extras)
    return eval_id


def _clipped(text: str, head: int = 3000, tail: int = 3000) -> str:
    """A long traceback's first and last characters (the cause is often at the top)."""
    return text if len(text) <= head + tail else f"{text[:head]}\n[... {len(text) - head - tail} characters ...]\n{text[-tail:]}"


def _open(cfg, model_path: Path, seed: int, engine_kw: dict):
    """`open_engine`, with a model that fails to load reported as an EngineError naming it."""
    # on first use: it pulls in torch, numpy
    from trainer.rollout import open_engine

    try:
        return open_engine(cfg.rollout_engine, model_path, seed=seed, dtype=cfg.dtype, **engine_kw)
    except WorkbenchError:
        raise
    except Exception as e:  # a corrupt or truncated checkpoint, an unsupported architecture, ...
        raise EngineError(f"could not load {model_path} into the {cfg.rollout_engine} engine: "
                          f"{type(e).__name__}: {e}; check the checkpoint (re-fetch the model or pick another "
                          "checkpoint)") from e


def _play(store, eval_id: str, cfg, model_path: Path, tasks, settings: EvalSettings, say,
          run_id: str | None) -> tuple[dict, dict]:
    from transformers import AutoTokenizer

    # on first use: it pulls in torch, gymnasium, numpy, yaml
    from trainer.loop import engine_options
    # on first use: it pulls in torch, gymnasium, numpy, yaml
    from trainer.placement import maybe_runtime
    # on first use: it pulls in torch, gymnasium, numpy, yaml
    from trainer.evaluate import sample_row
    # on first use: it pulls in torch, gymnasium, numpy, yaml
    from trainer.scoring import rollout

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    rows: list[dict] = []
    sweep = settings.context_sweep and NEEDLE_DOMAIN in {t[0] for t in tasks}
    engine_kw = engine_options(cfg, model_path, tokenizer)
    if sweep and "max_model_len" in engine_kw:  # the sweep's full-context asks fill the whole window
        engine_kw["max_model_len"] = context_window(model_path, default=engine_kw["max_model_len"])
        # and the KV cache holds at least one sequence of it (vLLM's minimum)
        engine_kw["kv_cache_tokens"] = max(engine_kw.get("kv_cache_tokens") or 0, engine_kw["max_model_len"])
    with maybe_runtime(cfg) as runtime:
        engine = _open(cfg, model_path, settings.seed, engine_kw)
        try:
            seen: dict[str, dict[str, int]] = {}
            played: dict[str, list] = {}
            for d in dict.fromkeys(t[0] for t in tasks):
                domain = get_domain(d)
                batch = [domain.make_task(seed, level) for name, level, seed in tasks if name == d]
                played[d] = batch
                say(f"{d}: sampling {len(batch)} tasks x {settings.samples} ...")
                seen.update(seen_in_training(store, run_id, batch, tokenizer, cfg.context_budget_tokens))
                samples = rollout(engine, tokenizer, batch, settings.samples, settings.max_new_tokens,
                                  settings.temperature, settings.top_p, runtime=runtime, cfg=cfg)
                got = [sample_row(s) for s in samples]
                store.record_eval_samples(eval_id, got)
                rows += got
                solved = sum(r["correct"] for r in got) / max(len(got), 1)
                say(f"{d}: {len(batch)} tasks x {settings.samples} samples, {solved:.0%} correct")
            extras = {"seen_in_training": seen} if run_id else {}
            if sweep:
                say("needle sweep for the usable context length")
                extras["context"] = context_extras(store, engine, tokenizer, model_path, settings)
        finally:
            engine.close()
    summary = summary_of(rows, settings.ks)
    extras.update(capability_extras(rows))
    extras.update(baseline_extras(rows, played))
    return summary, extras


def baseline_extras(rows: list[dict], tasks: dict[str, list] | None = None) -> dict:
    """The baselines of the tasks played and the verdict against them (`backend.baselines`):
    {"baselines": domain -> baselines, "baseline_verdicts": per domain, family and overall}
    ({} when no domain has baselines). Costs verifier calls only; `tasks` (domain -> the
    tasks played) None regenerates them."""
    # on first use: it pulls in numpy
    from backend.baselines import group_verdicts, suite_baselines
    # on first use: it pulls in numpy
    from trainer.eval_stats import domain_families, jsonable

    table = suite_baselines(rows, tasks)
    if not table:
        return {}
    return {"baselines": table,
            "baseline_verdicts": jsonable(group_verdicts(rows, table, domain_families({r["domain"] for r in rows})))}


def seen_in_training(store, run_id: str | None, tasks, tokenizer, budget: int | None = None) -> dict[str, dict[str, int]]:
    """Held-out tasks whose prompt a checkpoint's training run sampled, exactly, per domain:
    {domain: {"tasks", "seen"}}. Seeds never overlap (`domains.splits`), but a small task
    space (level-1 arithmetic has a few hundred questions) repeats questions under
    different seeds; the report shows the count. {} for a model without a run.

    Prompts are rendered as training renders them (`trainer.prompts.render_prompt`: the chat
    template, the context `budget` of retrieval domains) and compared whole."""
    if run_id is None:
        return {}
    prompts = store.run_prompts(run_id)
    out: dict[str, dict[str, int]] = {}
    for task in tasks:
        cell = out.setdefault(task.domain, {"tasks": 0, "seen": 0})
        cell["tasks"] += 1
        cell["seen"] += render_prompt(tokenizer, task, budget)[0] in prompts.get(task.domain, ())
    return out


def summary_of(rows: list[dict], ks) -> dict:
    """The JSON summary stored with an evaluation: `trainer.eval_stats.summarize` with its
    estimates as dicts, families from the domain registry."""
    # on first use: it pulls in numpy
    from trainer.eval_stats import domain_families, jsonable, summarize

    return jsonable(summarize(rows, ks, domain_families({r["domain"] for r in rows})))


def capability_extras(rows: list[dict]) -> dict:
    """Tool use and multi-turn results over the whole suite: {"tool_calls": {"calls",
    "valid_calls", "validity"}} when any tool call was made; {"multi_turn": {"episodes",
    "tasks", "success" (Estimate over tasks of the share solved), "mean_turns"}} when any
    episode had turns."""
    # on first use: it pulls in numpy
    from trainer.eval_stats import bootstrap_mean, task_results

    out: dict = {}
    calls = sum(int(r.get("calls") or 0) for r in rows if not r.get("fault"))
    if calls:
        valid = sum(int(r.get("valid_calls") or 0) for r in rows if not r.get("fault"))
        out["tool_calls"] = {"calls": calls, "valid_calls": valid, "validity": valid / calls}
    multi = [r for r in rows if r.get("turns")]
    if multi:
        per_task = task_results(multi)
        out["multi_turn"] = {"episodes": len(multi), "tasks": len(per_task),
                             "success": bootstrap_mean([t["c"] / t["n"] for t in per_task.values()]).as_dict(),
                             "mean_turns": sum(r["turns"] for r in multi) / len(multi)}
    return out


def context_extras(store, engine, tokenizer, model_path: Path, settings: EvalSettings) -> dict:
    """A needle sweep over SWEEP_LENGTHS that fit the model's window (full context and
    retrieval, SWEEP_DEPTHS), stored for the Retrieval page too; returns {"sweep_id",
    "usable_tokens" (full context, the domain's answer format), "usable_tokens_retrieval",
    "usable_tokens_mention" (full context, the number anywhere in the reply), "lengths", "cells"}."""
    # on first use: it pulls in numpy
    from trainer.eval_stats import usable_context

    probe = SweepConfig(lengths=[SWEEP_LENGTHS[0]], max_new_tokens=min(settings.max_new_tokens, 32))
    window = model_window(model_path, probe)
    lengths = [n for n in SWEEP_LENGTHS if n <= window] or [SWEEP_LENGTHS[0]]
    cfg = SweepConfig(lengths=lengths, depths=list(SWEEP_DEPTHS), haystacks=2, model_needles=2,
                      max_new_tokens=probe.max_new_tokens, seed=settings.seed)
    result = run_sweep(tokenizer, cfg, engine=engine, model_path=model_path)
    sweep_id = store.record_context_sweep(str(model_path), result)
    return {"sweep_id": sweep_id, "usable_tokens": usable_context(result["cells"], mode="full"),
            "usable_tokens_retrieval": usable_context(result["cells"], mode="retrieval"),
            "usable_tokens_mention": usable_context(result["cells"], key="mention_rate"),
            "lengths": lengths, "cells": result["cells"]}


def resolve_eval_ref(store, ref: str) -> str:
    """An evaluation id from a reference: an evaluation id as is, or a training run id ->
    the newest completed evaluation of one of that run's checkpoints.

    Raises:
        EvalNotFound: neither, or a run none of whose checkpoints was evaluated.
    """
    try:
        store.get_eval(ref)
        return ref
    except EvalNotFound:
        pass
    done = store.list_evals(statuses=("completed",), run_id=ref, limit=1, in_run=False)
    if done:
        return done[0]["id"]
    raise EvalNotFound(f"'{ref}' is neither an evaluation nor a training run with an evaluated checkpoint; "
                       f"list evaluations with `rlwb eval list`, or evaluate one with `rlwb eval {ref} --mix NAME`")


def refresh_eval_liveness(store) -> list[str]:
    """Mark failed every 'running' evaluation whose process is gone (killed, crashed);
    returns their ids."""
    # on first use: it pulls in pandas, numpy, yaml, sqlite_utils
    from backend.runs import run_process_alive

    # the process must have started before the evaluation was created (else the pid was reused)
    dead = [e["id"] for e in store.list_evals(statuses=("running",))
            if not run_process_alive({"pid": e.get("pid"), "heartbeat_at": e["created_at"]})]
    for eval_id in dead:
        store.finish_eval(eval_id, "failed", error="the evaluation's process ended before it finished; run it again")
    return dead
