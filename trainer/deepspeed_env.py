"""The process environment a DeepSpeed learner needs before it starts.

`ensure_single_process_env` sets torch.distributed's variables (MASTER_ADDR, MASTER_PORT,
RANK, LOCAL_RANK, WORLD_SIZE) for a one-process job unless a launcher (torchrun, deepspeed)
set them, and `extensions_dir` gives DeepSpeed's compiled C++ ops a directory per virtual
environment. Used by `trainer.learner.DeepSpeedLearner` at start-up.

Not covered: multi-process launches (`trainer.learner_group` starts the ranks).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

STALE_BUILD_LOCK_S = 900  # seconds: DeepSpeed's op builds take a minute or two; an older lock is a dead builder's


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def extensions_dir() -> Path:
    """Build DeepSpeed's C++ ops per environment and clear a dead builder's lock.

    torch keeps compiled extensions in one per-user directory; two virtual environments
    (two checkouts) then rebuild the same op over each other, and a process killed while
    building leaves a ``lock`` file that makes every later build wait forever. Here the
    directory is per environment (``$TORCH_EXTENSIONS_DIR`` wins, else
    ``<sys.prefix>/torch_extensions``), and a lock older than `STALE_BUILD_LOCK_S` is
    removed, with a note on stderr.

    Returns:
        The extensions directory (also in ``$TORCH_EXTENSIONS_DIR``).
    """
    root = Path(os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(sys.prefix) / "torch_extensions")))
    for lock in root.glob("*/lock"):
        try:
            age = time.time() - lock.stat().st_mtime
            if age > STALE_BUILD_LOCK_S:
                lock.unlink()
                print(f"rlwb: removed a stale extension build lock {lock} ({age / 60:.0f} min old; its builder "
                      "is gone)", file=sys.stderr)
        except OSError:
            continue
    return root


def ensure_single_process_env() -> None:
    """Set the torch.distributed variables for a one-process job unless a launcher did, and
    the extension build directory (`extensions_dir`). A fresh MASTER_PORT is picked unless a
    torch.distributed group is already up (an in-process vLLM engine's), whose port stays."""
    import torch.distributed as dist  # deferred: the page imports trainer modules without torch's start-up cost

    extensions_dir()
    if "RANK" in os.environ and "MASTER_PORT" in os.environ:
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if not dist.is_initialized():  # an in-process vLLM engine may already have set up a group
        os.environ["MASTER_PORT"] = str(free_port())
    else:
        os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
