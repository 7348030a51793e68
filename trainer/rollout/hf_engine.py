"""`HFEngine`: the fallback rollout engine on transformers ``generate``.

For machines where vLLM does not install or start (``rollout_engine: hf``). It keeps the
model in this process, so a weight update is a plain ``load_state_dict``.

Logprobs are those of the distribution each token was sampled from, as `VLLMEngine`'s
(``logprobs_mode="processed_logprobs"``): log-softmax of the logits divided by the sampling
temperature T and, with top_p < 1, renormalised over the top-p nucleus; greedy decoding
(T = 0) gives raw (T = 1) logprobs. The learner scores tokens at the same T (without top-p).
`generate` applies temperature and top-p itself, as logits processors, and records the
log-softmax of their output: the very scores transformers samples from. `score` runs a
forward pass and returns raw logprobs.

Generation stops at every end-of-sequence id: the tokenizer's eos and those of the model's
``generation_config`` (`eos_token_ids`), as vLLM and transformers' own defaults do.

Not covered: KV-cache reuse across requests, continuous batching, or any speed-up beyond
padded ``generate`` calls over micro-batches of prompts; it is the slower engine (see
``bench/rollout_throughput.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from core.errors import EngineError
from trainer.rollout.base import GroupCallback, RolloutEngine, deliver
from trainer.types import Completion

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def eos_token_ids(tokenizer, generation_config) -> list[int]:
    """Every id that ends a completion: the tokenizer's eos, then those of the model's
    generation config (``eos_token_id``, an int or a list, e.g. Llama 3's ``<|eot_id|>``
    beside ``<|end_of_text|>``). Empty when neither names one."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    extra = generation_config.eos_token_id
    for i in [extra] if isinstance(extra, int) else list(extra or []):
        if int(i) not in ids:
            ids.append(int(i))
    return ids


class _LogprobRecorder:
    """Logits processor that records the logprob of each sampled token under the scores it
    was sampled from.

    transformers runs user logits processors after its own penalties and before its
    sampling warpers; `HFEngine` puts its temperature and top-p warpers in front of this one
    and leaves transformers' off, so `__call__` sees the final scores of each step. It keeps
    one step's log-softmax, (B, vocab), and reads the sampled token's entry off the next
    call's ``input_ids``; `finish` reads the last step's from the returned sequences.
    """

    def __init__(self) -> None:
        self._prev: torch.Tensor | None = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self._prev is not None:
            self._steps.append(self._prev.gather(-1, input_ids[:, -1:])[:, 0])
        self._prev = scores.float().log_softmax(-1)
        return scores

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        """(B, steps) float32 logprobs; column t belongs to generated token t."""
        if self._prev is None:
            return torch.zeros(sequences.shape[0], 0)
        self._steps.append(self._prev.gather(-1, sequences[:, -1:])[:, 0])
        return torch.stack(self._steps, dim=1).cpu()


