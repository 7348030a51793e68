"""`VLLMEngine`: the rollout engine on vLLM (the CPU build here, the same code on GPUs).

This is the only module in the workbench that imports ``vllm``. It runs vLLM's engine
*in process* (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set before the import): that is what
lets `update_weights` hand tensors straight to the worker through ``collective_rpc`` and
reload them in place, without restarting the engine or writing a checkpoint.

Logprobs: the engine is created with ``logprobs_mode="processed_logprobs"``, so a sampled
token's logprob is of the distribution vLLM drew it from: log-softmax of the logits divided
by the sampling temperature T and, with top_p < 1, renormalised over the top-p nucleus
(greedy requests, T = 0, get raw T = 1 logprobs). The learner scores tokens at the same T,
so with top_p = 1 the importance ratio pi_new / pi_old starts at 1; it applies no top-p, so
with top_p < 1 each token's ratio starts at the nucleus mass, between top_p and 1.
Prompt logprobs (`score`) are raw in this mode too. On GPUs this mode samples with vLLM's
native PyTorch sampler instead of FlashInfer's (which can't return processed logprobs).

Stop tokens: vLLM reads the model's ``generation_config.json`` (``generation_config="auto"``,
its default) and stops at each of its ``eos_token_id`` ids as well as the tokenizer's eos,
with finish reason "stop"; the stop id is kept in the token ids and left out of the text.

Tensor parallelism (``tensor_parallel_size`` N > 1) runs on N GPUs: vLLM then starts N
worker processes, and `update_weights` sends the weights to each of them (pickled through
vLLM's message queue rather than handed over in process). Not covered: tensor parallelism
on the CPU build (refused: the CPU path is tested with 1) and LoRA adapters in the engine.

Sleep (`VLLMEngine.sleep`): vLLM's own sleep mode needs CUDA's memory pool, and its CPU
build only logs "not supported". Here the engine releases on the CPU what it holds for
generation alone (each linear layer's packed weight, the other parameters' storage, the KV
cache) while the learner trains in the same process, and the next `update_weights` gives
the storage back and reloads every weight into it; in between it refuses to generate.

Seeds: after `RolloutEngine.reseed` each request carries its own seed (vLLM's per-request
generator), derived from the reseed, the call and the prompt's index, so a request samples
the same tokens whatever else the engine holds in its batch (checked on vLLM 0.32's CPU
build: same seeds, same completions; the earlier note that it crashed on them no longer holds).
A script using it needs an ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

# In-process engine core: required for in-place weight updates via collective_rpc on CPU.
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
# vLLM's CPU build drops torch to 1 thread for serving unless OMP_NUM_THREADS is set; the
# learner shares this process and needs every core (measured: 7x slower step on 1 thread).
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
# vLLM 0.32 on torch 2.13 saves its compiled model through torch's AOT path but can't load
# it back ("'function' object has no attribute 'finalize_loading'"), so every engine start
# compiled from scratch (~125 s here). The older compile cache reloads: ~60 s from the
# second start on (measured with the quickstart model).
os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
# Keep the CLI's progress bar readable; RLWB users can still set VLLM_LOGGING_LEVEL=INFO.
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402
from vllm.sampling_params import RequestOutputKind  # noqa: E402
from vllm.platforms import current_platform  # noqa: E402

from core.errors import EngineError  # noqa: E402
from trainer.rollout.base import (DEFAULT_KV_SEQUENCES, KV_BLOCK_TOKENS, GroupCallback, RolloutEngine,  # noqa: E402
                                  kv_bytes_per_token, kv_memory_problem)
from trainer.types import Completion  # noqa: E402

_DTYPES = ("float32", "bfloat16")
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


class _RotaryReloadFilter(logging.Filter):
    """Drops vLLM's "RotaryEmbedding: Failed to load weights" warning, logged at every in-place
    weight update: the rotary cache is computed from the config, never loaded (an HF state
    dict holds no such tensor), so the warning is always true and never a problem. Every other
    record of that logger passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "%s: Failed to load weights" and record.args == ("RotaryEmbedding",))


logging.getLogger(RELOAD_LOGGER).addFilter(_RotaryReloadFilter())
# KV cache block (tokens); see `VLLMEngine`'s ``block_size`` and bench/rollout_throughput.py.
DEFAULT_BLOCK_SIZE = KV_BLOCK_TOKENS


