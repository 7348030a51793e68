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
