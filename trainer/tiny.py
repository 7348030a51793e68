"""A tiny random Llama model with a locally trained tokenizer, built in a few seconds.

Tests use it in place of SmolLM2-135M: it has the same architecture family (Llama, GQA,
tied embeddings, ChatML chat template with ``<|im_start|>``/``<|im_end|>``), loads in both
transformers and vLLM's CPU build, and is small enough (~0.5M parameters, ~1000-token
vocabulary) for a full rollout/learn/sync cycle to take seconds.

    python -m trainer.tiny /tmp/tiny-model

It is *not* a language model: weights are random, so it produces gibberish. Its
initialisation is wider than usual (std 0.1) so that next-token distributions are peaked
enough for logprob comparisons in tests to mean something.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import torch

# Special tokens, in the same order (ids 0, 1, 2) as SmolLM2.
UNK, BOS, EOS = "<|endoftext|>", "<|im_start|>", "<|im_end|>"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_ENGLISH = """\
You are a helpful assistant. Answer the question and put the final answer on the last line.
The quick brown fox jumps over the lazy dog. A model learns from rewards given for answers.
What is the sum of the numbers? Calculate the result step by step and show your work.
How many times does the letter appear in the word? Count the letters one by one.
Spell the word backwards. Which word comes first in alphabetical order? Sort the list.
Reverse the string, then give the answer. The answer is correct. The answer is wrong.
Think about the problem, then write Answer: followed by the number.
system user assistant question answer reasoning result total plus minus times divided by
equals add subtract multiply divide number digit letter word sentence count first last
"""

_WORDS = ["apple", "banana", "strawberry", "letter", "mississippi", "house", "river",
          "computer", "language", "model", "reward", "python", "table", "garden", "number"]


def _corpus(seed: int = 0) -> list[str]:
    """Deterministic training text: English, digits, arithmetic and letter prompts."""
    rng = random.Random(seed)
    lines = _ENGLISH.splitlines()
    lines.append(" ".join(str(i) for i in range(200)))
    for _ in range(400):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        op = rng.choice(["+", "-", "*", "/"])
        lines.append(f"What is {a} {op} {b}? Answer: {a + b if op == '+' else a - b}")
    for _ in range(200):
        w = rng.choice(_WORDS)
        ch = rng.choice(w)
        lines.append(f'How many times does the letter "{ch}" appear in "{w}"? '
                     f"Answer: {w.count(ch)}")
        lines.append(f"Spell {w} backwards: {w[::-1]}")
    return lines


def build_tokenizer(vocab_size: int = 1000, seed: int = 0):
    """Train a byte-level BPE tokenizer on the built-in corpus.

    Args:
        vocab_size: target vocabulary size in tokens (the result can be slightly smaller
            when the corpus runs out of merges).
        seed: seed of the corpus generator.

    Returns:
        A `transformers.PreTrainedTokenizerFast` with bos ``<|im_start|>``, eos and pad
        ``<|im_end|>``, unk ``<|endoftext|>`` (ids 1, 2, 2, 0) and a ChatML chat template.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[UNK, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS, unk_token=UNK
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(out_dir: Path, seed: int = 0, vocab_size: int = 1000) -> Path:
    """Write a tiny random Llama checkpoint (safetensors, float32) with its tokenizer.

    Shape: hidden 128, 2 layers, 4 query heads / 2 KV heads of head_dim 32 (a size vLLM's
    CPU attention supports), MLP 256, 1024 positions, tied embeddings.

    Args:
        out_dir: directory to write into (created; existing files are overwritten).
        seed: torch seed for the weights and seed of the tokenizer corpus.
        vocab_size: tokenizer vocabulary size in tokens (~1000).

    Returns:
        `out_dir`, loadable with `AutoModelForCausalLM.from_pretrained` and `vllm.LLM`.
    """
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    tok = build_tokenizer(vocab_size, seed)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=1024,
        rms_norm_eps=1e-5,
        initializer_range=0.1,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    return out_dir


if __name__ == "__main__":
    print(build_tiny_model(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-model")))


def with_window(model_dir: Path, out_dir: Path, positions: int) -> Path:
    """A copy of a checkpoint at `out_dir` whose window is `positions` tokens (its config's
    ``max_position_embeddings``; RoPE models run past the positions they were built with),
    for tests of prompts longer than the tiny model's 1024 positions.

    Returns:
        `out_dir`.
    """
    out_dir = Path(out_dir)
    shutil.copytree(model_dir, out_dir)
    conf = json.loads((out_dir / "config.json").read_text())
    (out_dir / "config.json").write_text(json.dumps({**conf, "max_position_embeddings": positions}))
    return out_dir
