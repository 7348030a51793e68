"""User domains in the store: add, update, remove, export, import, and register the stored
ones beside the built-in domains.

    domain = add_domain(store, load_definition("sums.yaml"))          # version 1, registered
    domain = add_domain(store, definition, new=False)                  # version 2 of the same name
    register_user_domains(store)                                       # every stored one (a new process)
    export_domain(store, "sums", "sums.rlwb.json"); import_domain(store, "sums.rlwb.json")

A definition is a mapping: the `UserDomainSpec` fields plus `data` (the data file's path,
relative to the definition file) and optionally `format`. Nothing is stored unless the
whole file reads, every row builds, and the domain passes the contract check: a bad
definition leaves the store as it was. `store` is `backend.store.Store` (its
`save_user_domain`, `get_user_domain`, `list_user_domains`, `remove_user_domain`).

Not covered: validation (`rlwb domains validate NAME` runs `domains.validation` on a user
domain like on any other), the page's form (`app/`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigError
from domains import registry
from domains.user.data import TaskRow, build_rows, read_rows
from domains.user.build import build_domain
from domains.user.domain import UserRows
from domains.user.spec import parse_spec
from domains.user.verifiers import in_worker

EXPORT_FORMAT = "rlwb-user-domain/1"


def load_definition(path: str | Path) -> dict:
    """A definition file (YAML or JSON) as a mapping, its `data` path made absolute.

    Raises:
        ConfigError: the file is missing, not YAML, or not a mapping.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"definition file {path}: not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"definition file {path.name}: not YAML{where} ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"definition file {path.name}: a definition is a mapping of fields")
    if isinstance(raw.get("data"), str) and raw["data"]:
        raw["data"] = str((path.parent / raw["data"]).resolve())
    return raw


def prepare(definition: dict, rows: list[dict] | None = None, base_dir: Path | None = None) -> UserRows:
    """The domain a definition describes, built and checked but not stored.

    Args:
        definition: `UserDomainSpec` fields plus `data` (a path) and optional `format`.
        rows: The data rows already read (the page's upload); None: read `data`.
        base_dir: Where a files column's relative paths start (default: the folder of
            `data`, else the working directory).

    Raises:
        ConfigError: a bad field, an unreadable file, a bad row (named), a built-in name.
    """
    definition = dict(definition)
    data, fmt = definition.pop("data", None), definition.pop("format", None)
    if data is not None and not isinstance(data, str):
        raise ConfigError("domain field 'data': the data file's path, as text")
    spec = parse_spec(definition)
    if registry.is_built_in(spec.name):
        raise ConfigError(f"domain field 'name': {spec.name!r} is a built-in domain; pick another name")
    if rows is None:
        if not data:
            raise ConfigError("domain field 'data': the path of the data file (JSONL, JSON, CSV, Parquet or a "
                              "datasets directory)")
        rows = read_rows(data, fmt)
    # the user's template renders in a worker with a time limit (one may loop for ever)
    if base_dir is None and data:
        base_dir = Path(data).expanduser().resolve().parent
    built = in_worker(build_rows, spec, rows, base_dir, what=f"checking the rows of {spec.name}")
    return build_domain(spec, built)


def _save(store, domain: UserRows, note: str, new: bool) -> UserRows:
    from domains.conformance import check_domain  # the checker on first use (it plays tasks)

    check_domain(domain)  # before anything is stored
    version = store.save_user_domain(domain.name, domain.spec.model_dump(mode="json"),
                                     [asdict(r) for r in domain.rows], domain.data_sha256, note=note, new=new)
    stored = build_domain(domain.spec, domain.rows, version, trusted=True)
    registry.register(stored)
    return stored


def add_domain(store, definition: dict, rows: list[dict] | None = None, note: str = "",
               new: bool = True) -> UserRows:
    """Build, check, store and register a user domain (`prepare`); a new name with `new`,
    else a new version of a stored one. Returns the stored domain (its `version` set).

    Raises:
        ConfigError: as `prepare`; the name exists (`new`) or doesn't (not `new`).
    """
    return _save(store, prepare(definition, rows), note, new)


