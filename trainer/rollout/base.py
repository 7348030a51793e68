"""The `RolloutEngine` interface: sample G completions per prompt, take new weights in place.

Two implementations sit behind it: `trainer.rollout.vllm_engine.VLLMEngine` (the default,
vLLM's CPU build here and the same code on GPUs) and `trainer.rollout.hf_engine.HFEngine`
(transformers `generate`, for machines without vLLM). Use `open_engine` to pick one.
"""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from core.errors import EngineError
from trainer.types import Completion

DEFAULT_KV_SEQUENCES = 32  # KV cache room on CPU when not sized by the caller: this many full windows
KV_BLOCK_TOKENS = 32  # vLLM's KV block on the CPU (`trainer.rollout.vllm_engine.DEFAULT_BLOCK_SIZE`)
MAX_MEMORY_FRACTION = 0.95  # `trainer.config.RunConfig.vllm_memory_fraction`'s bound
KV_FLOOR_TOKENS = 8192  # a run's KV cache holds at least this many tokens (a small run's eval batches: 32 x 256)

#: ``on_group(i, completions)``: prompt i's n completions are done (see `RolloutEngine.generate`).
GroupCallback = Callable[[int, list[Completion]], None]


def deliver(groups: list[list[Completion]], on_group: GroupCallback | None) -> list[list[Completion]]:
    """Hand every group to `on_group` in prompt order (engines that finish all prompts at
    once); returns `groups`."""
    if on_group is not None:
        for i, group in enumerate(groups):
            on_group(i, group)
    return groups


