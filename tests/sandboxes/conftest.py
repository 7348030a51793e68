"""Fixtures for the sandbox tests (the Docker engine fixture is in tests/conftest.py)."""

import uuid

import pytest


@pytest.fixture
def test_label():
    """A label unique to one test, so its containers can be counted afterwards."""
    return {"rlwb.test": uuid.uuid4().hex[:10]}


def containers_with(client, labels: dict) -> list:
    """Containers (any state) carrying all of `labels`."""
    return client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]})
