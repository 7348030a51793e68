"""Synthetic text the store benchmarks share (bench/ui_load.py, bench/store_ingest.py)."""

from __future__ import annotations

import random

WORDS = ["the", "file", "line", "error", "count", "total", "python", "grep", "sed", "awk", "find", "sort",
         "uniq", "head", "tail", "cat", "echo", "directory", "output", "input", "value", "result", "check",
         "test", "pass", "fail", "log", "warning", "info", "data", "name", "size", "path", "user", "group",
         "time", "date", "read", "write", "open", "close", "list", "print", "return", "answer", "number",
         "string"]


def prose(rng: random.Random, words: int) -> str:
    """Pseudo-prose: common words and random syllable words (so the index sees many terms)."""
    out = []
    for i in range(words):
        if rng.random() < 0.6:
            out.append(rng.choice(WORDS))
        else:
            out.append("".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(1, 4))))
        if i % 12 == 11:
            out.append("\n")
    return " ".join(out)
