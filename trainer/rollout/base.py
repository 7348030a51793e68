"""The `RolloutEngine` interface: sample G completions per prompt, take new weights in place.

Two implementations sit behind it: `trainer.rollout.vllm_engine.VLLMEngine` (the default,
vLLM's CPU build here and the same code on GPUs) and `trainer.rollout.hf_engine.HFEngine`
(transformers `generate`, for machines without vLLM). Use `open_engine` to pick one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

import torch

from trainer.types import Completion

DEFAULT_KV_SEQUENCES = 32  # KV cache room on CPU when not sized by the caller: this many full windows
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


class RolloutEngine(ABC):
    """Generates completions with the current policy.

    Engines are seeded once at construction (vLLM's CPU build crashes on per-request seeds).

    Attributes:
        window: prompt + completion tokens one request may hold (vLLM's ``max_model_len``,
            the model's positions for transformers); None when the engine doesn't say.
            Callers keep ``len(prompt) + max_new_tokens`` within it (`trainer.window`).
    """

    name: str = "base"
    window: int | None = None

    @abstractmethod
    def generate(
        self,
        prompts: list[list[int]],
        n: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        on_group: GroupCallback | None = None,
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
