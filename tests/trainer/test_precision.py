"""`dtype: auto`: bfloat16 only where this machine computes it natively, pinned into the
run's config when the config is validated (so a run row and a resume keep it)."""

import pytest
from pydantic import ValidationError

import trainer.precision as precision
from core.errors import ConfigError
from trainer.config import RunConfig, parse_config

AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"


@pytest.fixture
def cpuinfo(tmp_path, monkeypatch):
    """Write a fake /proc/cpuinfo; no CUDA device."""
    monkeypatch.setattr(precision, "_cuda_bf16", lambda: None)

    def write(text: str):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        return path
    return write


@pytest.mark.parametrize("text, want, flag", [
    (AVX512_BF16, "bfloat16", "avx512_bf16"), (AMX, "bfloat16", "amx_bf16"), (AVX2, "float32", "neither")])
def test_auto_is_bf16_only_on_a_cpu_with_native_bf16(cpuinfo, text, want, flag):
    dtype, why = precision.auto_dtype(cpuinfo=cpuinfo(text))
    assert dtype == want
    assert flag in why


def test_auto_is_float32_where_the_cpu_flags_cant_be_read(cpuinfo, tmp_path):
    assert precision.cpu_flags(tmp_path / "missing") == set()
    assert precision.auto_dtype(cpuinfo=tmp_path / "missing")[0] == "float32"
    assert precision.auto_dtype(cpuinfo=cpuinfo("processor\t: 0\nmodel name\t: x\n"))[0] == "float32"


@pytest.mark.parametrize("native, want", [(True, "bfloat16"), (False, "float32")])
def test_a_cuda_device_decides_over_the_cpu(cpuinfo, monkeypatch, native, want):
    monkeypatch.setattr(precision, "_cuda_bf16", lambda: (native, "NVIDIA X"))
    dtype, why = precision.auto_dtype(cpuinfo=cpuinfo(AVX2 if native else AVX512_BF16))
    assert dtype == want
    assert "NVIDIA X" in why


@pytest.mark.parametrize("text", [AVX512_BF16, AMX])
def test_auto_keeps_a_lora_run_in_float32_even_with_native_bf16(cpuinfo, monkeypatch, text):
    dtype, why = precision.auto_dtype(lora=True, cpuinfo=cpuinfo(text))
    assert dtype == "float32" and "LoRA" in why
    monkeypatch.setattr(precision, "_cuda_bf16", lambda: (True, "NVIDIA X"))
    assert precision.auto_dtype(lora=True)[0] == "float32"


def test_the_config_tells_auto_whether_it_trains_lora(monkeypatch):
    seen = []
    monkeypatch.setattr(precision, "auto_dtype", lambda lora: seen.append(lora) or ("float32", "x"))
    RunConfig(dtype="auto", lora_rank=16)
    RunConfig(dtype="auto")
    assert seen == [True, False]
    with pytest.raises(ValidationError, match="lora_rank"):  # a bad rank is the field's problem, not auto's
        RunConfig(dtype="auto", lora_rank="sixteen")


def test_a_cuda_device_that_cant_be_read_claims_no_bf16(monkeypatch):
    import torch

    def broken(*args, **kw):
        raise RuntimeError("CUDA error: no device\nmore")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", broken)
    native, name = precision._cuda_bf16()
    assert native is False and "no device" in name and "more" not in name


def test_the_learner_refuses_an_unresolved_dtype(tiny_model_dir):
    from trainer.learner import DeepSpeedLearner

    cfg = RunConfig(model=str(tiny_model_dir)).model_copy(update={"dtype": "auto"})  # skips validation
    with pytest.raises(ConfigError, match="field 'dtype'.*unresolved"):
        DeepSpeedLearner(tiny_model_dir, cfg)


def test_this_machine_resolves_consistently_with_its_flags():
    dtype, _ = precision.auto_dtype()
    cuda = precision._cuda_bf16()
    native = cuda[0] if cuda else bool(set(precision.BF16_CPU_FLAGS) & precision.cpu_flags())
    assert dtype == ("bfloat16" if native else "float32")


@pytest.mark.parametrize("pinned", ["bfloat16", "float32"])
def test_the_config_pins_auto_and_says_so(monkeypatch, tiny_model_dir, pinned):
    monkeypatch.setattr(precision, "auto_dtype", lambda lora: (pinned, "because"))
    cfg = parse_config({"dtype": "auto", "model": str(tiny_model_dir)})
    assert cfg.dtype == pinned
    assert cfg.dtype_note == f"dtype: auto -> {pinned}: because"
    stored = cfg.model_dump(mode="json")
    assert stored["dtype"] == pinned  # the run row records the dtype, not "auto"
    again = RunConfig(**stored)  # a resume on a machine that would resolve differently
    assert again.dtype == pinned and again.dtype_note is None
    assert cfg.model_copy(update={"name": "x"}).dtype_note == cfg.dtype_note


def test_a_named_dtype_is_kept_and_a_wrong_one_names_the_choices(monkeypatch, tiny_model_dir):
    monkeypatch.setattr(precision, "auto_dtype", lambda lora: pytest.fail("auto resolved without auto"))
    assert parse_config({"dtype": "bfloat16", "model": str(tiny_model_dir)}).dtype_note is None
    with pytest.raises(ConfigError, match="'float32', 'bfloat16' or 'auto'"):
        parse_config({"dtype": "fp16", "model": str(tiny_model_dir)})
