"""The store's user domains in this process's registry, and the versions a run pins.

    register_stored(store)                  # the newest version of each (CLI, page, `rlwb eval`)
    cfg = pin_user_domains(cfg, store)      # at launch: {name: version} of the run's user domains
    register_pinned(cfg_dict, store)        # in the run's process: exactly those versions

Registration is what makes a user domain usable: `RunConfig` checks domain names against
the registry, so the run's process registers its pinned versions before it builds the
config. Nothing is imported from the domain families when the store has no user domain
(`rlwb --help` and commands that don't need them stay fast).

Not covered: building, checking and storing a domain (`domains.user.library`).
"""

from __future__ import annotations

import sys

_DONE: set[str] = set()  # stores (by path) whose user domains this process registered


def register_stored(store, quiet: bool = False) -> dict[str, str]:
    """Register the newest version of every user domain in `store` (once per store per
    process). Returns {name: why} for stored domains that no longer build (also printed to
    stderr unless `quiet`)."""
    key = str(getattr(store, "path", id(store)))
    if key in _DONE:
        return {}
    _DONE.add(key)
    if not store.list_user_domains():
        return {}
    # on first use: it pulls in the domain families (reasoning-gym, numpy, pydantic)
    from domains.user.library import register_user_domains

    _, broken = register_user_domains(store)
    if broken and not quiet:
        for name, why in broken.items():
            print(f"note: user domain {name!r} is not loaded: {why}", file=sys.stderr)
    return broken


def forget(store) -> None:
    """Let the next `register_stored` of this store register again (after a change)."""
    _DONE.discard(str(getattr(store, "path", id(store))))


def pin_user_domains(cfg, store):
    """`cfg` with `user_domains` = {name: stored version} of the user domains it trains on.

    Raises:
        ConfigError: a user domain of the config is not stored (or was removed).
    """
    # on first use: it pulls in the domain families
    from domains.registry import is_built_in
    from domains.user.library import load_user_domain

    names = [n for n in cfg.domain_list if not is_built_in(n)]
    if not names:
        return cfg
    pinned = {n: (cfg.user_domains or {}).get(n) or load_user_domain(store, n).version for n in names}
    return cfg.model_copy(update={"user_domains": pinned})


def register_pinned(config: dict, store) -> None:
    """Register the user-domain versions a stored run config pinned (`pin_user_domains`).

    Raises:
        ConfigError: a pinned version is no longer in the store.
    """
    pinned = config.get("user_domains") or {}
    if not pinned:
        return
    # on first use: it pulls in the domain families
    from domains.registry import register
    from domains.user.library import load_user_domain

    for name, version in pinned.items():
        register(load_user_domain(store, name, int(version)))
