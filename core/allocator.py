"""The memory allocator of the heavy processes (a run, an evaluation): TCMalloc where the
system has it, else the C library's malloc, said so.

    env = allocator.environment(os.environ)   # for a child process: TCMalloc preloaded
    allocator.reexec()                         # `rlwb run` / `rlwb eval`: restart this process with it
    allocator.status()                         # (True, "TCMalloc (/usr/lib/.../libtcmalloc_minimal.so.4)")

PyTorch on a CPU allocates and frees activation-sized blocks (MBs) all through a learner
step. glibc's malloc serves blocks above its mmap threshold with fresh mappings, so each
one costs page faults and zeroing; gperftools' TCMalloc keeps them in its page heap and
hands them out again. vLLM's CPU installation guide and PyTorch's CPU launcher
(``torch.backends.xeon.run_cpu``) preload it for that reason. Measured on a 2-core
AVX-512 host (bench/shared_prefix.py, the quickstart workload, two rounds each): the
shared-prefix learner step 16.6 / 14.8 s against glibc's 18.9 / 19.9 s, system time 6 s
against 16 s, peak RSS 2.2 GiB against 2.5-2.8 GiB.

A preload must be in the environment when a process starts, so `reexec` restarts the
process (``os.execve``, the same argv) with ``LD_PRELOAD`` set. Linux only; on other
systems, without the library (Debian/Ubuntu: ``apt install libtcmalloc-minimal4``, which
``make setup`` does as root) or with ``RLWB_ALLOCATOR=system`` the process keeps the C
library's malloc, and `status` says which and why.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path
from typing import TextIO

from core.errors import ConfigError

CHOICE_ENV = "RLWB_ALLOCATOR"
"""``tcmalloc`` (the default: used where installed) or ``system`` (the C library's malloc)."""
CHOICES = ("tcmalloc", "system")
# the shared library, minimal build first (no heap profiler: what vLLM's guide installs)
LIBRARY_NAMES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
         "/usr/local/lib", "/usr/local/lib64")
INSTALL_HINT = "apt install libtcmalloc-minimal4 (make setup does it as root)"
# TCMalloc reports every allocation over 1 GiB on stderr (model weights, a KV cache): not news here
_QUIET = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 40)}


def choice() -> str:
    """``RLWB_ALLOCATOR``, lower-cased; ``tcmalloc`` when unset.

    Raises:
        ConfigError: any other value (the message names the variable and its choices).
    """
    value = os.environ.get(CHOICE_ENV, "tcmalloc").strip().lower() or "tcmalloc"
    if value not in CHOICES:
        raise ConfigError(f"{CHOICE_ENV}={value!r}: use one of {', '.join(CHOICES)} (or leave it unset)")
    return value


def find_library() -> Path | None:
    """The TCMalloc shared library: under the Python environment's or the system's library
    folders (the first of `LIBRARY_NAMES` found), or None (also off Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    dirs = [Path(sys.prefix) / "lib", *(Path(d) for d in _DIRS)]
    for name in LIBRARY_NAMES:
        for d in dirs:
            try:
                if (d / name).is_file():
                    return d / name
            except OSError:  # a folder this user may not read
                continue
    return None


def loaded() -> Path | None:
    """The TCMalloc library mapped into this process (from ``/proc/self/maps``), or None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address, perms, offset, device, inode[, path]
        if len(fields) == 6 and Path(fields[5]).name.startswith("libtcmalloc"):
            return Path(fields[5])
    return None


def _preloads(env: dict | os._Environ) -> list[str]:
    """The libraries `env`'s ``LD_PRELOAD`` names (the loader splits it at spaces and colons)."""
    return env.get("LD_PRELOAD", "").replace(":", " ").split()


def _asked(env: dict | os._Environ = os.environ) -> str | None:
    """The TCMalloc library `env`'s ``LD_PRELOAD`` names (this process's by default), if any."""
    return next((p for p in _preloads(env) if Path(p).name.startswith("libtcmalloc")), None)


