"""Fixtures for the sandbox tests: a real Docker engine (skipped where none runs, unless
RLWB_REQUIRE_DOCKER=1, as in CI, where a missing engine fails the tests instead)."""

import os
import uuid

import pytest


@pytest.fixture(scope="session")
def docker_engine():
    """The Docker client, with the rlwb-sandbox image present."""
    from backend.errors import SandboxUnavailable
    from sandboxes.docker_backend import docker_client, find_image
    from sandboxes.spec import DEFAULT_IMAGE

    try:
        client = docker_client()
        if find_image(client, DEFAULT_IMAGE) is None:
            raise SandboxUnavailable(f"image {DEFAULT_IMAGE} missing: run `rlwb sandbox build-image`")
    except SandboxUnavailable as e:
        if os.environ.get("RLWB_REQUIRE_DOCKER") == "1":
            pytest.fail(f"RLWB_REQUIRE_DOCKER=1 but Docker is unusable: {e}")
        pytest.skip(f"no usable Docker engine here: {e}")
    return client


@pytest.fixture
def test_label():
    """A label unique to one test, so its containers can be counted afterwards."""
    return {"rlwb.test": uuid.uuid4().hex[:10]}


def containers_with(client, labels: dict) -> list:
    """Containers (any state) carrying all of `labels`."""
    return client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]})
