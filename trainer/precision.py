"""The compute dtype a run gets when its config says ``dtype: auto``.

    dtype, why = auto_dtype()   # ("bfloat16", "this CPU has avx512_bf16 (native bf16 matmuls)")

bfloat16 for full fine-tuning where this machine computes it natively: a CUDA GPU with bf16
(Ampere or later), or a CPU with AVX512_BF16 or AMX-BF16 instructions (oneDNN's bf16
matmuls). float32 everywhere else: an AVX2 CPU emulates bf16, slower than float32; and for LoRA runs, whose
adapter merged into bf16 engine weights loses its small updates (`auto_dtype`).

`trainer.config.RunConfig` resolves ``auto`` when the config is validated, so the run row,
its checkpoints and a resume on another machine keep the dtype the run started with.
Measured (README, "Measured"; a 2-core avx512_bf16 CPU): long_context's steps took 30.2-33.1 s
in bf16 against 41.6-48.0 s in float32, one sitting; full fine-tuning on the quickstart's
domains learned less per step in bf16 (held-out 57.6% and 52.0% after 30 steps against
62.1% and 59.5%, two seeds), so the shipped configs name float32. Not covered: fp16 (no
loss scaling here).
"""

from __future__ import annotations

from pathlib import Path

from core.cpu import BF16_CPU_FLAGS, cpu_flags, PROC_CPUINFO


def _cuda_bf16() -> tuple[bool, str] | None:
    """(native bf16?, the device) for the first CUDA device, or None without one. Imports
    torch (a few seconds the first time)."""
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        name = torch.cuda.get_device_name(0)
        return bool(torch.cuda.is_bf16_supported(including_emulation=False)), name
    except RuntimeError as e:  # a driver that lists a device it can't open: no native bf16 claimed
        return False, f"CUDA device 0, unreadable ({str(e).splitlines()[0] if str(e) else 'RuntimeError'})"


def auto_dtype(lora: bool = False, cpuinfo: str | Path = PROC_CPUINFO) -> tuple[str, str]:
    """What ``dtype: auto`` means on this machine, and why.

    Args:
        lora: the run trains LoRA adapters (``lora_rank > 0``): float32 then, whatever the
            hardware. The weight sync merges the adapter into the engine's weights, and in
            bf16 an update smaller than a weight's rounding step (2^-8 of it) is lost there,
            so the engine samples from a policy the learner never had. Measured on the
            quickstart (LoRA, 30 steps, avx512_bf16 CPU): bf16 clipped 3.0% of tokens on average
            against float32's 0%, its learner was no faster (median 13.3 s against 11.0 s a step)
            and its held-out accuracy lower (47.1% against 59.8%).
        cpuinfo: where the CPU's flags are read (tests point it at a fixture).

    Returns:
        ("bfloat16" or "float32", a reason for messages, e.g. "this CPU has avx512_bf16").
        With a CUDA device the run trains and samples there, so the GPU decides; else the
        CPU's flags do. It probes the process that validates the config: Ray workers on
        other machines (`ray_address`) may differ.
    """
    if lora:
        return "float32", ("LoRA: merged into bf16 engine weights, updates below bf16's precision are lost "
                           "(float32 learned more on the quickstart)")
    cuda = _cuda_bf16()
    if cuda is not None:
        native, name = cuda
        if native:
            return "bfloat16", f"the GPU ({name}) computes bf16 natively"
        return "float32", f"the GPU ({name}) has no native bf16"
    flags = cpu_flags(cpuinfo)
    if not flags:
        return "float32", f"no CPU flags in {cpuinfo} (not Linux on x86?), so no native bf16 is assumed"
    have = [f for f in BF16_CPU_FLAGS if f in flags]
    if have:
        return "bfloat16", f"this CPU has {' and '.join(have)} (native bf16 matmuls)"
    return "float32", ("this CPU has neither avx512_bf16 nor amx_bf16, so bf16 would be emulated and slower "
                       "than float32")

