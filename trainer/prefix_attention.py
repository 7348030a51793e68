"""Shared-prefix attention without a dense mask: each group's prompt causal on its own, its
completions batched against the prompt's keys and their own.

A shared-prefix micro-batch (`trainer.types.LearnerBatch.shared_prefix_micro_batches`) lays
out each group as its prompt once and then its G completions, and a (C, C) block mask says who
attends to whom. Given that mask, SDPA's kernels compute every query-key pair of the row and
cannot skip the pairs the mask forbids: on a 1.6k-token prompt with 8 x 64-token completions,
2,112^2 pairs, where the prompt's causal attention needs 1,600^2 / 2 and the completions
(8 x 64) x 2,112 at most. `shared_prefix_attention` computes those parts alone, with the same kernels:

- each prompt (columns o .. o+p of its row): SDPA with ``is_causal=True``;
- its G completions together: their queries against the prompt's keys and theirs, under a
  (n, p + n) mask (all of the prompt, causal within each completion's own tokens);
- the unused tail of a row: causal on its own, as the dense mask has it.

The result equals SDPA under the dense mask up to float rounding (the same softmax over the same
keys), forward and backward: the Prefix Grouper computation (Liu et al., 2025, "Prefix Grouper:
Efficient GRPO Training through Shared-Prefix Forward", arXiv:2506.05433), in transformers'
attention interface. It is registered under `ATTENTION` and takes the layout from the
``prefix_layout`` keyword that `trainer.logprobs.packed_token_logprobs` passes through the
model's forward; without one (or on a model with dropout in training, a softcap or attention
sinks, or a sliding window shorter than the layout's longest sequence) it is transformers' own
SDPA with the mask it was given. A window at least as long as every sequence of the
micro-batch never binds, so the block mask is exact there; the learner packs a step whose
longest sequence is longer than the model's window instead (`attention_window`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ATTENTION = "rlwb_shared_prefix"
"""The name `enable` registers the attention function under in transformers' interface."""


@dataclass
class _Segment:
    """One group's place in a row.

    offset, prefix: the prompt's first column and length (tokens).
    tokens: the completions' tokens after it (all G together, columns offset + prefix on).
    mask: None without completions, else (tokens, prefix + tokens) bool on the model's device,
        True where a completion query may attend: all of the prompt, and causally its own
        completion's earlier tokens (block-diagonal over the G completions).
    """

    offset: int
    prefix: int
    tokens: int
    mask: torch.Tensor | None


@dataclass
class PrefixLayout:
    """Where each group's prompt and completions sit in a shared-prefix micro-batch.

    Attributes:
        rows: per row, its segments in column order.
        ends: per row, the column after its last segment (the tail starts there).
        width: C, the row length (tokens).
        longest: the longest sequence laid out, prefix and completion (tokens): a sliding
            window at least this long attends to every token it would without one.
    """

    rows: list[list[_Segment]]
    ends: list[int]
    width: int
    longest: int = 0

    @classmethod
    @functools.lru_cache(maxsize=4)
    def build(cls, segments: tuple, width: int, device: torch.device | str) -> "PrefixLayout":
        """The layout of `PackedMicroBatch.segments` on `device`, built once per micro-batch
        (cached: the reference's forward and the policy's score the same layout).

        Args:
            segments: per row, a tuple of (offset, prefix length, completion lengths) in
                column order, completions directly after their prefix.
            width: C, the row length (tokens).
            device: where the masks go (the model's device).

        Raises:
            ValueError: if a segment runs past `width`.
        """
        rows, ends, longest = [], [], 0
        for row in segments:
            out, end = [], 0
            for offset, prefix, lengths in row:
                n = sum(lengths)
                longest = max(longest, prefix + max(lengths, default=0))
                end = offset + prefix + n
                if end > width:
                    raise ValueError(f"segment at column {offset} ends at {end}, past the row's {width} columns")
                mask = None
                if n:
                    mask = torch.zeros(n, prefix + n, dtype=torch.bool)
                    mask[:, :prefix] = True
                    start = prefix
                    for k in lengths:
                        mask[start - prefix : start - prefix + k, start : start + k] = torch.ones(k, k, dtype=torch.bool).tril()
                        start += k
                    mask = mask.to(device)
                out.append(_Segment(offset, prefix, n, mask))
            rows.append(out)
            ends.append(end)
        return cls(rows, ends, width, longest)


def _row(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, segments: list[_Segment], end: int,
         scaling: float | None) -> torch.Tensor:
    """One row's attention output (H, C, D) from its query and key/value (H, C, D).

    Every part is a contiguous slice of the row and every SDPA call 4D (the CPU flash kernel
    takes no 3D inputs and sends them to the slow math path)."""
    width = query.shape[1]

    def sdpa(rows: slice, cols: slice, mask: torch.Tensor | None) -> torch.Tensor:
        return F.scaled_dot_product_attention(query[None, :, rows], key[None, :, cols], value[None, :, cols],
                                              attn_mask=mask, is_causal=mask is None, scale=scaling)[0]

    pieces = []
    for s in segments:
        prompt = slice(s.offset, s.offset + s.prefix)
        pieces.append(sdpa(prompt, prompt, None))
        if s.tokens:  # all G completions at once against the prompt and the completions (block mask)
            done = s.offset + s.prefix + s.tokens
            pieces.append(sdpa(slice(s.offset + s.prefix, done), slice(s.offset, done), s.mask))
    if end < width:  # the tail: a causal block of its own, attended by nothing else
        pieces.append(sdpa(slice(end, width), slice(end, width), None))
    return torch.cat(pieces, dim=1)


