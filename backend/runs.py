"""Run manager: start a run in this process and keep its status in the store honest.

`run_foreground` creates the run row only after the config has been validated, marks it
`running` with this process's pid, and whatever happens leaves it in a final state:
`completed`, `stopped` (Ctrl-C or SIGTERM; everything written so far is kept) or `failed`
(with the error and traceback shown on the Runs page).

Not covered yet: background runs launched from the page, heartbeat-lapse detection and
resume (later issues).
"""

from __future__ import annotations

import os
import signal
import traceback as tb
from collections.abc import Callable

from backend.config import RunConfig
from backend.store import Store


class RunStopped(KeyboardInterrupt):
    """Raised inside a run when it receives SIGTERM; handled like Ctrl-C."""


def _raise_stopped(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise RunStopped(f"received signal {signum}")


def run_foreground(cfg: RunConfig, store: Store,
                   on_step: Callable[[int, dict[str, float]], None] | None = None,
                   on_start: Callable[[str], None] | None = None) -> str:
    """Run a post-training job in this process.

    Args:
        cfg: a validated config (see `backend.config.load_config`).
        store: where the run, its metrics and trajectories go.
        on_step: progress callback (step, metrics).
        on_start: called with the new run id once the run row exists.

    Returns:
        The run id.

    Raises:
        KeyboardInterrupt: after marking the run `stopped` (Ctrl-C or SIGTERM).
        Exception: whatever failed, after marking the run `failed` with its traceback.
    """
    from trainer.loop import check_model_fits, train

    check_model_fits(cfg)  # a model too small for the prompts fails before the run row exists
    run_id = store.create_run(cfg.name, cfg.model_dump(mode="json"), cfg.steps)
    if on_start:
        on_start(run_id)
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        store.update_run(run_id, pid=os.getpid())
        store.set_status(run_id, "running")
        train(cfg, store, run_id, on_step=on_step)
    except KeyboardInterrupt as e:
        reason = str(e) if isinstance(e, RunStopped) else "interrupted by the user (Ctrl-C)"
        store.set_status(run_id, "stopped", error=f"stopped: {reason}")
        raise
    except BaseException as e:
        store.set_status(run_id, "failed", error=f"{type(e).__name__}: {e}", traceback=tb.format_exc())
        raise
    else:
        store.set_status(run_id, "completed")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return run_id
