"""Runs a user's reward function on one reply inside a sandbox (never in the trainer).

    python3 -I reward_runner.py < job.json      # job: {"nonce", "reply", "answer", "row"}

The workspace holds this file and ``reward_fn.py``, the user's source, which defines
``reward(reply, answer, row)`` returning a number in [0, 1] or ``(number, breakdown dict)``.
What the function prints is kept off the real stdout; the last line printed is the nonce
followed by ``{"reward": r, "breakdown": {...}}`` or ``{"error": "..."}`` (it raised, exited,
returned NaN, 7 or a string). Copied into the sandbox as text (`domains.user.domain`), so it
imports nothing of the project.
"""

import contextlib
import io
import json
import math
import sys


def _result(job: dict) -> dict:
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            namespace: dict = {"__name__": "reward_fn"}
            with open("reward_fn.py", encoding="utf-8") as f:
                exec(compile(f.read(), "reward_fn.py", "exec"), namespace)  # noqa: S102 - the user's own code, sandboxed
            fn = namespace.get("reward")
            if not callable(fn):
                return {"error": "the source defines no function reward(reply, answer, row)"}
            value = fn(job["reply"], job["answer"], job["row"])
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: all score 0
        return {"error": f"reward() raised {type(e).__name__}: {e}"[:300]}
    breakdown: dict = {}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        value, breakdown = value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        return {"error": f"reward() returned {str(value)[:60]!r}, not a number in [0, 1]"}
    try:
        text = json.dumps(breakdown)
    except (TypeError, ValueError):
        text = "{}"
    return {"reward": float(value), "breakdown": json.loads(text) if len(text) < 4000 else {}}


def main() -> None:
    job = json.loads(sys.stdin.read())
    print(job["nonce"] + json.dumps(_result(job)), flush=True)


if __name__ == "__main__":
    main()