def shared_prefix_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                            **kwargs) -> tuple[torch.Tensor, None]:
    """Attention of a shared-prefix micro-batch by its parts (module docstring), in the signature
    of transformers' attention interface.

    Args:
        module: the attention layer calling it.
        query: (R, H, C, D) queries, rotary embeddings applied.
        key, value: (R, Hkv, C, D), Hkv dividing H (grouped-query attention).
        attention_mask: the dense (R, 1, C, C) mask, used only when SDPA runs instead.
        dropout: attention dropout probability.
        scaling: the softmax scale (1 / sqrt(D) when None).
        kwargs: ``prefix_layout`` (a `PrefixLayout` of the R rows), and what the model passes
            its attention function (a ``sliding_window`` shorter than the layout's longest
            sequence: SDPA under the given mask).

    Returns:
        ((R, C, H, D) attention output, None): no attention weights.
    """
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    layout = kwargs.pop("prefix_layout", None)
    window = kwargs.get("sliding_window")
    plain = (layout is None or (dropout and module.training) or (window is not None and window < layout.longest)
             or kwargs.get("softcap") is not None or kwargs.get("s_aux") is not None)
    if plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    if query.shape[2] != layout.width or len(layout.rows) != query.shape[0]:
        raise ValueError(f"prefix_layout is for {len(layout.rows)} rows of {layout.width} columns, the queries are "
                         f"{query.shape[0]} rows of {query.shape[2]}")
    heads = query.shape[1]
    key, value = repeat_kv(key, heads // key.shape[1]), repeat_kv(value, heads // value.shape[1])
    out = torch.stack([_row(query[r], key[r], value[r], layout.rows[r], layout.ends[r], scaling)
                       for r in range(query.shape[0])])
    return out.transpose(1, 2).contiguous(), None


# layer kinds (HF ``layer_types``; GPT-Neo's ``attention_layers``) that attend to every earlier token
FULL_KINDS = ("full_attention", "global")
# kinds that attend to at most the last N tokens, and the config field holding N: a sequence of at most N
# tokens is attended whole (a sliding window keeps keys less than N behind the query)
WINDOW_FIELDS = {"sliding_attention": "sliding_window"}


def column_bound(config) -> str | None:
    """Why the model with HF config `config` must see every sequence in a row of its own from
    column 0 (the padded layout), or None. Llama 4 counts its attention chunks and its
    no-rope layers' query temperature from the row's columns, not from the position ids, so
    a sequence placed later in a packed or shared-prefix row attends differently there."""
    config = config.get_text_config()
    if "chunked_attention" in {str(k) for k in (getattr(config, "layer_types", None) or [])}:
        return "counts its attention chunks from the row's first column"
    if getattr(config, "attn_temperature_tuning", False):
        return "scales its no-rope layers' queries by the row's column"
    return None


def attention_window(config) -> int | None:
    """The shortest attention span (tokens) some layer of the model with HF config `config`
    keeps to: a sliding window (Mistral, Phi-3, Gemma 2/3, Qwen with ``use_sliding_window``).
    None when every layer attends to all earlier tokens, or the window is at least
    ``max_position_embeddings`` and never binds; 0 when some layer is of a kind whose span is
    not known here (GPT-Neo's local layers mask by column, chunked layers count chunks by
    column (`column_bound`), recurrent and sparse layers ignore the mask), so no sequence is
    known to be attended whole.

    The shared-prefix layout hands the model a ready (R, C, C) block mask, which transformers
    passes through unchanged: no window is applied to it. That is exact while every sequence
    is at most the window long, so `trainer.learner` lays such a model's step out
    shared-prefix then, and packs a step with a longer sequence (every step where this is 0)."""
    config = config.get_text_config()  # a multimodal model's language part; a text model's config itself
    kinds = getattr(config, "layer_types", None) or getattr(config, "attention_layers", None)
    if not kinds:  # no per-layer kinds: a sliding_window field applies to every layer
        window = getattr(config, "sliding_window", None)
        kinds = ["sliding_attention"] if isinstance(window, int) and window > 0 else []
    spans = []
    for kind in {str(k) for k in kinds} - set(FULL_KINDS):
        span = getattr(config, WINDOW_FIELDS[kind], None) if kind in WINDOW_FIELDS else None
        if not isinstance(span, int) or span <= 0:
            return 0
        spans.append(span)
    longest = getattr(config, "max_position_embeddings", None)
    binding = [s for s in spans if not (isinstance(longest, int) and s >= longest)]
    return min(binding) if binding else None


def enable(model: torch.nn.Module) -> bool:
    """Switch an HF model that attends with SDPA to `shared_prefix_attention` (registered
    once under `ATTENTION`, its masks built as SDPA's). Other implementations (eager, flash)
    are left as they are and keep the dense mask. Returns whether the model now uses it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, shared_prefix_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(ATTENTION)
    return model.config._attn_implementation == ATTENTION
