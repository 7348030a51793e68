"""Runs one call of a user's Python tool inside a sandbox (never in the trainer).

    python3 -I .rlwb_tools/_runner.py NAME < arguments.json

The workspace holds this file and ``.rlwb_tools/NAME.py``, the user's source, which defines
``run(arguments)`` returning the result (text, or anything JSON can write) and may raise
``ToolError(code, message)`` (the name is given to the source) for one of the tool's
declared error codes. What the function prints is kept off the real stdout; the result is
written to ``.rlwb_tools/_result.json``, ``{"output": text}`` or ``{"error": {"code": ...,
"message": ...}}`` (any other exception is the code "tool_error"): a file, so a long result
is never cut by the sandbox's output limit. Copied into the sandbox as text
(`domains.user.episodes`), so it imports nothing of the project.
"""

import contextlib
import io
import json
import sys

MAX_OUTPUT_CHARS = 100_000


class ToolError(Exception):
    """Raised by a user's tool for a declared failure: `code` and a message for the model."""

    def __init__(self, code, message=""):
        super().__init__(message)
        self.code = str(code)


def _result(name: str, arguments: dict) -> dict:
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            namespace: dict = {"__name__": "user_tool", "ToolError": ToolError}
            with open(f".rlwb_tools/{name}.py", encoding="utf-8") as f:
                exec(compile(f.read(), f"{name}.py", "exec"), namespace)  # noqa: S102 - the user's own code, sandboxed
            value = namespace["run"](arguments)
    except ToolError as e:
        return {"error": {"code": e.code, "message": str(e)[:1000]}}
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: the call failed
        return {"error": {"code": "tool_error", "message": f"run() raised {type(e).__name__}: {e}"[:1000]}}
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            text = str(value)
    return {"output": text[:MAX_OUTPUT_CHARS]}


def main() -> None:
    arguments = json.loads(sys.stdin.read() or "{}")
    result = _result(sys.argv[1], arguments)
    with open(".rlwb_tools/_result.json", "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
