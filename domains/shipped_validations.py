"""Validation reports of the built-in domains, shipped with the code (`validations.json`).

A fresh install has validated nothing, yet validating every built-in domain takes most of
an hour here. So the reports of a `rlwb domains validate --ship` run are kept in
`domains/validations.json`, keyed by domain name and by the version they are of: the
domain's `source` (it names the generator package and its version, e.g.
"reasoning-core 0.5.0, planning"). `domains.validation.current_validations` falls back to
a shipped report for a built-in domain the store has no report of, as long as its
version is the installed one; a report the user makes replaces it.

    ship(reports, domains)              # after validating: keep them in validations.json
    shipped_report(get_domain("chain_sum"))   # the full report, or None (none, or another version)

`RLWB_SHIPPED_VALIDATIONS` names another file, or "none" to ignore the shipped reports (the
test suite does, so a fresh store means "never validated" there).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from core.errors import ConfigError
from domains.contract import Domain

SHIPPED_PATH = Path(__file__).with_name("validations.json")
ENV = "RLWB_SHIPPED_VALIDATIONS"


def shipped_path() -> Path | None:
    """The shipped reports' file: `$RLWB_SHIPPED_VALIDATIONS`, else `SHIPPED_PATH`; None
    when that variable is "none"."""
    env = os.environ.get(ENV)
    if env is None:
        return SHIPPED_PATH
    return None if env.strip().lower() in ("", "none") else Path(env)


def report_version(domain: Domain) -> str:
    """What a shipped report of `domain` must have been made of: its source (package and
    version) and, for a user domain, its stored version."""
    return f"{domain.source}|{domain.version_key}"


@functools.lru_cache(maxsize=4)
def _shipped(path: Path | None) -> dict[str, dict]:
    """The reports in `path` by domain ({} for None, or for the default file when it is
    absent, as in a checkout that never shipped any).

    Raises:
        ConfigError: the file is unreadable, is not a reports file, or (named by
            `RLWB_SHIPPED_VALIDATIONS`) does not exist.
    """
    if path is None:
        return {}
    named = f"{ENV}={path}" if os.environ.get(ENV) else str(path)
    fix = (f"point {ENV} at a file `rlwb domains validate --ship` wrote, or set {ENV}=none to read no "
           "shipped reports")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if path == SHIPPED_PATH:
            return {}
        raise ConfigError(f"{named}: no such file; {fix}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{named}: unreadable ({type(e).__name__}: {e}); {fix}") from None
    reports = data.get("reports") if isinstance(data, dict) else None
    if not isinstance(reports, dict) or not all(isinstance(r, dict) and "passed" in r for r in reports.values()):
        raise ConfigError(f"{named}: not a validation reports file (no \"reports\" of domain -> report); {fix}")
    return reports


def shipped_report(domain: Domain) -> dict | None:
    """The shipped report of `domain` (with "shipped": True), or None when none was shipped
    or it is of another version of the domain (its package was upgraded since)."""
    report = _shipped(shipped_path()).get(domain.name)
    if report is None or report.get("version") != report_version(domain):
        return None
    return {**report, "shipped": True}


def ship(reports: list[dict], domains: dict[str, Domain], path: Path = SHIPPED_PATH) -> int:
    """Merge `reports` (from `validate`) of built-in `domains` into the shipped file,
    written atomically, and return how many it now holds. A report keeps its verdict,
    reasons, per-level figures and when it was made; its task digests are dropped.

    Raises:
        OSError: the file could not be written (the old one is left as it was).
    """
    kept = dict(_shipped(path)) if path.exists() else {}
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for r in reports:
        d = domains.get(r["domain"])
        if d is None:
            continue
        slim = {k: v for k, v in r.items() if k != "task_digests"}
        kept[r["domain"]] = {**slim, "version": report_version(d), "created_at": r.get("created_at") or now}
    # one report a line: a diff after re-validating a few domains touches only their lines
    lines = [f"{json.dumps(n)}: {json.dumps(r, sort_keys=True, separators=(',', ':'), default=str)}"
             for n, r in sorted(kept.items())]
    text = ('{"about": "validation reports of the built-in domains; see domains/shipped_validations.py",\n'
            '"reports": {\n' + ",\n".join(lines) + "\n}}")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".validations.", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _shipped.cache_clear()
    return len(kept)
