"""Launch page: a form that starts a post-training run in the background.

Fields: model (fetched models, this store's checkpoints, or any checkpoint directory),
algorithm, mix (domains + level, or a stored mix), group size, batch size, learning rate,
KL coefficient, token and turn budgets, steps, rollout engine, sandbox backend, seed, and
every other config field as YAML. Validation is the CLI's (`backend.launching`); each
problem is shown under its field and nothing starts. "Launch" starts the run as a
background process (`backend.runs.launch`) and opens it on the Runs page. ``?clone=RUN_ID``
fills the form from an earlier run's config.
"""

from __future__ import annotations

import streamlit as st

from app.common import db_path, domain_picker, get_store, load_runs
from backend import launching
from core.choices import ALGORITHMS, ROLLOUT_ENGINES, SANDBOX_BACKENDS
from domains.mixes import load_mix
from core.errors import RunNotFound, WorkbenchError
from backend.runs import launch

OTHER_PATH = "Other: a checkpoint directory"


def show_error(slot, errors: dict[str, str], field: str) -> None:
    if field in errors:
        slot.error(errors[field], icon=":material/error:")


NUMBERS = [
    ("group_size", "Group size (G)", int, 1), ("prompts_per_step", "Prompts per step (batch)", int, 1),
    ("micro_batch_size", "Micro-batch (sequences)", int, 1), ("steps", "Steps", int, 1),
    ("learning_rate", "Learning rate", float, None), ("kl_coef", "KL coefficient", float, None),
    ("max_new_tokens", "Max new tokens", int, 1), ("max_turns", "Max turns (multi-turn)", int, 1),
    ("seed", "Seed", int, 1), ("checkpoint_every", "Checkpoint every N steps (0: end only)", int, 1),
    ("eval_tasks_per_domain", "Held-out eval tasks per domain", int, 1),
    ("eval_every", "Evaluate every N steps (0: before and after only)", int, 1),
    ("lora_rank", "LoRA rank (0: full fine-tuning)", int, 1),
    ("learner_processes", "Learner processes (data-parallel)", int, 1),
]


#: The fields' labels on the page, for the summary beside the Launch button.
FIELD_LABELS = {"name": "Run name", "model": "Model", "algorithm": "Algorithm", "mix": "Stored mix",
                "domains": "Domains", "difficulty": "Level", "rollout_engine": "Rollout engine",
                "sandbox_backend": "Sandbox backend", "overlap": "Overlap", "other": "Other settings (YAML)",
                "config": "the config", **{field: label for field, label, _, _ in NUMBERS}}


@st.cache_data(show_spinner=False)
def load_other_fields() -> list[dict[str, str]]:
    return launching.other_fields()


def load_values(store) -> tuple[str | None, dict]:
    """The form's starting values: a cloned run's config (``?clone=RUN_ID``) or the quickstart's."""
    clone = st.query_params.get("clone")
    try:
        values = launching.form_defaults(store, clone)
    except RunNotFound as e:
        st.warning(f"{e}; starting from configs/quickstart.yaml instead.")
        clone, values = None, launching.form_defaults(store)
    return clone, values


def model_fields(store, values: dict, slots: dict) -> dict:
    """Run name, model (or a checkpoint directory) and algorithm; returns their form values."""
    choices = launching.model_choices(store)
    labels = dict(choices)
    options = [v for v, _ in choices]
    current = values.get("model")
    if current and current not in options:
        options.append(current)
        labels[current] = current
    options.append(OTHER_PATH)
    name = st.text_input("Run name", value=values.get("name", "run"), key="launch_name")
    slots["name"] = st.empty()
    c1, c2 = st.columns([2, 1])
    model = c1.selectbox("Model", options, index=options.index(current) if current in options else 0,
                         format_func=lambda v: labels.get(v, v), key="launch_model")
    model_path = c1.text_input("Checkpoint directory (with “Other”)", key="launch_model_path",
                               placeholder="/path/to/a/save_pretrained/directory")
    slots["model"] = c1.empty()
    algorithm = c2.selectbox("Algorithm", ALGORITHMS, index=ALGORITHMS.index(values.get("algorithm", "grpo")),
                             key="launch_algorithm",
                             help=launching.field_help("algorithm"))
    slots["algorithm"] = c2.empty()
    chosen = model_path.strip() if model == OTHER_PATH else model
    return {"name": name, "model": chosen, "algorithm": algorithm}


