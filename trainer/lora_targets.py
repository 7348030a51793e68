"""Which layers of a model a LoRA target list adapts, matched as peft matches them, and why a
list can't be trained (Hu et al., 2021, "LoRA", arXiv:2106.09685).

    from trainer.lora_targets import adapted, target_problem
    adapted(model, ["q_proj", "v_proj"])        # {"model.layers.0.self_attn.q_proj", ...}
    target_problem(model_dir, ("q_proj", "nope"))  # "'nope' matches no layer of the model; ..."

`target_problem` is what a run config's ``lora_target_modules`` is checked with when it is
parsed (`trainer.config`); `adapted` is what a resume compares a checkpoint's adapter with
(`trainer.weights.with_adapter`). Both use peft's own `check_target_module_exists`, so a name,
a suffix or a regex matches here exactly where peft would put an adapter.

Not covered: peft's ``layers_to_transform`` and ``exclude_modules`` (the run config has no
such fields).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def adapted(model: torch.nn.Module, targets: Iterable[str]) -> set[str]:
    """The names of `model`'s modules that LoRA on `targets` puts an adapter on.

    Args:
        model: any torch module (a plain HF model, or one built on the meta device).
        targets: ``lora_target_modules`` entries (names, suffixes, or one regex).

    Returns:
        The qualified module names (``model.layers.0.self_attn.q_proj``); empty when none match.
    """
    # on first use: peft is only imported by LoRA runs
    from peft import LoraConfig
    from peft.tuners.tuners_utils import check_target_module_exists

    config = LoraConfig(target_modules=list(targets))
    return {name for name, _ in model.named_modules() if name and check_target_module_exists(config, name)}


def target_problem(path: str | Path, targets: tuple[str, ...]) -> str | None:
    """Why LoRA can't adapt `targets` (``lora_target_modules``) on the HF model at `path`, or
    None: an entry that matches no module (a typo would otherwise leave that layer untrained
    without a word), a match that is not a linear layer (``torch.nn.Linear``, or
    transformers' ``Conv1D`` of GPT-2-style models), or the output head of a model whose input
    embeddings share its weight (the merged weights would then hold two different copies of
    that one tensor, and the rollout engine would sample from another policy than the learner
    trains).

    The model is built on the meta device from its config: no weights are read (about 0.1 s
    for a 135M model); the verdict is cached per (directory, config.json's modification time
    in ns, targets). A model transformers can't build that way is not checked here
    (`trainer.weights.with_adapter` refuses targets that match nothing when the run starts).
    """
    config_file = Path(path).resolve() / "config.json"
    try:
        return _target_problem(str(config_file.parent), config_file.stat().st_mtime_ns, tuple(targets))
    except Exception:  # noqa: BLE001 - a model transformers can't build here: the learner's own check refuses it
        return None


@functools.lru_cache(maxsize=8)
def _target_problem(path: str, mtime_ns: int, targets: tuple[str, ...]) -> str | None:
    # on first use: torch and transformers are heavy, and only LoRA configs need them (the
    # page and the CLI import the run config)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    # on first use: with the rest of transformers
    from transformers.pytorch_utils import Conv1D

    config = AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    head = model.get_output_embeddings()
    modules = dict(model.named_modules())
    kinds = (torch.nn.Linear, Conv1D)
    linear = sorted({name.rsplit(".", 1)[-1] for name, m in modules.items()
                     if name and isinstance(m, kinds) and m is not head})
    fix = f"name linear layers of the model's decoder layers: {', '.join(linear)}"
    for target in targets:
        matched = adapted(model, [target])
        hits = [name for name in modules if name in matched]  # the model's order: the first mismatch is named
        if not hits:
            return f"{target!r} matches no layer of the model; {fix}"
        other = next((name for name in hits if not isinstance(modules[name], kinds)), None)
        if other is not None:
            return f"{target!r} matches {other} ({type(modules[other]).__name__}), not a linear layer; {fix}"
        if any(modules[name] is head for name in hits) and getattr(config, "tie_word_embeddings", False):
            return (f"{target!r} matches the output head, whose weight the model shares with its input "
                    f"embeddings (tie_word_embeddings); {fix}")
    return None
