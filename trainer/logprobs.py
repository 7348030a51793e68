"""Per-token log-probabilities of a causal LM over the learner's batch layouts.

`token_logprobs` scores right-padded (N, T) batches; `packed_token_logprobs` scores the
tokens of a `trainer.types.PackedMicroBatch` (whole sequences end to end, or each group's
prompt once with its completions after it and a block attention mask), applying the LM head
to the scored positions alone. `check_packing` and `shared_prefix_error` compare the packed
layouts with the padded one on a loaded model (the learner's start-up checks). Logprobs are
of logits / temperature, the distribution the rollout engine sampled from.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from core.errors import ConfigError
from trainer.types import LearnerBatch


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   with_entropy: bool = False, first_scored: int = 1,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of each token given its prefix, log_softmax(logits / temperature).

    Only positions >= `first_scored` are scored: logits are computed for those alone (HF's
    ``logits_to_keep``), which skips the vocabulary projection and softmax over the prompt,
    the costliest part of a small model's step (49k-token vocabulary).

    Args:
        model: an HF causal LM.
        input_ids: (N, T) token ids.
        attention_mask: (N, T) 1 on real tokens.
        with_entropy: also return the per-position entropy of the predictive distribution.
        first_scored: first column to score, >= 1 (e.g. the shortest prompt's length).
        temperature: sampling temperature T > 0 the logits are divided by (1: raw).

    Returns:
        (N, T) logprobs where column t scores input_ids[:, t] (columns before `first_scored`
        are 0), and (N, T) entropies in nats aligned the same way (or None).
    """
    t = input_ids.shape[1]
    first_scored = max(1, min(first_scored, t - 1))
    keep = t - first_scored + 1  # logits at positions first_scored-1 .. t-1
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                   logits_to_keep=keep).logits[:, :-1].float()
    logp_all = F.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)
    taken = logp_all.gather(-1, input_ids[:, first_scored:].unsqueeze(-1)).squeeze(-1)
    out = F.pad(taken, (first_scored, 0))
    ent = None
    if with_entropy:
        with torch.no_grad():
            ent = F.pad(-(logp_all.exp() * logp_all).sum(-1), (first_scored, 0))
    return out, ent