def _reload_on_worker(worker, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
    """Runs inside the vLLM worker: reload its model weights in place (HF names)."""
    worker.reload_weights(weights_iterator=iter(weights))


SLEEP_STATE = "_rlwb_sleep"  # on the worker: what `_sleep_on_worker` released, for `_wake_on_worker`


def _asleep_linear(x, weight, bias):
    raise RuntimeError("the rollout engine is asleep: its packed weights were released (VLLMEngine.sleep); "
                       "update_weights loads them again")


def _sleep_on_worker(worker) -> None:
    """Runs inside the vLLM worker (CPU): free the model's weights and KV cache.

    vLLM's CPU build keeps most weights outside its parameters: each linear layer packs its
    weight for oneDNN (or sgl's kernel) in a closure, ``layer.cpu_linear``, and leaves an empty
    parameter behind. Those closures are dropped here (the in-place reload packs new ones),
    and the storages of the remaining parameters (embeddings, norms) and of the KV cache are
    resized to 0 bytes; `_wake_on_worker` gives them back their size. Buffers (rotary caches:
    computed from the config, never loaded) are kept."""
    runner = worker.model_runner
    model = runner.get_model()

    def storages(tensors) -> list[tuple[torch.UntypedStorage, int]]:
        found: dict[int, torch.UntypedStorage] = {}
        for t in tensors:
            st = t.untyped_storage()
            if st.nbytes() and st.resizable():
                found.setdefault(st.data_ptr(), st)
        return [(st, st.nbytes()) for st in found.values()]

    # a KV cache still released from the sleep before (no generate since the sync) stays in the state
    kept = getattr(worker, SLEEP_STATE, None) or {}
    for part, tensors in (("weights", model.parameters()), ("kv", runner.kv_caches)):
        kept.setdefault(part, []).extend(storages(tensors))
    for layer in model.modules():
        if getattr(layer, "cpu_linear", None) is not None:
            layer.cpu_linear = _asleep_linear
    for part in kept.values():
        for st, _ in part:
            if st.nbytes():
                st.resize_(0)
    setattr(worker, SLEEP_STATE, kept)


def _wake_on_worker(worker, part: str) -> None:
    """Runs inside the vLLM worker: give `_sleep_on_worker`'s storages of `part` their size back.

    "weights": filled with NaN, so a parameter the reload that follows does not reach is
    caught by `_still_asleep` (never silently garbage); "kv": zeroed, because decoding reads
    a block's unwritten slots (masked, but a NaN there still poisons the logits: with a
    recycling allocator the memory is not fresh zeros)."""
    kept = getattr(worker, SLEEP_STATE, None) or {}
    for st, nbytes in kept.pop(part, ()):
        st.resize_(nbytes)
        view = torch.empty(0, dtype=torch.uint8).set_(st)
        view.fill_(0xFF if part == "weights" else 0)  # 0xFF bytes: a NaN in float32, bfloat16 and float16


def _still_asleep(worker) -> list[str]:
    """Runs inside the vLLM worker: the layers no weight reached since `_sleep_on_worker` (a
    linear layer still without its packed weight) and the parameters still holding `_wake_on_worker`'s NaN."""
    model = worker.model_runner.get_model()
    missing = [name for name, layer in model.named_modules() if getattr(layer, "cpu_linear", None) is _asleep_linear]
    missing += [name for name, p in model.named_parameters()
                if p.numel() and p.is_floating_point() and bool(torch.isnan(p).all())]
    return missing


def _check_tensor_parallel(size) -> None:
    """Raise EngineError unless `size` GPUs are there for vLLM's tensor parallelism (1: any
    machine)."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise EngineError(f"tensor_parallel_size must be a positive integer, got {size!r}")
    if size == 1:
        return
    if current_platform.is_cpu():
        raise EngineError(f"tensor_parallel_size {size} needs {size} GPUs, but this vLLM runs on the CPU; "
                          "set tensor_parallel_size: 1")
    visible = torch.cuda.device_count()
    if visible < size:
        raise EngineError(f"tensor_parallel_size {size} needs {size} GPUs, but {visible} are visible "
                          f"(CUDA_VISIBLE_DEVICES); set tensor_parallel_size: {max(visible, 1)} or free GPUs")


class VLLMEngine(RolloutEngine):
    """Rollouts on an in-process `vllm.LLM`.

    Args:
        model_path: HF checkpoint directory (see `trainer.models.resolve_model`).
        seed: engine seed; sampling is reproducible for the same request sequence.
        dtype: "float32" or "bfloat16" (faster only on CPUs with native bf16, e.g. avx512_bf16).
        max_model_len: prompt + completion cap in tokens.
        gpu_memory_utilization: fraction of device memory for weights + KV cache; on the
            CPU build the most of RAM the KV cache may take (it must be free when the engine
            starts). None picks 0.3 on CPU, 0.85 on GPU.
        kv_cache_tokens: on CPU, the KV cache is sized to hold this many tokens
            (`kv_bytes_per_token` each: 46 KB for SmolLM2-135M in float32), capped at
            `gpu_memory_utilization` of RAM, and passed to vLLM as ``kv_cache_memory_bytes``;
            sequences beyond it wait their turn. None: ``DEFAULT_KV_SEQUENCES`` full windows
            (32 x 1024 tokens, 1.5 GB for SmolLM2-135M) instead of a share of RAM (7 GB of a
            24 GB machine). Ignored on GPU, where vLLM sizes it from `gpu_memory_utilization`.
        enable_prefix_caching: reuse KV cache across requests sharing a prefix (the G
            samples of a group share their prompt).
        enforce_eager: skip torch.compile at start-up. On this CPU compiling SmolLM2 takes
            ~125 s at the first engine start and ~50-60 s from the second on (vLLM's
            compile cache; see VLLM_USE_AOT_COMPILE above) and buys faster decoding;
            eager starts in seconds.
        block_size: KV cache block size in tokens. Prefix caching only shares *full*
            blocks, so with vLLM's CPU default (128) a prompt shorter than 128 tokens is
            prefilled once per sample; 32 (the smallest size vLLM's CPU attention takes:
            multiples of 32) lets the G samples of a group, and every prompt sharing the
            chat template's system prompt, reuse all but the prompt's last < 32 tokens.
            None keeps vLLM's default.
        max_num_seqs: sequences decoded together per step (vLLM's CPU default is 256).
            None keeps vLLM's default.
        max_num_batched_tokens: token budget of one engine step (prefill chunks plus one
            token per decoding sequence; vLLM's CPU default is 4096). None keeps vLLM's.
        tensor_parallel_size: GPUs the model is split over (Megatron-style tensor
            parallelism, Shoeybi et al. 2019, arXiv:1909.08053); 1 on CPU.

    Raises:
        EngineError: unknown dtype, tensor_parallel_size above the GPUs visible (or above 1
            on CPU), or vLLM failed to start (the message names the fix).
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        seed: int = 0,
        dtype: str = "float32",
        max_model_len: int = 1024,
        gpu_memory_utilization: float | None = None,
        kv_cache_tokens: int | None = None,
        enable_prefix_caching: bool = True,
        enforce_eager: bool = False,
        block_size: int | None = DEFAULT_BLOCK_SIZE,
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
        tensor_parallel_size: int = 1,
    ) -> None:
        if dtype not in _DTYPES:
            raise EngineError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        _check_tensor_parallel(tensor_parallel_size)
        for field, value in (("block_size", block_size), ("max_num_seqs", max_num_seqs),
                             ("max_num_batched_tokens", max_num_batched_tokens)):
            if value is not None and value < 1:
                raise EngineError(f"{field} must be a positive integer or None, got {value!r}")
        sched = {k: v for k, v in (("block_size", block_size), ("max_num_seqs", max_num_seqs),
                                   ("max_num_batched_tokens", max_num_batched_tokens)) if v is not None}
        if gpu_memory_utilization is None:
            gpu_memory_utilization = 0.3 if current_platform.is_cpu() else 0.85
        if current_platform.is_cpu():
            # vLLM's CPU worker reads the fraction as a budget for the whole process (its RSS
            # counts against it): in a big process (a learner, a test session) a small fraction
            # leaves a negative KV cache. Ask for the KV cache itself, sized to the work.
            import psutil

            tokens = kv_cache_tokens or DEFAULT_KV_SEQUENCES * max_model_len
            if tokens < max_model_len:
                raise EngineError(f"kv_cache_tokens ({tokens}) must hold at least one sequence of max_model_len "
                                  f"({max_model_len}) tokens")
            ram = psutil.virtual_memory().total
            problem = kv_memory_problem(gpu_memory_utilization, max_model_len, model_path, dtype, ram)
            if problem:
                raise EngineError(problem)
            cap = int(gpu_memory_utilization * ram)
            sched["kv_cache_memory_bytes"] = min(cap, tokens * kv_bytes_per_token(model_path, dtype))
        self.model_path = Path(model_path)
        self.max_model_len = self.window = max_model_len
        self._calls = 0  # generate calls: request ids are "rlwb-<call>-<prompt>"
        self._asleep = False  # `sleep` released the weights and KV cache; `update_weights` loads them again
        self._kv_asleep = False  # weights back, KV cache not yet: zeroed at the next generate or score
        try:
            self._llm = LLM(
                model=str(model_path),
                dtype=dtype,
                seed=seed,
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
                enable_prefix_caching=enable_prefix_caching,
                logprobs_mode="processed_logprobs",
                enforce_eager=enforce_eager,
                tensor_parallel_size=tensor_parallel_size,
                **sched,
            )
        except Exception as e:  # vLLM raises many types at start-up
            raise EngineError(
                f"vLLM could not start on {model_path}: {e}; free memory (another run may hold its "
                "share), set vllm_memory_fraction to fit (lower where other processes hold the memory, "
                "higher where the KV cache can't hold one sequence of the window), or use rollout_engine: hf"
            ) from e

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
        """Sample `n` completions per prompt; see `RolloutEngine.generate`.

        Logprobs are of the distribution each token was sampled from (logits / `temperature`,
        renormalised over the `top_p` nucleus; raw for greedy); see the module docstring. The
        requests go through vLLM's engine step by step (as ``LLM.generate`` runs them, so
        the samples are the same), and `on_group` gets each prompt's group the step it
        finishes, while the others still generate.
        """
        self._check_awake()
        # vLLM refuses n > 1 with greedy decoding; the n greedy completions are identical.
        greedy_copies = n if temperature == 0.0 else 1
        params = SamplingParams(
            n=n // greedy_copies,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_new_tokens,
            logprobs=0,  # only the sampled token's logprob
            skip_special_tokens=True,
            output_kind=RequestOutputKind.FINAL_ONLY,  # a group's outputs once, when all n are done
        )
        engine = self._llm.llm_engine
        self._calls += 1
        ids = [f"rlwb-{self._calls}-{i}" for i in range(len(prompts))]
        index = {rid: i for i, rid in enumerate(ids)}
        result: list[list[Completion] | None] = [None] * len(prompts)
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"seeds: one per prompt, got {len(seeds)} for {len(prompts)} prompts")
        if temperature == 0.0:
            seeds = None
        elif seeds is None:
            seeds = self.prompt_seeds(temperature, len(prompts))
        per_request = [params] * len(prompts)
        if seeds is not None:  # after `reseed`: each request its own generator (vLLM's per-request seed)
            per_request = [params.clone() for _ in prompts]
            for p, seed in zip(per_request, seeds):
                p.seed = int(seed)
        try:
            for rid, p, sp in zip(ids, prompts, per_request):  # as LLM.generate adds them: same order, same samples
                engine.add_request(rid, TokensPrompt(prompt_token_ids=list(p)), sp)
            while engine.has_unfinished_requests():  # LLM.generate's loop, with a hook per group
                for out in engine.step():
                    i = index.get(out.request_id)
                    if out.finished and i is not None:  # (requests of an interrupted call: not ours)
                        result[i] = self._group(out, greedy_copies)
                        if on_group is not None:
                            on_group(i, result[i])
        except BaseException:
            engine.abort_request([rid for rid, group in zip(ids, result) if group is None])
            raise
        return result

    @staticmethod
    def _group(out, copies: int) -> list[Completion]:
        group = []
        for c in sorted(out.outputs, key=lambda c: c.index):
            ids = list(c.token_ids)
            lps = [step[t].logprob for t, step in zip(ids, c.logprobs)]
            if c.finish_reason not in ("stop", "length"):
                raise EngineError(f"vLLM finished a request with {c.finish_reason!r}")
            for _ in range(copies):
                group.append(Completion(list(ids), list(lps), c.text, c.finish_reason))
        return group

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Reload weights in place from HF-named tensors, then drop the prefix cache.

        Pass the *full* state dict (or at least every tensor of each module touched):
        vLLM fuses q/k/v and gate/up projections, and a fused module that receives only
        some of its parts is rebuilt with the rest uninitialised. Tensors are cast to the
        engine's dtype on copy. After `sleep` it gives the weights and KV cache their memory
        back first; every weight must come then.

        Raises:
            EngineError: if the worker rejects a name or shape, or after `sleep` a linear layer
                or a parameter got no weight (the engine stays asleep).
        """
        # a generator, not a list: the engine runs in this process, so vLLM reloads each
        # tensor as it comes; a LoRA learner merges one weight at a time and a list would
        # hold a whole merged copy of the model (~0.5 GB for SmolLM2-135M) at once
        weights = ((k, v.detach()) for k, v in named_tensors)
        try:
            if self._asleep:  # storage back (NaN), then every weight loaded into it; the KV cache at the next use
                self._llm.collective_rpc(_wake_on_worker, args=("weights",))
            self._llm.collective_rpc(_reload_on_worker, args=(weights,))
            missing = self._llm.collective_rpc(_still_asleep)[0] if self._asleep else []
        except Exception as e:
            raise EngineError(f"vLLM rejected the weight update: {e}") from e
        if missing:
            raise EngineError(f"the weight update after sleep() left {len(missing)} layers without weights (e.g. "
                              f"{missing[0]}); pass the whole state dict")
        if self._asleep:
            self._asleep, self._kv_asleep = False, True
        self._llm.reset_prefix_cache()

    def sleep(self) -> bool:
        """Release the engine's weights and KV cache until the next `update_weights` (see
        `RolloutEngine.sleep`): on the CPU build, which lacks vLLM's own sleep mode, the
        packed weights of every linear layer, the storage of the other parameters and the KV
        cache (SmolLM2-135M in float32 with the quickstart's KV cache: about 0.9 GiB of the
        process once it runs). On GPUs it does nothing and returns False (vLLM's sleep mode
        needs ``enable_sleep_mode`` at start and is not wired here).

        Raises:
            EngineError: the worker could not release them (the engine is then unusable until a
                full `update_weights`).
        """
        if not current_platform.is_cpu() or self._llm is None:
            return False
        if self._asleep:
            return True
        self._asleep = True  # from here on a half-released model must not generate
        try:
            self._llm.collective_rpc(_sleep_on_worker)
        except Exception as e:
            raise EngineError(f"vLLM could not release its memory: {e}; load weights with update_weights") from e
        gc.collect()
        return True

    def _check_awake(self) -> None:
        """Raise EngineError while asleep; after the weights came back, give the KV cache its
        memory back (zeroed) first: the weight sync's peak doesn't hold it."""
        if self._asleep:
            raise EngineError("the rollout engine is asleep (sleep() released its weights and KV cache); load "
                              "the policy's weights with update_weights before generating")
        if self._kv_asleep:
            self._llm.collective_rpc(_wake_on_worker, args=("kv",))
            self._kv_asleep = False

    def score(self, prompt: list[int], completion: list[int]) -> list[float]:
        """Raw logprobs (nats) of `completion` given `prompt`, length len(completion)."""
        if not completion:
            return []
        self._check_awake()
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        ids = list(prompt) + list(completion)
        (out,) = self._llm.generate([TokensPrompt(prompt_token_ids=ids)], params,
                                    use_tqdm=False)
        plp = out.prompt_logprobs  # position 0 is None (no context)
        return [plp[i][ids[i]].logprob for i in range(len(prompt), len(ids))]

    def close(self) -> None:
        """Shut the engine core down and free its memory so another engine can start."""
        llm = getattr(self, "_llm", None)
        if llm is None:
            return
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        llm.llm_engine.engine_core.shutdown()
        self._llm = None
        del llm
        cleanup_dist_env_and_memory()
        gc.collect()
