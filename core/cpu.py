"""The CPU's feature flags, read from Linux's ``/proc/cpuinfo``: which native bf16 matmul
instructions it has, for `trainer.precision` (``dtype: auto``) and `retrieval.embeddings`
(the embedding model's dtype).

    have = bf16_flags()   # ["avx512_bf16"] on a Cooper Lake Xeon or a Zen 4 EPYC, [] on AVX2

Not covered: other operating systems (no flags are read there, so nothing is assumed native).
"""

from __future__ import annotations

import functools
from pathlib import Path

#: x86 CPU flags (``/proc/cpuinfo``) of native bf16 matmul instructions.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
PROC_CPUINFO = "/proc/cpuinfo"


def cpu_flags(cpuinfo: str | Path = PROC_CPUINFO) -> set[str]:
    """The CPU's feature flags from a Linux ``/proc/cpuinfo`` (its first ``flags`` line);
    empty where the file can't be read (another OS) or has no such line. This machine's own
    file is read once a process: its flags don't change, and the kernel writes it out anew
    for every core at each read (every long-document task asks for the embedder's dtype)."""
    if str(cpuinfo) == PROC_CPUINFO:
        return set(_own_flags())
    return _read_flags(cpuinfo)


@functools.cache
def _own_flags() -> frozenset[str]:
    return frozenset(_read_flags(PROC_CPUINFO))


def _read_flags(cpuinfo: str | Path) -> set[str]:
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def bf16_flags(cpuinfo: str | Path = PROC_CPUINFO) -> list[str]:
    """The native bf16 flags this CPU has (`BF16_CPU_FLAGS` order); empty: bf16 is emulated
    (slower than float32) or the flags can't be read."""
    flags = cpu_flags(cpuinfo)
    return [f for f in BF16_CPU_FLAGS if f in flags]
