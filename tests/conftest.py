"""Shared fixtures. Keep this file small: one fixture per shared resource."""

import os
from pathlib import Path

import pytest

# A fresh store means "never validated" in these tests: the validation reports shipped with
# the built-in domains (domains/validations.json) are tested on their own
# (tests/domains/test_shipped_validations.py), which point this variable at them.
os.environ.setdefault("RLWB_SHIPPED_VALIDATIONS", "none")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama checkpoint + tokenizer (built once per session, ~4 s)."""
    from trainer.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tiny_model_2k_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny checkpoint with a 2048-token window (its config's max_position_embeddings;
    RoPE runs past the 1024 positions it was built with), for mixes whose prompts need more
    than 1024 of its tokens (humaneval's reach ~1,000 with its ~1000-token vocabulary)."""
    from trainer.tiny import with_window

    return with_window(tiny_model_dir, tmp_path_factory.mktemp("tiny-2k") / "model", 2048)


TINY_RUN_STEPS = 3


@pytest.fixture(scope="session")
def tiny_run(tiny_model_dir, tmp_path_factory) -> tuple[Path, str]:
    """A real 3-step GRPO run of the tiny model: vLLM rollouts, DeepSpeed learner, SQLite store.

    Returns:
        (database path, run id). Shared by the end-to-end and page tests.
    """
    from trainer.config import parse_config
    from backend.runs import run_foreground
    from backend.store import Store

    root = tmp_path_factory.mktemp("tiny-run")
    cfg = parse_config({
        "name": "tiny-e2e", "model": str(tiny_model_dir), "steps": TINY_RUN_STEPS,
        "domains": ["basic_arithmetic", "chain_sum", "letter_counting"],
        "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 16,
        "learning_rate": 1e-3, "kl_coef": 0.05, "checkpoint_every": 2, "eval_tasks_per_domain": 2,
        "eval_max_new_tokens": 8, "eval_every": 2, "vllm_compile": False, "output_dir": str(root / "out"),
    })
    db = root / "run.db"
    with Store(db) as store:
        run_id = run_foreground(cfg, store)
    return db, run_id


@pytest.fixture(scope="session")
def docker_engine():
    """The Docker client, with the rlwb-sandbox image present. Skipped where no engine runs,
    unless RLWB_REQUIRE_DOCKER=1 (as in CI), where a missing engine fails instead."""
    from core.errors import SandboxUnavailable
    from sandboxes.docker_backend import docker_client, find_image
    from sandboxes.spec import DEFAULT_IMAGE

    try:
        from sandboxes.image import recipe_hash

        client = docker_client()
        image = find_image(client, DEFAULT_IMAGE)
        if image is None:
            raise SandboxUnavailable(f"image {DEFAULT_IMAGE} missing: run `rlwb sandbox build-image`")
        if image.labels.get("rlwb.recipe") != recipe_hash():
            raise SandboxUnavailable(f"image {DEFAULT_IMAGE} is from an older recipe: run `rlwb sandbox build-image`")
    except SandboxUnavailable as e:
        if os.environ.get("RLWB_REQUIRE_DOCKER") == "1":
            pytest.fail(f"RLWB_REQUIRE_DOCKER=1 but Docker is unusable: {e}")
        pytest.skip(f"no usable Docker engine here: {e}")
    return client
