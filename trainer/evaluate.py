"""Greedy held-out evaluation per domain.

`evaluate` generates one greedy completion for each of `n` held-out tasks per domain
(seeds from `backend.domains.heldout_seeds`, a range training never samples) and reports
accuracy (verifier says fully correct), mean reward and answer-format rate.

Not covered: pass@k with sampling, bootstrap intervals and base-vs-checkpoint reports
(the evaluation issue builds those on top of this).
"""

from __future__ import annotations

from backend.domains import get_domain, heldout_seeds


def evaluate(engine, tokenizer, domains: list[str], n: int, difficulty: int = 1,
             max_new_tokens: int = 64) -> dict[str, dict[str, float]]:
    """Greedy accuracy on `n` held-out tasks per domain.

    Args:
        engine: a `RolloutEngine` holding the weights to evaluate.
        tokenizer: the model's tokenizer (chat template).
        domains: domain names.
        n: held-out tasks per domain.
        difficulty: difficulty level of the tasks.
        max_new_tokens: cap on generated tokens per answer.

    Returns:
        domain -> {"n", "accuracy", "mean_reward", "format_rate"} (fractions in [0, 1]).
    """
    from trainer.loop import render_prompt

    tasks = [get_domain(d).make_task(seed, difficulty) for d in domains for seed in heldout_seeds(n)]
    prompts = [render_prompt(tokenizer, t)[1] for t in tasks]
    outs = engine.generate(prompts, n=1, max_new_tokens=max_new_tokens, temperature=0.0)
    results: dict[str, dict[str, float]] = {}
    for d in domains:
        rows = [(t, o[0]) for t, o in zip(tasks, outs) if t.domain == d]
        scored = [get_domain(d).score(t, c.text) for t, c in rows]
        results[d] = {
            "n": len(rows),
            "accuracy": sum(float(b.get("correct", 0.0)) >= 0.999 for _, b in scored) / len(rows),
            "mean_reward": sum(r for r, _ in scored) / len(rows),
            "format_rate": sum(float(b.get("format", 0.0)) for _, b in scored) / len(rows),
        }
    return results