NO_MIX = "(none: pick domains)"


def mix_fields(store, values: dict, slots: dict) -> dict:
    """A stored mix, or domains with equal weights and a level; returns their form values.
    A stored mix shows its domains, weights and level ranges, read-only, and the Domains and
    Level fields are disabled (the mix decides them)."""
    st.markdown("**Mix**")
    mixes = [m["name"] for m in store.list_mixes()]
    m1, m2, m3 = st.columns([1, 3, 1])
    mix_options = [NO_MIX] + mixes
    mix_now = values.get("mix")
    mix = m1.selectbox("Stored mix", mix_options,
                       index=mix_options.index(mix_now) if mix_now in mix_options else 0, key="launch_mix",
                       help="A mix saved in the mix editor (Domains page): its domains, weights and level ranges "
                            "replace the Domains and Level fields")
    slots["mix"] = m1.empty()
    chosen = None if mix == NO_MIX else mix
    domains = domain_picker(m2, "Domains (equal weights)", "launch_domains", list(values.get("domains") or {}),
                            disabled=chosen is not None,
                            help="Sampled with equal weights at the Level below; type to filter by name, family "
                                 "or description; for weights and level ranges save a mix in the mix editor "
                                 "(Domains page)")
    slots["domains"] = m2.empty()
    difficulty = m3.number_input("Level", value=int(values.get("difficulty", 1)), step=1, key="launch_difficulty",
                                 disabled=chosen is not None, help="The level every domain is sampled at (1: easiest)")
    slots["difficulty"] = m3.empty()
    if chosen is not None:
        show_mix(store, chosen)
    return {"mix": chosen, "domains": domains, "difficulty": int(difficulty)}


def show_mix(store, name: str) -> None:
    """The stored mix's newest version as a read-only table (domain, weight, share, levels)."""
    try:
        row, spec = load_mix(store, name)
    except WorkbenchError as e:
        st.error(str(e), icon=":material/error:")
        return
    pinned = spec.pinned(row["name"], row["version"])["domains"]
    total = sum(d["weight"] for d in pinned.values()) or 1.0
    st.caption(f"Mix **{row['name']}** version {row['version']}: these domains, weights and levels are trained "
               "(the Domains and Level fields are not used).")
    st.dataframe([{"domain": d, "weight": s["weight"], "share": f"{100 * s['weight'] / total:.0f}%",
                   "levels": f"{s['levels'][0]}-{s['levels'][1]}"} for d, s in pinned.items()],
                 hide_index=True, key="launch_mix_table")


def optimisation_fields(values: dict, slots: dict) -> dict:
    """The numeric settings (``NUMBERS``), four to a row; returns their form values."""
    st.markdown("**Optimisation**")
    got = {}
    cols = st.columns(4)
    for i, (field, label, kind, step) in enumerate(NUMBERS):
        col = cols[i % 4]
        default = values.get(field, 0)
        if kind is float:
            got[field] = col.number_input(label, value=float(default), format="%.2e", step=None,
                                          key=f"launch_{field}")
        else:
            got[field] = col.number_input(label, value=int(default), step=step, key=f"launch_{field}")
        slots[field] = col.empty()
    return got


