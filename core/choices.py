"""The choice lists of a run, one owner each: the rollout engine, the algorithm and the
sandbox backend.

`trainer.config` types its fields with these `Literal`s; the CLI's ``choices=``,
`backend.evaluation.EvalSettings`, the launch page, `sandboxes.BACKENDS` and
`trainer.rollout.ENGINE_KINDS` read the tuples. A ground module: it imports nothing of the
project (so the CLI can build its parser without loading pydantic). What each choice means
is documented on the `trainer.config.RunConfig` field that takes it.
"""

from __future__ import annotations

from typing import Literal, get_args

Algorithm = Literal["grpo", "dr_grpo", "rloo", "dapo", "gspo", "cispo", "reinforce_pp", "reinforce_pp_baseline"]
EngineKind = Literal["vllm", "hf"]
SandboxBackend = Literal["docker", "local"]

ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
ROLLOUT_ENGINES: tuple[str, ...] = get_args(EngineKind)
SANDBOX_BACKENDS: tuple[str, ...] = get_args(SandboxBackend)
