"""Who owns a sandbox container or a claimed job: ``<hostname>:<pid>`` of the orchestrator.

The garbage collector (`sandboxes.docker_backend.collect_garbage`) and the durable job
queue (`sandboxes.jobqueue`) use it to tell the leftovers of a dead process from the work
of a live one. Not covered: owners on other hosts (they are always presumed alive).
"""

from __future__ import annotations

import os
import socket


def owner_tag() -> str:
    """This process's owner value: ``<hostname>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """False only for an owner on this host whose process is gone."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's (or unlabelled): not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
