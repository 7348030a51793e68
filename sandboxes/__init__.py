"""Sandboxes: isolated execution places with files, commands, limits, snapshots; a warm pool
and a scheduler on top.

    from sandboxes import open_sandbox, SandboxSpec
    with open_sandbox("docker", SandboxSpec(memory_mb=256)) as sb:
        print(sb.exec("python3 -c 'print(6*7)'").stdout)

Backends: ``docker`` (the default; a container on the local engine, see
`sandboxes.docker_backend`) and ``local`` (bubblewrap + rlimits for machines without
Docker; WEAKER isolation, see `sandboxes.local_backend`). A backend is only ever used when
asked for by name: asking for ``docker`` where no engine runs raises `SandboxUnavailable`.
Each backend module is imported only when it is asked for (the Docker SDK and its client
are not loaded on machines that use the local backend).
"""

from __future__ import annotations

from core.choices import SANDBOX_BACKENDS as BACKENDS
from core.errors import ConfigError
from sandboxes.base import FileInfo, Sandbox
from sandboxes.image import recipe_hash
from sandboxes.local_backend import LocalSandbox, bwrap_path
from sandboxes.spec import DEFAULT_IMAGE, ExecResult, SandboxSpec

__all__ = ["BACKENDS", "ExecResult", "FileInfo", "Sandbox", "SandboxSpec", "backend_status", "open_sandbox",
           "engine_containers", "sandbox_class"]


def sandbox_class(backend: str) -> type[Sandbox]:
    """The Sandbox class of a backend name.

    Raises:
        ConfigError: unknown backend (the message lists the valid ones).
    """
    if backend == "docker":
        # on first use: it pulls in docker
        from sandboxes.docker_backend import DockerSandbox

        return DockerSandbox
    if backend == "local":
        return LocalSandbox
    raise ConfigError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def open_sandbox(backend: str = "docker", spec: SandboxSpec | None = None,
                 labels: dict[str, str] | None = None) -> Sandbox:
    """Start a sandbox of the named backend.

    Raises:
        ConfigError: unknown backend. SandboxUnavailable: the backend can't run here.
        SandboxError: it failed to start.
    """
    return sandbox_class(backend)(spec, labels).start()


def backend_status() -> dict[str, dict]:
    """What each backend can do on this machine, for the CLI and the page.

    Returns:
        {"docker": {"available": bool, "detail": str, "isolation": str, "image": bool},
         "local": {...}}; never raises.
    """
    out: dict[str, dict] = {}
    try:
        # on first use: it pulls in docker
        from sandboxes.docker_backend import DockerSandbox, docker_client, find_image

        client = docker_client()
        image = find_image(client, DEFAULT_IMAGE)
        fresh = image is not None and image.labels.get("rlwb.recipe") == recipe_hash()
        detail = f"engine {client.version().get('Version', '?')}; image {DEFAULT_IMAGE}: " + (
            "ready" if fresh else "outdated, run `rlwb sandbox build-image`" if image else
            "missing, run `rlwb sandbox build-image`")
        out["docker"] = {"available": image is not None, "detail": detail, "isolation": DockerSandbox.isolation,
                         "image": image is not None}
    except Exception as e:  # noqa: BLE001 - status must never raise (no SDK, no engine, ...)
        out["docker"] = {"available": False, "detail": str(e).splitlines()[0][:300], "isolation": "", "image": False}
    bwrap = bwrap_path()
    out["local"] = {"available": bwrap is not None, "isolation": LocalSandbox.isolation, "image": True,
                    "detail": f"bubblewrap at {bwrap}" if bwrap else "bubblewrap missing: apt-get install bubblewrap"}
    return out


def engine_containers() -> list[dict]:
    """The labelled sandbox containers on the local Docker engine (for the page); [] when
    there is no engine. Each: id, status, owner, created, pool labels."""
    try:
        # on first use: it pulls in docker
        from sandboxes.docker_backend import OWNER_LABEL, labelled_containers

        return [{"id": c.short_id, "status": c.status, "owner": c.labels.get(OWNER_LABEL, ""),
                 "created": c.attrs.get("Created", "")[:19], "image": (c.image.tags or ["?"])[0]}
                for c in labelled_containers()]
    except Exception:  # noqa: BLE001 - the page's status panel must never raise
        return []
