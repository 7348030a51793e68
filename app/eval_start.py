"""The Evaluation page's "Start an evaluation" form and its live list of running ones.

The form takes what `rlwb eval` takes (model or checkpoint, a stored mix, domains at a
level or the training run's own, tasks per domain, samples, k, temperature, answer budget,
engine, seed) and says how long it should take; "Start evaluation" checks everything
(`backend.evaluation.parse_settings`, `backend.eval_jobs.start`) and starts a background
process, so closing or reloading the page does not stop it. The running list redraws every
few seconds (a fragment): domains scored, the last progress line, Stop; a job that died
before it recorded its evaluation shows its log's end. When one finishes the whole page
redraws, so its report can be picked at once.

UI only; the work is `backend.eval_jobs`. Not covered: context-length sweeps (the
Retrieval page shows them; `rlwb eval context-length` runs them).
"""

from __future__ import annotations

import streamlit as st

from app.common import domain_picker, get_store
from backend import eval_jobs, launching
from backend.evaluation import EvalSettings, eval_config, parse_settings, resolve_eval_model
from core.choices import ROLLOUT_ENGINES
from core.errors import WorkbenchError

MIX, DOMAINS, RUNS_OWN = "A stored mix", "Domains at a level", "The training run's own domains"
#: EvalSettings field -> its label on the form, for error messages
LABELS = {"mix": "Stored mix", "domains": "Domains", "difficulty": "Level", "tasks_per_domain": "Tasks per domain",
          "samples": "Samples per task", "ks": "k (pass@k)", "temperature": "Temperature",
          "max_new_tokens": "Max new tokens", "seed": "Seed", "rollout_engine": "Engine"}
RUNNING_KEY = "eval_running_ids"  # the evaluations the fragment last saw running (a change redraws the page)
DEFAULTS = EvalSettings()


def parse_ks(text: str) -> list[int] | str:
    """"1, 8" -> [1, 8]; the unparsable word otherwise."""
    out = []
    for word in text.replace(",", " ").split():
        if not word.isdigit():
            return word
        out.append(int(word))
    return out


def minutes(seconds: float) -> str:
    return f"about {seconds / 60:.0f} minutes" if seconds >= 90 else f"about {seconds:.0f} seconds"


def form(store) -> None:
    """The fields, the estimate and the Start button; a problem is shown under the button,
    naming the field, and nothing starts."""
    choices = launching.model_choices(store)
    if not choices:
        st.warning("No model to evaluate: fetch one with `rlwb models fetch smollm2-135m`, or train a run.")
        return
    labels = dict(choices)
    c1, c2 = st.columns([2, 3])
    model = c1.selectbox("Model or checkpoint", list(labels), format_func=labels.get, key="evalstart_model",
                         help="A fetched base model, or a checkpoint a run in this store saved")
    found = store.checkpoint_at(model)  # a checkpoint: evaluated as RUN_ID:STEP (short labels, its run linked)
    from_run, ref = (found[0], f"{found[0]}:{found[1]}") if found else (None, model)
    sources = ([RUNS_OWN] if from_run else []) + [DOMAINS] + ([MIX] if store.list_mixes() else [])
    source = c2.radio("Tasks from", sources, horizontal=True, key="evalstart_source",
                      help="The run's own: the domains and levels the checkpoint was trained on")
    settings: dict = {}
    if source == MIX:
        settings["mix"] = c2.selectbox("Stored mix", [m["name"] for m in store.list_mixes()], key="evalstart_mix")
    elif source == DOMAINS:
        d1, d2 = c2.columns([4, 1])
        settings["domains"] = domain_picker(d1, "Domains", "evalstart_domains", ["chain_sum"])
        settings["difficulty"] = int(d2.number_input("Level", 1, 5, 1, key="evalstart_level"))
    n1, n2, n3, n4, n5, n6 = st.columns(6)
    settings["tasks_per_domain"] = int(n1.number_input("Tasks per domain", 1, 10_000, DEFAULTS.tasks_per_domain,
                                                        key="evalstart_tasks", help="Held-out tasks (seeds training "
                                                        "never samples)"))
    settings["samples"] = int(n2.number_input("Samples per task", 1, 256, DEFAULTS.samples, key="evalstart_samples",
                                              help="Completions sampled per task: the n of pass@k"))
    ks = parse_ks(n3.text_input("k (pass@k)", ", ".join(map(str, DEFAULTS.ks)), key="evalstart_ks",
                                help="Comma-separated, each between 1 and the samples per task"))
    settings["temperature"] = n4.number_input("Temperature", 0.0, 2.0, DEFAULTS.temperature, 0.1,
                                              key="evalstart_temperature")
    settings["max_new_tokens"] = int(n5.number_input("Max new tokens", 1, 768, DEFAULTS.max_new_tokens,
                                                     key="evalstart_max_new_tokens", help="Per answer (per turn)"))
    settings["rollout_engine"] = n6.selectbox("Engine", ROLLOUT_ENGINES, key="evalstart_engine",
                                              help="vllm (the training runs' engine) or hf (transformers' "
                                                   "generate: slower, starts faster)")
    settings["seed"] = DEFAULTS.seed
    b1, b2 = st.columns([1, 5], vertical_alignment="center")
    start = b1.button("Start evaluation", type="primary", key="evalstart_submit")
    checked, domains, problem = check(store, ref, settings, ks)
    if checked is not None:
        seconds, basis = eval_jobs.estimate_seconds(store, domains, checked)
        b2.caption(f"{domains} domain{'s' if domains != 1 else ''} × {checked.tasks_per_domain} tasks × "
                   f"{checked.samples} samples = {domains * checked.tasks_per_domain * checked.samples:,} "
                   f"completions: {minutes(seconds)} (from {basis}). For a first look: 10 tasks, 2 samples, k 1, 2.")
    if start and checked is not None:
        try:
            job = eval_jobs.start(store, ref, checked)
        except WorkbenchError as e:
            problem = str(e)
        else:
            st.session_state["evalstart_done"] = (f"Started (pid {job['pid']}, output in `{job['log']}`); it "
                                                  "shows under Running below and its report here once it completes.")
            st.rerun()
    if problem:
        b2.error(("Not started: " if start else "") + problem, icon=":material/error:")
    if "evalstart_done" in st.session_state:
        st.success(st.session_state.pop("evalstart_done"), icon=":material/check_circle:")


