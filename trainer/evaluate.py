"""Greedy held-out evaluation per domain.

`evaluate` generates one greedy completion for each of `n` held-out tasks per domain
(seeds from `backend.domains.heldout_seeds`, a range training never samples) and reports
accuracy (verifier says fully correct), mean reward and answer-format rate.

Not covered: pass@k with sampling, bootstrap intervals and base-vs-checkpoint reports
(the evaluation issue builds those on top of this).
"""

from __future__ import annotations

from backend.domains import get_domain, heldout_seeds


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
    from trainer.loop import rollout

    levels = difficulty if isinstance(difficulty, dict) else dict.fromkeys(domains, difficulty)
    tasks = [get_domain(d).make_task(seed, levels[d]) for d in domains for seed in heldout_seeds(n)]
    samples = rollout(engine, tokenizer, tasks, 1, max_new_tokens, temperature=0.0, top_p=1.0,
                      runtime=runtime, cfg=cfg)
    results: dict[str, dict[str, float]] = {}
    for d in domains:
        scored = [(s.reward, s.breakdown) for s in samples if s.domain == d and s.fault is None]
        k = max(len(scored), 1)
        results[d] = {
            "n": len(scored),
            "accuracy": sum(float(b.get("correct", 0.0)) >= 0.999 for _, b in scored) / k,
            "mean_reward": sum(r for r, _ in scored) / k,
            "format_rate": sum(float(b.get("format", 0.0)) for _, b in scored) / k,
        }
    return results