class _ScoredPositions:
    """Within the block, the LM head sees only the hidden states at `index` (flat over the
    (R, C) positions): the model's own forward, DeepSpeed's hooks included, then returns
    (K, V) logits for the scored tokens instead of (R, C, V) for every position."""

    def __init__(self, head: torch.nn.Module, index: torch.Tensor):
        self.head, self.index, self.handle = head, index, None

    def _gather(self, module, args):
        hidden = args[0]
        return (hidden.reshape(-1, hidden.shape[-1]).index_select(0, self.index),) + tuple(args[1:])

    def __enter__(self):
        self.handle = self.head.register_forward_pre_hook(self._gather)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def model_attention_mask(model: torch.nn.Module, allow: torch.Tensor) -> torch.Tensor:
    """A (R, C, C) bool mask (True: the query may attend to the key) in the form the model's
    attention takes as a ready 4D mask: bool (R, 1, C, C) for SDPA, else additive floats
    (0 or the dtype's minimum) in the model's dtype."""
    module = getattr(model, "module", model)  # a DeepSpeed engine wraps the HF model
    config = module.config
    mask = allow.unsqueeze(1)
    if getattr(config, "_attn_implementation", None) == "sdpa":
        return mask
    dtype = next(module.parameters()).dtype
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def packed_token_logprobs(model: torch.nn.Module, head: torch.nn.Module, input_ids: torch.Tensor,
                          position_ids: torch.Tensor, logit_index: torch.Tensor, targets: torch.Tensor,
                          with_entropy: bool = False, temperature: float = 1.0,
                          attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of the scored tokens of packed sequences (`PackedMicroBatch`),
    log_softmax(logits / temperature).

    Without `attention_mask`, transformers reads the packing from the position ids and
    masks attention to each sequence (``use_cache=False`` is needed for that: with a cache
    it falls back to a plain causal mask across the whole row); with one (a shared-prefix
    micro-batch), that mask decides who attends to whom.

    Args:
        model: an HF causal LM, or the DeepSpeed engine wrapping one.
        head: the model's output embedding (``get_output_embeddings()``), a module applied
            to the final hidden states; it is shown only the `logit_index` positions.
        input_ids: (R, C) token ids, sequences back to back.
        position_ids: (R, C) positions restarting at 0 per sequence.
        logit_index: (K,) flat indices into R x C of the logits that score `targets`.
        targets: (K,) token ids scored.
        with_entropy: also return the entropy (nats) of each of those K predictive
            distributions.
        temperature: sampling temperature T > 0 the logits are divided by (1: raw).
        attention_mask: None, or (R, C, C) bool: True where a query position may attend to a
            key position (`PackedMicroBatch.attention_mask`).

    Returns:
        (K,) logprobs and (K,) entropies (or None).
    """
    kw = {} if attention_mask is None else {"attention_mask": model_attention_mask(model, attention_mask)}
    with _ScoredPositions(head, logit_index):
        logits = model(input_ids=input_ids, position_ids=position_ids, use_cache=False, **kw).logits.float()
    logits = logits.reshape(-1, logits.shape[-1])
    assert logits.shape[0] == logit_index.shape[0], "the LM head was not applied to the scored positions"
    logp_all = F.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)
    taken = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = None
    if with_entropy:
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
    return taken, ent


def first_completion_column(mask: torch.Tensor) -> int:
    """Smallest column holding a completion token in a (N, T) mask (1 if none)."""
    cols = mask.any(dim=0).nonzero()
    return int(cols[0]) if len(cols) else 1


def check_packing(model: torch.nn.Module) -> None:
    """Raise ConfigError unless packed logprobs match padded ones on this model: two short
    random sequences scored both ways (two small forward passes, no gradient)."""
    g = torch.Generator().manual_seed(0)
    vocab = model.get_output_embeddings().weight.shape[0]
    seqs = [torch.randint(0, vocab, (n,), generator=g) for n in (5, 7)]
    ids = torch.zeros(2, 7, dtype=torch.long)
    att = torch.zeros(2, 7, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], att[i, : len(s)] = s, 1
    was_training = model.training
    model.eval()
    with torch.no_grad():
        padded, _ = token_logprobs(model, ids, att)
        flat = torch.cat(seqs).unsqueeze(0)
        pos = torch.cat([torch.arange(5), torch.arange(7)]).unsqueeze(0)
        index = torch.tensor([0, 1, 2, 3, 5, 6, 7, 8, 9, 10])
        packed, _ = packed_token_logprobs(model, model.get_output_embeddings(), flat, pos, index, flat[0, index + 1])
    model.train(was_training)
    want = torch.cat([padded[0, 1:5], padded[1, 1:7]])
    err = float((packed - want).abs().max())
    if not err < 1e-3:
        raise ConfigError(f"packed sequences score differently from padded ones on this model (max logprob "
                          f"difference {err:.3g} nats): its attention ignores packed position ids; use "
                          "batching='padded'")


def shared_prefix_error(model: torch.nn.Module) -> float:
    """Largest logprob difference (nats) between the shared-prefix and the padded layout on
    `model`: three short random sequences, two of them sharing a prompt (two small forward
    passes, no gradient). inf when the model's attention refuses the mask."""
    g = torch.Generator().manual_seed(1)
    vocab = model.get_output_embeddings().weight.shape[0]
    prompt = torch.randint(0, vocab, (4,), generator=g)
    seqs = [torch.cat([prompt, torch.randint(0, vocab, (k,), generator=g)]) for k in (3, 2)]
    seqs.append(torch.randint(0, vocab, (6,), generator=g))
    firsts = (4, 4, 3)
    batch = LearnerBatch(torch.zeros(3, 7, dtype=torch.long), torch.zeros(3, 7, dtype=torch.long),
                         torch.zeros(3, 7), torch.zeros(3, 7), torch.zeros(3))
    for i, (s, first) in enumerate(zip(seqs, firsts)):
        batch.input_ids[i, : len(s)], batch.attention_mask[i, : len(s)] = s, 1
        batch.completion_mask[i, first : len(s)] = 1.0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            padded, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
            [micro] = batch.shared_prefix_micro_batches(rows=3)
            shared, _ = packed_token_logprobs(model, model.get_output_embeddings(), micro.input_ids,
                                              micro.position_ids, micro.logit_index, micro.targets,
                                              attention_mask=micro.attention_mask)
    except (RuntimeError, ValueError, TypeError):  # an attention implementation without 4D masks
        return math.inf
    finally:
        model.train(was_training)
    want = torch.cat([padded[i, first : len(s)] for i, (s, first) in enumerate(zip(seqs, firsts))])
    # the micro-batch orders its tokens by segment (longest first): compare the sorted values
    return float((shared.sort().values - want.sort().values).abs().max())
