"""Per-token log-probabilities of a causal LM over the learner's batch layouts.

`token_logprobs` scores right-padded (N, T) batches; `packed_token_logprobs` scores the
tokens of a `trainer.types.PackedMicroBatch` (whole sequences end to end, or each group's
prompt once with its completions after it and a block attention mask). Both apply the LM
head to the scored positions alone and a slice of them at a time (`scored_logprobs`), so the
(tokens, vocabulary) logits never exist whole. `check_packing` and `shared_prefix_error` compare the packed
layouts with the padded one on a loaded model (the learner's start-up checks). Logprobs are
of logits / temperature, the distribution the rollout engine sampled from.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from core.errors import ConfigError
from trainer.prefix_attention import ATTENTION, PrefixLayout
from trainer.types import LearnerBatch


LOGIT_CHUNK_TOKENS = 512
"""Scored tokens per slice of the vocabulary projection: peak logits memory is this x V floats
(SmolLM2's 49,152-token vocabulary: 100 MB in float32) however many tokens a batch scores."""


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   with_entropy: bool = False, first_scored: int = 1, temperature: float = 1.0,
                   chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of each token given its prefix, log_softmax(logits / temperature).

    Only positions >= `first_scored` are scored: the LM head sees those hidden states alone,
    which skips the vocabulary projection and softmax over the prompt, the costliest part of
    a small model's step (49k-token vocabulary), and it sees them `LOGIT_CHUNK_TOKENS` at a
    time (`scored_logprobs`).

    Args:
        model: an HF causal LM, or the DeepSpeed engine wrapping one.
        input_ids: (N, T) token ids.
        attention_mask: (N, T) 1 on real tokens.
        with_entropy: also return the per-position entropy of the predictive distribution.
        first_scored: first column to score, >= 1 (e.g. the shortest prompt's length).
        temperature: sampling temperature T > 0 the logits are divided by (1: raw).
        chunk: scored tokens per slice of the LM head (None: `LOGIT_CHUNK_TOKENS`).

    Returns:
        (N, T) logprobs where column t scores input_ids[:, t] (columns before `first_scored`
        are 0), and (N, T) entropies in nats aligned the same way (or None).
    """
    n, t = input_ids.shape
    first_scored = max(1, min(first_scored, t - 1))
    cols = torch.arange(first_scored - 1, t - 1, device=input_ids.device)  # logits at these score col + 1
    index = (torch.arange(n, device=input_ids.device).unsqueeze(1) * t + cols).reshape(-1)
    head = _module(model).get_output_embeddings()
    with _HiddenAtScored(head, index):
        hidden = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    taken, ent = scored_logprobs(head, hidden, input_ids[:, first_scored:].reshape(-1), temperature, with_entropy,
                                 softcap=_softcap(model), chunk=chunk)
    out = F.pad(taken.view(n, -1), (first_scored, 0))
    return out, None if ent is None else F.pad(ent.view(n, -1), (first_scored, 0))


def _module(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)  # a DeepSpeed engine wraps the HF model


def _softcap(model: torch.nn.Module) -> float | None:
    """The model's final logit soft-capping (Gemma 2), applied after the LM head."""
    return getattr(_module(model).config, "final_logit_softcapping", None)


class _HiddenAtScored:
    """Within the block the LM head passes through the hidden states at `index` (flat over
    the (R, C) positions) instead of projecting them: the model's own forward, DeepSpeed's
    hooks included, then returns (K, H) hidden states where its output says logits, for
    `scored_logprobs` to project a slice at a time."""

    def __init__(self, head: torch.nn.Module, index: torch.Tensor):
        self.head, self.index, self.handle = head, index, None

    def _gather(self, module, args):
        hidden = args[0]
        return (hidden.reshape(-1, hidden.shape[-1]).index_select(0, self.index),) + tuple(args[1:])

    def __enter__(self):
        self.handle = self.head.register_forward_pre_hook(self._gather)
        self.head.forward = _passthrough  # an instance attribute shadows the class's forward
        return self

    def __exit__(self, *exc):
        self.handle.remove()
        del self.head.forward


def _passthrough(hidden: torch.Tensor) -> torch.Tensor:
    return hidden


def _chunk_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float,
                    softcap: float | None, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(hidden).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    logp_all = F.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)
    taken = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return taken, taken.new_zeros(())
    with torch.no_grad():
        return taken, -(logp_all.exp() * logp_all).sum(-1)


def scored_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                    with_entropy: bool = False, softcap: float | None = None,
                    chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log_softmax(head(hidden) / temperature) at `targets`, `chunk` tokens at a time.

    Under autograd each slice is checkpointed (``torch.utils.checkpoint``, non-reentrant): its
    (chunk, V) logits are freed after the forward and recomputed in the backward, so peak
    memory is one slice's logits, softmax and gradient (about 3 x chunk x V floats) instead of
    K x V of each. The recompute costs one more LM-head forward over the scored tokens. A batch
    of at most `chunk` tokens runs as one plain slice (the unchunked computation).

    Args:
        head: the model's output embedding (``get_output_embeddings()``).
        hidden: (K, H) final hidden states at the scored positions.
        targets: (K,) token ids scored.
        temperature: sampling temperature T > 0 the logits are divided by (1: raw).
        with_entropy: also return the entropy (nats, no gradient) of each distribution.
        softcap: the model's final logit soft-capping, or None.
        chunk: scored tokens per slice, >= 1 (None: `LOGIT_CHUNK_TOKENS`).

    Returns:
        (K,) logprobs and (K,) entropies (or None).
    """
    chunk = chunk or LOGIT_CHUNK_TOKENS
    pieces, ents = [], []
    checkpointed = torch.is_grad_enabled() and hidden.requires_grad and hidden.shape[0] > chunk
    for lo in range(0, max(hidden.shape[0], 1), chunk):  # an empty batch still gives a graph
        args = (head, hidden[lo : lo + chunk], targets[lo : lo + chunk], temperature, softcap, with_entropy)
        if checkpointed:
            taken, ent = torch.utils.checkpoint.checkpoint(_chunk_logprobs, *args, use_reentrant=False)
        else:
            taken, ent = _chunk_logprobs(*args)
        pieces.append(taken)
        ents.append(ent)
    taken = torch.cat(pieces)
    return taken, torch.cat(ents).detach() if with_entropy else None


def model_attention_mask(model: torch.nn.Module, allow: torch.Tensor) -> torch.Tensor:
    """A (R, C, C) bool mask (True: the query may attend to the key) in the form the model's
    attention takes as a ready 4D mask: bool (R, 1, C, C) for SDPA, else additive floats
    (0 or the dtype's minimum) in the model's dtype."""
    module = _module(model)
    mask = allow.unsqueeze(1)
    if getattr(module.config, "_attn_implementation", None) in ("sdpa", ATTENTION):
        return mask
    dtype = next(module.parameters()).dtype
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def packed_token_logprobs(model: torch.nn.Module, head: torch.nn.Module, input_ids: torch.Tensor,
                          position_ids: torch.Tensor, logit_index: torch.Tensor, targets: torch.Tensor,
                          with_entropy: bool = False, temperature: float = 1.0,
                          attention_mask: torch.Tensor | None = None, segments: tuple | None = None,
                          chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of the scored tokens of packed sequences (`PackedMicroBatch`),
    log_softmax(logits / temperature), projected `LOGIT_CHUNK_TOKENS` at a time
    (`scored_logprobs`).

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
        segments: None, or the same layout as groups (`PackedMicroBatch.segments`): a model
            switched to `trainer.prefix_attention.ATTENTION` then attends by the parts of
            each group instead of under the dense mask (the same result, less computed).
        chunk: scored tokens per slice of the LM head (None: `LOGIT_CHUNK_TOKENS`).

    Returns:
        (K,) logprobs and (K,) entropies (or None).
    """
    kw = {} if attention_mask is None else {"attention_mask": model_attention_mask(model, attention_mask)}
    if segments is not None and getattr(_module(model).config, "_attn_implementation", None) == ATTENTION:
        kw["prefix_layout"] = PrefixLayout.build(segments, input_ids.shape[1], input_ids.device)
    with _HiddenAtScored(head, logit_index):
        hidden = model(input_ids=input_ids, position_ids=position_ids, use_cache=False, **kw).logits
    assert hidden.shape[0] == logit_index.shape[0], "the LM head was not shown the scored positions alone"
    return scored_logprobs(head, hidden, targets, temperature, with_entropy, softcap=_softcap(model), chunk=chunk)


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
    if not torch.isfinite(packed).all() or not torch.isfinite(padded).all():
        raise ConfigError("the model's logprobs are not finite (NaN or inf) on two short random sequences: its "
                          "weights hold NaN or inf values; start from a sound checkpoint")
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
                                              attention_mask=micro.attention_mask, segments=micro.segments)
    except (RuntimeError, ValueError, TypeError):  # an attention implementation without 4D masks
        return math.inf
    finally:
        model.train(was_training)
    want = torch.cat([padded[i, first : len(s)] for i, (s, first) in enumerate(zip(seqs, firsts))])
    # the micro-batch orders its tokens by segment (longest first): compare the sorted values
    return float((shared.sort().values - want.sort().values).abs().max())
