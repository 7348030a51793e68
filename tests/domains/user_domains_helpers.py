"""What the user-domain tests share: validating unsaved user domains in Docker."""

from domains import registry
from domains.user.library import prepare
from domains.validation import validate


def validate_unsaved(definitions: list[dict], rows: list[dict], cross_process: bool = False,
                     n_verify: int = 4) -> list[dict]:
    """Build each definition on `rows`, register it for the call, validate all of them in
    Docker sandboxes (20 tasks a level) and unregister them; the reports in order."""
    names = []
    try:
        for definition in definitions:
            registry.register(prepare(definition, rows=rows))
            names.append(definition["name"])
        return validate(names, n_tasks=20, n_verify=n_verify, sandbox_backend="docker", cross_process=cross_process)
    finally:
        for name in names:
            registry.unregister(name)
