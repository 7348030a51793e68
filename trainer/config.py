"""Typed run config: the one place a run's defaults live.

A run is described by a YAML file (see ``configs/quickstart.yaml``) that maps onto
`RunConfig`. Loading validates everything a run needs before anything starts: YAML
syntax, field types and ranges, that every domain exists and that the model resolves to a
local checkpoint. Every failure is a `ConfigError` whose message names the field and the
fix, so the CLI can print one line and exit non-zero without creating a run.

A run samples tasks either from `domains` (a weight per domain, all at one `difficulty`
level) or from a stored, versioned mix (`mix: NAME` or `mix: NAME@VERSION`, see
`domains.mixes`): `resolve_mix` pins the mix version into the config before the run is
created, so the run records exactly which weights and level ranges it used.
"""

from __future__ import annotations

import difflib

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from core.choices import Algorithm, EngineKind, SandboxBackend
from core.errors import ConfigError, ModelNotFound
from retrieval.context import DEFAULT_BUDGET_TOKENS
from domains.registry import domain_names, get_domain, unknown_domain_message
from trainer import lora_targets, precision
from trainer.models import MODELS, resolve_model, weights_problem

# the forms of ray_address: auto, HOST:PORT, ray://HOST:PORT
RAY_ADDRESS_RE = re.compile(r"^(auto|(ray://)?[A-Za-z0-9._-]+:\d{1,5})$")
QUICKSTART_DOMAINS = ["basic_arithmetic", "chain_sum", "gsm_symbolic", "letter_counting", "spell_backward"]


#: DAPO's eps_high (Yu et al., 2025, arXiv:2503.14476, §3.1): ``algorithm: dapo``'s upper clip unless set
DAPO_CLIP_EPS_HIGH = 0.28


