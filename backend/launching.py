"""What the page's Launch form needs: model choices, defaults (a new run or a clone of an
earlier one), and validation with the same rules as ``rlwb run`` (`trainer.config`).

    choices = model_choices(store)                 # fetched models + this store's checkpoints
    values = form_defaults(store, clone="r2025...") # the cloned run's config, editable
    cfg, errors = check_launch(values, store)      # errors by form field, or a ready config

UI-free: the Launch page draws the widgets and calls `backend.runs.launch` with `cfg`.
Not covered here: starting the process (`backend.runs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainer.config import RunConfig, config_errors
from core.errors import ModelNotFound, WorkbenchError
from domains.mixes import resolve_mix
from trainer.models import MODELS, resolve_model
from trainer.phases import EVALUATION_PHASES, parse_time

#: The fields the form draws as widgets, in order; every other field of the config is
#: edited as YAML under "Other settings".
FORM_FIELDS = ("name", "model", "algorithm", "mix", "domains", "difficulty", "group_size", "prompts_per_step",
               "micro_batch_size", "learning_rate", "kl_coef", "max_new_tokens", "max_turns", "steps",
               "rollout_engine", "sandbox_backend", "seed", "checkpoint_every", "eval_tasks_per_domain",
               "eval_every", "overlap", "lora_rank")

#: Filled in by the run itself; never copied from a cloned run.
_RUN_FILLED = ("mix_spec",)

QUICKSTART = Path(__file__).resolve().parent.parent / "configs" / "quickstart.yaml"


def model_choices(store) -> list[tuple[str, str]]:
    """Models a run can start from: (value for `model:`, label), fetched models first, then
    the checkpoints recorded in this store (newest run first)."""

    out = []
    for name, spec in MODELS.items():
        try:
            resolve_model(name)
            out.append((name, f"{name} ({spec.hf_id})"))
        except ModelNotFound:
            continue
    for run in store.list_runs(limit=50):
        for ck in reversed(store.checkpoints(run["id"])):
            if Path(ck["path"], "config.json").is_file():
                out.append((ck["path"], f"{run['name']} · {run['id']} · step {ck['step']}"))
    return out


def form_defaults(store, clone: str | None = None) -> dict[str, Any]:
    """Starting values of the form: the config of run `clone` (named "<name>-clone"), else
    configs/quickstart.yaml, else `RunConfig`'s defaults. Every key is a config field.

    Raises:
        RunNotFound: `clone` names no run.
    """
    if clone:
        run = store.get_run(clone)
        cfg = dict(run["config"])
        for key in _RUN_FILLED:
            cfg.pop(key, None)
        cfg["name"] = f"{run['name']}-clone"
        if cfg.get("mix"):
            cfg.pop("domains", None)
            cfg.pop("difficulty", None)
        return cfg
    base = RunConfig().model_dump(mode="json")
    if QUICKSTART.is_file():
        base.update(yaml.safe_load(QUICKSTART.read_text(encoding="utf-8")) or {})
    for key in _RUN_FILLED:
        base.pop(key, None)
    return base


def extra_yaml(values: dict[str, Any]) -> str:
    """The fields of `values` that the form has no widget for, as YAML (the "Other settings" box)."""
    rest = {k: v for k, v in values.items() if k not in FORM_FIELDS and k not in _RUN_FILLED}
    return yaml.safe_dump(rest, sort_keys=True, allow_unicode=True) if rest else ""


def parse_extra(text: str) -> tuple[dict[str, Any], str | None]:
    """Parse the "Other settings" YAML: (fields, None) or ({}, an error message)."""
    if not text.strip():
        return {}, None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        return {}, f"malformed YAML{where}: {getattr(e, 'problem', None) or e}; write one `field: value` per line"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, "expected `field: value` lines (a mapping), e.g. temperature: 1.0"
    shadowed = sorted(set(data) & set(FORM_FIELDS))
    if shadowed:
        return {}, f"{', '.join(shadowed)} {'has' if len(shadowed) == 1 else 'have'} a field of its own above; remove it here"
    return data, None


def field_of(path: str) -> str:
    """The form field an error path belongs to ("domains.chain_sum" -> "domains")."""
    head = path.split(".", 1)[0]
    return head if head in FORM_FIELDS else "other"


def field_help(name: str) -> str:
    """The description of `RunConfig` field `name` (what the form's help shows for it)."""
    return RunConfig.model_fields[name].description or ""


def other_fields() -> list[dict[str, str]]:
    """The run config fields the "Other settings" box takes (those without a field of their
    own on the form), for the page's reference table: field, default (YAML) and help."""
    rows = []
    for name, info in RunConfig.model_fields.items():
        if name in FORM_FIELDS or name == "mix_spec":
            continue
        default = yaml.safe_dump(info.get_default(call_default_factory=True), default_flow_style=True).strip()
        rows.append({"field": name, "default": default.removesuffix("...").strip(),
                     "help": info.description or ""})
    return rows


def check_launch(values: dict[str, Any], store) -> tuple[RunConfig | None, dict[str, str]]:
    """Validate the form's values as ``rlwb run`` would, including the stored mix.

    Args:
        values: config fields (the form's widgets and the parsed "Other settings").
        store: for resolving a stored mix.

    Returns:
        (config with the mix pinned, {}) when it can launch, else (None, errors) where
        errors maps a form field (or "other" for the YAML box, "config" for the whole) to
        a message naming the fix.
    """

    data = dict(values)
    if not data.get("model"):
        return None, {"model": "pick a model: a fetched model or a checkpoint directory "
                               "(fetch one with `rlwb model fetch smollm2-135m`)"}
    if data.get("mix"):
        data.pop("domains", None)
        data.pop("difficulty", None)
    else:
        data.pop("mix", None)
    errors: dict[str, str] = {}
    for path, msg in config_errors(data).items():
        field = field_of(path) if path != "config" else "config"
        if field == "other":  # the YAML box holds many fields: name each, show them all
            msg = f"`{path}`: {msg}"
            errors[field] = f"{errors[field]}  \n{msg}" if field in errors else msg
        else:
            errors.setdefault(field, msg)
    if errors:
        return None, errors
    cfg = RunConfig(**data)
    try:
        cfg = resolve_mix(cfg, store)
    except WorkbenchError as e:
        return None, {"mix": str(e)}
    return cfg, {}


#: What a run costs on the README's machine (SmolLM2-135M, 2-core CPU, vLLM + DeepSpeed),
#: for a store with no similar finished run: the processes' start (seconds), a step per
#: sampled-token slot (prompts x group x max_new_tokens; the quickstart's LoRA step, ~20 s
#: for 8 x 8 x 48) and a held-out task per evaluation (greedy, 48 tokens: 900 tasks in ~42 s).
#: The start: vLLM's engine (with torch.compile) and the learner, 53 s in a quickstart on a
#: quiet machine and 117 s in a fresh clone's first run beside other work (2026-12-05).
DEFAULT_COSTS = {"start": 60.0, "step_per_slot": 20.0 / (8 * 8 * 48), "eval_per_task": 42.0 / 900}


def _evaluations(cfg: RunConfig) -> int:
    """How many held-out evaluations a run of `cfg` makes: before, every `eval_every`
    steps short of the last, after (none without held-out tasks)."""
    if not cfg.eval_tasks_per_domain:
        return 0
    return 2 + ((cfg.steps - 1) // cfg.eval_every if cfg.eval_every else 0)


def _costs_of(store, run: dict) -> dict[str, float] | None:
    """`DEFAULT_COSTS`' figures as one finished run measured them (its phases), or None for
    a run without phases (recorded before store version 15) or without a step."""

    phases = store.run_phases(run["id"])
    if not phases or not all(p["ended_at"] for p in phases):
        return None
    c = run["config"]
    seconds = {}
    for p in phases:
        took = (parse_time(p["ended_at"]) - parse_time(p["started_at"])).total_seconds()
        kind = "eval" if p["phase"] in EVALUATION_PHASES else "step" if p["phase"] in ("step", "checkpoint") else (
            "start" if p["phase"] in ("sandboxes", "engine start", "learner start") else None)
        if kind:
            seconds[kind] = seconds.get(kind, 0.0) + took
    steps = sum(p["phase"] == "step" for p in phases)
    evals = sum(p["phase"] in EVALUATION_PHASES for p in phases)
    domains = len((c.get("mix_spec") or {}).get("domains") or c.get("domains") or {}) or 1
    if not steps:
        return None
    slots = c["prompts_per_step"] * c["group_size"] * c["max_new_tokens"]
    out = {"start": seconds.get("start", DEFAULT_COSTS["start"]), "step_per_slot": seconds["step"] / (steps * slots)}
    if evals and c.get("eval_tasks_per_domain"):
        out["eval_per_task"] = seconds["eval"] / (evals * c["eval_tasks_per_domain"] * domains)
    return out


def estimate_run(store, cfg: RunConfig, similar: int = 10) -> dict:
    """How long a run of `cfg` should take, from up to `similar` finished runs of this store
    with the same model and the same kind of fine-tuning (LoRA or full), each figure the
    median over them, else `DEFAULT_COSTS`.

    Returns:
        {"seconds", "start", "steps" (all of them), "evaluations" (all of them), "basis"}
        in seconds; basis says what the figures rest on.
    """
    import statistics

    measured = []
    for run in store.list_runs(limit=100):
        c = run["config"]
        if (run["status"] == "completed" and c.get("model") == cfg.model
                and bool(c.get("lora_rank")) == bool(cfg.lora_rank)):
            costs = _costs_of(store, run)
            if costs:
                measured.append(costs)
        if len(measured) >= similar:
            break
    costs = dict(DEFAULT_COSTS)
    for key in costs:
        values = [m[key] for m in measured if key in m]
        if values:
            costs[key] = statistics.median(values)
    kind = "LoRA" if cfg.lora_rank else "full fine-tuning"
    basis = (f"{len(measured)} finished {kind} run{'s' if len(measured) > 1 else ''} of this model in this store"
             if measured else f"SmolLM2-135M on a 2-core CPU (the README's machine), no finished {kind} run of "
                              "this model in this store yet")
    domains = len(cfg.domain_specs())
    start = costs["start"]
    steps = cfg.steps * cfg.prompts_per_step * cfg.group_size * cfg.max_new_tokens * costs["step_per_slot"]
    evaluations = _evaluations(cfg) * cfg.eval_tasks_per_domain * domains * costs["eval_per_task"]
    return {"seconds": start + steps + evaluations, "start": start, "steps": steps, "evaluations": evaluations,
            "basis": basis}
