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

from sandboxes.pool import Scheduler
from trainer.episodes import SandboxRuntime, sandbox_spec
from trainer.ray_scheduler import RayRolloutEngine, RaySandboxPool
from trainer.rollout import RolloutEngine, open_engine


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
                                     workers=cfg.rollout_workers, address=cfg.ray_address, **kw)
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
