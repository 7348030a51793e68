"""Mixes: named, versioned sets of domains with sampling weights and difficulty ranges.

A mix is what a run samples its tasks from. It is stored in SQLite (`Store.save_mix`);
every save makes a new immutable version, and a run pins the exact version it used
(`resolve_mix` writes it into the run's config). A domain can join a mix only if its
newest validation report passed (`domains.validation`); domains never validated are
validated on the spot when saving.

    spec = MixSpec.model_validate({"domains": {"chain_sum": {"weight": 2, "levels": [1, 3]},
                                               "maze": {"weight": 1}}})
    version = save_mix(store, "arith-and-maze", spec)           # -> 1
    draws = draw(spec.as_specs(), random.Random(0), 1000)      # [(domain, level), ...]

CLI: `rlwb mix create NAME DOMAIN[:WEIGHT[:LO-HI]] ...`, `rlwb mix list`, `rlwb mix show`.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.errors import ConfigError, DomainNotFound
from domains.registry import get_domain
from domains.validation import current_validations, validate

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # used with fullmatch
MAX_VERSION = 1_000_000_000


class MixDomain(BaseModel):
    """One domain of a mix: its sampling weight and the range of levels sampled.

    `levels` is [lowest, highest] (inclusive); None means every level of the domain.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    weight: float = Field(1.0, ge=0.0, description="Relative sampling weight (>= 0).")
    levels: tuple[int, int] | None = Field(None, description="[lowest, highest] level sampled.")


class MixSpec(BaseModel):
    """The contents of one mix version: domain -> `MixDomain`.

    Raises (through `model_validate`): pydantic ValidationError for an empty mix, unknown
    domains, negative weights, weights summing to 0 and level ranges outside a domain's
    levels; use `parse_spec` to get a `ConfigError` naming the field.
    """

    model_config = ConfigDict(extra="forbid")

    domains: dict[str, MixDomain]

    @field_validator("domains")
    @classmethod
    def _not_empty(cls, v: dict[str, MixDomain]) -> dict[str, MixDomain]:
        if not v:
            raise ValueError("the mix is empty; add at least one domain, e.g. chain_sum:1")
        return v

    @model_validator(mode="after")
    def _positive_total(self) -> "MixSpec":
        total = sum(d.weight for d in self.domains.values())
        if not math.isfinite(total):
            raise ValueError("the weights are too large to add up; use relative weights such as 1, 2, 5")
        if not total > 0:
            raise ValueError("the weights sum to 0; give at least one domain a weight above 0")
        return self

    def as_specs(self) -> dict[str, tuple[float, int, int]]:
        """domain -> (weight, lowest level, highest level), domains of weight 0 left out."""
        return {n: (d.weight, *d.levels) for n, d in self.domains.items() if d.weight > 0}

    def pinned(self, name: str, version: int) -> dict:
        """The form a run records: {"name", "version", "domains": {domain: {weight, levels}}}."""
        return {"name": name, "version": version,
                "domains": {n: {"weight": w, "levels": [lo, hi]} for n, (w, lo, hi) in self.as_specs().items()}}