def engine_fields(values: dict, slots: dict) -> dict:
    """Rollout engine, sandbox backend and overlap; returns their form values."""
    e1, e2 = st.columns(2)
    rollout_engine = e1.selectbox("Rollout engine", ROLLOUT_ENGINES,
                                  index=ROLLOUT_ENGINES.index(values.get("rollout_engine", "vllm")),
                                  key="launch_rollout_engine", help="vllm (default) or hf (transformers generate)")
    slots["rollout_engine"] = e1.empty()
    sandbox_backend = e2.selectbox("Sandbox backend", SANDBOX_BACKENDS,
                                   index=SANDBOX_BACKENDS.index(values.get("sandbox_backend", "docker")),
                                   key="launch_sandbox_backend",
                                   help="docker, or local (bubblewrap; weaker isolation) for sandboxed domains")
    slots["sandbox_backend"] = e2.empty()
    overlap = st.checkbox("Overlap rollouts with the learner (one step off-policy)",
                          value=bool(values.get("overlap", False)), key="launch_overlap",
                          help="Roll out step t+1 with the previous weights while the learner trains on step "
                               "t; the importance ratio corrects for the one-step staleness, recorded as "
                               "off_policy/staleness.")
    slots["overlap"] = st.empty()
    return {"rollout_engine": rollout_engine, "sandbox_backend": sandbox_backend, "overlap": overlap}


def duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def estimate_sentence(store, form: dict, other: str) -> str:
    """How long the run as filled in should take and what that rests on
    (`backend.launching.estimate_run`), or why there is no estimate yet."""
    extra, problem = launching.parse_extra(other)
    cfg, errors = (None, True) if problem else launching.check_launch({**extra, **form}, store)
    if cfg is None:
        return "The time estimate appears once every field is valid."
    e = launching.estimate_run(store, cfg)
    return (f"Takes about {duration(e['seconds'])}: start {duration(e['start'])}, {cfg.steps} steps "
            f"{duration(e['steps'])}, held-out evaluations {duration(e['evaluations'])} (from {e['basis']})."
            + (f" Runs in {cfg.dtype} (`{cfg.dtype_note}`)." if cfg.dtype_note else ""))


def submit(store, form: dict, other: str) -> None:
    """Validate the form and launch; on a problem, store the messages and redraw (nothing starts)."""
    extra, problem = launching.parse_extra(other)
    if problem:
        cfg, errors = None, {"other": problem}
    else:
        cfg, errors = launching.check_launch({**extra, **form}, store)
    if cfg is not None:
        try:
            run_id = launch(cfg, store)
        except WorkbenchError as e:
            cfg, errors = None, {"config": str(e)}
    st.session_state["launch_errors"] = errors
    if cfg is None:
        st.rerun()  # draw each message under its field
    st.session_state.pop("launch_errors", None)
    load_runs.clear()
    st.switch_page("screens/runs.py", query_params={"run": run_id})


def render() -> None:
    st.title("Launch a run")
    store = get_store(db_path())
    clone, values = load_values(store)
    st.caption((f"Cloned from run `{clone}`; edit and launch. " if clone else
                "Starts from configs/quickstart.yaml. ")
               + "The run starts as a background process: closing or reloading the page does not stop it.")
    errors: dict[str, str] = st.session_state.get("launch_errors", {})
    slots: dict = {}
    # not an st.form: picking a stored mix has to redraw the Domains and Level fields at once
    form = {**model_fields(store, values, slots), **mix_fields(store, values, slots),
            **optimisation_fields(values, slots), **engine_fields(values, slots)}
    other = st.text_area("Other settings (YAML)", value=launching.extra_yaml(values), height=160,
                         key="launch_other", help="Any other run config field as `field: value` lines, e.g. "
                                                  "`temperature: 1.0` or `curriculum: true`; the table below lists "
                                                  "every one with its default and help")
    slots["other"] = st.empty()
    with st.expander("Fields the YAML box takes (default and help)"):
        st.dataframe(load_other_fields(), hide_index=True, key="launch_other_fields")
    slots["config"] = st.empty()
    b1, b2 = st.columns([1, 5], vertical_alignment="center")
    submitted = b1.button("Launch", type="primary", key="launch_submit")
    if errors:  # beside the button: how many problems and where (each is shown under its field)
        where = ", ".join(FIELD_LABELS.get(f, f) for f in errors)
        b2.error(f"Not launched: {len(errors)} problem{'s' if len(errors) > 1 else ''} to fix ({where}); "
                 "see the messages under those fields.", icon=":material/error:")
    else:
        b2.caption(estimate_sentence(store, form, other))
    for field, slot in slots.items():
        show_error(slot, errors, field)
    if submitted:
        submit(store, form, other)

render()
