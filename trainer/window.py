"""The rollout engine's context window: how long each domain level's prompts are in the
policy's tokens, the window a run needs, and the check that refuses a run whose prompts
can't fit before anything starts.

    from trainer.window import prompt_lengths, run_window
    prompt_lengths(tokenizer, "chain_sum", 3)     # -> {"n": 32, "p50": 71, "p90": 78, "max": 83, ...}
    run_window(cfg, model_path, tokenizer)         # -> 1024, or ConfigError naming domain, level, tokens

Why: vLLM refuses a request whose prompt is longer than its ``max_model_len`` (the run
then dies mid-way), and quietly shortens ``max_new_tokens`` for one that nearly fills it.
So before a run row exists, `run_window` renders `PROMPT_SAMPLE_TASKS` tasks of every
level of every domain in the mix (plus the exact held-out tasks the run evaluates on)
through the model's chat template and takes the longest:

* single-turn domains need ``longest prompt + answer tokens`` (the larger of
  ``max_new_tokens`` and ``eval_max_new_tokens``);
* multi-turn domains need ``max_episode_tokens`` (an episode ends there, `finish
  "length"`), and their opening prompt plus one turn must fit inside it;
* retrieval domains need their context budget plus overhead (`retrieval_window`).

The window is the smallest of ``DEFAULT_WINDOW_TOKENS`` (what runs used so far) and the
need with `HEADROOM` for prompts longer than the sampled ones, capped at the model's own
window (``max_position_embeddings``); a need above the model's window is a `ConfigError`
that names the domain, the level, the token counts and the levels that do fit.

A sample is not a proof: a task longer than every measured one can still come up. The
rollout therefore checks every prompt against the engine's window as well
(`trainer.scoring.rollout`) and records a group that doesn't fit as a ``context`` fault,
never trained on, rather than crashing the run or shortening its answers.

Not covered: the window of a Ray cluster's engines is the one asked for here; nothing
re-measures prompts while a run trains.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from domains.splits import TRAIN_SEED_RANGE, heldout_seeds
from domains.contract import EpisodeDomain, RetrievalDomain
from domains.registry import get_domain
from core.errors import ConfigError, GenerationTimeout
from trainer.episodes import episode_prompt
from trainer.prompts import chat_text, render_prompt
from domains.long_docs.domain import PROMPT_OVERHEAD_TOKENS
from trainer.config import RunConfig
from trainer.models import context_window

DEFAULT_WINDOW_TOKENS = 1024  # the engine window while every prompt fits in it (vLLM's max_model_len)
PROMPT_SAMPLE_TASKS = 16  # training-seed tasks measured per level before a launch (a fixed sample)
MAX_TIMEOUTS = 2  # a level whose sample has this many generator timeouts is refused (a run would stall on it)
HEADROOM = 1.25  # the window leaves this factor over the longest measured prompt, where the model allows
WINDOW_ROUND = 256  # windows are rounded up to a multiple of this many tokens
SEQUENCE_ROUND = 32  # a sequence's KV room is rounded up to this (the vLLM engine's KV block)
_SAMPLE_SEED = 20261201  # the fixed RNG that picks the measured training seeds


@dataclass(frozen=True)
class Need:
    """What one domain level needs of the engine's window.

    Attributes:
        domain, level: the domain level.
        tokens: the window it needs (tokens): prompt + answer, or the episode budget.
        prompt_max: its longest measured prompt (tokens); 0 where not measured (retrieval).
        what: how `tokens` is made up, for messages.
    """

    domain: str
    level: int
    tokens: int
    prompt_max: int
    what: str


def _quantiles(values: list[int]) -> dict[str, float]:
    """n, min, p50, p90, p99, max and mean of token counts."""
    qs = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return {"n": len(values), "min": min(values), "p50": statistics.median(values), "p90": qs[89],
            "p99": qs[98], "max": max(values), "mean": round(statistics.fmean(values), 1)}


def _training_seeds(n: int) -> list[int]:
    """`n` training seeds drawn by a fixed RNG (the same sample every call)."""
    rng = random.Random(_SAMPLE_SEED)
    return [rng.randrange(*TRAIN_SEED_RANGE) for _ in range(n)]


_MEASURED: dict[tuple, list[int]] = {}


def prompt_token_counts(tokenizer, domain: str, level: int, n: int = PROMPT_SAMPLE_TASKS,
                        heldout: int = 0) -> list[int]:
    """Prompt lengths of a domain level in `tokenizer`'s tokens, after its chat template.

    Single-turn domains: the prompt a rollout sends (`trainer.prompts.render_prompt`);
    multi-turn domains: the episode's opening prompt (`trainer.episodes.episode_prompt`).
    Memoised per (tokenizer, domain, level, n, heldout) in this process.

    Args:
        tokenizer: the policy's tokenizer (with a chat template).
        domain, level: a registered domain and one of its levels.
        n: training-seed tasks to measure (a fixed sample, the same every call).
        heldout: also measure the first `heldout` held-out tasks (those evaluations use).

    Returns:
        One count per task that generated (a seed whose generator times out is left out).

    Raises:
        DomainNotFound: unknown domain. ConfigError: not one of its levels, its generator
            fails at this level, or `MAX_TIMEOUTS` of its seeds time out (named in the message).
    """
    key = (tokenizer.name_or_path, len(tokenizer), domain, level, n, heldout)
    if key in _MEASURED:
        return _MEASURED[key]
    d = get_domain(domain)
    counts: list[int] = []
    timeouts = 0
    for seed in _training_seeds(n) + heldout_seeds(heldout):
        try:
            task = d.make_task(seed, level)
        except GenerationTimeout as e:
            timeouts += 1
            if timeouts >= MAX_TIMEOUTS:
                raise ConfigError(f"{domain} level {level}: {timeouts} of the tasks measured timed out while "
                                  f"generating ({e}); pick another level") from None
            continue
        except ConfigError:
            raise
        except Exception as e:  # noqa: BLE001 - an upstream generator failing at this level
            raise ConfigError(f"{domain} level {level} can't generate tasks ({type(e).__name__}: {e}); "
                              f"`rlwb domains validate {domain}` reports it; pick another level") from None
        if isinstance(d, EpisodeDomain):
            messages, kw, _, _ = episode_prompt(tokenizer, task)
            text = chat_text(tokenizer, messages, add_generation_prompt=True, **kw)
            counts.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
        else:
            counts.append(len(render_prompt(tokenizer, task)[1]))
    _MEASURED[key] = counts
    return counts


def prompt_lengths(tokenizer, domain: str, level: int, n: int = PROMPT_SAMPLE_TASKS) -> dict[str, float] | None:
    """Quantiles of a domain level's prompt lengths in `tokenizer`'s tokens
    (`prompt_token_counts`): {"n", "min", "p50", "p90", "p99", "max", "mean"}; None for
    retrieval domains (their prompt is the context budget, `context_budget_tokens`) and for
    a level whose every sampled seed timed out.

    Raises:
        as `prompt_token_counts`.
    """
    if isinstance(get_domain(domain), RetrievalDomain):
        return None
    counts = prompt_token_counts(tokenizer, domain, level, n)
    return _quantiles(counts) if counts else None


def retrieval_window(cfg: RunConfig, model_path) -> int:
    """Tokens a retrieval prompt and its answer need: the context budget, the prompt's own
    overhead and the longest answer (training or evaluation).

    Raises:
        ConfigError: the model's window (`max_position_embeddings`) is smaller.
    """

    answer = max(cfg.max_new_tokens, cfg.eval_max_new_tokens if cfg.eval_tasks_per_domain else 0)
    need = cfg.context_budget_tokens + PROMPT_OVERHEAD_TOKENS + answer
    window = context_window(model_path, default=need)
    if need > window:
        raise ConfigError(f"context_budget_tokens {cfg.context_budget_tokens} + {PROMPT_OVERHEAD_TOKENS} tokens of "
                          f"prompt + the answer need {need} tokens, more than the model's window of {window}; "
                          f"lower context_budget_tokens to at most {window - need + cfg.context_budget_tokens}")
    return need


def level_needs(cfg, model_path, tokenizer) -> list[Need]:
    """What every level of every domain in the run's mix needs of the window (`Need`).

    Raises:
        ConfigError: a multi-turn domain whose opening prompt leaves no room for a turn in
            ``max_episode_tokens``; a retrieval mix over the model's window; a generator
            that fails (see `prompt_token_counts`).
    """
    answer = max(cfg.max_new_tokens, cfg.eval_max_new_tokens if cfg.eval_tasks_per_domain else 0)
    needs = []
    for name, (_, lo, hi) in cfg.domain_specs().items():
        domain = get_domain(name)
        if isinstance(domain, RetrievalDomain):  # the same budget at every level
            tokens = retrieval_window(cfg, model_path)
            needs += [Need(name, level, tokens, 0, f"context budget {cfg.context_budget_tokens} + prompt + answer")
                      for level in range(lo, hi + 1)]
            continue
        for level in range(lo, hi + 1):
            # evaluation plays the first eval_tasks_per_domain held-out tasks at the range's lowest level
            counts = prompt_token_counts(tokenizer, name, level, heldout=cfg.eval_tasks_per_domain if level == lo else 0)
            if not counts:
                continue
            longest = max(counts)
            if isinstance(domain, EpisodeDomain):
                if longest + cfg.max_new_tokens > cfg.max_episode_tokens:
                    raise ConfigError(
                        f"field 'max_episode_tokens': {name} level {level} opens episodes with prompts of up to "
                        f"{longest} tokens ({len(counts)} tasks measured), so max_episode_tokens "
                        f"{cfg.max_episode_tokens} leaves no room for a {cfg.max_new_tokens}-token turn; set "
                        f"max_episode_tokens: {_round_up(longest + cfg.max_new_tokens)} or more")
                needs.append(Need(name, level, cfg.max_episode_tokens, longest, "max_episode_tokens"))
            else:
                needs.append(Need(name, level, longest + answer, longest,
                                  f"prompts of up to {longest} tokens ({len(counts)} tasks measured) + {answer} "
                                  "answer tokens"))
    return needs


def _round_up(tokens: float) -> int:
    return int(math.ceil(tokens / WINDOW_ROUND) * WINDOW_ROUND)


def _fit_hint(cfg, domain: str, needs: list[Need], model_window: int) -> str:
    """What to change so that `domain` fits: the first unbroken range of its levels that
    fit (prompt lengths need not grow with the level), and how to pin it when a curriculum
    over `domains` would climb past it."""
    fits = {n.level for n in needs if n.tokens <= model_window}
    if not fits:
        return f"leave {domain} out of the mix"
    lo = hi = min(fits)
    while hi + 1 in fits:
        hi += 1
    hint = f"keep {domain} at levels {lo}-{hi}"
    if cfg.curriculum and cfg.mix is None:
        hint += (f" (curriculum: true climbs to its hardest level: pin the range with a mix, e.g. "
                 f"`rlwb mix create NAME {domain}:1:{lo}-{hi}`, or set curriculum: false)")
    return hint


def run_window(cfg, model_path, tokenizer) -> int:
    """The rollout engine window (tokens, vLLM's ``max_model_len``) a run's mix needs.

    max(`DEFAULT_WINDOW_TOKENS`, the largest `Need` with `HEADROOM` on its prompt, rounded
    up to `WINDOW_ROUND`), capped at the model's window; never below the largest need.

    Args:
        cfg: a resolved `trainer.config.RunConfig`.
        model_path: the policy's checkpoint directory (its ``max_position_embeddings``).
        tokenizer: the policy's tokenizer.

    Raises:
        ConfigError: some domain level needs more than the model's window; the message
            names it, its token counts, and the levels of that domain that fit.
    """
    return run_sizes(cfg, model_path, tokenizer)[0]


def run_sizes(cfg, model_path, tokenizer) -> tuple[int, int]:
    """(window, sequence): `run_window`'s window and the longest sequence the run's mix makes
    (tokens: the largest `Need` with `HEADROOM` on its prompt, rounded up to `SEQUENCE_ROUND`,
    within the window) — what a KV cache sized to the work holds per sequence.

    Raises:
        ConfigError: as `run_window`.
    """
    needs = level_needs(cfg, model_path, tokenizer)
    model_window = context_window(model_path, default=DEFAULT_WINDOW_TOKENS)
    over = [n for n in needs if n.tokens > model_window]
    if over:
        worst = max(over, key=lambda n: n.tokens)
        hint = _fit_hint(cfg, worst.domain, [n for n in needs if n.domain == worst.domain], model_window)
        field = "max_episode_tokens" if worst.what == "max_episode_tokens" else "mix" if cfg.mix else "domains"
        raise ConfigError(
            f"field '{field}': {worst.domain} level {worst.level} needs {worst.tokens} tokens ({worst.what}), "
            f"more than the model's window of {model_window} tokens; {hint}, lower "
            f"{'max_episode_tokens' if field == 'max_episode_tokens' else 'max_new_tokens/eval_max_new_tokens'}, "
            "or use a model with a longer window (`rlwb domains show "
            f"{worst.domain} --json` lists each level's prompt lengths)")
    if not needs:
        window = min(DEFAULT_WINDOW_TOKENS, model_window)
        return window, window
    padded = [n.tokens + (HEADROOM - 1) * n.prompt_max for n in needs]
    longest = max(n.tokens for n in needs)
    window = min(model_window, max(DEFAULT_WINDOW_TOKENS, max(map(_round_up, padded)), longest))
    sequence = SEQUENCE_ROUND * math.ceil(max(max(padded), longest) / SEQUENCE_ROUND)
    return window, min(window, sequence)
