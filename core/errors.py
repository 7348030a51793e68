"""The workbench's one exception hierarchy.

Every error a user can cause (bad config, unknown run, missing model) is a
`WorkbenchError` subclass whose message says what to do. The CLI prints the message and
exits non-zero; the page shows it without crashing. `assert` is kept for internal
invariants (tensor shapes), never for user input.
"""


class WorkbenchError(Exception):
    """Base class of every error the workbench raises on purpose."""


class ConfigError(WorkbenchError, ValueError):
    """A run config, CLI argument or form field is invalid; the message names the field and the fix."""


class RunNotFound(WorkbenchError, KeyError):
    """No run with the given id exists in the store."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "run not found"


class TrajectoryNotFound(WorkbenchError, KeyError):
    """No trajectory with the given id exists in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "trajectory not found"


class ModelNotFound(WorkbenchError):
    """A model name or checkpoint path can't be resolved to a local HF checkpoint."""


class DomainNotFound(WorkbenchError, KeyError):
    """A domain name is not in the registry."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "domain not found"


class EngineError(WorkbenchError):
    """A rollout engine or learner failed to start or to run a request."""


class SandboxError(WorkbenchError):
    """A sandbox could not be started or used. A *harness* fault: the engine or container
    failed, not the program inside it, so it is retried and never scored as reward 0."""


class SandboxUnavailable(SandboxError):
    """The requested sandbox backend is not usable on this machine (no Docker engine, no
    image, no bubblewrap); the message says how to get it."""


class SandboxTimeout(SandboxError):
    """A sandbox's per-episode wall-clock budget is spent; the episode must end."""


class GenerationTimeout(WorkbenchError):
    """A task generator or verifier did not finish within its time limit (some upstream
    generators loop for a very long time on rare seeds); the caller draws another seed,
    scores the answer 0 or reports it."""


class UpstreamCrash(WorkbenchError):
    """The worker process that runs upstream generator or verifier code (`domains.upstream`)
    died during a call or could not start; the call's result is lost."""


class DocumentError(WorkbenchError, ValueError):
    """A document given to retrieval can't be used (empty, binary, too large, undecodable);
    the message says what was wrong and what to do instead."""


class EvalNotFound(WorkbenchError, KeyError):
    """No evaluation with the given id exists in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "evaluation not found"
