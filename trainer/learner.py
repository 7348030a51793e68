"""The DeepSpeed learner: one policy-gradient step per training step.

The only module that imports deepspeed. It wraps an HF causal LM in a DeepSpeed ZeRO engine
(stage 2 by default) on whatever accelerator DeepSpeed detects: the CPU accelerator here,
CUDA on GPUs, with no code change. A frozen copy of the initial weights is the KL
reference. The loss is `trainer.algorithms.grpo.policy_loss` (token-level aggregation over
the whole step, so micro-batches add up to exactly the full-batch gradient).

Temperature: the run samples at ``temperature`` T, so the policy's and the reference's
logprobs (and the entropy metric) are taken from logits / T, the distribution the rollout
engine sampled from and whose logprobs it returns; with T = 1 they are the raw ones. This
is what TRL's GRPOTrainer (``logits / self.temperature``) and verl's actor
(``logits.div_(temperature)``) do. top_p is not applied here (see `trainer.rollout.vllm_engine`
for what that means for the ratio when top_p < 1).

Batching (`BATCHINGS`): "shared_prefix" (the default) packs each group's prompt once with its
G completions after it and a block attention mask (Prefix Grouper, arXiv:2506.05433), so the
learner and the reference model compute the prompt once per group instead of G times;
"packed" puts whole sequences end to end in each row with position ids that restart at 0 and
no attention mask, so transformers attends within each sequence only; "padded" (the first
path, kept for comparison: ``bench/learner_mfu.py``) right-pads length-sorted micro-batches.
The packed layouts compute logits for the scored completion tokens alone. All three give the
same loss and gradient up to float rounding (tests/trainer/test_packing.py); each packed
layout is checked against the padded one on the model at start-up, and a model whose
attention can't take the shared-prefix mask, or keeps to a sliding window, falls back to
"packed" with a notice.

LoRA (``lora_rank > 0``, Hu et al., 2021, "LoRA", arXiv:2106.09685, through ``peft``): only
the adapters train; the KL reference is the same model with the adapter disabled (no second
copy of the weights); `named_weights` gives the merged weights (W + alpha/r B A) under HF
names for the rollout engine's in-place sync; a checkpoint holds the merged HF weights (what
evaluation and rollouts load) and the adapter in ``adapter/`` (what a resumed run loads onto
the base).

Data parallelism: under a launcher (torchrun sets RANK/WORLD_SIZE) each rank trains on its
share of every step's batch (`LearnerBatch.shard`) and DeepSpeed all-reduces the gradients;
`trainer.learner_group` runs the ranks for a run. Every rank runs as many micro-batches as
the busiest one: a rank short of them repeats one of its own with zero weight (ZeRO-2 buckets
gradients in the order the backward makes them, and ZeRO-3's gathers are collective).

With ZeRO-3 (``zero_stage: 3``; Rajbhandari et al., 2020, "ZeRO", arXiv:1910.02054) the
parameters are partitioned over the ranks too, the frozen KL reference's as well: DeepSpeed
gathers each layer's for its forward and backward, and the weight sync and checkpoints
gather one layer at a time (`zero3_weights`), so no rank holds more than one layer beyond
its partition while they run.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from trainer.config import RunConfig
from core.errors import ConfigError
from trainer import optimizer_state, prefix_attention
from trainer.algorithms.grpo import ALGORITHM_PARTS, LossOutput, policy_loss
from trainer.checkpoints import replace_durably
from trainer.deepspeed_env import ensure_single_process_env
from trainer.logprobs import (check_packing, first_completion_column, packed_token_logprobs, shared_prefix_error,
                              token_logprobs)
from trainer.metrics import PeakRSS
from trainer.types import LearnerBatch, PackedMicroBatch
from trainer.weights import ADAPTER_DIR, merged_weights, saved_adapter, with_adapter, zero3_weights

# DeepSpeed's ZeRO-3 calls these torch.distributed functions on every layer's gather and
# reduce, and torch 2.13 warns at each call: a run's log would fill with them
warnings.filterwarnings("ignore", message=r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` "
                        "is deprecated", category=FutureWarning)

BATCHINGS = ("shared_prefix", "packed", "padded")
# ZeRO-3's buffers, in parameters (DeepSpeed's defaults, 5e8 / 5e7 / 1e9 / 1e9, are sized for billions of
# parameters; bench/data_parallel.py on SmolLM2-135M, 2 ranks: the largest rank's peak 5.19 GiB with the
# defaults, 4.74 GiB with these, the step 35.0 s and 35.9 s)
ZERO3_BUCKETS = {"reduce_bucket_size": 2e7, "stage3_prefetch_bucket_size": 2e7, "stage3_max_live_parameters": 3e7,
                 "stage3_max_reuse_distance": 3e7}


class DeepSpeedLearner:
    """GRPO learner on a DeepSpeed ZeRO engine.

    Args:
        model_path: local HF checkpoint directory: the policy's initial weights and the
            frozen KL reference.
        cfg: the run config (learning rate, schedule, clip, KL, ZeRO stage, dtype, batch sizes).
        init_from: a checkpoint of this run to take the policy's weights from instead (a
            resumed run); the reference stays `model_path`.
        steps_done: optimizer steps already taken (a resumed run): the learning-rate
            schedule continues from there. When `init_from` holds the optimizer's state
            (``optimizer/``, `save_checkpoint`), AdamW's moments, its step count and the
            scheduler are restored from it exactly (``self.optimizer_restored``); else the
            moments start from zero again (``self.optimizer_note`` says why).
        batching: "shared_prefix" (the default: each group's prompt once, its completions
            after it, about ``micro_batch_size`` sequences' worth of tokens per micro-batch),
            "packed" (padding-free micro-batches of up to ``micro_batch_size`` rows of T
            tokens) or "padded" (``micro_batch_size`` right-padded sequences per micro-batch,
            grouped by length); see the module docstring. "shared_prefix" on a model whose
            attention can't take its mask falls back to "packed" with a notice on stderr; on
            a model that attends within a sliding window (`trainer.prefix_attention.attention_window`,
            ``self.window``) a step whose longest sequence is longer than the window is packed
            (the block mask applies no window), with a notice the first time; a model that
            attends by the row's columns (Llama 4: `trainer.prefix_attention.column_bound`)
            uses "padded". On
            the CPU an SDPA model then attends by each group's parts, not under the dense
            block mask (`trainer.prefix_attention`; ``self.by_parts``).

    Raises:
        ConfigError: an unknown `batching`, or "packed" on a model whose packed logprobs differ from its padded
            ones (a model or transformers version without packed-sequence attention).
    """

    def __init__(self, model_path: str | Path, cfg: RunConfig, init_from: str | Path | None = None,
                 steps_done: int = 0, batching: str = "shared_prefix"):
        if batching not in BATCHINGS:
            raise ConfigError(f"batching must be one of {BATCHINGS}, got {batching!r}; use batching='packed'")
        import deepspeed
        from deepspeed.accelerator import get_accelerator
        from transformers import AutoModelForCausalLM

        self.cfg, self.batching = cfg, batching
        self.zero3 = cfg.zero_stage == 3
        # ZeRO-3 gathers the LM head's weight at each call of it, a collective: every rank must call it as
        # often as the others, whatever its share of the scored tokens, so the head sees them in one slice
        # (peak logits memory: a micro-batch's scored tokens x the vocabulary, not LOGIT_CHUNK_TOKENS x it)
        self.logit_chunk = sys.maxsize if self.zero3 else None
        ensure_single_process_env()
        # An in-process vLLM engine creates and, on close, destroys the torch.distributed
        # world; drop DeepSpeed's cached groups so a later learner doesn't use dead ones.
        from deepspeed.utils import groups

        groups._release_process_group_references(None)
        torch.manual_seed(cfg.seed)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(cfg.dtype)
        if dtype is None:  # "auto" is pinned when a config is validated; a copy made without it is not
            raise ConfigError(f"field 'dtype': {cfg.dtype!r} reached the learner unresolved; build the config "
                              "with RunConfig(...) or parse_config, which pin dtype: auto")
        self.lora = cfg.lora_rank > 0
        saved = saved_adapter(init_from) if init_from is not None and not self.lora else None
        if saved is not None:
            raise ConfigError(f"{init_from} holds a LoRA adapter (lora_rank: {saved['lora_rank']}, lora_alpha: "
                              f"{saved['lora_alpha']:g}); resume it with those settings, or start a new run")
        # LoRA: the adapters train on the base, a resumed run's from its checkpoint's adapter/
        model = AutoModelForCausalLM.from_pretrained(model_path if self.lora else (init_from or model_path),
                                                     dtype=torch.float32)
        if self.lora:
            model = with_adapter(model, cfg, init_from)
        # attention by the groups' parts instead of under the dense block mask on the CPU (bench/shared_prefix.py's
        # long-document step: 26.2 s against 29.6 s); on an H200 at 1.6k-token prompts it measured slower (0.39 s
        # against 0.26 s a step: many small kernel launches), so CUDA keeps the dense mask
        self.by_parts = False
        bound = prefix_attention.column_bound(model.config)
        if bound and batching != "padded":
            print(f"[learner] this model {bound}: each sequence needs a row of its own; using batching='padded'",
                  file=sys.stderr, flush=True)
            batching = self.batching = "padded"
        # a sliding window is not applied to the block mask: exact while no sequence is longer, so a step with a
        # longer one is packed (`_micro_batches`), and the packed path is checked here too
        self.window = prefix_attention.attention_window(model.config) if batching == "shared_prefix" else None
        self._window_said = False
        if self.window == 0:
            print("[learner] this model has attention layers whose span the shared-prefix block mask can't reproduce "
                  "(layer kinds other than full and sliding-window attention); using batching='packed'",
                  file=sys.stderr, flush=True)
            batching = self.batching = "packed"
        if batching == "shared_prefix":
            if get_accelerator().device_name() == "cpu":
                self.by_parts = prefix_attention.enable(model)  # SDPA models only
            err = shared_prefix_error(model)
            if not err < 1e-3:
                print(f"[learner] shared-prefix batching scores differently from padded on this model (max "
                      f"logprob difference {err:.3g} nats); using batching='packed'", file=sys.stderr, flush=True)
                batching = self.batching = "packed"
                self.by_parts = False
        if batching == "packed" or self.window is not None:
            check_packing(model)
        if cfg.gradient_checkpointing:
            # non-reentrant: with LoRA the layers' inputs need no grad, and the reentrant form would then
            # give the adapters inside each checkpointed layer no gradient at all
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.ref_model = None
        if cfg.kl_coef > 0 and not self.lora:  # LoRA: the reference is the base, adapter off
            self.ref_model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).eval()
            self.ref_model.requires_grad_(False)
            if self.by_parts:
                prefix_attention.enable(self.ref_model)
        n = cfg.sequences_per_step
        # a data-parallel rank (torchrun/deepspeed set WORLD_SIZE) takes its share of each step's sequences;
        # the accumulation boundary is set by hand each step, so these counts only satisfy DeepSpeed's check
        world = int(os.environ.get("WORLD_SIZE", "1"))
        accumulation = max(1, n // (cfg.micro_batch_size * world))
        ds_config = {
            "train_batch_size": cfg.micro_batch_size * accumulation * world,
            "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
            "gradient_accumulation_steps": accumulation,
            "gradient_clipping": cfg.max_grad_norm,
            "zero_optimization": {"stage": cfg.zero_stage, **(ZERO3_BUCKETS if self.zero3 else {})},
            "zero_allow_untested_optimizer": True,
            "bf16": {"enabled": cfg.dtype == "bfloat16"},
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        }
        # fused: one kernel over each parameter instead of a dozen elementwise passes, each an OpenMP region
        # (SmolLM2-135M, all 135M weights: bench/optimizer_step.py)
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate, betas=(0.9, 0.999),
            weight_decay=cfg.weight_decay, fused=True
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, optimizer_state.lr_lambda(cfg))
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config
        )
        self.device = self.engine.device
        import torch.distributed as dist

        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self._rss = PeakRSS()
        if self.ref_model is not None and self.zero3:  # partitioned like the policy (as OpenRLHF's and verl's)
            ref_config = {key: ds_config[key] for key in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                                          "gradient_accumulation_steps", "zero_optimization",
                                                          "bf16", "steps_per_print")}
            self.ref_model = deepspeed.initialize(model=self.ref_model, config=ref_config)[0]
            self.ref_model.eval()
        elif self.ref_model is not None:  # DeepSpeed moved the policy to its accelerator; the reference follows
            self.ref_model.to(self.device)
        self.steps_done = int(steps_done)
        # None, or why AdamW's moments start from zero (said of the checkpoint, for the run's [resume] note)
        self.optimizer_note = optimizer_state.restore(self.engine, self.scheduler, init_from, cfg, self.world,
                                                      self.steps_done, self.lora)

    @property
    def optimizer_restored(self) -> bool:
        """Whether AdamW's moments, its step and the scheduler came back exactly from `init_from`."""
        return self.optimizer_note is None

    @property
    def module(self) -> torch.nn.Module:
        """The wrapped HF model (weights as the learner sees them)."""
        return self.engine.module

    def step(self, batch: LearnerBatch) -> dict[str, float]:
        """One optimizer step on a step's batch (gradient accumulation inside). In a
        data-parallel job every rank gets the whole batch, trains on its share
        (`LearnerBatch.shard`) and DeepSpeed all-reduces the gradients: the same step as
        one process up to float rounding.

        The batch may hold fewer than N sequences (zero-variance groups skipped), in any
        number: the last micro-batch is the accumulation boundary, whatever the count, and
        the loss is token-level over the whole batch, so the gradient is exact.

        Args:
            batch: 1 to N sequences, N = prompts_per_step * group_size, padded to T tokens.

        Returns:
            Step metrics: loss, pg_loss, kl (with kl_coef > 0 only), entropy, clip_frac, ratio_mean, grad_norm, lr,
            learner_tokens (the sequences' real tokens, the logical tokens the loss covers),
            learner_computed_tokens (the tokens the forward passes compute: a shared prefix
            counts once), learner_padding_share (share of the positions computed that were
            padding, 0 .. 1), learner_micro_batches, learner_processes (data-parallel
            ranks), learner_sequences_per_process (this rank's share of the sequences),
            learner_seconds, learner_tokens_per_s; with several ranks also
            memory/learner_rank_peak_gb (the largest rank's peak RSS in the step, GiB) and
            memory/learner_ranks_peak_gb (the ranks' peaks added up).

        Raises:
            ValueError: if the batch is empty or holds more than N sequences.
        """
        n, rows = self.cfg.sequences_per_step, batch.input_ids.shape[0]
        if not 0 < rows <= n:
            raise ValueError(f"learner expects 1 to {n} sequences per step, got {rows}")
        t0 = time.perf_counter()
        if self.world > 1:  # each rank's own peak (the run's process measures only itself)
            self._rss.reset()
        self.engine.train()
        total_tokens = float(batch.completion_mask.sum().item()) or 1.0
        total_sequences = float((batch.completion_mask.sum(dim=1) > 0).sum().item()) or 1.0  # GSPO's mean
        full, sums = batch, {"loss": 0.0, "pg": 0.0, "kl": 0.0, "clip": 0.0, "ratio": 0.0, "entropy": 0.0}
        own = batch.shard(self.rank, self.world) if self.world > 1 else batch  # this rank's groups (None: none)
        micros, pass_one = self._micro_batches(own)
        slots = sum(m.input_ids.numel() for m in micros)  # positions the forward passes compute
        computed = (sum(m.num_tokens for m in micros) if self.batching != "padded" else own.num_tokens) if own else 0
        # every rank runs as many micro-batches as the busiest one (ZeRO-2 reduces gradients on each backward):
        # a rank with fewer runs passes weighted zero. DeepSpeed averages the ranks' gradients, and the loss is
        # already normalised over the whole step's tokens, so each rank's loss is scaled by the world size.
        count = int(self._all_reduce([len(micros)], "max")[0])
        own_norm = None
        for i in range(count):
            # the optimizer steps after the last micro-batch, not after a fixed count of them
            self.engine.set_gradient_accumulation_boundary(i == count - 1)
            if i < len(micros):
                out, entropy_sum = pass_one(micros[i], total_tokens, total_sequences)
                loss = out.loss
                sums["loss"] += float(out.loss.detach())
                sums["pg"] += out.pg_loss_sum
                sums["kl"] += out.kl_sum
                sums["clip"] += out.clipped_sum
                sums["ratio"] += out.ratio_sum
                sums["entropy"] += entropy_sum
            else:
                # a real pass weighted zero: ZeRO-3's gathers are collective, and ZeRO-2 buckets gradients in
                # the order the backward produces them, which must be the same on every rank (a sum of
                # parameters x 0 produced them in another order and mixed up the reduced gradients)
                filler, filler_pass = (micros[0], pass_one) if micros else self._filler(full)
                loss = filler_pass(filler, total_tokens, total_sequences)[0].loss * 0.0
            self.engine.backward(loss * self.world if self.world > 1 else loss, scale_wrt_gas=False)
            if i == count - 1 and self.cfg.zero_stage == 0:
                # without ZeRO DeepSpeed clips the (already all-reduced) gradients but keeps no norm: measured here
                grads = [p.grad for p in self.engine.module.parameters() if p.grad is not None]
                own_norm = float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0
            self.engine.step()
        memory = {}
        if self.world > 1:  # the step's sums over every rank's sequences
            keys = list(sums)
            peak = self._rss.read_gb()
            totals = self._all_reduce([sums[k] for k in keys] + [slots, computed, peak], "sum")
            sums, slots, computed = dict(zip(keys, totals[:-3])), totals[-3], totals[-2]
            memory = {"memory/learner_rank_peak_gb": self._all_reduce([peak], "max")[0],
                      "memory/learner_ranks_peak_gb": totals[-1]}
        self.steps_done += 1
        seconds = time.perf_counter() - t0
        grad_norm = self.engine.get_global_grad_norm()
        if grad_norm is None and self.cfg.zero_stage == 0:
            grad_norm = own_norm
        batch = full
        # KL is measured only against a reference (kl_coef > 0): a run without one records none, not 0
        kl = {"kl": sums["kl"] / total_tokens} if self.cfg.kl_coef > 0 else {}
        return {
            **kl,
            "loss": sums["loss"],
            "pg_loss": sums["pg"] / total_tokens,
            "entropy": sums["entropy"] / total_tokens,
            "clip_frac": sums["clip"] / total_tokens,
            "ratio_mean": sums["ratio"] / total_tokens,
            "grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "lr": float(self.scheduler.get_last_lr()[0]),
            "learner_tokens": float(batch.num_tokens),
            "learner_computed_tokens": float(computed),
            "learner_padding_share": 1.0 - computed / slots if slots else 0.0,
            "learner_micro_batches": float(count),
            "learner_processes": float(self.world),
            "learner_sequences_per_process": float(own.input_ids.shape[0] if own is not None else 0),
            "learner_seconds": seconds,
            "learner_tokens_per_s": batch.num_tokens / seconds if seconds > 0 else 0.0,
            **memory,
        }

    def _micro_batches(self, batch: LearnerBatch | None) -> tuple[list, object]:
        """`batch`'s micro-batches in the learner's layout, and the pass that trains one."""
        if batch is None:
            return [], None
        if self.batching == "shared_prefix" and self.window is not None:
            longest = int(batch.attention_mask.sum(dim=1).max())
            if longest > self.window:
                if not self._window_said:
                    print(f"[learner] a sequence of {longest} tokens is longer than this model's sliding window of "
                          f"{self.window}, which the shared-prefix block mask does not apply: such steps are packed "
                          "(each sequence whole)", file=sys.stderr, flush=True)
                    self._window_said = True
                return batch.packed_micro_batches(self.cfg.micro_batch_size), self._packed_micro_step
        if self.batching == "shared_prefix":
            return batch.shared_prefix_micro_batches(self.cfg.micro_batch_size), self._packed_micro_step
        if self.batching == "packed":
            return batch.packed_micro_batches(self.cfg.micro_batch_size), self._packed_micro_step
        return batch.micro_batches(self.cfg.micro_batch_size), self._padded_micro_step

    def _filler(self, batch: LearnerBatch) -> tuple[object, object]:
        """A micro-batch for a rank that holds none of `batch` (fewer groups than ranks) to run
        with zero weight, and its pass: the first of rank 0's share."""
        micros, pass_one = self._micro_batches(batch.shard(0, self.world))
        return micros[0], pass_one

    def _all_reduce(self, values: list[float], op: str) -> list[float]:
        """`values` summed ("sum") or maxed ("max") over the data-parallel ranks (float64)."""
        if self.world == 1:
            return [float(v) for v in values]
        import torch.distributed as dist

        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)  # NCCL: on the GPU
        dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return t.tolist()

    @property
    def has_reference(self) -> bool:
        """Whether the loss has a KL term to a reference (a frozen copy, or LoRA's base)."""
        return self.cfg.kl_coef > 0

    @contextlib.contextmanager
    def _reference(self):
        """The KL reference model for a no-grad forward: the frozen copy, or with LoRA the
        policy with its adapter disabled (the base weights)."""
        if self.ref_model is not None:
            with torch.no_grad():
                yield self.ref_model
        else:
            with torch.no_grad(), self.module.disable_adapter():
                yield self.module

    def _loss(self, logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
              ref_lp: torch.Tensor | None, sequence_index: torch.Tensor, total_tokens: float,
              total_sequences: float) -> LossOutput:
        """`policy_loss` with the run's algorithm (its objective), clip range and KL weight;
        tensors as `policy_loss` takes them, sums over the step's tokens or sequences."""
        low, high = self.cfg.clip_range
        return policy_loss(logp, old, adv, mask, clip_eps=low, clip_eps_high=high, ref_logprobs=ref_lp,
                           kl_coef=self.cfg.kl_coef, num_tokens_total=total_tokens,
                           objective=ALGORITHM_PARTS[self.cfg.algorithm][1], sequence_index=sequence_index,
                           num_sequences_total=total_sequences)

    def _padded_micro_step(self, micro: LearnerBatch, total_tokens: float,
                           total_sequences: float) -> tuple[LossOutput, float]:
        """Forward pass and loss of one right-padded micro-batch; (loss, entropy sum in nats)."""
        ids, att = micro.input_ids.to(self.device), micro.attention_mask.to(self.device)
        mask = micro.completion_mask.to(self.device)
        first, temp = first_completion_column(mask), self.cfg.temperature
        ref_lp = None
        if self.has_reference:
            with self._reference() as ref:
                ref_lp, _ = token_logprobs(ref, ids, att, first_scored=first, temperature=temp, chunk=self.logit_chunk)
        logp, ent = token_logprobs(self.engine, ids, att, with_entropy=True, first_scored=first, temperature=temp,
                                   chunk=self.logit_chunk)
        rows = torch.arange(ids.shape[0], device=self.device).unsqueeze(1).expand_as(mask)  # a row is a sequence
        out = self._loss(logp, micro.old_logprobs.to(self.device), micro.advantages.to(self.device), mask, ref_lp,
                         rows, total_tokens, total_sequences)
        return out, float((ent * mask).sum())

    def _packed_micro_step(self, micro: PackedMicroBatch, total_tokens: float,
                           total_sequences: float) -> tuple[LossOutput, float]:
        """Forward pass and loss of one packed (or shared-prefix) micro-batch; (loss, entropy
        sum in nats).

        The K scored tokens go to `policy_loss` as K one-token rows (shape (K, 1), one
        advantage each): the same per-token terms and sums as the padded layout.
        """
        dev = self.device
        ids, pos = micro.input_ids.to(dev), micro.position_ids.to(dev)
        index, targets = micro.logit_index.to(dev), micro.targets.to(dev)
        mask, temp = micro.completion_mask.to(dev).unsqueeze(1), self.cfg.temperature
        allow = None if micro.attention_mask is None else micro.attention_mask.to(dev)
        ref_lp = None
        if self.has_reference:
            with self._reference() as ref:
                ref_lp, _ = packed_token_logprobs(ref, ref.get_output_embeddings(), ids, pos, index, targets,
                                                  temperature=temp, attention_mask=allow, segments=micro.segments,
                                                  chunk=self.logit_chunk)
                ref_lp = ref_lp.unsqueeze(1)
        logp, ent = packed_token_logprobs(self.engine, self.module.get_output_embeddings(), ids, pos, index,
                                          targets, with_entropy=True, temperature=temp, attention_mask=allow,
                                          segments=micro.segments, chunk=self.logit_chunk)
        out = self._loss(logp.unsqueeze(1), micro.old_logprobs.to(dev).unsqueeze(1), micro.advantages.to(dev), mask,
                         ref_lp, micro.sequence_index.to(dev).unsqueeze(1), total_tokens, total_sequences)
        return out, float((ent.unsqueeze(1) * mask).sum())

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The policy's current weights under HF names, for in-place sync into a rollout
        engine (ZeRO 0-2 keep full parameters on every rank; under ZeRO-3 they are gathered a
        module at a time, `zero3_weights`, and every rank must consume the iterator).

        This is the full state dict, tied tensors included: vLLM's in-place reload leaves a
        tied ``lm_head`` stale unless ``lm_head.weight`` is sent too (measured: logprob
        error 0.36 nats without it, 1e-6 with it).
        """
        if self.zero3:
            yield from zero3_weights(self.module, self.lora)
            return
        if self.lora:
            yield from merged_weights(self.module)
            return
        for name, t in self.module.state_dict().items():
            yield name, t.detach()

    @torch.no_grad()
    def logprobs(self, batch: LearnerBatch) -> torch.Tensor:
        """(N, T) raw (temperature 1, as `RolloutEngine.score`) logprobs of `batch.input_ids`
        under the current weights (eval mode)."""
        self.engine.eval()
        lp, _ = token_logprobs(self.module, batch.input_ids.to(self.device), batch.attention_mask.to(self.device),
                               first_scored=first_completion_column(batch.completion_mask))
        return lp.cpu() * batch.completion_mask

    def save_checkpoint(self, path: str | Path, tokenizer=None, extra: dict[str, dict] | None = None,
                        blobs: dict[str, bytes] | None = None, with_optimizer: bool = True) -> Path:
        """Write an HF checkpoint (safetensors, config, tokenizer) atomically: into a temporary
        sibling directory first, then renamed into place.

        Args:
            extra: file name -> JSON-able dict written beside the weights (e.g. the trainer
                state a resumed run starts from), inside the same atomic rename.
            blobs: file name -> bytes written beside them the same way.
            with_optimizer: also write DeepSpeed's checkpoint of the optimizer and scheduler
                into ``optimizer/`` (for a 135M-parameter float32 model about 2.2 GB: the fp32
                master weights, AdamW's two moments, the module), what an exact resume loads.

        Returns:
            The checkpoint directory.

        Raises:
            RuntimeError: `with_optimizer` after the torch.distributed world went away (see the message).
        """
        import torch.distributed as dist

        if with_optimizer and not dist.is_initialized():  # vLLM's in-process engine core ends the world on close
            raise RuntimeError("the torch.distributed world this learner's DeepSpeed engine uses is gone (an "
                               "in-process vLLM engine opened after the learner has closed); open the rollout "
                               "engine before the learner, as trainer.loop does, or save with_optimizer=False")
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        lead = self.rank == 0  # in a data-parallel job rank 0 writes the weights and renames; all write DeepSpeed's
        gathered = adapter = None  # ZeRO-3: the full weights and LoRA adapters, gathered by every rank
        if self.zero3:
            gathered = self.full_weights()
            adapter = self._zero3_adapter(lead) if self.lora else None
        if lead:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            if self.lora:  # the merged HF weights (rollouts, evaluation) and the adapter (resume)
                base = self.module.get_base_model()
                base.save_pretrained(tmp, state_dict=gathered or dict(merged_weights(self.module)),
                                     safe_serialization=True)
                self.module.save_pretrained(tmp / ADAPTER_DIR, safe_serialization=True, state_dict=adapter)
            else:
                self.module.save_pretrained(tmp, safe_serialization=True, state_dict=gathered)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
        self._barrier()
        if with_optimizer:  # LoRA: the frozen base is the model's own files, only the adapters' states go in
            optimizer_state.save(self.engine, tmp, self.cfg, self.world, self.lora, lead)
        self._barrier()
        if lead:
            for name, data in (extra or {}).items():
                (tmp / name).write_text(json.dumps(data), encoding="utf-8")
            for name, data in (blobs or {}).items():
                (tmp / name).write_bytes(data)
            if path.exists():
                shutil.rmtree(path)
            replace_durably(tmp, path)  # fsync the files and the directory, rename, fsync the parent
        self._barrier()
        return path

    def full_weights(self) -> dict[str, torch.Tensor] | None:
        """The policy's weights under HF names, whole, for writing them out: on rank 0 a dict
        (tied weights one tensor under each name), None on the other ranks. Under ZeRO-3 they
        are host copies gathered a module at a time and every rank must call this (collective);
        under ZeRO 0-2 they are `named_weights`."""
        lead = self.rank == 0
        if not self.zero3:
            return dict(self.named_weights()) if lead else None
        weights = zero3_weights(self.module, self.lora, copy=lead)
        if lead:
            return dict(weights)
        collections.deque(weights, maxlen=0)  # take part in each module's gather
        return None

    def _zero3_adapter(self, lead: bool) -> dict[str, torch.Tensor] | None:
        """The LoRA adapters' weights gathered from their ZeRO-3 partitions (collective), under
        the peft model's state-dict names; on rank 0, else None."""
        import deepspeed

        named = [(k, p) for k, p in self.module.named_parameters() if ".lora_" in k]
        with deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=None):
            return {k: p.detach().to("cpu", copy=True) for k, p in named} if lead else None

    def _barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        """Release the engine, its optimizer and the reference model, and collect them: their
        memory goes back at once (the quickstart's LoRA learner after a step: 0.58 GiB of the
        process, once the allocator hands its free pages back: `trainer.metrics.release_free_memory`).

        The torch.distributed process group stays up for the life of the process:
        DeepSpeed caches its groups, and a second learner in the same process (tests, eval
        after training) must find them alive.
        """
        import torch.distributed as dist

        # DeepSpeed's destroy drops the hooks through which a ZeRO-1/2/3 (or bf16) optimizer keeps the
        # engine alive (ZeRO-3's partitions, the reference engine's too); it needs the torch.distributed
        # world, which a closed in-process vLLM engine may already have ended
        if dist.is_initialized():
            for engine in (self.engine, self.ref_model if self.zero3 else None):
                if engine is not None:
                    engine.destroy()
        self.engine = self.optimizer = self.scheduler = None
        self.ref_model = None
        gc.collect()  # DeepSpeed's engine and its optimizer refer to each other
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # torch's cache of the freed blocks
