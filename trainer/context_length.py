"""Context-length evaluation: a needle sweep over haystack lengths and depths, with and
without retrieval (`rlwb eval context-length MODEL`).

    from trainer.context_length import SweepConfig, run_sweep
    result = run_sweep(tokenizer, SweepConfig(lengths=[4_000, 64_000, 1_000_000]), engine=engine)
    result["cells"]   # one row per (length, depth, mode): needles, evidence rate, accuracy

For each haystack length, `haystacks` haystacks are built (`domains.long_docs.domain`), each with
one needle at every depth of `depths` (distinct keys and values, so the other needles are
distractors). Each needle is then asked about on its own:

- **retrieval**: the context is the pipeline's summary + fragments in `budget_tokens`
  (`retrieval.pipeline`); evidence = the needle's sentence is in that context.
- **full**: the haystack itself as the context, cut to what fits the model's window
  (`window_tokens` minus room for the question and answer; the head of the haystack is
  kept); evidence = the needle lies inside the kept part.

With an engine, the model answers `model_needles` needles per cell greedily in both modes:
accuracy is the share of exact answers (the domain's verifier: an `Answer:` line with the
number), mention rate the share of replies that contain the number anywhere (the usual
needle-in-a-haystack reading, for models that don't keep the answer format). The result is a
JSON-able dict the store keeps (`Store.record_context_sweep`) and the Retrieval page draws
as heat maps.

Not covered: multi-needle reasoning questions (the `needle_haystack` domain trains those).
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field

from core.errors import ConfigError
from retrieval.context import DEFAULT_BUDGET_TOKENS
from domains.contract import ANSWER_INSTRUCTION, SYSTEM_PROMPT
from domains.long_docs.domain import build_haystack, draw_needles, needle_task
from domains.registry import get_domain
from trainer.models import context_window

DEFAULT_LENGTHS = (4_000, 16_000, 64_000, 256_000, 1_000_000)
DEFAULT_DEPTHS = tuple(range(0, 101, 10))
MODES = ("retrieval", "full")


@dataclass
class SweepConfig:
    """Sweep settings (lengths in SmolLM2 tokens, depths in percent).

    Attributes:
        lengths: Haystack lengths, each 1,000 .. 2,000,000 tokens.
        depths: Needle depths, each 0..100 percent.
        haystacks: Haystacks per length (each holds one needle per depth).
        budget_tokens: Retrieval context budget (policy tokens).
        window_tokens: The model's context window (policy tokens); 0 = from the model config.
        model_needles: Needles per (length, depth) cell the model answers, per mode.
        max_new_tokens: Answer budget.
        seed: Seeds the haystacks and needles.
    """

    lengths: list[int] = field(default_factory=lambda: list(DEFAULT_LENGTHS))
    depths: list[int] = field(default_factory=lambda: list(DEFAULT_DEPTHS))
    haystacks: int = 10
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    window_tokens: int = 0
    model_needles: int = 1
    max_new_tokens: int = 24
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.lengths or any(not isinstance(n, int) or not 1_000 <= n <= 2_000_000 for n in self.lengths):
            raise ConfigError(f"lengths must be ints in [1000, 2000000] tokens, got {self.lengths!r}")
        if not self.depths or any(not isinstance(d, int) or not 0 <= d <= 100 for d in self.depths):
            raise ConfigError(f"depths must be ints in [0, 100] percent, got {self.depths!r}")
        if len(set(self.depths)) != len(self.depths) or len(self.depths) > 40:
            raise ConfigError("depths must be distinct, at most 40 of them")
        if len(set(self.lengths)) != len(self.lengths):
            raise ConfigError(f"lengths must be distinct, got {self.lengths!r}")
        if not isinstance(self.window_tokens, int) or not (self.window_tokens == 0 or self.window_tokens >= 512):
            raise ConfigError(f"window_tokens must be 0 (from the model's config) or at least 512, "
                              f"got {self.window_tokens!r}")
        for name in ("haystacks", "budget_tokens", "max_new_tokens"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if not isinstance(self.model_needles, int) or not 0 <= self.model_needles <= self.haystacks:
            raise ConfigError(f"model_needles must be in [0, haystacks], got {self.model_needles!r}")


def model_window(engine_model_path, cfg: SweepConfig) -> int:
    """The context window in tokens: `cfg.window_tokens` if set, else the checkpoint's
    `max_position_embeddings` (8192 when there is no checkpoint)."""
    if cfg.window_tokens:
        return cfg.window_tokens
    if engine_model_path is None:
        return 8192

    return context_window(engine_model_path)


def _full_context(haystack: str, tokenizer, room: int) -> tuple[str, int]:
    """The head of the haystack that fits in `room` tokens, and its character length."""
    enc = tokenizer(haystack, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= room:
        return haystack, len(haystack)
    end = enc["offset_mapping"][room - 1][1]
    return haystack[:end], end


def run_sweep(tokenizer, cfg: SweepConfig, engine=None, model_path=None, progress=None) -> dict:
    """Run the needle sweep (see the module docstring).

    Args:
        tokenizer: The policy's tokenizer (budgets, the full-context cut, the chat template).
        cfg: Sweep settings.
        engine: A `RolloutEngine` to measure the model's accuracy; None = evidence only.
        model_path: The engine's checkpoint (its config gives the window).
        progress: Optional callback(str) for status lines.

    Returns:
        {"config", "window_tokens", "cells": [{"length", "depth", "mode", "needles",
        "evidence", "evidence_rate", "answered", "correct", "accuracy", "mentioned",
        "mention_rate", "sample_reply"}], "seconds"}.
    """
    # on first use: it pulls in numpy
    from retrieval.pipeline import Collection, RetrievalConfig, Retriever

    start = time.monotonic()
    window = model_window(model_path, cfg)
    room = max(256, window - cfg.max_new_tokens - 128)
    rcfg = RetrievalConfig(budget_tokens=cfg.budget_tokens)
    cells: dict[tuple, dict] = {}
    asks: list[tuple[tuple, object, str]] = []  # (cell key, task, context text) for the model
    for length in cfg.lengths:
        for h in range(cfg.haystacks):
            rng = random.Random(f"sweep:{cfg.seed}:{length}:{h}")
            needles = draw_needles(rng, len(cfg.depths), list(cfg.depths))
            seed = cfg.seed * 1_000 + h
            haystack = build_haystack(seed, length, needles)
            retriever = Retriever(Collection.build({"haystack": haystack}, tokenizer, rcfg), rcfg)
            full_text, kept = (_full_context(haystack, tokenizer, room) if h < cfg.model_needles or engine is None
                               else (None, 0))
            for needle in needles:
                task = needle_task(seed, length, [needle])
                ctx = retriever.build_context(task.question, tokenizer=tokenizer)
                for mode, text, hit in (("retrieval", ctx.text, needle.sentence in ctx.text),
                                        ("full", full_text, None if full_text is None else
                                         haystack.find(needle.sentence) + len(needle.sentence) <= kept)):
                    cell = cells.setdefault((length, needle.depth, mode), {
                        "length": length, "depth": needle.depth, "mode": mode, "needles": 0, "evidence": 0,
                        "answered": 0, "correct": 0, "mentioned": 0, "sample_reply": None})
                    if hit is not None:
                        cell["needles"] += 1
                        cell["evidence"] += int(hit)
                    if engine is not None and h < cfg.model_needles and text is not None:
                        asks.append(((length, needle.depth, mode), task, text))
            if progress:
                progress(f"length {length:,}: haystack {h + 1}/{cfg.haystacks} done")
    if engine is not None and asks:
        _ask_model(engine, tokenizer, asks, cells, cfg.max_new_tokens)
    for cell in cells.values():
        cell["evidence_rate"] = cell["evidence"] / cell["needles"] if cell["needles"] else None
        cell["accuracy"] = cell["correct"] / cell["answered"] if cell["answered"] else None
        cell["mention_rate"] = cell["mentioned"] / cell["answered"] if cell["answered"] else None
    return {"config": asdict(cfg), "window_tokens": window, "cells": list(cells.values()),
            "seconds": round(time.monotonic() - start, 1)}


def _ask_model(engine, tokenizer, asks, cells, max_new_tokens: int) -> None:
    domain = get_domain("needle_haystack")
    prompts = []
    for _, task, text in asks:
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"{text}\n\nQuestion: {task.question}\n{ANSWER_INSTRUCTION}"}]
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompts.append(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    outs = engine.generate(prompts, n=1, max_new_tokens=max_new_tokens, temperature=0.0, top_p=1.0)
    for (key, task, _), [comp] in zip(asks, outs):
        _, breakdown = domain.score(task, comp.text)
        cell = cells[key]
        cell["answered"] += 1
        cell["correct"] += int(breakdown["correct"] == 1.0)
        cell["mentioned"] += int(task.answer in comp.text)
        cell["sample_reply"] = cell["sample_reply"] or comp.text[:300]
