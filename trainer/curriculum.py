"""Adaptive per-domain difficulty: move each domain's level with its running pass rate.

A `Curriculum` keeps, for every domain of the mix, a current level inside the domain's
[lo, hi] range (starting at lo) and a window of the last `window` pass/fail outcomes of
that domain's scored samples. After each training step's `update`: when the window is full
and its pass rate is above `raise_above`, the level goes up by one (if below hi); below
`lower_below`, down by one (if above lo). A level change clears the window, so the next
decision is made on outcomes at the new level only.

Why: GRPO learns nothing from a group whose samples all pass or all fail (every advantage
is 0; DAPO's "dynamic sampling", Yu et al., 2025, arXiv:2503.14476), so tasks the policy
always or never solves waste rollouts. Keeping each domain near the policy's frontier is
the adaptive-curriculum idea of reasoning-gym (Stojanovski et al., 2025, "Reasoning Gym:
Reasoning Environments for Reinforcement Learning with Verifiable Rewards",
arXiv:2505.24760).

Deterministic: no randomness; the result depends only on the samples and their order.
Not covered: finer steps than whole levels, and saving the state across a resumed run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from trainer.config import RunConfig
from trainer.types import Sample

PASS = 0.999  # a sample passes when its breakdown's "correct" is at least this


def passed(sample: Sample) -> bool:
    """True if the verifier judged the sample fully correct (breakdown "correct" >= 0.999)."""
    return float(sample.breakdown.get("correct", 0.0)) >= PASS


class Curriculum:
    """Per-domain level, raised or lowered by the pass rate over a sliding window.

    Args:
        specs: domain -> (weight, lowest level, highest level), as `RunConfig.domain_specs`.
        window: outcomes per domain the pass rate is taken over (samples), >= 1.
        raise_above: raise the level when the full window's pass rate is above this, in (0, 1].
        lower_below: lower the level when it is below this, in [0, raise_above).

    Raises:
        ValueError: on an empty `specs`, a range with lo > hi, window < 1 or thresholds
            outside 0 <= lower_below < raise_above <= 1.
    """

    def __init__(self, specs: dict[str, tuple[float, int, int]], window: int = 32,
                 raise_above: float = 0.8, lower_below: float = 0.2):
        if not specs:
            raise ValueError("a curriculum needs at least one domain")
        if window < 1:
            raise ValueError(f"window must be >= 1 sample, got {window}")
        if not 0.0 <= lower_below < raise_above <= 1.0:
            raise ValueError(f"need 0 <= lower_below < raise_above <= 1, got {lower_below} and {raise_above}")
        bad = [d for d, (_, lo, hi) in specs.items() if lo > hi]
        if bad:
            raise ValueError(f"level range of domain {bad[0]!r} is empty: {specs[bad[0]][1:]}")
        self.ranges = {d: (lo, hi) for d, (_, lo, hi) in specs.items()}
        self.raise_above, self.lower_below = raise_above, lower_below
        self._levels = {d: lo for d, (lo, _) in self.ranges.items()}
        self._windows: dict[str, deque[bool]] = {d: deque(maxlen=window) for d in self.ranges}
        self._rates: dict[str, float] = {}

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "Curriculum":
        """The curriculum of a run: its mix's level ranges and the `curriculum_*` settings.

        Raises:
            ConfigError: the run's mix is not resolved yet (see `RunConfig.domain_specs`).
        """
        return cls(cfg.domain_specs(), cfg.curriculum_window, cfg.curriculum_raise_above,
                   cfg.curriculum_lower_below)

    def level(self, domain: str) -> int:
        """The level to sample `domain`'s tasks at now.

        Raises:
            KeyError: `domain` is not in the curriculum.
        """
        return self._levels[domain]

    def update(self, samples: Iterable[Sample]) -> dict[str, int]:
        """Add one step's scored samples, then move each domain's level at most one step.

        Samples with a harness `fault` and of domains outside the curriculum are ignored.

        Returns:
            domain -> level change (+1 or -1) for the domains whose level moved.
        """
        touched: set[str] = set()
        for s in samples:
            if s.fault is None and s.domain in self._windows:
                self._windows[s.domain].append(passed(s))
                touched.add(s.domain)
        moves = {}
        for d in sorted(touched):
            win, (lo, hi) = self._windows[d], self.ranges[d]
            rate = self._rates[d] = sum(win) / len(win)
            if len(win) < win.maxlen:
                continue
            move = 0
            if rate > self.raise_above and self._levels[d] < hi:
                move = 1
            elif rate < self.lower_below and self._levels[d] > lo:
                move = -1
            if move:
                self._levels[d] += move
                win.clear()
                moves[d] = move
        return moves

    def snapshot(self) -> dict:
        """The mutable state as JSON-able data (levels, windows, rates), for checkpoints."""
        return {"levels": dict(self._levels), "windows": {d: list(w) for d, w in self._windows.items()},
                "rates": dict(self._rates)}

    def restore(self, snap: dict) -> None:
        """Take back a `snapshot`'s state; domains no longer in the curriculum are ignored."""
        for d, lvl in snap.get("levels", {}).items():
            if d in self._levels:
                lo, hi = self.ranges[d]
                self._levels[d] = min(max(int(lvl), lo), hi)
        for d, outcomes in snap.get("windows", {}).items():
            if d in self._windows:
                self._windows[d].clear()
                self._windows[d].extend(bool(x) for x in outcomes)
        self._rates.update({d: float(r) for d, r in snap.get("rates", {}).items() if d in self._levels})

    def state(self) -> dict[str, float]:
        """Metrics of the current state: ``curriculum/level/<domain>`` for every domain and
        ``curriculum/pass_rate/<domain>`` (fraction in [0, 1], over the window as it was at
        the last update, before any level change it caused) for domains with outcomes."""
        out = {f"curriculum/level/{d}": float(lvl) for d, lvl in self._levels.items()}
        out.update({f"curriculum/pass_rate/{d}": r for d, r in self._rates.items()})
        return out
