"""Where a run's rollouts and sandboxes run: in this process (``scheduler: local``) or as
Ray actors across a cluster (``scheduler: ray``).

    with maybe_runtime(cfg) as runtime:                # None when the mix needs no sandbox
        engine = open_run_engine(cfg, model_path, **engine_options(cfg, model_path))

The one module that makes the local-or-Ray choice: it stands above the local engines
(`trainer.rollout.open_engine`), the local sandbox runtime (`trainer.episodes.SandboxRuntime`)
and their Ray counterparts (`trainer.ray_scheduler`), so none of those imports the others back.
Importing it never imports ray or vllm (both are imported when an engine or pool starts).

Not covered: the learner's placement (it runs where `rlwb run` runs; `trainer.learner`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from sandboxes.pool import Scheduler
from trainer.episodes import SandboxRuntime, sandbox_spec
from trainer.ray_scheduler import RayRolloutEngine, RaySandboxPool
from trainer.rollout import RolloutEngine, open_engine


def worker_engine_options(kw: dict, workers: int, address: str | None) -> dict:
    """One rollout worker's engine options out of the run's (`trainer.loop.engine_options`):
    its KV cache sized to its share of a step's sequences (`trainer.ray_scheduler.split` gives each worker a
    contiguous slice of the prompts), one full window at least; and, on a private Ray
    instance on a machine without a GPU (no `address`: every worker's KV cache in this
    machine's RAM), its share of ``gpu_memory_utilization``, so the workers together keep to
    the run's memory fraction. With a GPU each worker has its own (`trainer.ray_scheduler._options`) and keeps the
    whole fraction of it.

    Args:
        kw: `open_engine` options; ``kv_cache_tokens`` and ``max_model_len`` in tokens.
        workers: rollout workers, >= 1.
        address: the Ray cluster, or None for a private instance on this machine.
    """
    out = dict(kw)
    if out.get("kv_cache_tokens"):
        # the largest slice of a step's prompts (`trainer.ray_scheduler.split`): ceil(P / W) of P, at most
        # twice the even share
        share = -(-out["kv_cache_tokens"] // workers)
        out["kv_cache_tokens"] = max(min(2 * share, out["kv_cache_tokens"]), out.get("max_model_len") or 0)
    if address is None and out.get("gpu_memory_utilization") and not torch.cuda.is_available():
        out["gpu_memory_utilization"] = out["gpu_memory_utilization"] / workers
    return out


def open_run_engine(cfg, model_path: str | Path, **kw) -> RolloutEngine:
    """The rollout engine of a run: `open_engine(cfg.rollout_engine, ...)` in this process,
    or with ``scheduler: ray`` a `trainer.ray_scheduler.RayRolloutEngine` over
    ``cfg.rollout_workers`` workers on the cluster at ``cfg.ray_address``.

    Args:
        cfg: the run's `trainer.config.RunConfig` (engine, seed, dtype, scheduler fields).
        **kw: engine options (`trainer.loop.engine_options`).

    Raises:
        EngineError: as `open_engine`, or a Ray worker failed to start.
        ConfigError: scheduler: ray without Ray, or an unreachable ray_address.
    """
    if cfg.scheduler == "ray":
        return RayRolloutEngine.open(cfg.rollout_engine, model_path, seed=cfg.seed, dtype=cfg.dtype,
                                     workers=cfg.rollout_workers, address=cfg.ray_address,
                                     **worker_engine_options(kw, cfg.rollout_workers, cfg.ray_address))
    return open_engine(cfg.rollout_engine, model_path, seed=cfg.seed, dtype=cfg.dtype, **kw)


def ray_runtime(cfg) -> SandboxRuntime:
    """A `SandboxRuntime` whose pool is a `RaySandboxPool` of the run's backend, size and
    workers, with the unchanged `sandboxes.pool.Scheduler` on top (and one more such pool
    per network allow-list a domain of the mix asks for)."""
    def opener(network: str | tuple[str, ...] = "none"):
        return RaySandboxPool.open(cfg.sandbox_backend, sandbox_spec(cfg, network), cfg.sandbox_pool_size,
                                   cfg.sandbox_workers, cfg.ray_address)

    pool = opener()
    return SandboxRuntime(pool, Scheduler(pool), opener)


@contextlib.contextmanager
def maybe_runtime(cfg):
    """A `SandboxRuntime` when the mix needs sandboxes, else None; closed on exit. With
    ``scheduler: ray`` its pool is spread over Ray sandbox workers (`ray_runtime`)."""
    runtime = None
    if cfg.needs_sandbox and cfg.scheduler == "ray":
        runtime = ray_runtime(cfg).open_networks(cfg.domain_list)
    elif cfg.needs_sandbox:
        runtime = SandboxRuntime.open(cfg).open_networks(cfg.domain_list)
    try:
        yield runtime
    finally:
        if runtime is not None:
            runtime.close()