class HFEngine(RolloutEngine):
    """Rollouts with `transformers` in this process.

    Args:
        model_path: HF checkpoint directory.
        seed: seed of the engine's own random stream (the global torch RNG is left alone).
        dtype: "float32" or "bfloat16".
        device: torch device; None picks "cuda" when available, else "cpu".
        score_batch: sequences per forward pass in `score` (bounds memory: the pass
            materialises (score_batch, T, vocab) logits).
        gen_batch: prompts per ``generate`` call (each expands to n sequences); smaller
            batches waste less compute on padding and on sequences that already stopped.

    Raises:
        EngineError: unknown dtype, or the checkpoint does not load.
    """

    name = "hf"

    def __init__(
        self,
        model_path: str | Path,
        seed: int = 0,
        dtype: str = "float32",
        device: str | None = None,
        score_batch: int = 8,
        gen_batch: int = 32,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in _DTYPES:
            raise EngineError(f"dtype must be one of {tuple(_DTYPES)}, got {dtype!r}")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
            self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=_DTYPES[dtype])
        except (OSError, ValueError) as e:
            raise EngineError(f"transformers could not load {model_path}: {e}") from e
        self.model.to(self.device).eval()
        self.window = getattr(self.model.config, "max_position_embeddings", None)
        self.score_batch = score_batch
        self.gen_batch = gen_batch
        self.eos_ids = eos_token_ids(self.tokenizer, self.model.generation_config)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
            else (self.eos_ids or [None])[0]
        with torch.random.fork_rng(devices=self._rng_devices()):
            torch.manual_seed(seed)
            self._rng = self._get_rng()

    def reseed(self, seed: int) -> None:
        """`RolloutEngine.reseed`: the private stream restarts from `seed`; the calls that
        follow draw from it in order (the batches of one call share it)."""
        super().reseed(seed)
        with torch.random.fork_rng(devices=self._rng_devices()):
            torch.manual_seed(seed)
            self._rng = self._get_rng()

    # -- private random stream: generate() draws from it, not from the global RNG ----------
    def _rng_devices(self) -> list:
        return [self.device] if self.device.type == "cuda" else []

    def _get_rng(self) -> tuple:
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        return torch.get_rng_state(), cuda

    def _set_rng(self, state: tuple) -> None:
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], self.device)

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
        """Sample `n` completions per prompt, `gen_batch` prompts per ``generate`` call.

        See `RolloutEngine.generate`. Logprobs are those of the distribution each token was
        sampled from (logits / `temperature`, renormalised over the `top_p` nucleus; raw for
        greedy), read from the very scores it was sampled from. A completion ends at the
        first of `eos_token_ids` (finish "stop", the id kept, its text left out of ``text``).
        `on_group` gets the groups of each ``generate`` call as it returns. `seeds` (one per
        prompt) restart the private stream from the first: transformers samples a batch from
        one generator, so prompts can't be seeded one by one.
        """
        if seeds is not None and temperature > 0 and prompts:
            HFEngine.reseed(self, int(seeds[0]))
        result: list[list[Completion]] = []
        for start in range(0, len(prompts), self.gen_batch):
            batch = self._generate_batch(prompts[start:start + self.gen_batch], n, max_new_tokens, temperature, top_p)
            deliver(batch, None if on_group is None else (lambda i, g, at=start: on_group(at + i, g)))
            result += batch
        return result

    @torch.no_grad()
    def _generate_batch(self, prompts, n, max_new_tokens, temperature, top_p):
        """One left-padded ``generate`` call; returns len(prompts) groups of n."""
        from transformers import GenerationConfig, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        sample = temperature > 0
        # transformers refuses num_return_sequences > 1 when greedy; greedy copies are equal.
        per_prompt, copies = (n, 1) if sample else (1, n)
        # Temperature and top-p run as our processors, ahead of the recorder, so it records the
        # scores sampled from; transformers' own warpers stay off (1.0), and top_k 0 is off too
        # (transformers would otherwise default to 50, vLLM applies none).
        warpers = []
        if sample and temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(temperature))
        if sample and top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p))
        config = GenerationConfig(
            do_sample=sample,
            temperature=1.0 if sample else None,
            top_p=1.0 if sample else None,
            top_k=0 if sample else None,
            max_new_tokens=max_new_tokens,
            num_return_sequences=per_prompt,
            eos_token_id=self.eos_ids or None,
            pad_token_id=self.pad_id,
        )
        recorder = _LogprobRecorder()
        with torch.random.fork_rng(devices=self._rng_devices()):
            self._set_rng(self._rng)
            out = self.model.generate(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                generation_config=config, logits_processor=LogitsProcessorList([*warpers, recorder]),
            )
            self._rng = self._get_rng()
        logprobs = recorder.finish(out).tolist()  # (B*per_prompt, new tokens)
        new = out[:, width:].tolist()  # grouped by prompt: row // per_prompt

        stops = set(self.eos_ids)
        result: list[list[Completion]] = [[] for _ in prompts]
        for row, (seq, lps) in enumerate(zip(new, logprobs)):
            cut = next((i + 1 for i, t in enumerate(seq) if t in stops), None)
            reason = "length" if cut is None else "stop"
            seq, lps = seq[:cut], lps[:cut]
            # as vLLM: the stop token is kept in the ids but not in the text
            text = self.tokenizer.decode(seq[:-1] if reason == "stop" else seq, skip_special_tokens=True)
            for _ in range(copies):
                result[row // per_prompt].append(Completion(list(seq), list(lps), text, reason))
        return result

    @torch.no_grad()
    def _logprobs(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        """Raw logprobs of each completion given its prompt, by right-padded forward passes."""
        result: list[list[float]] = []
        for start in range(0, len(pairs), self.score_batch):
            chunk = pairs[start:start + self.score_batch]
            width = max(len(p) + len(c) for p, c in chunk)
            ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, (p, c) in enumerate(chunk):
                ids[i, : len(p) + len(c)] = torch.tensor(p + c, dtype=torch.long)
                mask[i, : len(p) + len(c)] = 1
            logits = self.model(input_ids=ids.to(self.device),
                                attention_mask=mask.to(self.device)).logits
            for i, (p, c) in enumerate(chunk):
                if not c:
                    result.append([])
                    continue
                # logits at t predict token t+1: positions len(p)-1 .. len(p)+len(c)-2
                rows = logits[i, len(p) - 1 : len(p) + len(c) - 1].float().log_softmax(-1)
                target = torch.tensor(c, device=rows.device)[:, None]
                result.append(rows.gather(-1, target)[:, 0].tolist())
        return result

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy HF-named tensors into the model (a subset is fine; dtype is cast on copy).

        Raises:
            EngineError: a name is not a parameter of the model, or a shape differs.
        """
        state = {k: v.detach() for k, v in named_tensors}
        try:
            result = self.model.load_state_dict(state, strict=False)
        except RuntimeError as e:  # size mismatch
            raise EngineError(f"weight update does not fit the model: {e}") from e
        if result.unexpected_keys:
            raise EngineError(
                f"weight update has names the model lacks: {result.unexpected_keys[:5]}"
            )

    def score(self, prompt: list[int], completion: list[int]) -> list[float]:
        """Raw logprobs (nats) of `completion` given `prompt`, length len(completion)."""
        return self._logprobs([(list(prompt), list(completion))])[0]

    def close(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.model = None
