"""The store's catalogue verbs: domain validation reports, context-length sweeps and named
mixes (`backend.store.Store` inherits them). Each runs under the store's lock; mixes are
versioned and a version, once stored, never changes.

Not covered: the schema (`backend.store_schema`), runs and trajectories (`backend.store`),
evaluations (`backend.eval_store`).
"""

from __future__ import annotations

import json

from core.errors import ConfigError
from backend.store_common import decode as _decode
from backend.store_common import locked as _locked
from backend.store_common import now as _now


class CatalogueVerbs:
    """Catalogue verbs of `backend.store.Store` (uses its ``db`` and ``_lock``)."""

    @_locked
    def record_validation(self, report: dict) -> int:
        """Store one domain's validation report (`domains.validation`); returns its id."""
        with self.db.conn:
            row = self.db["domain_validations"].insert({
                "domain": report["domain"], "domain_version": report.get("domain_version", ""),
                "passed": int(bool(report["passed"])),
                "reasons": json.dumps(report.get("reasons", [])), "report": json.dumps(report),
                "created_at": _now()})
        return row.last_pk

    @_locked
    def latest_validations(self) -> dict[str, dict]:
        """The newest validation of every validated domain: domain -> {"passed": bool,
        "reasons": [str], "created_at", "id", "domain_version"} (the full report via
        `validation_report`; which version it is of: `domains.validation.current_validations`)."""
        rows = self.db.execute(
            "SELECT v.id, v.domain, v.passed, v.reasons, v.created_at, v.domain_version FROM domain_validations v "
            "JOIN (SELECT domain, MAX(id) AS id FROM domain_validations GROUP BY domain) m ON v.id = m.id").fetchall()
        return {r[1]: {"id": r[0], "passed": bool(r[2]), "reasons": json.loads(r[3] or "[]"), "created_at": r[4],
                       "domain_version": r[5] or ""} for r in rows}

    @_locked
    def validation_report(self, domain: str) -> dict | None:
        """The newest full validation report of a domain, or None if never validated."""
        row = self.db.execute("SELECT report, created_at FROM domain_validations WHERE domain = ? "
                              "ORDER BY id DESC LIMIT 1", [domain]).fetchone()
        return {**json.loads(row[0]), "created_at": row[1]} if row else None

    @_locked
    def record_context_sweep(self, model: str, result: dict) -> int:
        """Store a context-length sweep (`trainer.context_length.run_sweep`'s result); returns its id."""
        with self.db.conn:
            return self.db["context_sweeps"].insert({
                "model": str(model), "config": json.dumps(result.get("config", {})),
                "result": json.dumps(result), "created_at": _now()}).last_pk

    @_locked
    def context_sweeps(self, limit: int = 20) -> list[dict]:
        """The newest sweeps first, each with its decoded `result`."""
        rows = self.db["context_sweeps"].rows_where(order_by="id desc", limit=limit)
        return [_decode(_decode(r, "result"), "config") for r in rows]

    @_locked
    def save_mix(self, name: str, spec: dict, note: str = "") -> int:
        """Store a new version of mix `name` (versions are immutable); returns the version (1, 2, ...)."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")  # take the write lock before reading the last version
        try:
            cur = conn.execute("SELECT COALESCE(MAX(version), 0) FROM mixes WHERE name = ?", [name]).fetchone()
            version = cur[0] + 1
            conn.execute("INSERT INTO mixes (name, version, spec, note, created_at) VALUES (?, ?, ?, ?, ?)",
                         [name, version, json.dumps(spec, sort_keys=True), note, _now()])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return version

    @_locked
    def get_mix(self, name: str, version: int | None = None) -> dict | None:
        """Mix `name` at `version` (None: the newest) as {"name", "version", "spec", "note",
        "created_at"}, or None if there is no such mix or version."""
        if version is None:
            row = self.db.execute("SELECT * FROM mixes WHERE name = ? ORDER BY version DESC LIMIT 1", [name])
        else:
            row = self.db.execute("SELECT * FROM mixes WHERE name = ? AND version = ?", [name, version])
        cols = [c[0] for c in row.description]
        found = row.fetchone()
        return _decode(dict(zip(cols, found)), "spec") if found else None

    @_locked
    def list_mixes(self) -> list[dict]:
        """The newest version of every mix, by name: {"name", "version", "spec", "note", "created_at"}."""
        rows = self.db.execute("SELECT m.* FROM mixes m JOIN (SELECT name, MAX(version) AS v FROM mixes "
                               "GROUP BY name) l ON m.name = l.name AND m.version = l.v ORDER BY m.name")
        cols = [c[0] for c in rows.description]
        return [_decode(dict(zip(cols, r)), "spec") for r in rows.fetchall()]

    @_locked
    def mix_versions(self, name: str) -> list[dict]:
        """Every version of a mix, oldest first."""
        rows = self.db.execute("SELECT * FROM mixes WHERE name = ? ORDER BY version", [name])
        cols = [c[0] for c in rows.description]
        return [_decode(dict(zip(cols, r)), "spec") for r in rows.fetchall()]

    @_locked
    def save_user_domain(self, name: str, spec: dict, rows: list[dict], data_sha256: str, note: str = "",
                         new: bool = True) -> int:
        """Store a new version of user domain `name`: its definition and (once per content)
        its task rows. With `new`, the name must not be in the catalogue; without, it must.
        Returns the version (1, 2, ...; a removed and re-added domain continues the count).

        Raises:
            ConfigError: `new` and the domain exists, or not `new` and it doesn't.
        """
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")  # take the write lock before reading the last version
        try:
            last, live = conn.execute("SELECT COALESCE(MAX(version), 0), MAX(version) FILTER (WHERE removed_at "
                                         "IS NULL) FROM user_domains WHERE name = ?", [name]).fetchone()
            if new and live is not None:
                raise ConfigError(f"user domain {name!r} exists (version {live}); "
                                  f"`rlwb domains update {name}` makes a new version")
            if not new and live is None:
                raise ConfigError(f"no user domain named {name!r}; `rlwb domains add` creates one")
            conn.execute("INSERT OR IGNORE INTO user_domain_data (sha256, rows, n_rows, created_at) VALUES (?, ?, ?, ?)",
                         [data_sha256, json.dumps(rows, ensure_ascii=False), len(rows), _now()])
            conn.execute("INSERT INTO user_domains (name, version, spec, data_sha256, note, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", [name, last + 1, json.dumps(spec, sort_keys=True), data_sha256,
                                                       note, _now()])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return last + 1

    @_locked
    def get_user_domain(self, name: str, version: int | None = None, with_rows: bool = True) -> dict | None:
        """User domain `name` at `version` (None: the newest not removed) as {"name",
        "version", "spec", "data_sha256", "note", "created_at", "removed_at", "n_rows"} plus
        "rows" if `with_rows`; None if there is no such domain or version. A removed
        domain's versions stay readable by number (the runs that used them)."""
        where = "d.name = ? AND " + ("d.version = ?" if version is not None else "d.removed_at IS NULL")
        args = [name] + ([version] if version is not None else [])
        rows_col = ", x.rows" if with_rows else ""
        cur = self.db.execute(f"SELECT d.*, x.n_rows{rows_col} FROM user_domains d JOIN user_domain_data x "
                              f"ON x.sha256 = d.data_sha256 WHERE {where} ORDER BY d.version DESC LIMIT 1", args)
        cols = [c[0] for c in cur.description]
        found = cur.fetchone()
        if not found:
            return None
        row = _decode(dict(zip(cols, found)), "spec")
        return _decode(row, "rows") if with_rows else row

    @_locked
    def list_user_domains(self) -> list[dict]:
        """The newest version of every user domain not removed, by name (no rows)."""
        cur = self.db.execute(
            "SELECT d.*, x.n_rows FROM user_domains d JOIN user_domain_data x ON x.sha256 = d.data_sha256 "
            "JOIN (SELECT name, MAX(version) AS v FROM user_domains WHERE removed_at IS NULL GROUP BY name) l "
            "ON d.name = l.name AND d.version = l.v ORDER BY d.name")
        cols = [c[0] for c in cur.description]
        return [_decode(dict(zip(cols, r)), "spec") for r in cur.fetchall()]

    @_locked
    def remove_user_domain(self, name: str) -> int:
        """Hide user domain `name` from the catalogue; returns how many versions were hidden
        (0: no such domain). Its versions stay readable by number."""
        with self.db.conn:
            cur = self.db.conn.execute("UPDATE user_domains SET removed_at = ? WHERE name = ? AND removed_at IS NULL",
                                       [_now(), name])
        return cur.rowcount

    @_locked
    def user_domain_versions(self, name: str) -> list[dict]:
        """Every stored version of a user domain, oldest first (removed ones too): {"version",
        "note", "created_at", "removed_at", "data_sha256"}."""
        cur = self.db.execute("SELECT version, note, created_at, removed_at, data_sha256 FROM user_domains "
                              "WHERE name = ? ORDER BY version", [name])
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