def load_user_domain(store, name: str, version: int | None = None) -> UserRows:
    """A stored user domain (the newest version unless `version`).

    Raises:
        ConfigError: no such domain or version (the message lists the stored ones).
    """
    row = store.get_user_domain(name, version)
    if row is None:
        known = ", ".join(d["name"] for d in store.list_user_domains()) or "none yet"
        what = f"user domain {name!r} has no version {version}" if version else f"no user domain named {name!r}"
        raise ConfigError(f"{what}; stored user domains: {known} (add one with `rlwb domains add`)")
    rows = tuple(TaskRow(**r) for r in row["rows"])
    return build_domain(row["spec"], rows, row["version"], trusted=True)  # checked when it was stored


def register_user_domains(store) -> tuple[list[str], dict[str, str]]:
    """Register the newest version of every stored user domain.

    Returns:
        (names registered, {name: why} for those that no longer build -- a domain stored
        by an older workbench whose definition it now refuses); never raises for one
        broken domain.
    """
    done, broken = [], {}
    for row in store.list_user_domains():
        try:
            registry.register(load_user_domain(store, row["name"], row["version"]))
            done.append(row["name"])
        except Exception as e:  # noqa: BLE001 - one broken stored domain must not break every command
            broken[row["name"]] = f"{type(e).__name__}: {e}"[:300]
    return done, broken


def remove_domain(store, name: str) -> int:
    """Hide a user domain from the catalogue and the registry; how many versions were hidden.

    Raises:
        ConfigError: no such user domain, or a built-in name.
    """
    if registry.is_built_in(name):
        raise ConfigError(f"{name!r} is a built-in domain; only user domains can be removed")
    hidden = store.remove_user_domain(name)
    if not hidden:
        load_user_domain(store, name)  # raises with the list of stored ones
    registry.unregister(name)
    return hidden


def export_domain(store, name: str, path: str | Path, version: int | None = None) -> Path:
    """Write a stored user domain (definition and rows) to one JSON file `import_domain` reads.

    Raises:
        ConfigError: no such domain or version.
    """
    domain = load_user_domain(store, name, version)
    path = Path(path)
    if path.is_dir() or not path.name:
        raise ConfigError(f"export file {path}: is a directory; give a file name, e.g. {path / (name + '.json')}")
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps({"format": EXPORT_FORMAT, **domain.to_json()}, ensure_ascii=False, indent=1),
                   encoding="utf-8")
    tmp.replace(path)  # no half-written export
    return path


def import_domain(store, path: str | Path, name: str | None = None, note: str = "") -> UserRows:
    """Store a user domain from an `export_domain` file (as a new domain, optionally renamed).

    Raises:
        ConfigError: not an export file, a bad definition or row, the name exists.
    """
    path = Path(path)
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"import file {path.name}: not a domain export ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ConfigError(f"import file {path.name}: not a domain export (no \"format\": \"{EXPORT_FORMAT}\")")
    if not isinstance(data.get("spec"), dict):
        raise ConfigError(f"import file {path.name}: \"spec\" must be the domain's definition (an object)")
    spec = dict(data["spec"])
    if name:
        spec["name"] = name
    try:
        rows = tuple(TaskRow(**r) for r in data.get("rows") or [])
    except (TypeError, AttributeError) as e:
        raise ConfigError(f"import file {path.name}: malformed rows ({e})") from None
    if not rows:
        raise ConfigError(f"import file {path.name}: no rows")
    parsed = parse_spec(spec)
    if registry.is_built_in(parsed.name):
        raise ConfigError(f"domain field 'name': {parsed.name!r} is a built-in domain; import it with --name")
    return _save(store, build_domain(parsed, rows), note, new=True)
