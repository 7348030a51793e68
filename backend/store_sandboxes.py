"""The store's sandbox verbs: every sandbox execution (scheduler jobs, episode commands) and
each run's pool state, for the Sandboxes page (`backend.store.Store` inherits them).

Not covered: the schema (`backend.store_schema`), runs and trajectories (`backend.store`).
"""

from __future__ import annotations

from backend.store_common import locked as _locked
from backend.store_common import now as _now
from backend.store_common import utf8_safe


class SandboxVerbs:
    """Sandbox verbs of `backend.store.Store` (uses its ``db``, ``_lock`` and ``_immediate``)."""

    @_locked
    def record_sandbox_executions(self, rows: list[dict], run_id: str | None = None, step: int | None = None) -> None:
        """Store sandbox executions (scheduler jobs and episode commands) for the Sandboxes page.

        Args:
            rows: dicts with kind, outcome, exit_code, latency_ms and optionally queue_ms,
                attempts, sandbox, backend, command, error.
        """
        now = _now()
        keep = ("kind", "outcome", "exit_code", "latency_ms", "queue_ms", "attempts", "sandbox", "backend",
                "command", "error")
        out = [{"run_id": run_id, "step": step, "created_at": now, **{k: utf8_safe(r.get(k)) for k in keep}}
               for r in rows]
        if out:
            with self._immediate():
                self.db["sandbox_executions"].insert_all(out)

    @_locked
    def record_pool_state(self, run_id: str, state: dict, status: str = "open") -> None:
        """Upsert the state of a run's sandbox pool (`SandboxPool.state()`), status open/closed."""
        keep = ("backend", "isolation", "size", "idle", "busy", "replaced", "orphans_collected")
        row = {"run_id": run_id, "status": status, "updated_at": _now(), **{k: state.get(k) for k in keep}}
        with self._immediate():
            self.db["sandbox_pools"].upsert(row, pk="run_id")

    @_locked
    def pool_states(self, limit: int = 20) -> list[dict]:
        """The most recently updated pool states."""
        return list(self.db["sandbox_pools"].rows_where(order_by="updated_at desc", limit=limit))

    @_locked
    def sandbox_executions(self, limit: int = 200, run_id: str | None = None) -> list[dict]:
        """The most recent sandbox executions, newest first."""
        where, params = ("run_id = ?", [run_id]) if run_id else (None, None)
        return list(self.db["sandbox_executions"].rows_where(where, params, order_by="id desc", limit=limit))

    @_locked
    def sandbox_failures(self, run_id: str | None = None) -> dict[str, int]:
        """Executions by outcome (ok, error, timeout, oom, harness)."""
        where, params = ("where run_id = ?", [run_id]) if run_id else ("", [])
        sql = f"select outcome, count(*) as n from sandbox_executions {where} group by outcome"
        return {r["outcome"]: r["n"] for r in self.db.query(sql, params)}
