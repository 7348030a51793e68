"""Seeds and the held-out split: which tasks training may sample and which it never sees.

Training seeds come from `TRAIN_SEED_RANGE`, held-out (evaluation) seeds from the disjoint
`HELDOUT_SEED_RANGE`. Disjoint seeds are not enough where a domain draws from a finite set
of items (a pooled generator's 500 items, HumanEval's 164 problems, the CAD domains' small
parameter grids, the times table): there the items themselves are split, one in
`POOL_HELDOUT_EVERY` held out (`split_pool`, `heldout_item`, `draw_on_side`), and a seed
reaches only its own side, so an evaluation task is never a training task (checked by
tests/domains/test_heldout_separation.py).

    seed = train_seed(rng)                  # a training seed
    seeds = heldout_seeds(100)              # the first 100 held-out seeds, the same every time

Imports nothing of the project but the errors. Not covered: which held-out tasks an
evaluation plays (`domains.registry.heldout_tasks`, distinct questions).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from core.errors import ConfigError

TRAIN_SEED_RANGE = (0, 1_000_000_000)  # [low, high)
HELDOUT_SEED_RANGE = (1_000_000_000, 1_100_000_000)  # [low, high), disjoint from training


def train_seed(rng: random.Random) -> int:
    """Draw a training seed uniformly from `TRAIN_SEED_RANGE` using `rng`."""
    return rng.randrange(*TRAIN_SEED_RANGE)


def heldout_seeds(n: int, offset: int = 0) -> list[int]:
    """The n held-out seeds starting `offset` seeds into `HELDOUT_SEED_RANGE`.

    Deterministic (consecutive seeds), so every evaluation sees the same tasks.

    Raises:
        ConfigError: If n or offset is negative or the seeds would leave the range.
    """
    low, high = HELDOUT_SEED_RANGE
    if n < 0 or offset < 0 or low + offset + n > high:
        raise ConfigError(f"need 0 <= n, 0 <= offset and offset + n <= {high - low}; got n={n}, offset={offset}")
    return list(range(low + offset, low + offset + n))


def is_heldout(seed: int) -> bool:
    """True if the seed is in `HELDOUT_SEED_RANGE`."""
    return HELDOUT_SEED_RANGE[0] <= seed < HELDOUT_SEED_RANGE[1]


# One item in POOL_HELDOUT_EVERY of a finite set of items is held out. Shared by every
# domain that draws from a finite set: pooled reasoning-gym generators and the CAD
# domains split by a hash of the item's question (`heldout_item`); humaneval by problem
# index (`domains.code.humaneval`), its problems being fixed and distinct.
POOL_HELDOUT_EVERY = 5
MAX_SIDE_DRAWS = 200  # `draw_on_side` gives up after this many draws (a held-out miss is 4/5 per draw)

_T = TypeVar("_T")


def heldout_item(question: str, every: int = POOL_HELDOUT_EVERY) -> bool:
    """True if the item whose question (prompt text) is `question` is held out.

    The side is a property of the text itself: the first 8 bytes of its SHA-256, as a
    big-endian int, divisible by `every` (one item in `every` is held out). Equal questions
    are always on the same side, whatever pool, process or seed they come from.
    """
    digest = hashlib.sha256(question.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % every == 0


def heldout_share(key: str, fraction: float) -> bool:
    """True if the item whose key (a user row's id) is `key` is held out: the first 8 bytes of
    the key's SHA-256, as a fraction of 2**64, fall below `fraction`. Stable when rows are
    added or reordered, and the same in every process."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def split_pool(questions: Sequence[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Split a finite pool of items into (training, held-out) indices.

    An item is held out iff `heldout_item(question)`. A question that occurs several times
    keeps only its first index, so no question is reachable twice within a side and none
    from both sides.

    Args:
        questions: The pool's items' question texts, in pool order.

    Returns:
        (training indices, held-out indices), each ascending.
    """
    first: dict[str, int] = {}
    for i, q in enumerate(questions):
        first.setdefault(q, i)
    train = tuple(i for q, i in first.items() if not heldout_item(q))
    held = tuple(i for q, i in first.items() if heldout_item(q))
    return train, held


def draw_on_side(seed: int, draw: Callable[[int], _T], question: Callable[[_T], str],
                 every: int = POOL_HELDOUT_EVERY) -> _T:
    """The first of `draw(0)`, `draw(1)`, ... that is on `seed`'s side of the item split.

    For generators over a small space of items (the CAD domains' parameter grids), where
    a held-out seed could otherwise generate exactly a training task: a training seed
    keeps only items with `not heldout_item(question(item))`, a held-out seed only items
    with `heldout_item(...)`. Deterministic if `draw` is (the same seed gives the same
    item); a training seed keeps its first draw 4 times in 5.

    Args:
        seed: The task seed (`is_heldout` picks the side).
        draw: attempt number -> item, deterministic in (seed, attempt).
        question: item -> the question text the split is computed on.
        every: one item in `every` is held out (`heldout_item`).

    Raises:
        ConfigError: no item of the seed's side within MAX_SIDE_DRAWS draws.
    """
    want = is_heldout(seed)
    for attempt in range(MAX_SIDE_DRAWS):
        item = draw(attempt)
        if heldout_item(question(item), every) == want:
            return item
    raise ConfigError(f"seed {seed}: no {'held-out' if want else 'training'} item in {MAX_SIDE_DRAWS} draws")