def _error_field(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"]) or "mix"


def parse_spec(data: Any) -> MixSpec:
    """Validate a mapping {"domains": {...}} into a `MixSpec`.

    Raises:
        ConfigError: naming the first bad field (e.g. "domains.maze.weight") and the fix.
    """

    try:
        spec = MixSpec.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "greater_than_equal" and err["loc"][-1] == "weight":
            msg = "weights must be >= 0 (0 leaves the domain out)"
        raise ConfigError(f"mix field '{_error_field(err)}': {msg}") from None
    for name, d in spec.domains.items():
        try:
            levels = get_domain(name).levels
        except DomainNotFound as e:
            raise ConfigError(f"mix field 'domains.{name}': {e}") from None
        lo, hi = d.levels if d.levels is not None else (min(levels), max(levels))
        if lo > hi or lo not in levels or hi not in levels:
            raise ConfigError(f"mix field 'domains.{name}.levels': must be a range within "
                              f"{min(levels)}-{max(levels)}, got {lo}-{hi}")
        d.levels = (lo, hi)
    return spec


def parse_domain_arg(arg: str) -> tuple[str, dict]:
    """Parse a CLI item `DOMAIN[:WEIGHT[:LO-HI]]` ("chain_sum:2:1-3", "maze", "maze::2-4").

    Raises:
        ConfigError: a malformed weight or level range, naming the item.
    """
    parts = arg.split(":")
    if len(parts) > 3 or not parts[0]:
        raise ConfigError(f"mix item {arg!r}: write DOMAIN[:WEIGHT[:LO-HI]], e.g. chain_sum:2:1-3")
    out: dict[str, Any] = {}
    if len(parts) > 1 and parts[1]:
        try:
            out["weight"] = float(parts[1])
        except ValueError:
            raise ConfigError(f"mix item {arg!r}: weight {parts[1]!r} is not a number") from None
    if len(parts) > 2 and parts[2]:
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", parts[2])
        if not m:
            raise ConfigError(f"mix item {arg!r}: levels {parts[2]!r} must be LO-HI or one level, e.g. 1-3")
        out["levels"] = [int(m[1]), int(m[2] or m[1])]
    return parts[0], out


def check_name(name: str) -> str:
    """A mix name: 1-64 characters, letters, digits, `_`, `.`, `-`, starting alphanumeric.

    Raises:
        ConfigError: otherwise.
    """
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ConfigError(f"mix name {name!r} is invalid: use 1-64 letters, digits, '_', '.' or '-', "
                          "starting with a letter or digit")
    return name


def blocked_domains(store, names: list[str], validate_missing: bool = True, n_tasks: int = 30) -> dict[str, str]:
    """Domains that can't join a mix, with the reason: their newest validation failed.

    Domains never validated are validated now (`n_tasks` per level) and their reports
    stored, when `validate_missing`; otherwise they count as blocked.

    Returns:
        domain -> reason (empty when every domain may join).
    """
    latest = current_validations(store)
    missing = [n for n in names if n not in latest]
    if missing and validate_missing:
        for report in validate(missing, n_tasks=n_tasks):
            store.record_validation(report)
        latest = current_validations(store)
    out = {}
    for n in names:
        v = latest.get(n)
        if v is None:
            out[n] = "never validated; run `rlwb domains validate " + n + "`"
        elif not v["passed"]:
            out[n] = "failed validation: " + "; ".join(v["reasons"][:2])
    return out


def save_mix(store, name: str, spec: MixSpec | dict, note: str = "", validate_missing: bool = True) -> int:
    """Check and store a new version of mix `name`.

    Args:
        spec: a `MixSpec` or the mapping `parse_spec` accepts.
        validate_missing: validate never-validated domains first (see `blocked_domains`).

    Returns:
        The new version number.

    Raises:
        ConfigError: a bad name or spec, or a domain whose validation failed; nothing is
            saved then.
    """
    check_name(name)
    spec = spec if isinstance(spec, MixSpec) else parse_spec(spec)
    active = list(spec.as_specs())
    blocked = blocked_domains(store, active, validate_missing=validate_missing)
    if blocked:
        name0, why = next(iter(blocked.items()))
        raise ConfigError(f"mix field 'domains.{name0}': {name0} can't join a mix: {why}")
    return store.save_mix(name, spec.model_dump(mode="json"), note=note)


def split_ref(ref: str) -> tuple[str, int | None]:
    """"NAME" -> (NAME, None); "NAME@3" -> (NAME, 3).

    Raises:
        ConfigError: a malformed version.
    """
    name, at, version = str(ref).partition("@")
    if not at:
        return check_name(name), None
    if not re.fullmatch(r"[0-9]{1,10}", version) or not 1 <= int(version) <= MAX_VERSION:
        raise ConfigError(f"mix {ref!r}: the version after '@' must be a number from 1 to {MAX_VERSION}, "
                          f"e.g. {name}@1")
    return check_name(name), int(version)


def load_mix(store, ref: str) -> tuple[dict, MixSpec]:
    """The stored mix `NAME` or `NAME@VERSION` and its re-validated spec.

    Raises:
        ConfigError: no such mix or version (the message lists the stored mixes).
    """
    name, version = split_ref(ref)
    row = store.get_mix(name, version)
    if row is None:
        known = ", ".join(m["name"] for m in store.list_mixes()) or "none yet"
        what = f"mix {name!r} has no version {version}" if version else f"no mix named {name!r}"
        raise ConfigError(f"{what}; stored mixes: {known} (create one with `rlwb mix create`)")
    return row, parse_spec(row["spec"])


def resolve_mix(cfg, store):
    """Pin the run config's mix: returns a copy of `cfg` with `mix_spec` filled from the
    stored version (the newest unless `mix` names one). Configs without a mix are
    returned unchanged.

    Raises:
        ConfigError: unknown mix or version, or a domain of it whose newest validation
            failed since the mix was saved.
    """
    if cfg.mix is None:
        return cfg
    ref = cfg.mix
    if cfg.mix_spec:  # a pinned config (a stored run's): it must be exactly that stored version
        ref = f"{cfg.mix_spec.get('name')}@{cfg.mix_spec.get('version')}"
    try:
        row, spec = load_mix(store, ref)
    except ConfigError as e:
        raise ConfigError(f"field 'mix': {e}") from None
    pinned = spec.pinned(row["name"], row["version"])
    if cfg.mix_spec and cfg.mix_spec != pinned:
        raise ConfigError(f"field 'mix_spec': does not match the stored mix {ref}; remove mix_spec (it is "
                          "filled in when the run starts) and name the mix with mix: NAME@VERSION")
    blocked = blocked_domains(store, list(spec.as_specs()), validate_missing=False)
    failed = {d: why for d, why in blocked.items() if not why.startswith("never")}
    if failed:
        d, why = next(iter(failed.items()))
        raise ConfigError(f"field 'mix': domain {d} of {row['name']}@{row['version']} {why}")
    return cfg.model_copy(update={"mix_spec": pinned})


def draw(specs: dict[str, tuple[float, int, int]], rng: random.Random, k: int,
         level_of: Any = None) -> list[tuple[str, int]]:
    """Draw k (domain, level) pairs: a domain with probability weight / total, then a level
    uniform in its [lo, hi] range, or `level_of(domain)` when given (the curriculum).

    Args:
        specs: domain -> (weight, lo, hi), e.g. `RunConfig.domain_specs()`.
        rng: the source of randomness (deterministic by its seed).

    Raises:
        ConfigError: empty specs or weights that don't sum above 0.
    """
    names = [n for n, (w, _, _) in specs.items() if w > 0]
    if not names:
        raise ConfigError("the mix has no domain with a weight above 0")
    picks = rng.choices(names, weights=[specs[n][0] for n in names], k=k)
    if level_of is not None:
        return [(n, level_of(n)) for n in picks]
    return [(n, rng.randint(specs[n][1], specs[n][2])) for n in picks]
