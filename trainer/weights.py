"""The policy's weights under HF names, as a rollout engine and a checkpoint take them, and
the LoRA adapters on them.

`with_adapter` puts peft LoRA adapters on a model (Hu et al., 2021, "LoRA", arXiv:2106.09685);
`merged_weights` folds a peft LoRA model's adapters into its weights; `zero3_weights` gathers
a ZeRO-3-partitioned model's weights one module at a time (collective over the data-parallel
ranks). Used by `trainer.learner.DeepSpeedLearner` for the weight sync and its checkpoints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch

from core.errors import ConfigError
from trainer.config import RunConfig
from trainer.lora_targets import adapted

ADAPTER_DIR = "adapter"  # a LoRA run's checkpoint keeps its adapter here, beside the merged weights


def with_adapter(model: torch.nn.Module, cfg: RunConfig, init_from: str | Path | None) -> torch.nn.Module:
    """`model` with LoRA adapters on `cfg.lora_target_modules`: fresh ones (B = 0, so the
    policy starts as the base), or a resumed run's from ``init_from/adapter``.

    Raises:
        ConfigError: no target module matches a layer of the model, or `init_from` lacks its
            adapter.
    """
    from peft import LoraConfig, PeftModel, get_peft_model

    if init_from is not None:
        saved = saved_adapter(init_from)
        if saved is None:
            raise ConfigError(f"{init_from} holds no LoRA adapter ({ADAPTER_DIR}/); resume it with lora_rank: 0, "
                              "or start a new run")
        want = {"lora_rank": cfg.lora_rank, "lora_alpha": float(cfg.lora_alpha),
                "lora_target_modules": sorted(set(cfg.lora_target_modules))}
        differ = [k for k in ("lora_rank", "lora_alpha") if saved[k] != want[k]]
        # the layers each list adapts, not the strings: peft saves a list deduplicated, or shortened to the
        # layers' last names when it is long
        if adapted(model, saved["lora_target_modules"]) != adapted(model, cfg.lora_target_modules):
            differ.append("lora_target_modules")
        if differ:
            raise ConfigError(f"{init_from}'s adapter was trained with "
                              f"{', '.join(f'{k}: {saved[k]}' for k in differ)}; the run's config says "
                              f"{', '.join(f'{k}: {want[k]}' for k in differ)}: resume with the checkpoint's "
                              "settings, or start a new run")
        return PeftModel.from_pretrained(model, str(Path(init_from) / ADAPTER_DIR), is_trainable=True)
    try:
        return get_peft_model(model, LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                target_modules=list(cfg.lora_target_modules)))
    except ValueError as e:  # peft: "Target modules ... not found in the base model"
        raise ConfigError(f"lora_target_modules {list(cfg.lora_target_modules)}: {e}; name linear layers of the "
                          "model, e.g. q_proj, v_proj") from None


def saved_adapter(checkpoint: str | Path) -> dict | None:
    """The LoRA settings of the adapter a checkpoint holds, under the run config's names
    (lora_rank, lora_alpha, lora_target_modules sorted), or None when it holds none (a full
    fine-tuning checkpoint).

    Raises:
        ConfigError: its adapter_config.json can't be read.
    """
    path = Path(checkpoint) / ADAPTER_DIR / "adapter_config.json"
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return {"lora_rank": int(saved["r"]), "lora_alpha": float(saved["lora_alpha"]),
                "lora_target_modules": sorted(saved["target_modules"])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path} can't be read ({type(e).__name__}: {e}); resume from another checkpoint") from None


def merged_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The weights of a peft LoRA model as the plain HF model would name and hold them: each
    adapted layer's W + its delta (alpha / r x B A), the adapters themselves left out.
    Nothing in `model` changes. Lazy: a merged weight is made when it is consumed, so the
    extra memory is one weight's (bytes), not the model's, for a consumer that doesn't keep
    them (`VLLMEngine.update_weights`)."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    # the layers, not their deltas: a delta is made when its weight is yielded, so at most
    # one merged weight (and its delta) exists beside the model at a time
    adapted = {f"{name}.base_layer.weight": module
               for name, module in base.named_modules() if isinstance(module, LoraLayer) and module.merged is False}
    for name, t in base.state_dict().items():
        if ".lora_" in name:
            continue
        t = t.detach()
        if name in adapted:
            layer = adapted[name]
            t = t + layer.get_delta_weight(layer.active_adapters[0]).to(t.dtype)
        yield name.replace(".base_layer.", "."), t


def zero3_weights(model: torch.nn.Module, lora: bool, copy: bool = False) -> Iterator[tuple[str, torch.Tensor]]:
    """The weights of a ZeRO-3-partitioned model under HF names (as `named_weights` gives them
    unpartitioned: tied ones under each name, a LoRA model's merged), gathered one module at a
    time with ``deepspeed.zero.GatheredParameters``.

    Collective: every rank of the data-parallel group must consume the whole iterator (each
    module's gather is an all-gather). Without `copy` a yielded tensor is valid until the next
    one is asked for (a tied weight's stays valid: it is kept for its other names); with it
    each is the caller's own copy in host memory, a tied weight one tensor under all its
    names. Peak accelerator memory beyond the partition: one module's full parameters (for
    SmolLM2-135M the embedding, 28 M floats = 113 MB) plus the tied weights.
    """
    import deepspeed
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model() if lora else model
    names: dict[int, int] = {}
    for _, module in base.named_modules():  # parameters held under several names (tied embeddings)
        for p in module._parameters.values():
            if p is not None:
                names[id(p)] = names.get(id(p), 0) + 1
    kept: dict[int, torch.Tensor] = {}

    def own(t: torch.Tensor) -> torch.Tensor:  # the caller's copy in host memory (a GPU holds one layer at a time)
        return t.detach().to("cpu", copy=True)

    inside: str | None = None  # a LoRA layer's sub-modules are yielded with it
    for prefix, module in base.named_modules():
        if inside is not None and prefix.startswith(inside + "."):
            continue
        inside = None
        merged = lora and isinstance(module, LoraLayer) and module.merged is False
        params = list(module.parameters()) if merged else [p for p in module._parameters.values() if p is not None]
        if not params and not module._buffers:
            continue
        dot = prefix + "." if prefix else ""
        with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
            if merged:
                inside = prefix
                layer = module.base_layer
                weight = layer.weight.detach() + module.get_delta_weight(module.active_adapters[0]).to(layer.weight.dtype)
                yield dot + "weight", weight.to("cpu") if copy else weight
                if getattr(layer, "bias", None) is not None:
                    yield dot + "bias", own(layer.bias)
                continue
            for name, p in module._parameters.items():
                if p is None or (lora and ".lora_" in dot + name):
                    continue
                if names[id(p)] > 1:  # tied: one tensor for every name (shared storage, as in state_dict)
                    if id(p) not in kept:
                        kept[id(p)] = own(p) if copy else p.detach().clone()
                    yield dot + name, kept[id(p)]
                else:
                    yield dot + name, own(p) if copy else p.detach()
        for name, b in module._buffers.items():
            if b is not None and name not in module._non_persistent_buffers_set:
                yield dot + name, own(b) if copy else b.detach()