def check(store, model: str, settings: dict, ks) -> tuple[EvalSettings | None, int, str | None]:
    """(settings, number of domains, None) checked as `rlwb eval` checks them (the fields,
    the model, the mix or domains), or (None, 0, the problem naming its field on the form)."""
    if isinstance(ks, str):
        return None, 0, f"k (pass@k): '{ks}' is not a whole number; give numbers like 1, 8"
    try:
        checked = parse_settings({**settings, "ks": ks}, names=LABELS)
        model_path, run_id, _ = resolve_eval_model(store, model)
        domains = len(eval_config(store, checked, model_path, run_id).domain_specs())
    except WorkbenchError as e:
        return None, 0, str(e)
    return checked, domains, None


@st.fragment(run_every=3)
def running(path: str, on_end=None) -> None:
    """The running evaluations and starting jobs, redrawn every 3 s; when one of them ends,
    `on_end()` (e.g. clearing the page's cached list) and the whole page redraws (its report
    can then be picked)."""
    store = get_store(path)
    eval_jobs_running = [e for e in store.list_evals(statuses=("running",), in_run=False, limit=20)]
    jobs = eval_jobs.starting(store)
    now = {e["id"] for e in eval_jobs_running} | {f"pid{j['pid']}" for j in jobs if j["alive"]}
    before = st.session_state.get(RUNNING_KEY)
    st.session_state[RUNNING_KEY] = now
    if before is not None and before - now:
        if on_end is not None:
            on_end()
        st.rerun(scope="app")  # one ended: the list, the picker and the report redraw
    if not eval_jobs_running and not jobs:
        return
    st.subheader("Running")
    for j in jobs:
        if j["alive"]:
            st.info(f"Starting (pid {j['pid']}, since {j['started_at'][11:19]} UTC): "
                    f"{j['tail'][-1] if j['tail'] else 'loading the model and hashing its weights'}", icon=":material/hourglass_top:")
        else:
            with st.expander(f"An evaluation started at {j['started_at'][11:19]} UTC ended before it began "
                             f"(pid {j['pid']}): {j['tail'][-1] if j['tail'] else 'no output'}", icon=":material/error:"):
                st.code("\n".join(j["tail"]) or "(no output)", language=None)
                st.caption(f"The whole output: `{j['log']}`")
    for ev in eval_jobs_running:
        p = eval_jobs.progress(store, ev)
        c1, c2 = st.columns([6, 1], vertical_alignment="center")
        share = p["domains_done"] / p["domains"] if p["domains"] else 0.0
        c1.progress(share, text=f"{ev['model']} · {ev['id']}: {p['domains_done']} of {p['domains']} domains scored "
                                f"({p['completions']:,} of {p['completions_total']:,} completions)"
                                + (f" · now: {p['last_line']}" if p["last_line"] else ""))
        if c2.button("Stop", key=f"evalstop_{ev['id']}", icon=":material/stop:",
                     help="Ends the process; the evaluation is marked failed and keeps nothing to report"):
            eval_jobs.stop(store, ev["id"])