def derive_seed(*parts: int) -> int:
    """A seed in [0, 2**31) that depends on `parts` alone (e.g. a run's seed and a step), the
    same in every process and Python version (blake2b, not the salted built-in `hash`)."""
    digest = hashlib.blake2b(repr(tuple(int(p) for p in parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


class RolloutEngine(ABC):
    """Generates completions with the current policy.

    Engines are seeded at construction; `reseed` makes the sampled calls that follow depend
    on a given seed alone (a run seeds each training step's rollout from (run seed, step), so a
    resumed run samples what the uninterrupted one did).

    Attributes:
        window: prompt + completion tokens one request may hold (vLLM's ``max_model_len``,
            the model's positions for transformers); None when the engine doesn't say.
            Callers keep ``len(prompt) + max_new_tokens`` within it (`trainer.window`).
        sampling_seed: the seed of the last `reseed`, None before any.
    """

    name: str = "base"
    window: int | None = None
    sampling_seed: int | None = None
    _sampled_calls: int = 0

    def reseed(self, seed: int) -> None:
        """From now on, the k-th sampled (temperature > 0) `generate` call samples from a
        stream that depends on (`seed`, k, the prompt's index) alone: not on what the engine
        generated before, nor on the other prompts of the call. Greedy calls don't count."""
        self.sampling_seed, self._sampled_calls = int(seed), 0

    def prompt_seeds(self, temperature: float, count: int) -> list[int] | None:
        """The `count` per-prompt seeds of this sampled call after a `reseed` (and count the
        call), else None: prompt i gets ``derive_seed(call seed, i)``."""
        call_seed = self._call_seed(temperature)
        return None if call_seed is None else [derive_seed(call_seed, i) for i in range(count)]

    def _call_seed(self, temperature: float) -> int | None:
        """The seed of this sampled call after a `reseed` (and count it), else None."""
        if self.sampling_seed is None or temperature == 0.0:
            return None
        self._sampled_calls += 1
        return derive_seed(self.sampling_seed, self._sampled_calls)

    @abstractmethod
    def generate(
        self,
        prompts: list[list[int]],
        n: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        on_group: GroupCallback | None = None,
        seeds: list[int] | None = None,
    ) -> list[list[Completion]]:
        """Sample `n` completions for each prompt.

        Args:
            prompts: B prompts as token id lists (already chat-templated).
            n: completions per prompt (the GRPO group size G); temperature 0 means greedy.
            max_new_tokens: cap on generated tokens per completion.
            temperature: sampling temperature; 0 selects greedy decoding.
            top_p: nucleus sampling mass.
            on_group: called as ``on_group(i, completions)`` once per prompt, in the
                generating thread, as soon as prompt i's n completions are done (an engine
                that batches everything calls it for every prompt at the end): scoring
                and sandbox verification can start while other prompts still generate.
                An exception it raises stops generation and propagates.
            seeds: B per-prompt seeds for this sampled call, used instead of the `reseed`
                stream (a call split over several engines samples as one engine would: see
                `prompt_seeds`); an engine that can't seed each request (transformers)
                restarts its stream from the first. Ignored when greedy.

        Returns:
            B lists of n `Completion`s, in prompt order, each with per-token sampling logprobs:
            of the distribution each token was drawn from, log_softmax(logits / temperature)
            renormalised over the top_p nucleus (raw logprobs when greedy). A completion ends
            at any of the model's end-of-sequence ids (the tokenizer's eos and those of its
            generation config), finish reason "stop", or at `max_new_tokens`, "length".
        """

    @abstractmethod
    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load new policy weights (HF parameter names) into the running engine in place.

        Raises:
            EngineError: if the engine rejects the weights.
        """

    def sleep(self) -> bool:
        """Release the memory the engine needs only to generate, while the learner trains: its
        weights and KV cache (as vLLM's "sleep mode" level 2 does on GPUs; the next
        `update_weights` brings new weights anyway). Until that `update_weights`, which must
        carry every weight, `generate` and `score` raise `EngineError`. This default keeps
        everything (an engine that can't sleep).

        Returns:
            Whether it slept (False: nothing released; the engine stays usable).
        """
        return False

    @abstractmethod
    def score(self, prompt: list[int], completion: list[int]) -> list[float]:
        """Log-probabilities (nats) of `completion` tokens given `prompt` under the current
        weights, length len(completion). Used to check weight sync."""

    def close(self) -> None:
        """Release the engine's processes and memory."""

    def __enter__(self) -> "RolloutEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def kv_bytes_per_token(model_path: str | Path, dtype: str) -> int:
    """Bytes of KV cache one token takes in `model_path`'s model: keys and values of every
    layer, num_key_value_heads x head_dim each, in `dtype` (4 or 2 bytes).

    Raises:
        EngineError: the model's config.json is missing or lacks the layer and head counts.
    """
    try:
        c = json.loads((Path(model_path) / "config.json").read_text())
        heads = int(c["num_attention_heads"])
        head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
        per_token = 2 * int(c["num_hidden_layers"]) * int(c.get("num_key_value_heads") or heads) * head_dim
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EngineError(f"can't size the KV cache from {model_path}/config.json ({type(e).__name__}: {e}); "
                          "pass a model directory with a transformers config") from None
    return per_token * (4 if dtype == "float32" else 2)


def kv_memory_problem(fraction: float, window: int, model_path: str | Path, dtype: str, ram_bytes: int,
                      engines: int = 1) -> str | None:
    """Why a KV cache capped at `fraction` of `ram_bytes` (split between `engines` engines on
    the machine) can't hold one sequence of `window` tokens in each (vLLM's minimum: it
    refuses to start), or None. The sequence is counted in whole KV blocks of `KV_BLOCK_TOKENS`.

    Args:
        fraction: the run's ``vllm_memory_fraction`` (on the CPU: the most of RAM the KV cache may take).
        window: the engine's ``max_model_len`` (tokens).
        dtype: the engine's dtype ("float32": 4 bytes a value, else 2).
        ram_bytes: the machine's RAM (bytes).
        engines: rollout engines sharing the fraction (a private Ray instance's workers).

    Raises:
        EngineError: `model_path`'s config.json can't size the cache (`kv_bytes_per_token`).
    """
    blocks = -(-window // KV_BLOCK_TOKENS)
    need = blocks * KV_BLOCK_TOKENS * kv_bytes_per_token(model_path, dtype)
    if fraction * ram_bytes >= need * engines:
        return None
    least = math.ceil(need * engines / ram_bytes * 1000) / 1000
    each = f" split over {engines} rollout workers on this machine" if engines > 1 else ""
    fix = (f"set vllm_memory_fraction to at least {least:g}" if least <= MAX_MEMORY_FRACTION else
           "it can't fit this machine's RAM (vllm_memory_fraction is at most "
           f"{MAX_MEMORY_FRACTION:g}): shorten the window (max_new_tokens, the mix's longest prompts)"
           + (", use fewer rollout_workers" if engines > 1 else "") + ", or use rollout_engine: hf")
    return (f"vllm_memory_fraction {fraction:g} leaves the KV cache {fraction * ram_bytes / 2**30:.2f} GiB of this "
            f"machine's {ram_bytes / 2**30:.1f} GiB RAM{each}, and one sequence of the run's {window}-token window "
            f"needs {need / 2**30:.2f} GiB in each: {fix}")
