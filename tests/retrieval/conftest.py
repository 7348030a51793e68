"""Fixtures of the retrieval tests: a policy tokenizer (the tiny model's, trained on the fly)
and the shared MiniLM embedder (loaded once, ~8 s)."""

import pytest


@pytest.fixture(scope="session")
def policy_tokenizer():
    from trainer.tiny import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session")
def embedder():
    from retrieval.embeddings import Embedder

    return Embedder.shared()
