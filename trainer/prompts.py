"""A task rendered as the policy sees it: the domain's chat messages through the model's
chat template, as text and token ids (`render_prompt`). Used by rollouts (`trainer.loop`),
the window check (`trainer.window`) and evaluation.

Not covered: multi-turn episodes' openings (`trainer.episodes.episode_prompt`).
"""

from __future__ import annotations

from core.errors import ConfigError
from domains.contract import Task
from domains.registry import build_messages


def render_prompt(tokenizer, task: Task, context_budget_tokens: int | None = None) -> tuple[str, list[int]]:
    """Render a task through the model's chat template.

    Args:
        context_budget_tokens: retrieval domains: tokens of retrieved context (None: the
            domain's default).

    Returns:
        The prompt text (generation prompt appended) and its token ids.

    Raises:
        ConfigError: the tokenizer has no chat template (a base model's checkpoint).
    """
    messages = build_messages(task, tokenizer, context_budget_tokens)
    text = chat_text(tokenizer, messages, add_generation_prompt=True)
    return text, tokenizer(text, add_special_tokens=False)["input_ids"]


def chat_text(tokenizer, messages: list[dict], **kw) -> str:
    """`messages` through the tokenizer's chat template, as text (``apply_chat_template``'s
    other arguments in `kw`).

    Raises:
        ConfigError: the tokenizer has no chat template (a base model's checkpoint). A
            tokenizer that renders chats without one (mistral-common's) is used as it is.
    """
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, **kw)
    except ValueError as e:
        if getattr(tokenizer, "chat_template", None) is not None:
            raise
        raise ConfigError(f"field 'model': {tokenizer.name_or_path} has no chat template (no chat_template.jinja, "
                          "no chat_template in tokenizer_config.json), and every domain's prompt is chat messages; "
                          "use an instruct model, or add its family's chat_template.jinja to the directory") from e