def environment(env: dict | os._Environ) -> dict:
    """A copy of `env` for a child process, with TCMalloc first in ``LD_PRELOAD`` when it is
    the choice and installed (unchanged otherwise).

    Raises:
        ConfigError: a bad ``RLWB_ALLOCATOR`` (see `choice`).
    """
    env = dict(env)
    lib = find_library() if choice() == "tcmalloc" else None
    if lib is None:
        return env
    if _asked(env) is None:
        env["LD_PRELOAD"] = " ".join([str(lib), *_preloads(env)])
    for key, value in _QUIET.items():
        env.setdefault(key, value)
    return env


def reexec() -> None:
    """Restart this process with TCMalloc preloaded (``os.execve``: same interpreter, same
    ``sys.orig_argv``) when it is the choice, installed and not loaded yet; otherwise return.
    Call it before anything starts threads or opens files that must survive (the restart
    keeps only the environment and the command line).

    Raises:
        ConfigError: a bad ``RLWB_ALLOCATOR`` (see `choice`).
    """
    # a preload already asked for and not loaded was refused by the loader, and would be again:
    # so a restarted process (its LD_PRELOAD names TCMalloc) never restarts twice
    if choice() != "tcmalloc" or loaded() is not None or _asked() or find_library() is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment(os.environ))


def fallback_reason() -> str | None:
    """Why this process runs without TCMalloc, as one line naming the fix; None when it is loaded."""
    if loaded() is not None:
        return None
    try:
        if choice() == "system":
            return f"the C library's malloc ({CHOICE_ENV}=system)"
    except ConfigError as e:
        return f"the C library's malloc: {e}"
    if not sys.platform.startswith("linux"):
        return f"the system's malloc (TCMalloc is preloaded on Linux only; this is {sys.platform})"
    asked = _asked()
    if asked:  # asked for and not mapped: the loader refused it (a wrong path or architecture)
        return f"the C library's malloc: the loader did not preload {asked}"
    found = find_library()
    if found is None:
        return (f"the C library's malloc: TCMalloc is not installed ({INSTALL_HINT}; "
                "learner steps took 10-25% less with it)")
    return f"the C library's malloc: TCMalloc ({found}) is preloaded by `rlwb run`, `rlwb runs resume` and `rlwb eval`"


def status() -> tuple[bool, str]:
    """(whether runs get TCMalloc, a one-line detail) for the page's system table: the library
    runs and evaluations preload, or the C library's malloc and why (never raises)."""
    lib = loaded()
    if lib is not None:
        return True, f"TCMalloc ({lib})"
    try:
        found = find_library() if choice() == "tcmalloc" else None
    except ConfigError:
        found = None
    if found is not None:
        return True, f"TCMalloc ({found}): runs and evaluations preload it"
    return False, fallback_reason()


def notice(stream: TextIO) -> None:
    """Write one ``note: memory allocator: ...`` line to `stream` when this process runs
    without TCMalloc (slower learner steps: never silently); nothing when it has it."""
    reason = fallback_reason()
    if reason is not None:
        print(f"note: memory allocator: {reason}", file=stream, flush=True)


def release_free_memory() -> bool:
    """Hand TCMalloc's free pages back to the system (``MallocExtension_ReleaseFreeMemory``)
    when it is loaded; returns whether it ran."""
    release = _release_function()
    if release is None:
        return False
    release()
    return True


@functools.cache
def _release_function():
    """TCMalloc's ``MallocExtension_ReleaseFreeMemory`` among the process's own symbols (a
    preloaded library is in them, even if its file was replaced since), or None without it;
    looked up once: what a process preloaded doesn't change."""
    if loaded() is None:
        return None
    try:
        return ctypes.CDLL(None).MallocExtension_ReleaseFreeMemory
    except (OSError, AttributeError):
        return None
