"""Greedy held-out evaluation per domain, during training.

`evaluate` generates one greedy completion for each of `n` held-out tasks per domain
(`domains.registry.heldout_tasks`: seeds from a range training never samples, distinct
questions) and reports
accuracy (verifier says fully correct), mean reward and answer-format rate.
`record_heldout` stores one such evaluation of a run's phase ("before", "step-N",
"after") twice over: every completion as an evaluation of its own (`Store.create_eval`
with the phase; the tables `rlwb eval` writes, so the Runs page, the Evaluation page and
`rlwb eval samples` read intervals, baselines, verdicts and the answers themselves from
one code path, `backend.eval_report` / `backend.heldout`), and the per-domain aggregates
(`Store.record_evaluation`) the Runs page's curves are drawn from.

Not covered: pass@k with sampling (`rlwb eval`, `backend.evaluation`), baselines (the
report computes them from the stored completions when they are wanted).
"""

from __future__ import annotations

from domains.contract import PASS_THRESHOLD
from domains.registry import heldout_tasks
from trainer.eval_stats import domain_families, jsonable, summarize
from trainer.phases import evaluation_step
from trainer.scoring import rollout

#: What an in-run evaluation's suite says about how it was sampled (`rlwb eval` samples
#: `samples` completions per task at `temperature`; these figures are greedy pass@1).
IN_RUN_SAMPLING = {"samples": 1, "ks": [1], "temperature": 0.0, "top_p": 1.0}


def evaluate_samples(engine, tokenizer, domains: list[str], n: int, difficulty: int | dict[str, int] = 1,
                     max_new_tokens: int = 64, runtime=None, cfg=None) -> list:
    """One greedy completion of each of `n` held-out tasks per domain, scored.

    Args: as `evaluate`.

    Returns:
        The scored `trainer.types.Sample`s, task by task (n per domain, fewer for a domain
        with fewer distinct held-out questions; `domains.registry.heldout_tasks`).

    Raises:
        ConfigError: a level that is not one of its domain's levels.
        KeyError: `difficulty` is a dict without one of `domains`.
    """
    levels = difficulty if isinstance(difficulty, dict) else dict.fromkeys(domains, difficulty)
    tasks = [t for d in domains for t in heldout_tasks(d, [levels[d]], n)]
    return rollout(engine, tokenizer, tasks, 1, max_new_tokens, temperature=0.0, top_p=1.0,
                   runtime=runtime, cfg=cfg)


def aggregates(rows: list[dict], domains: list[str]) -> dict[str, dict[str, float]]:
    """domain -> {"n", "accuracy", "mean_reward", "format_rate"} (fractions in [0, 1]) over
    the sample rows (`sample_row`) scored without a harness fault."""
    results: dict[str, dict[str, float]] = {}
    for d in domains:
        scored = [r for r in rows if r["domain"] == d and not r["fault"]]
        k = max(len(scored), 1)
        results[d] = {"n": len(scored), "accuracy": sum(r["correct"] for r in scored) / k,
                      "mean_reward": sum(r["reward"] for r in scored) / k,
                      "format_rate": sum(r["format"] for r in scored) / k}
    return results


def evaluate(engine, tokenizer, domains: list[str], n: int, difficulty: int | dict[str, int] = 1,
             max_new_tokens: int = 64, runtime=None, cfg=None) -> dict[str, dict[str, float]]:
    """Greedy accuracy on `n` held-out tasks per domain.

    Args:
        engine: a `RolloutEngine` holding the weights to evaluate.
        tokenizer: the model's tokenizer (chat template).
        domains: domain names.
        n: held-out tasks per domain.
        difficulty: level of the tasks, one for every domain or domain -> level.
        max_new_tokens: cap on generated tokens per answer (per turn in episodes).
        runtime: a `trainer.episodes.SandboxRuntime` for sandboxed domains.
        cfg: the run config (multi-turn budgets) for multi-turn domains.

    Returns:
        domain -> {"n", "accuracy", "mean_reward", "format_rate"} (fractions in [0, 1]),
        over the tasks scored without a harness fault.

    Raises:
        ConfigError: a level that is not one of its domain's levels.
        KeyError: `difficulty` is a dict without one of `domains`.
    """
    samples = evaluate_samples(engine, tokenizer, domains, n, difficulty, max_new_tokens, runtime, cfg)
    return aggregates([sample_row(s) for s in samples], domains)


def sample_row(s) -> dict:
    """The stored row of one scored `trainer.types.Sample` (keys of SAMPLE_COLUMNS):
    correct when the verifier's "correct" reaches `domains.contract.PASS_THRESHOLD`."""

    b = s.breakdown
    return {"domain": s.domain, "level": s.difficulty, "task_seed": s.task_seed, "sample_idx": s.index,
            "reward": float(s.reward), "correct": int(float(b.get("correct", 0.0)) >= PASS_THRESHOLD),
            "format": float(b.get("format", 0.0)), "calls": b.get("calls"), "valid_calls": b.get("valid_calls"),
            "turns": len(s.turns) if s.turns else None, "finish_reason": s.completion.finish_reason,
            "completion": s.completion.text, "fault": s.fault, "answer": s.answer}


def in_run_suite(cfg, levels: dict[str, int], seeds: list[int]) -> dict:
    """The suite an in-run evaluation records (the keys `rlwb eval`'s suites have, so one
    report reads both): greedy, one completion per task (`IN_RUN_SAMPLING`), the run's
    domains at `levels`, the held-out seeds, the answer budget, and ``"in_run": True``."""
    pin = cfg.mix_spec
    return {"in_run": True, "mix": cfg.mix, "domains": {d: [lv, lv] for d, lv in levels.items()},
            "mix_pinned": {"name": pin["name"], "version": pin["version"]} if pin else None,
            "tasks_per_domain": cfg.eval_tasks_per_domain, **IN_RUN_SAMPLING,
            "max_new_tokens": cfg.eval_max_new_tokens, "seed": cfg.seed, "seed_offset": 0,
            "rollout_engine": cfg.rollout_engine, "seeds": seeds,
            "max_turns": cfg.max_turns}


def record_heldout(store, run_id: str, phase: str, model: str, cfg, levels: dict[str, int], samples: list) -> str:
    """Store one in-run held-out evaluation: its completions as an evaluation of phase
    `phase` (replacing an earlier one of the same phase), then the per-domain aggregates.

    Args:
        store: a `backend.store.Store`.
        run_id: the training run.
        phase: "before", "step-N" or "after".
        model: what was evaluated (a path, or "RUN policy at step N").
        cfg: the run config.
        levels: domain -> the level evaluated.
        samples: `evaluate_samples`' scored samples.

    Returns:
        The evaluation's id.

    Raises:
        RunNotFound: no such run. ValueError: a phase other than those three.
    """
    if evaluation_step(phase, cfg.steps) is None:
        raise ValueError(f"invalid evaluation phase {phase!r}; use 'before', 'after' or 'step-N' (N a step)")
    rows = [sample_row(s) for s in samples]
    eval_id = store.create_eval(model, model, {}, in_run_suite(cfg, levels, sorted({s.task_seed for s in samples})),
                                run_id=run_id,
                                step=evaluation_step(phase, cfg.steps), phase=phase)
    store.record_eval_samples(eval_id, rows)
    summary = jsonable(summarize(rows, [1], domain_families(cfg.domain_list)))
    store.finish_eval(eval_id, "completed", summary=summary, extras={})
    for domain, r in aggregates(rows, cfg.domain_list).items():
        store.record_evaluation(run_id, phase, domain, r["n"], r["accuracy"], r["mean_reward"], r["format_rate"], model)
    return eval_id
