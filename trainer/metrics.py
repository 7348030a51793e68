"""A step's rollout metrics: reward, accuracy, format, length and tool use per domain, and
the sandbox executions with their queue, latency and failure figures.

`rollout_metrics(samples)` summarizes scored samples (`trainer.types.Sample`, harness faults
and prompts over the engine's window counted apart); `sandbox_executions` gathers a step's
sandbox rows (verification jobs and episode commands) and `sandbox_metrics` their figures.

Not covered: the learner's metrics (`trainer.learner`), timings (`trainer.pipeline`).
"""

from __future__ import annotations

import ctypes
import functools
import resource
from collections import defaultdict
from pathlib import Path

from core import allocator
from sandboxes.pool import percentile
from trainer.audit import audit_metrics
from trainer.curriculum import passed
from trainer.types import Sample


def rollout_metrics(samples: list[Sample]) -> dict[str, float]:
    """Reward, accuracy, format rate and response length, overall and per domain, over the
    scored samples (harness faults are counted apart, in `sandbox/harness_faults`, and prompts too
    long for the engine's window in `context/over_window`); turns
    per episode for multi-turn domains; the answer audit per domain (`trainer.audit`)."""
    out: dict[str, float] = {"sandbox/harness_faults": float(sum(s.fault not in (None, "context") for s in samples)),
                             "context/over_window": float(sum(s.fault == "context" for s in samples))}
    scored = [s for s in samples if s.fault is None]
    by_domain: dict[str, list[Sample]] = defaultdict(list)
    for s in scored:
        by_domain[s.domain].append(s)
    for key, group in [("mean", scored), *sorted(by_domain.items())]:
        n = len(group)
        if not n:
            continue
        out[f"reward/{key}"] = sum(s.reward for s in group) / n
        out[f"accuracy/{key}"] = sum(passed(s) for s in group) / n
        out[f"format/{key}"] = sum(float(s.breakdown.get("format", 0.0)) for s in group) / n
        out[f"response_length/{key}"] = sum(sum(s.completion.mask or [1] * len(s.completion.token_ids))
                                            for s in group) / n
        if "turns" in group[0].breakdown:  # multi-turn episodes
            out[f"turns/{key}"] = sum(len(s.turns) for s in group) / n
        out.update(tool_metrics(group, key))
    out.setdefault("reward/mean", 0.0)
    out.setdefault("accuracy/mean", 0.0)
    out["response_length"] = out.get("response_length/mean", 0.0)
    generated = [s for s in samples if s.fault != "context"]  # a prompt over the window has no completion to cut
    out["truncated_frac"] = sum(s.completion.finish_reason == "length" for s in generated) / max(len(generated), 1)
    out.update(audit_metrics(scored))
    return out


def tool_metrics(samples: list[Sample], key: str) -> dict[str, float]:
    """Tool-call metrics of tool-use episodes (breakdowns with "calls"), under `key` (a
    domain or "mean"): tools/call_validity (valid calls / calls, `domains.tools.env.call_stats`;
    absent when no call was made), tools/calls_per_episode, tools/ok_rate (calls that ran
    without an error code / calls), and for "mean" tools/errors/<code> (counts)."""
    episodes = [s for s in samples if "calls" in s.breakdown]
    if not episodes:
        return {}
    calls = sum(s.breakdown["calls"] for s in episodes)
    out = {f"tools/calls_per_episode/{key}": calls / len(episodes)}
    if calls:
        out[f"tools/call_validity/{key}"] = sum(s.breakdown["valid_calls"] for s in episodes) / calls
        out[f"tools/ok_rate/{key}"] = sum(s.breakdown.get("ok_calls", 0) for s in episodes) / calls
    if key == "mean":
        codes: dict[str, int] = defaultdict(int)
        for s in episodes:
            for code, count in (s.breakdown.get("error_codes") or {}).items():
                codes[code] += count
        out.update({f"tools/errors/{code}": float(c) for code, c in sorted(codes.items())})
    return out


def sandbox_executions(samples: list[Sample], runtime) -> list[dict]:
    """One row per sandbox execution of a step: the scheduler's verification jobs and the
    commands of multi-turn episodes (checker runs are part of the episode's reward)."""
    rows = runtime.scheduler.drain_records() if runtime is not None else []
    backend = runtime.pool.backend if runtime is not None else ""
    for s in samples:
        for t in s.turns:
            if t.get("action") == "command":
                rows.append({"kind": s.domain, "outcome": t["outcome"], "exit_code": t.get("exit_code"),
                             "latency_ms": t.get("duration_ms"), "backend": backend,
                             "command": str(t.get("command", ""))[:500]})
    return rows


def sandbox_metrics(executions: list[dict], runtime) -> dict[str, float]:
    """Queue depth, latency p50/p99 (ms) and failures by kind over a step's executions."""
    lat = [r["latency_ms"] for r in executions if r.get("latency_ms") is not None]
    out = {"sandbox/executions": float(len(executions)),
           "sandbox/queue_depth": runtime.scheduler.metrics(reset=True)["queue_depth"],
           "sandbox/latency_p50_ms": percentile(lat, 50), "sandbox/latency_p99_ms": percentile(lat, 99),
           "sandbox/pool_replaced": float(runtime.pool.state()["replaced"])}
    for kind in ("error", "timeout", "oom", "harness"):
        out[f"sandbox/failures/{kind}"] = float(sum(r["outcome"] == kind for r in executions))
    return out


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system: glibc's ``malloc_trim(0)`` over every
    malloc arena, and TCMalloc's page heap where it is preloaded (`core.allocator`).

    An allocator keeps the memory a phase freed (the learner's activations, a rollout's
    buffers), so without this a process's RSS only grows over a run. Returns whether either
    ran (False off glibc without TCMalloc, e.g. on macOS, where the allocator returns memory itself)."""
    tcmalloc = allocator.release_free_memory()
    libc = _libc()
    if libc is None:
        return tcmalloc
    libc.malloc_trim(0)
    return True


@functools.cache
def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # glibc only
        return libc
    except (OSError, AttributeError):
        return None


def _status_gb(key: str) -> float:
    """`key` ("VmRSS", "VmHWM") of /proc/self/status in GiB (2**30 bytes); the peak since
    the process started (``ru_maxrss``) where there is no /proc."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024 / 2**30
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30


def resident_gb() -> float:
    """The process's resident memory now (``VmRSS``) in GiB (2**30 bytes); the peak since the
    process started where there is no /proc."""
    return _status_gb("VmRSS")


class PeakRSS:
    """The process's peak resident memory within a phase of a step: Linux's RSS high-water
    mark (``VmHWM``), reset at the start of the phase through ``/proc/self/clear_refs``.
    Where the kernel doesn't allow the reset (or there is no /proc), `read` gives the peak
    since the process started (``ru_maxrss``). Threads share the process's memory: with
    ``overlap`` a phase's peak includes the rollout running beside it."""

    def __init__(self):
        self.resettable = Path("/proc/self/clear_refs").exists()

    def reset(self) -> None:
        """Start a phase: hand the allocator's free heap pages back to the system first
        (`release_free_memory`), so a phase's peak is its own and not the last phase's
        leftovers, then reset the high-water mark."""
        release_free_memory()
        if self.resettable:
            try:
                Path("/proc/self/clear_refs").write_text("5")
            except OSError:
                self.resettable = False

    def read_gb(self) -> float:
        """Peak RSS since the last `reset` in GiB (2**30 bytes)."""
        if self.resettable:
            return _status_gb("VmHWM")
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
