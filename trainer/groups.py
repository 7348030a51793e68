"""A step's groups: tasks drawn from the mix, advantages per group, zero-variance handling.

`sample_tasks` draws a step's tasks (a domain by weight, its level uniform over the mix's
range or the curriculum's level, a training seed); `collect_groups` rolls them out with a
given `play` (e.g. `trainer.scoring.rollout`), fills the advantages (`assign_advantages`, the
estimator of the run's algorithm: `trainer.algorithms.grpo.ALGORITHM_PARTS`; REINFORCE++'s
are normalised over the final learner batch) and treats groups whose rewards are all equal as
``zero_variance`` says: keep them (advantage 0), skip them, or resample their tasks (DAPO's
dynamic sampling, Yu et al., 2025, arXiv:2503.14476). Truncated samples are kept, masked or
penalized, and long ones shaped, as ``overlong`` says (`trainer.overlong`).

Not covered: generating and scoring the samples (`trainer.scoring`), the learner step.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trainer.config import RunConfig
from domains.contract import Task
from domains.registry import get_domain
from domains.splits import train_seed
from core.errors import GenerationTimeout
from trainer.algorithms.grpo import ALGORITHM_PARTS, batch_normalize, group_advantages, leave_one_out_advantages
from trainer.curriculum import Curriculum
from trainer.overlong import masked, overlong_metrics, treat_overlong
from trainer.types import Sample


def sample_tasks(cfg: RunConfig, rng: random.Random, k: int, curriculum: Curriculum | None = None) -> list[Task]:
    """Draw `k` training tasks from the mix (`cfg.domain_specs()`).

    Each task: a domain by weight, then its level (the curriculum's level for the domain
    if `curriculum` is given, else uniform over the domain's [lo, hi] range), then a
    training seed. Deterministic for a given `rng` state.

    Raises:
        ConfigError: the run's mix is not resolved yet.
    """
    specs = cfg.domain_specs()
    names = list(specs)
    picks = rng.choices(names, weights=[specs[n][0] for n in names], k=k)
    tasks = []
    for name in picks:
        _, lo, hi = specs[name]
        if curriculum is not None:
            level = curriculum.level(name)
        else:  # a one-level range draws nothing, so fixed-difficulty runs keep their task stream
            level = lo if lo == hi else rng.randint(lo, hi)
        tasks.append(_make_task(get_domain(name), rng, level))
    return tasks


def _make_task(domain, rng: random.Random, level: int, attempts: int = 3) -> Task:
    """A training task of `domain` at `level`; a seed whose generation times out (some
    upstream generators loop on rare seeds) is replaced by a fresh one, up to `attempts`.

    Raises:
        GenerationTimeout: every attempt timed out.
    """
    for attempt in range(attempts):
        try:
            return domain.make_task(train_seed(rng), level)
        except GenerationTimeout:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def by_group(samples: list[Sample]) -> dict[int, list[Sample]]:
    """Samples keyed by their `group`, in order of first appearance."""
    out: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.group].append(s)
    return dict(out)


def zero_variance(group: list[Sample]) -> bool:
    """True if a group gives GRPO no signal: its scored rewards (no harness fault, not
    masked as overlong) are all equal, or fewer than two of its samples were scored."""
    rewards = [s.reward for s in group if s.fault is None and not masked(s)]
    return len(rewards) < 2 or len(set(rewards)) == 1


def assign_advantages(samples: list[Sample], group_size: int, algorithm: str, overlong: str = "keep",
                      max_tokens: int | None = None, overlong_buffer: int | None = None) -> int:
    """Fill `Sample.advantage` group by group with `algorithm`'s estimator
    (`trainer.algorithms.grpo.ALGORITHM_PARTS`): the group-std-normalised (GRPO, DAPO, GSPO,
    CISPO), mean-centred (Dr. GRPO, REINFORCE++-baseline) or leave-one-out (RLOO) reward, or
    for REINFORCE++ the reward itself, zero-variance groups included (`normalize_over_batch`
    then normalises REINFORCE++'s over the learner batch).

    Overlong samples are first masked, penalized or shaped as `overlong` says
    (`trainer.overlong.treat_overlong`, with `max_tokens` and `overlong_buffer` for "soft").
    Samples with a harness fault (they are not the model's failure) and masked samples get
    advantage 0 and take no part in their group's statistics.

    Returns:
        The number of groups whose scored rewards were all equal (no GRPO signal).

    Raises:
        ValueError: an unknown algorithm or overlong mode.
    """
    if algorithm not in ALGORITHM_PARTS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHM_PARTS)}, got {algorithm!r}")
    estimator = ALGORITHM_PARTS[algorithm][0]
    treat_overlong(samples, overlong, max_tokens, overlong_buffer)
    zero_var = 0
    for group in by_group(samples).values():
        scored = [s for s in group if s.fault is None and not masked(s)]
        for s in group:
            s.advantage = 0.0
        flat = zero_variance(group)
        zero_var += flat
        if estimator == "batch":  # REINFORCE++: the reward itself, equal-reward groups included
            for s in scored:
                s.advantage = float(s.reward)
            continue
        if flat:
            continue
        rewards = torch.tensor([[s.reward for s in scored]], dtype=torch.float32)
        if estimator == "leave_one_out":
            adv = leave_one_out_advantages(rewards)
        else:
            adv = group_advantages(rewards, normalize_std=(estimator == "group_std"))
        for s, a in zip(scored, adv.flatten().tolist()):
            s.advantage = a
    return zero_var


def normalize_over_batch(samples: list[Sample], batch: list[Sample], algorithm: str) -> None:
    """REINFORCE++ (and its -baseline variant): normalise the advantages of the learner
    `batch`'s scored samples over that batch (`trainer.algorithms.grpo.batch_normalize`);
    the step's other `samples` (skipped, masked, faulted) get advantage 0. Other algorithms:
    nothing changes."""
    if ALGORITHM_PARTS[algorithm][0] not in ("batch", "group_mean_batch"):
        return
    scored = [s for s in batch if s.fault is None]
    ids = {id(s) for s in scored}
    for s in samples:
        if id(s) not in ids:
            s.advantage = 0.0
    if scored:
        adv = batch_normalize(torch.tensor([s.advantage for s in scored], dtype=torch.float32))
        for s, a in zip(scored, adv.tolist()):
            s.advantage = a


@dataclass
class StepGroups:
    """The groups of one step after zero-variance handling (see `collect_groups`).

    Attributes:
        samples: the step's final `prompts_per_step` groups (a resampled group's last
            replacement in its place), advantages set: what the store records.
        batch: the samples the learner trains on: `samples` minus the skipped groups, the
            samples masked as overlong and the prompts too long for the engine's window
            (fault "context"); may be empty (then the step takes no learner step).
        rolled: every sample rolled out in the step, replaced groups included (rollout
            metrics, the curriculum's pass rates, sandbox executions).
        metrics: ``zero_variance/*`` metrics (shares in [0, 1], counts of groups or samples)
            and ``overlong/*`` (counts of samples).
    """

    samples: list[Sample]
    batch: list[Sample]
    rolled: list[Sample]
    metrics: dict[str, float]


def collect_groups(cfg: RunConfig, rng: random.Random, play: Callable[[list[Task]], list[Sample]],
                   curriculum: Curriculum | None = None) -> StepGroups:
    """Sample a step's tasks, roll them out with `play` and treat zero-variance groups as
    `cfg.zero_variance` says.

    keep: they stay in the batch with advantage 0. skip: they leave the learner batch (their
    trajectories are still recorded). resample: their tasks are redrawn and rolled out
    again, up to `cfg.max_resample_rounds` rounds, and whatever is still zero-variance is
    skipped (DAPO's dynamic sampling, arXiv:2503.14476). Truncated samples are treated as
    `cfg.overlong` says before advantages (`trainer.overlong`); masked ones leave the batch.

    Args:
        play: k tasks -> k * group_size scored samples with `group` 0..k-1 (e.g. `trainer.scoring.rollout`).
        curriculum: sets each domain's level (see `sample_tasks`).

    Returns:
        The final groups, the learner batch, every rolled-out sample and the metrics
        ``zero_variance/groups`` (share of the originally sampled groups with zero variance,
        also as ``zero_variance_groups``), ``zero_variance/<domain>`` (that share per domain),
        ``zero_variance/resampled`` (groups redrawn, all rounds), ``zero_variance/skipped``
        (groups left out of the batch), ``zero_variance/discarded_samples`` (rolled out,
        replaced, not recorded) and, unless ``overlong: keep``, ``overlong/masked`` or
        ``overlong/penalized`` (recorded samples treated).
    """
    rolled = play(sample_tasks(cfg, rng, cfg.prompts_per_step, curriculum))
    assign_advantages(rolled, cfg.group_size, cfg.algorithm, cfg.overlong, cfg.max_new_tokens, cfg.overlong_buffer)
    groups = by_group(rolled)
    zero = sorted(g for g, group in groups.items() if zero_variance(group))
    domains: dict[str, list[bool]] = defaultdict(list)
    for g, group in groups.items():
        domains[group[0].domain].append(g in zero)
    metrics = {"zero_variance/groups": len(zero) / len(groups), "zero_variance_groups": len(zero) / len(groups)}
    metrics.update({f"zero_variance/{d}": sum(z) / len(z) for d, z in sorted(domains.items())})
    resampled = 0
    for _ in range(cfg.max_resample_rounds if cfg.zero_variance == "resample" else 0):
        if not zero:
            break
        fresh = play(sample_tasks(cfg, rng, len(zero), curriculum))
        for s in fresh:
            s.group = zero[s.group]  # take the place of the group it replaces
        assign_advantages(fresh, cfg.group_size, cfg.algorithm, cfg.overlong, cfg.max_new_tokens, cfg.overlong_buffer)
        rolled = rolled + fresh
        resampled += len(zero)
        groups.update(by_group(fresh))
        zero = [g for g in zero if zero_variance(groups[g])]
    skipped = set() if cfg.zero_variance == "keep" else set(zero)
    samples = [s for g in sorted(groups) for s in groups[g]]
    metrics.update({"zero_variance/resampled": float(resampled), "zero_variance/skipped": float(len(skipped)),
                    "zero_variance/discarded_samples": float(len(rolled) - len(samples))})
    metrics.update(overlong_metrics(samples, cfg.overlong))
    # a prompt over the engine's window was never generated: it has nothing to train on
    batch = [s for s in samples if s.group not in skipped and not masked(s) and s.fault != "context"]
    normalize_over_batch(samples, batch, cfg.algorithm)
    return StepGroups(samples, batch, rolled, metrics)