class RunConfig(BaseModel):
    """Everything one post-training run needs. Stored with the run as JSON.

    Sizes: a step samples `prompts_per_step` tasks and `group_size` completions of each, so
    the learner sees N = prompts_per_step * group_size sequences per step, split into
    micro-batches of `micro_batch_size` (gradient accumulation).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    #: what `dtype: auto` was pinned to on this machine and why, for the CLI and the page; None
    #: when the config named its dtype or was rebuilt from a stored (pinned) one
    _dtype_note: str | None = PrivateAttr(None)

    name: str = Field("run", description="Human-readable run name.", min_length=1, max_length=200)
    model: str = Field("smollm2-135m", description="A fetched model name or a local HF checkpoint directory.")
    domains: dict[str, float] = Field(
        default_factory=lambda: {d: 1.0 for d in QUICKSTART_DOMAINS},
        description="The mix: domain name -> sampling weight (a plain list means equal weights).",
    )
    difficulty: int = Field(1, ge=1, le=5, description="Difficulty level of sampled tasks, 1 (easy) to the "
                                                      "domain's hardest (3-5); used with `domains`.")
    mix: str | None = Field(None, description="A stored mix, NAME or NAME@VERSION (`rlwb mix list`); replaces "
                                              "`domains` and `difficulty`.")
    mix_spec: dict | None = Field(None, description="Filled in when the run starts: the pinned mix "
                                                    "{name, version, domains: {domain: {weight, levels: [lo, hi]}}}.")
    user_domains: dict[str, int] | None = Field(
        None, description="Filled in when the run starts: the stored version of each user domain the run uses "
                          "{name: version} (`rlwb domains add`), which the run's process loads.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seeds task sampling, the rollout engine and the learner.")

    algorithm: Algorithm = Field(
        "grpo", description="grpo: advantages normalised by the group std; dr_grpo: mean-centred only; rloo: "
                            "reward minus the mean of the group's other samples (leave-one-out baseline); dapo: "
                            "grpo with clip-higher (clip_eps_high 0.28 unless set; configs/dapo.yaml adds its "
                            "overlong: soft and zero_variance: resample); gspo: one clipped importance ratio per "
                            "sequence (configs/gspo.yaml: the paper's clip ranges); cispo: clipped, detached "
                            "importance weights on every token's log-prob; reinforce_pp: rewards normalised over "
                            "the batch, no group baseline; reinforce_pp_baseline: group mean subtracted, then "
                            "normalised over the batch (papers: trainer/algorithms/grpo.py)."
    )
    steps: int = Field(20, ge=1, le=100_000, description="Training steps (one rollout + one optimizer step each).")
    prompts_per_step: int = Field(4, ge=1, description="Tasks sampled per step.")
    group_size: int = Field(8, description="Completions per task (G); GRPO needs G >= 2.")
    micro_batch_size: int = Field(8, ge=1, description="Sequences per learner forward/backward.")
    max_new_tokens: int = Field(
        64, ge=1, le=768, description="Cap on generated tokens per completion (prompt + completion must fit the "
                                      "engine's window: 1024 tokens, raised where the mix's prompts need it)."
    )
    temperature: float = Field(1.0, gt=0.0, le=2.0, description="Sampling temperature for training rollouts; "
                               "the learner scores policy and reference at the same temperature (logits / T).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass for training rollouts "
                         "(the learner applies no top-p).")

    learning_rate: float = Field(1e-5, gt=0.0, lt=1.0, description="Peak AdamW learning rate.")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="Schedule after warmup.")
    warmup_steps: int = Field(0, ge=0, description="Linear warmup steps.")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0.0, description="Gradient clipping threshold (global L2 norm).")
    clip_eps: float = Field(0.2, gt=0.0, lt=1.0, description="PPO clip range for the importance ratio (the lower "
                            "one, and the upper one unless clip_eps_high is set).")
    clip_eps_high: float | None = Field(
        None, gt=0.0, le=10.0, description="Upper clip range: the ratio is clipped to [1 - clip_eps, 1 + "
                                           "clip_eps_high] (DAPO's clip-higher; cispo's only bound). Unset: "
                                           "clip_eps, or 0.28 under algorithm: dapo.")
    kl_coef: float = Field(0.02, ge=0.0, description="Weight of the k3 KL penalty to the frozen reference; 0 disables it.")

    zero_stage: int = Field(2, ge=0, le=3, description="DeepSpeed ZeRO stage: 0 none, 1 optimizer state, 2 also "
                            "gradients, 3 also the parameters partitioned over the learner processes (gathered "
                            "a layer at a time for the weight sync and checkpoints).")
    learner_processes: int = Field(
        1, ge=1, le=64, description="Data-parallel learner processes on this machine (torchrun; each trains on its "
                                    "share of a step's groups, DeepSpeed all-reduces the gradients; "
                                    "trainer.learner_group). 1: the learner runs in the run's process.")
    dtype: Literal["float32", "bfloat16", "auto"] = Field(
        "float32", description="Training and rollout dtype. bfloat16 keeps float32 master weights in the "
                               "optimizer. CPUs without native bf16 (AVX2) emulate it; with it (avx512_bf16) "
                               "long_context's step was 1.4x faster than in float32. auto: bfloat16 where "
                               "this machine has native bf16 (a CUDA GPU of Ampere or later, a CPU with "
                               "avx512_bf16 or amx_bf16) and the run trains no LoRA adapter, else float32; "
                               "pinned when the config is loaded, so the run records the dtype it used "
                               "(trainer.precision). Full fine-tuning in bf16 took faster steps but learned "
                               "less per step on the quickstart's domains (README, Measured).")
    gradient_checkpointing: bool = Field(False, description="Trade compute for activation memory.")
    lora_rank: int = Field(0, ge=0, le=1024, description="LoRA rank r (Hu et al., 2021, arXiv:2106.09685, with "
                           "peft): train low-rank adapters instead of the weights; the KL reference is the base "
                           "with the adapter off (no second copy). 0: full fine-tuning.")
    lora_alpha: float = Field(32.0, gt=0.0, le=10000.0, description="LoRA scaling alpha (the update is alpha / r x "
                              "B A); at most 10,000 (common values are r to 4 r: far larger ones overflow the "
                              "merged float32 weights).")
    lora_target_modules: list[str] = Field(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], min_length=1,
        description="Linear layers that get an adapter (names inside each decoder layer).")
    rollout_engine: EngineKind = Field("vllm", description="vllm (default) or hf (transformers generate).")
    vllm_memory_fraction: float = Field(
        0.3, gt=0.0, le=0.95, description="vLLM gpu_memory_utilization (on CPU: the most of RAM the KV cache may "
                                           "take; it is sized to a step's sequences at the full window below that)."
    )

    overlap: bool = Field(
        False, description="One-step off-policy: roll out step t+1 with the previous weights while the learner "
                           "trains on step t (the importance ratio corrects for the one-step staleness, which "
                           "is recorded as off_policy/staleness). Off: every step is on-policy.")
    engine_sleep: bool = Field(
        True, description="Release the rollout engine's weights and KV cache while the learner trains and while a "
                          "checkpoint is written, and load them back with the weight sync (the quickstart: about "
                          "0.9 GiB less). vLLM's CPU build only: the transformers engine, Ray rollout workers and "
                          "vLLM on GPUs keep theirs; with overlap only where no rollout is prefetched (the last "
                          "step, checkpoints).")
    scheduler: Literal["local", "ray"] = Field(
        "local", description="Where rollouts and sandboxes run: local (this process and machine) or ray (rollout "
                             "and sandbox workers as Ray actors across a cluster, trainer.ray_scheduler; with one "
                             "rollout worker the same results as local for a fixed seed).")
    ray_address: str | None = Field(
        None, description="scheduler: ray: the cluster to join: 'auto' (started on this machine with `ray start`), "
                          "'HOST:PORT' of the head node or 'ray://HOST:10001' (Ray Client); unset: a private Ray "
                          "instance on this machine.")
    rollout_workers: int = Field(
        1, ge=1, le=64, description="scheduler: ray: rollout engines (Ray actors); the prompts of a call are split "
                                    "over them and worker r is seeded seed + r.")
    sandbox_workers: int = Field(
        1, ge=1, le=64, description="scheduler: ray: Ray actors that each hold a slice of the sandbox pool "
                                    "(at most sandbox_pool_size).")
    tensor_parallel_size: int = Field(
        1, ge=1, le=8, description="vLLM tensor parallelism: GPUs one rollout engine spans (a Ray rollout worker "
                                   "then asks for as many). 1 on CPU, the tested default.")
    vllm_compile: bool = Field(
        True, description="torch.compile the vLLM model at start (slower start, faster decoding); false for short runs."
    )

    sandbox_backend: SandboxBackend = Field(
        "docker", description="Where sandboxed domains (humaneval, terminal_*) run: docker, or local "
                              "(bubblewrap; weaker isolation). Never swapped silently.")
    sandbox_pool_size: int = Field(
        8, ge=1, le=64, description="Warm sandboxes kept for the run; multi-turn episodes run this many at a time.")
    sandbox_memory_mb: int = Field(512, ge=64, le=16384, description="Memory limit of each sandbox, MiB.")
    command_timeout_s: float = Field(10.0, gt=0.0, le=600.0, description="Wall-clock limit of one sandbox command, s.")
    max_turns: int = Field(4, ge=1, le=32, description="Turn budget of a multi-turn episode (shell and tool domains; "
                                                       "a game's level sets its own).")
    max_episode_tokens: int = Field(
        1024, ge=64, le=4096, description="Token budget of a multi-turn episode (prompt, turns and observations).")
    curriculum: bool = Field(
        False, description="Adapt each domain's level within its range to the running pass rate "
                           "(trainer.curriculum); off: levels drawn uniformly from the range.")
    curriculum_window: int = Field(
        32, ge=4, le=10_000, description="Curriculum: scored samples per domain in the pass-rate window.")
    curriculum_raise_above: float = Field(
        0.8, gt=0.0, le=1.0, description="Curriculum: raise a domain's level when its full window's pass rate "
                                         "is above this.")
    curriculum_lower_below: float = Field(
        0.2, ge=0.0, lt=1.0, description="Curriculum: lower a domain's level when its full window's pass rate "
                                         "is below this (must be below curriculum_raise_above).")
    zero_variance: Literal["keep", "skip", "resample"] = Field(
        "keep", description="Groups whose rewards are all equal (no GRPO signal): keep (advantage 0; under "
                            "reinforce_pp their rewards still count against the batch's), skip (drop "
                            "from the learner batch) or resample (redraw their tasks, then skip what is left).")
    max_resample_rounds: int = Field(
        2, ge=0, le=10, description="zero_variance: resample: rounds of redrawing zero-variance groups per step.")
    overlong: Literal["keep", "mask", "penalize", "soft"] = Field(
        "keep", description="Truncated samples (finish \"length\": a completion cut at max_new_tokens, an episode "
                            "cut by max_episode_tokens or max_turns): keep (scored and trained like finished ones), "
                            "mask (no part in the loss or their group's advantage statistics; DAPO's overlong "
                            "filtering), penalize (reward 0, the failure reward, before advantages) or soft (DAPO's "
                            "soft overlong punishment: a completion longer than max_new_tokens - overlong_buffer "
                            "loses up to 1 from its reward, linearly over the buffer).")
    overlong_buffer: int = Field(
        16, ge=1, le=768, description="overlong: soft: the last tokens before max_new_tokens over which the "
                                      "length penalty grows from 0 to 1 (DAPO's L_cache).")

    checkpoint_every: int = Field(0, ge=0, description="Save an HF checkpoint every N steps (0: only at the end).")
    eval_tasks_per_domain: int = Field(
        0, ge=0, description="Held-out tasks per domain evaluated greedily before and after training (0: skip)."
    )
    eval_max_new_tokens: int = Field(64, ge=1, le=768, description="Cap on generated tokens during evaluation.")
    eval_every: int = Field(
        0, ge=0, description="Also evaluate the same held-out tasks every N steps during training, for the Runs "
                             "page's curves (0: only before and after); needs eval_tasks_per_domain > 0.")
    context_budget_tokens: int = Field(
        DEFAULT_BUDGET_TOKENS, ge=128, le=131_072,
        description="Retrieval domains: tokens of retrieved context (global summary + fragments) in each prompt; the "
                    "model's window must hold it plus about 512 tokens of instructions and question, plus the answer.")
    output_dir: str | None = Field(None, description="Where checkpoints go (default: the user data dir).")

    @field_validator("name")
    @classmethod
    def _printable_name(cls, v: str) -> str:
        if not v.isprintable() or not v.strip():
            raise ValueError("must be one line of printable text, e.g. name: quickstart")
        return v.strip()

    @field_validator("mix_spec")
    @classmethod
    def _mix_spec_only_with_mix(cls, v: dict | None, info: ValidationInfo) -> dict | None:
        # mix is declared (so validated) before this field. Without a mix nothing reads the
        # pin, and a config keeps whatever it holds (a YAML alias bomb would be expanded
        # when the run's config is stored as JSON).
        if v is not None and info.data.get("mix") is None:
            raise ValueError("mix_spec is filled in when a run with a stored mix starts; remove it")
        return v

    @field_validator("domains", mode="before")
    @classmethod
    def _domains_as_weights(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            if not all(isinstance(d, str) for d in v):
                raise ValueError("list items must be domain names, e.g. domains: [basic_arithmetic, chain_sum]")
            return {d: 1.0 for d in v}
        return v

    @field_validator("domains")
    @classmethod
    def _known_domains(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("the mix is empty; list at least one domain, e.g. domains: [basic_arithmetic]")
        known = domain_names()
        unknown = [d for d in v if d not in known]
        if unknown:
            raise ValueError(unknown_domain_message(unknown[0]))
        bad = [d for d, w in v.items() if not w > 0]
        if bad:
            raise ValueError(f"weight of domain {bad[0]!r} must be > 0")
        return v

    @field_validator("lora_rank", "lora_alpha", mode="before")
    @classmethod
    def _not_a_bool(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, bool):  # YAML's yes/no/true/false would pass as 1 and 0
            raise ValueError(f"{info.field_name} takes a number, got {str(v).lower()}; e.g. lora_rank: 16, "
                             "lora_alpha: 32 (lora_rank: 0 trains all the weights)")
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _pin_auto_dtype(cls, data: Any, handler) -> "RunConfig":
        # `dtype: auto` becomes this machine's dtype before the fields are checked: a run row,
        # its checkpoints and a resume elsewhere keep what the run started with
        if not (isinstance(data, dict) and data.get("dtype") == "auto"):
            return handler(data)
        try:  # read as the field reads it (pydantic's int: "16.0" is 16)
            lora = TypeAdapter(int).validate_python(data.get("lora_rank") or 0) > 0
        except ValidationError:  # the field's own check names the problem
            lora = False
        dtype, why = precision.auto_dtype(lora=lora)
        cfg = handler({**data, "dtype": dtype})
        cfg._dtype_note = f"dtype: auto -> {dtype}: {why}"
        return cfg

    @model_validator(mode="after")
    def _difficulty_in_levels(self) -> "RunConfig":
        if self.mix is not None and self.mix_spec is None and "domains" in self.model_fields_set:
            raise ValueError("set either mix (a stored mix) or domains (weights), not both")
        if self.mix is not None and self.mix_spec is None and "difficulty" in self.model_fields_set:
            raise ValueError("difficulty does not apply to a mix (its level ranges do); remove difficulty or "
                             "change the ranges with `rlwb mix update`")
        if self.mix is None:
            for name in self.domains:
                levels = get_domain(name).levels
                if self.difficulty not in levels:
                    raise ValueError(f"difficulty {self.difficulty} is not a level of domain {name!r} (levels "
                                     f"{min(levels)}-{max(levels)}); lower difficulty or use a mix with level ranges")
        cad = [d for d in (self.domains if self.mix is None else (self.mix_spec or {}).get("domains", {}))
               if get_domain(d).family == "cad"]
        if cad and self.sandbox_backend != "docker":
            raise ValueError(f"the cad domains ({', '.join(cad)}) run their CAD kernel in the Docker sandbox image "
                             "(numpy, trimesh, manifold3d); the local fallback has no such libraries: set "
                             "sandbox_backend: docker")
        return self

    def domain_specs(self) -> dict[str, tuple[float, int, int]]:
        """The mix this run samples from: domain -> (weight, lowest level, highest level).

        From the pinned `mix_spec` when the run uses a stored mix, else from `domains`
        with every domain at `difficulty` (with `curriculum`, from `difficulty` up to the
        domain's hardest level).

        Raises:
            ConfigError: `mix` is set but not resolved yet (call `domains.mixes.resolve_mix`).
        """
        if self.mix is not None:
            if not self.mix_spec:
                raise ConfigError(f"mix {self.mix!r} is not resolved; call domains.mixes.resolve_mix first")
            return {d: (float(s["weight"]), int(s["levels"][0]), int(s["levels"][1]))
                    for d, s in self.mix_spec["domains"].items()}
        if self.curriculum:  # the curriculum starts at `difficulty` and may climb to the hardest level

            return {d: (w, self.difficulty, max(get_domain(d).levels)) for d, w in self.domains.items()}
        return {d: (w, self.difficulty, self.difficulty) for d, w in self.domains.items()}

    @property
    def domain_list(self) -> list[str]:
        """Names of the domains this run samples from (the mix's, or `domains`)."""
        if self.mix is not None and self.mix_spec:
            return list(self.mix_spec["domains"])
        return list(self.domains)

    @property
    def clip_range(self) -> tuple[float, float]:
        """(eps_low, eps_high): the ratio is clipped to [1 - eps_low, 1 + eps_high]."""
        if self.clip_eps_high is not None:
            return self.clip_eps, self.clip_eps_high
        return self.clip_eps, DAPO_CLIP_EPS_HIGH if self.algorithm == "dapo" else self.clip_eps

    @field_validator("overlong_buffer")
    @classmethod
    def _buffer_below_cap(cls, v: int, info: ValidationInfo) -> int:
        # max_new_tokens and overlong are declared (so validated) before this field
        cap = info.data.get("max_new_tokens")
        if info.data.get("overlong") == "soft" and cap is not None and v > cap:
            raise ValueError(f"the soft overlong buffer ({v} tokens) must fit in max_new_tokens ({cap}); set "
                             f"overlong_buffer: {max(1, cap // 4)}")
        return v

    @field_validator("group_size")
    @classmethod
    def _group_size(cls, v: int) -> int:
        if v < 2:
            raise ValueError(
                f"group_size must be >= 2 for GRPO (advantages compare samples within a group); got {v}, set group_size: 8"
            )
        return v

    @field_validator("micro_batch_size")
    @classmethod
    def _micro_batch_divides(cls, v: int, info: ValidationInfo) -> int:
        # prompts_per_step and group_size are declared (so validated) before this field
        p, g = info.data.get("prompts_per_step"), info.data.get("group_size")
        if p and g and (p * g) % v:
            raise ValueError(f"micro_batch_size ({v}) must divide prompts_per_step * group_size ({p * g}); "
                             f"set micro_batch_size: {g}")
        return v

    @field_validator("curriculum_lower_below")
    @classmethod
    def _curriculum_thresholds(cls, v: float, info: ValidationInfo) -> float:
        # curriculum_raise_above is declared (so validated) before this field
        hi = info.data.get("curriculum_raise_above")
        if hi is not None and v >= hi:
            raise ValueError(f"must be below curriculum_raise_above ({hi}); got {v}, e.g. set "
                             "curriculum_lower_below: 0.2 and curriculum_raise_above: 0.8")
        return v

    @field_validator("eval_every")
    @classmethod
    def _eval_every_needs_tasks(cls, v: int, info: ValidationInfo) -> int:
        if v and not info.data.get("eval_tasks_per_domain"):
            raise ValueError(f"evaluating every {v} steps needs held-out tasks: set eval_tasks_per_domain "
                             "(e.g. 20) or eval_every: 0")
        steps = info.data.get("steps")
        if v and steps is not None and v >= steps:
            raise ValueError(f"evaluating every {v} steps in a {steps}-step run adds nothing to the evaluations "
                             f"before and after training; set eval_every below {steps}, or 0")
        return v

    @field_validator("scheduler")
    @classmethod
    def _ray_installed(cls, v: str) -> str:
        import importlib.util

        if v == "ray" and importlib.util.find_spec("ray") is None:
            raise ValueError("scheduler: ray needs the ray package: `pip install ray` (the same version on every "
                             "node), or set scheduler: local")
        return v

    @field_validator("tensor_parallel_size")
    @classmethod
    def _tensor_parallel_on_vllm(cls, v, info: ValidationInfo):
        # rollout_engine is declared (so validated) before it
        if v > 1 and info.data.get("rollout_engine", "vllm") != "vllm":
            raise ValueError(f"tensor_parallel_size {v} applies to rollout_engine: vllm only; set rollout_engine: "
                             "vllm or tensor_parallel_size: 1")
        return v

    @field_validator("ray_address", "rollout_workers", "sandbox_workers")
    @classmethod
    def _ray_only(cls, v, info: ValidationInfo):
        # scheduler is declared (so validated) before these fields
        default = cls.model_fields[info.field_name].default
        if v != default and info.data.get("scheduler", "ray") != "ray":
            raise ValueError(f"{info.field_name} applies to scheduler: ray; set scheduler: ray or remove "
                             f"{info.field_name}")
        if info.field_name == "ray_address" and v is not None:
            if not RAY_ADDRESS_RE.match(v):
                raise ValueError(f"{v!r} is not a Ray address; use 'auto', 'HOST:PORT' of the head node (e.g. "
                                 "10.0.0.5:6379) or 'ray://HOST:10001', or leave it unset for a private instance")
        return v

    @model_validator(mode="after")
    def _sandbox_workers_fit_pool(self) -> "RunConfig":
        if self.sandbox_workers > self.sandbox_pool_size:
            raise ValueError(f"sandbox_workers ({self.sandbox_workers}) must be at most sandbox_pool_size "
                             f"({self.sandbox_pool_size}): each worker holds at least one sandbox; lower "
                             f"sandbox_workers or raise sandbox_pool_size")
        return self

    @field_validator("model")
    @classmethod
    def _absolute_model_dir(cls, v: str) -> str:

        path = Path(v).expanduser()
        # a checkpoint directory given relative to here must be found from elsewhere too
        return os.path.abspath(path) if v not in MODELS and path.is_dir() else v

    @field_validator("output_dir")
    @classmethod
    def _writable_output_dir(cls, v: str | None) -> str | None:
        if v is None:
            return v
        path = Path(v).expanduser()
        probe = path
        try:
            while not probe.exists() and probe != probe.parent:
                probe = probe.parent
            usable = probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
        except OSError as e:  # a parent that can't be searched, a name too long, ...
            raise ValueError(f"{str(path)!r} can't be used ({e.strerror or e}); choose a writable directory "
                             "or leave output_dir unset") from None
        if not usable:
            raise ValueError(f"{str(path)!r} can't be created or written ({str(probe)!r} is not a writable "
                             "directory); choose a writable directory or leave output_dir unset")
        # absolute: checkpoint paths and the run log are found again from another directory
        # (the page, `rlwb runs resume` run elsewhere)
        return os.path.abspath(path)

    @property
    def dtype_note(self) -> str | None:
        """What ``dtype: auto`` was pinned to on this machine and why (`trainer.precision`), e.g.
        "dtype: auto -> bfloat16: this CPU has avx512_bf16 (native bf16 matmuls)"; None when
        the config named its dtype or was rebuilt from a stored, already pinned one."""
        return self._dtype_note

    @property
    def needs_sandbox(self) -> bool:
        """True if a domain of the mix is verified in a sandbox."""

        return any(get_domain(d).needs_sandbox for d in self.domain_list)

    @property
    def sequences_per_step(self) -> int:
        """N, the learner's batch size in sequences."""
        return self.prompts_per_step * self.group_size


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "config"


def config_errors(data: Any) -> dict[str, str]:
    """Every problem of a run config, by field: the checks `parse_config` makes, all at once.

    For forms that show each message beside its field. Keys are field paths (``model``,
    ``learning_rate``, ``domains.basic_arithmetic`` ...; ``config`` for problems of the
    whole config), in pydantic's order; an empty dict means `parse_config` accepts `data`.
    """
    return _check(data)[1]


def _check(data: Any, check_model: bool = True) -> tuple[RunConfig | None, dict[str, str]]:
    """(the config, {}) when `data` is valid, else (None or the config, errors by field)."""
    if not isinstance(data, dict):
        return None, {"config": f"expected a mapping of fields (name: value), got {type(data).__name__}"}
    names = [k for k in data if not isinstance(k, str)]
    if names:  # YAML's `?` or `1: x` make a key that is no name: RunConfig(**data) would raise a TypeError
        return None, {"config": f"field names must be text (name: value), got {names[0]!r}; quote it or remove it"}
    errors: dict[str, str] = {}
    cfg = None
    try:
        cfg = RunConfig(**data)
    except ValidationError as e:
        for err in e.errors():
            field = _field_path(err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(err["loc"][-1]), list(RunConfig.model_fields), n=1)
                msg = (f"unknown field {str(err['loc'][-1])!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                       + f"; valid fields are: {', '.join(RunConfig.model_fields)}")
            errors.setdefault(field, msg)
    model = data.get("model", RunConfig.model_fields["model"].default)
    if check_model and "model" not in errors and isinstance(model, str):
        problem = _model_problem(model)
        if problem:
            errors["model"] = problem
        elif cfg is not None and cfg.lora_rank > 0:
            problem = lora_targets.target_problem(resolve_model(model), tuple(cfg.lora_target_modules))
            if problem and "lora_target_modules" not in cfg.model_fields_set:
                problem += " (the list is the default, for Llama-style models: set lora_target_modules for this one)"
            if problem:
                errors["lora_target_modules"] = problem
    return cfg, errors


def _model_problem(model: str) -> str | None:
    """Why `model` can't be trained (not fetched, no readable HF config), or None."""

    try:
        path = resolve_model(model)
    except ModelNotFound as e:
        return str(e)
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(path)
    except Exception as e:  # noqa: BLE001 - any unreadable config means the same fix
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"{path}/config.json can't be read ({first}); point model at a complete HF checkpoint directory"
    return weights_problem(path)


def parse_config(data: Any, source: str = "config", check_model: bool = True) -> RunConfig:
    """Validate a mapping into a `RunConfig` and check that its model resolves.

    Args:
        data: the parsed YAML mapping.
        source: where it came from, for messages (a file path).
        check_model: also check that the model resolves and that ``lora_target_modules``
            name linear layers of it (`trainer.lora_targets.target_problem`); False checks the fields alone.

    Raises:
        ConfigError: naming the first invalid field and how to fix it.
    """
    cfg, errors = _check(data, check_model)
    if errors:
        field, msg = next(iter(errors.items()))
        if field == "config" and not isinstance(data, dict):
            raise ConfigError(f"{source}: {msg}")
        raise ConfigError(f"{source}: field '{field}': {msg}")
    return cfg


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a run config YAML file.

    Raises:
        ConfigError: the file is missing, is malformed YAML, or a field is invalid.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} not found; pass a YAML file such as configs/quickstart.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{p}: malformed YAML{where}: {problem}; fix the syntax and retry") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not UTF-8 text; save the config as UTF-8 YAML") from None
    if data is None:
        raise ConfigError(f"{p}: the config is empty; start from configs/quickstart.yaml")
    return parse_config(data, source=str(p))
