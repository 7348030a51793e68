"""The one data contract between the stages of a training step.

rollout -> reward -> advantage -> learner all pass these dataclasses, in the spirit of
OpenRLHF's ``Experience`` and verl's ``DataProto``:

* `Completion`  - one sampled answer from a `RolloutEngine` (token ids, sampling logprobs).
* `Sample`      - one completion of one task, scored: the row a trajectory is stored from.
* `LearnerBatch` - padded tensors the learner consumes, built from a list of `Sample`.
* `PackedMicroBatch` - a padding-free micro-batch: several sequences end to end in each row,
  told apart by position ids that restart at 0 (`LearnerBatch.packed_micro_batches`), or
  each group's prompt once with its completions after it, told apart by a block attention
  mask (`LearnerBatch.shared_prefix_micro_batches`).

Shapes use N = number of sequences (prompts x group size), T = padded sequence length in
tokens, R = rows of a packed micro-batch, C = its row length (tokens) and K = its scored
(completion) tokens. Nothing here imports vllm or deepspeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from domains.contract import Breakdown, Turn


@dataclass
class Completion:
    """One completion sampled by a rollout engine.

    Attributes:
        token_ids: generated token ids, length L (tokens), EOS included when it was sampled.
        logprobs: log-probability of each generated token under the sampling policy, length L
            (nats). Used as the "old" policy in the clipped importance ratio.
        text: detokenised completion (special tokens skipped).
        finish_reason: "stop" (EOS or stop string) or "length" (hit max_new_tokens).
        mask: None for a single-turn completion (every token is the policy's). For a
            multi-turn episode, the whole transcript after the prompt: model turns (1) and
            the environment's observation tokens between them (0, never trained on).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str
    mask: list[int] | None = None


@dataclass
class Sample:
    """One scored completion of one task: a trajectory of a single-turn episode.

    Attributes:
        domain: domain name, e.g. "basic_arithmetic".
        task_seed: seed that generated the task inside its domain.
        group: index of the task within the step (all G samples of a task share it).
        index: sample index within the group, 0..G-1.
        prompt: the rendered prompt text (after the chat template).
        prompt_ids: prompt token ids, length P (tokens).
        completion: `Completion` from the engine.
        reward: scalar reward in [0, 1] (down to -1 after `trainer.overlong`'s soft shaping).
        breakdown: named reward parts (`domains.contract.Breakdown`), e.g. {"format": 1.0,
            "correct": 0.0, "extracted": "17"}.
        advantage: group-normalised advantage, filled in by the algorithm.
        answer: the hidden reference answer (stored for inspection, never shown to the model).
        fault: None, "harness" when the sandbox machinery failed while scoring it, or
            "context" when its prompt was too long for the engine's window (never sent): such
            a sample takes no part in the loss, its group's advantages or reward metrics.
        turns: multi-turn episodes only: one `domains.contract.Turn` per turn (model text,
            action, command or tool calls, stdout, stderr, exit code, duration in ms, timed_out).
        difficulty: the task's level in its domain (1 easy .. n hard); 0 when unknown.
        retrieval: retrieval domains only: how the context was assembled -- context and
            document sizes (tokens), whether the evidence made it in, and each fragment's
            location and scores (`retrieval.context.Context.record`).
    """

    domain: str
    task_seed: int
    group: int
    index: int
    prompt: str
    prompt_ids: list[int]
    completion: Completion
    reward: float = 0.0
    breakdown: Breakdown = field(default_factory=dict)
    advantage: float = 0.0
    answer: str = ""
    fault: str | None = None
    turns: list[Turn] = field(default_factory=list)
    difficulty: int = 0
    retrieval: dict | None = None


@dataclass
class LearnerBatch:
    """Padded tensors for one policy-gradient step.

    Attributes:
        input_ids: (N, T) int64, prompt followed by completion, right-padded with pad id.
        attention_mask: (N, T) int64, 1 on real tokens.
        completion_mask: (N, T) float32, 1 on completion tokens that take part in the loss
            (the policy's own tokens: not prompts, observations of multi-turn episodes, pads,
            or samples with a harness fault).
            Position t marks the token input_ids[:, t] (predicted by logits at t-1).
        old_logprobs: (N, T) float32, sampling-policy logprobs aligned with completion_mask
            (0 elsewhere).
        advantages: (N,) float32, one advantage per sequence.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor

    @property
    def num_tokens(self) -> int:
        """Real (non-pad) tokens in the batch."""
        return int(self.attention_mask.sum().item())

    def rows(self, index: list[int]) -> "LearnerBatch":
        """The batch of the given rows, in that order."""
        rows = torch.tensor(index, dtype=torch.long)
        return LearnerBatch(self.input_ids[rows], self.attention_mask[rows], self.completion_mask[rows],
                            self.old_logprobs[rows], self.advantages[rows])

    def shard(self, rank: int, world: int) -> "LearnerBatch | None":
        """Data-parallel rank `rank`'s share of the rows (of `world` ranks), or None if it gets none.

        Sequences that share a prompt (a GRPO group: the same tokens before the first
        scored one) stay together, so each rank's shared-prefix forward still computes a
        prompt once; groups go largest first to the rank with the fewest tokens so far
        (real tokens, a shared prompt counted once). With fewer groups than ranks the rows
        are dealt out one by one instead. Every rank computes the same split from the same
        batch.

        Raises:
            ValueError: `rank` not in [0, `world`).
        """
        if not 0 <= rank < world:
            raise ValueError(f"rank must be in [0, {world}), got {rank}")
        lengths = self.attention_mask.sum(dim=1).tolist()
        groups: dict[tuple, list[int]] = {}
        for i, n in enumerate(lengths):
            scored = self.completion_mask[i, 1:n].nonzero()
            p = int(scored[0]) + 1 if len(scored) else n
            groups.setdefault(tuple(self.input_ids[i, :p].tolist()), []).append(i)
        if len(groups) >= world:
            load, owned = [0] * world, [[] for _ in range(world)]
            cost = {key: len(key) + sum(lengths[i] - len(key) for i in rows) for key, rows in groups.items()}
            for key in sorted(groups, key=lambda k: (-cost[k], groups[k][0])):
                r = min(range(world), key=lambda r: (load[r], r))
                load[r] += cost[key]
                owned[r] += groups[key]
            mine = sorted(owned[rank])
        else:
            mine = list(range(rank, len(lengths), world))
        return self.rows(mine) if mine else None

    def micro_batches(self, size: int) -> list["LearnerBatch"]:
        """Split into micro-batches of `size` rows for gradient accumulation.

        Rows are grouped by length (longest first) and each micro-batch is trimmed to its
        own longest row, so little compute goes to padding. The loss is token-level over
        the whole step, so the grouping does not change the gradient.
        """
        lengths = self.attention_mask.sum(dim=1)
        order = torch.argsort(lengths, descending=True, stable=True)
        out = []
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            t = int(lengths[rows].max())
            out.append(LearnerBatch(
                self.input_ids[rows, :t],
                self.attention_mask[rows, :t],
                self.completion_mask[rows, :t],
                self.old_logprobs[rows, :t],
                self.advantages[rows],
            ))
        return out

    def packed_micro_batches(self, rows: int, pad_id: int = 0) -> list["PackedMicroBatch"]:
        """Pack the sequences end to end into rows of at most T tokens, `rows` rows per
        micro-batch: padding-free batches for gradient accumulation.

        Sequences are placed first-fit decreasing by length into rows of capacity T (the
        longest sequence), so a packed micro-batch holds at most `rows` x T tokens: the
        memory bound of a padded micro-batch of `rows` sequences, with the room padding
        would take filled by further sequences. Each micro-batch is trimmed to its fullest
        row. Position ids restart at 0 at each sequence; with no attention mask, HF models
        then attend only within each sequence (transformers' ``find_packed_sequence_indices``),
        as the padding-free collators of Krell et al., 2021, "Efficient Sequence Packing
        without Cross-contamination", arXiv:2107.02027, and HF's ``DataCollatorWithFlattening``
        do. The loss is token-level over the whole step, so packing does not change it.

        Args:
            rows: rows per micro-batch (the run's ``micro_batch_size``), >= 1.
            pad_id: token id for the unused tail of a row (never scored, attended by nothing).

        Returns:
            Micro-batches in order of decreasing fill; together they hold every sequence once.

        Raises:
            ValueError: if `rows` < 1.
        """
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        lengths = self.attention_mask.sum(dim=1).tolist()
        bins = _first_fit_decreasing(lengths, max(lengths))  # sequence indices per row
        return [self._pack(bins[s : s + rows], lengths, pad_id) for s in range(0, len(bins), rows)]

    def _pack(self, bins: list[list[int]], lengths: list[int], pad_id: int) -> "PackedMicroBatch":
        """One packed micro-batch: each bin (sequence indices) becomes one row."""
        width = max(sum(lengths[i] for i in b) for b in bins)
        ids = torch.full((len(bins), width), pad_id, dtype=torch.long)
        pos = torch.zeros((len(bins), width), dtype=torch.long)
        index, targets, old, adv, mask, seq = [], [], [], [], [], []
        for r, b in enumerate(bins):
            offset = 0
            for i in b:
                n = lengths[i]
                ids[r, offset : offset + n] = self.input_ids[i, :n]
                pos[r, offset : offset + n] = torch.arange(n)
                cols = self.completion_mask[i, 1:n].nonzero().squeeze(1) + 1  # column 0 has no prefix
                index.append(r * width + offset + cols - 1)  # the logits at t-1 score token t
                targets.append(self.input_ids[i, cols])
                old.append(self.old_logprobs[i, cols])
                adv.append(self.advantages[i].expand(len(cols)))
                mask.append(self.completion_mask[i, cols])
                seq.append(torch.full((len(cols),), len(seq), dtype=torch.long))
                offset += n
            pos[r, offset:] = torch.arange(width - offset)  # the tail: a block of its own
        return PackedMicroBatch(ids, pos, torch.cat(index), torch.cat(targets), torch.cat(old),
                                torch.cat(adv), torch.cat(mask), num_sequences=sum(len(b) for b in bins),
                                num_tokens=sum(lengths[i] for b in bins for i in b), sequence_index=torch.cat(seq))

    def shared_prefix_micro_batches(self, rows: int, pad_id: int = 0) -> list["PackedMicroBatch"]:
        """Pack each group's prompt once, its completions after it: the shared-prefix forward of
        "Prefix Grouper: Efficient GRPO Training through Shared-Prefix Forward" (Liu et al.,
        2025, arXiv:2506.05433).

        Sequences whose tokens before their first scored token are the same (the G samples of
        a GRPO group; a multi-turn episode's first prompt) form a segment: that prefix once,
        then each sequence's remaining tokens. Position ids continue after the prefix in each
        completion, and `attention_mask` lets a completion token attend to the prefix and to
        the earlier tokens of its own completion only, so every scored token sees exactly the
        context it has in its own sequence: the same logprobs, loss and gradient as
        `packed_micro_batches` up to float rounding (the prefix's gradient is the sum of its
        G copies'). The first token of each completion is scored from the prefix's last
        position, shared by the group (its index repeats in `logit_index`).

        Segments are placed first-fit decreasing into rows of capacity max(T, the longest
        segment); a micro-batch holds max(1, rows * T // capacity) rows, so its tokens stay
        within the padded path's rows x T bound unless one segment alone is longer.

        Args:
            rows: the run's ``micro_batch_size``, >= 1 (sequences' worth of tokens per micro-batch).
            pad_id: token id for the unused tail of a row (never scored, attended by nothing).

        Returns:
            Micro-batches with `attention_mask` set; together they hold every sequence once.

        Raises:
            ValueError: if `rows` < 1.
        """
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        lengths = self.attention_mask.sum(dim=1).tolist()
        prefix: list[int] = []
        groups: dict[tuple, list[int]] = {}
        for i, n in enumerate(lengths):
            scored = self.completion_mask[i, 1:n].nonzero()
            p = int(scored[0]) + 1 if len(scored) else n
            prefix.append(p)
            groups.setdefault((p, tuple(self.input_ids[i, :p].tolist())), []).append(i)
        segments = list(groups.values())
        seg_len = [prefix[g[0]] + sum(lengths[i] - prefix[i] for i in g) for g in segments]
        capacity = max(max(lengths), max(seg_len))
        per_micro = max(1, rows * max(lengths) // capacity)
        bins = _first_fit_decreasing(seg_len, capacity)  # segment indices per row
        return [self._pack_shared([[segments[g] for g in b] for b in bins[s : s + per_micro]], prefix, lengths,
                                  pad_id) for s in range(0, len(bins), per_micro)]

    def _pack_shared(self, bins: list[list[list[int]]], prefix: list[int], lengths: list[int],
                     pad_id: int) -> "PackedMicroBatch":
        """One shared-prefix micro-batch: each bin (segments of sequence indices) becomes a row."""
        def seg_tokens(seg: list[int]) -> int:
            return prefix[seg[0]] + sum(lengths[i] - prefix[i] for i in seg)

        width = max(sum(seg_tokens(seg) for seg in b) for b in bins)
        ids = torch.full((len(bins), width), pad_id, dtype=torch.long)
        pos = torch.zeros((len(bins), width), dtype=torch.long)
        allow = torch.zeros((len(bins), width, width), dtype=torch.bool)
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        index, targets, old, adv, mask, seq = [], [], [], [], [], []
        layout = []
        for r, b in enumerate(bins):
            offset = 0
            row = []
            for seg in b:
                p = prefix[seg[0]]
                row.append((offset, p, tuple(lengths[i] - p for i in seg)))
                ids[r, offset : offset + p] = self.input_ids[seg[0], :p]
                pos[r, offset : offset + p] = torch.arange(p)
                allow[r, offset : offset + p, offset : offset + p] = causal[:p, :p]
                cursor = offset + p
                for i in seg:
                    n = lengths[i]
                    k = n - p
                    ids[r, cursor : cursor + k] = self.input_ids[i, p:n]
                    pos[r, cursor : cursor + k] = torch.arange(p, n)
                    allow[r, cursor : cursor + k, offset : offset + p] = True
                    allow[r, cursor : cursor + k, cursor : cursor + k] = causal[:k, :k]
                    cols = self.completion_mask[i, 1:n].nonzero().squeeze(1) + 1
                    src = cols - 1  # the logits at t-1 score token t
                    flat = torch.where(src < p, offset + src, cursor + src - p)
                    index.append(r * width + flat)
                    targets.append(self.input_ids[i, cols])
                    old.append(self.old_logprobs[i, cols])
                    adv.append(self.advantages[i].expand(len(cols)))
                    mask.append(self.completion_mask[i, cols])
                    seq.append(torch.full((len(cols),), len(seq), dtype=torch.long))
                    cursor += k
                offset = cursor
            layout.append(tuple(row))
            # the tail: a causal block of its own, its positions below the longest sequence's as in the packed
            # layout (a row can be wider than T; a model whose RoPE scaling or position table reads the largest
            # position id would otherwise see one no sequence has)
            pos[r, offset:] = torch.arange(width - offset).clamp(max=max(lengths) - 1)
            allow[r, offset:, offset:] = causal[: width - offset, : width - offset]
        return PackedMicroBatch(ids, pos, torch.cat(index), torch.cat(targets), torch.cat(old),
                                torch.cat(adv), torch.cat(mask), num_sequences=sum(len(seg) for b in bins for seg in b),
                                num_tokens=sum(seg_tokens(seg) for b in bins for seg in b), attention_mask=allow,
                                segments=tuple(layout), sequence_index=torch.cat(seq))

    @classmethod
    def from_samples(cls, samples: list[Sample], pad_id: int) -> "LearnerBatch":
        """Pack scored samples into right-padded tensors.

        Args:
            samples: N samples with prompt_ids, completion token ids/logprobs and advantage.
            pad_id: token id used for padding (masked out everywhere).

        Raises:
            ValueError: if `samples` is empty.
        """
        if not samples:
            raise ValueError("LearnerBatch.from_samples needs at least one sample")
        lengths = [len(s.prompt_ids) + len(s.completion.token_ids) for s in samples]
        n, t = len(samples), max(lengths)
        input_ids = torch.full((n, t), pad_id, dtype=torch.long)
        attention = torch.zeros((n, t), dtype=torch.long)
        comp_mask = torch.zeros((n, t), dtype=torch.float32)
        old_lp = torch.zeros((n, t), dtype=torch.float32)
        for i, s in enumerate(samples):
            p, c = len(s.prompt_ids), len(s.completion.token_ids)
            input_ids[i, :p] = torch.tensor(s.prompt_ids, dtype=torch.long)
            if c:
                input_ids[i, p : p + c] = torch.tensor(s.completion.token_ids, dtype=torch.long)
                if s.fault is None:  # a harness-faulted sample keeps its row but trains nothing
                    mask = s.completion.mask
                    comp_mask[i, p : p + c] = 1.0 if mask is None else torch.tensor(mask, dtype=torch.float32)
                old_lp[i, p : p + c] = torch.tensor(s.completion.logprobs, dtype=torch.float32)
            attention[i, : p + c] = 1
        adv = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
        return cls(input_ids, attention, comp_mask, old_lp, adv)


def _first_fit_decreasing(sizes: list[int], capacity: int) -> list[list[int]]:
    """Bin packing: the indices of `sizes` (tokens) placed longest first into the first bin
    (a row of `capacity` tokens) with room, else a new one. Returns the indices per bin."""
    bins: list[list[int]] = []
    fill: list[int] = []
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        for b, used in enumerate(fill):
            if used + sizes[i] <= capacity:
                bins[b].append(i)
                fill[b] += sizes[i]
                break
        else:
            bins.append([i])
            fill.append(sizes[i])
    return bins


@dataclass
class PackedMicroBatch:
    """Sequences packed end to end, without padding between them, for one forward/backward.

    Built by `LearnerBatch.packed_micro_batches`. Only the completion tokens that take part
    in the loss are scored; their per-token tensors are flat, in row-major order.

    Attributes:
        input_ids: (R, C) int64, each row several sequences back to back, then pad ids.
        position_ids: (R, C) int64, 0, 1, ... within each sequence (a drop marks the start
            of the next one); the unused tail of a row counts from 0 as a block of its own.
        logit_index: (K,) int64, flat index into the R x C positions of the logits that
            score each completion token (the position just before it).
        targets: (K,) int64, the completion tokens scored.
        old_logprobs: (K,) float32, their sampling-policy logprobs.
        advantages: (K,) float32, the advantage of each token's sequence.
        completion_mask: (K,) float32, the tokens' loss weights (1.0).
        num_sequences: sequences in the micro-batch.
        num_tokens: real (non-pad) tokens in it: the tokens the forward pass computes (a
            shared prefix counts once).
        attention_mask: None where position ids alone separate the sequences
            (`LearnerBatch.packed_micro_batches`); else (R, C, C) bool, True where the query
            position (dim 1) may attend to the key position (dim 2)
            (`LearnerBatch.shared_prefix_micro_batches`).
        segments: None, or for a shared-prefix micro-batch, per row a tuple of
            (offset, prefix length, completion lengths) per group in column order: the same
            layout as `attention_mask`, for `trainer.prefix_attention.PrefixLayout`.
        sequence_index: (K,) int64, the sequence (0-based within the micro-batch) each
            scored token belongs to: GSPO's sequence-level ratio needs it.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    logit_index: torch.Tensor
    targets: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    completion_mask: torch.Tensor
    num_sequences: int
    num_tokens: int
    attention_mask: torch.Tensor | None = None
    segments: tuple | None = None
    sequence_index: torch.Tensor | None = None

    @property
    def padding_share(self) -> float:
        """Share of the R x C positions that hold padding (0 .. 1)."""
        return 1.0 - self.num_tokens / self.input_ids.numel()
