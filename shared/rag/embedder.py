"""Sentence embeddings from a model2vec StaticModel, strictly offline.

EMBEDDING_MODEL (a local folder or a Hugging Face hub id already in the local cache)
is tried first and never downloaded; when it cannot be loaded, the model committed
in the repo is used and one warning names both.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from shared.config import PROJECT_ROOT, Settings
from shared.logging import get_logger

log = get_logger(__name__)

OFFLINE_MODEL = PROJECT_ROOT / "models" / "reactome-minilm-256"
_cache: dict[tuple[str, str, str], Embedder] = {}
_lock = threading.Lock()


def slug(name: str) -> str:
    """An identifier-safe form of a model name (`minishlab/potion-base-32M` -> `minishlab_potion_base_32M`)."""
    return re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_")


class Embedder:
    """A loaded StaticModel, its name and the vector index that goes with it."""

    def __init__(self, model: object, model_name: str, index_name: str) -> None:
        self.model = model
        self.model_name = model_name
        self.index_name = index_name

    @property
    def dim(self) -> int:
        return int(self.model.dim)  # type: ignore[attr-defined]

    def encode(self, texts: Sequence[str], batch_size: int = 2048) -> np.ndarray:
        """float32 rows, L2-normalised (zero vectors stay zero)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = self.model.encode(list(texts), batch_size=batch_size, use_multiprocessing=False)  # type: ignore[attr-defined]
        vectors = np.asarray(raw, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def _local_path(name: str) -> Path:
    """A local folder for `name`: the path itself, or the hub cache entry (no network)."""
    path = Path(name).expanduser()
    if not path.is_absolute():
        candidate = PROJECT_ROOT / path
        path = candidate if candidate.exists() else path
    if path.exists():
        return path
    if name.startswith((".", "/", "~")) or name.count("/") != 1:
        raise FileNotFoundError(f"no model folder at {name}")
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id=name, local_files_only=True))


def _load(path: Path) -> object:
    from model2vec import StaticModel

    return StaticModel.from_pretrained(path, force_download=False)


def offline_index_name(settings: Settings, model_dir: Path = OFFLINE_MODEL) -> str:
    """Index name for the committed model: graph name + model folder name."""
    return f"{settings.turingdb_graph}_{slug(model_dir.name)}"


def load_embedder(settings: Settings, fallback: Path = OFFLINE_MODEL) -> Embedder:
    """The configured model if it loads offline, else the committed one (cached per process)."""
    key = (settings.embedding_model, str(fallback), settings.turingdb_graph + "|" + settings.vector_index_name)
    with _lock:
        if key in _cache:
            return _cache[key]
        try:
            embedder = Embedder(_load(_local_path(settings.embedding_model)), settings.embedding_model, settings.vector_index_name)
        except Exception as exc:  # noqa: BLE001 - any failure means: use the offline model
            embedder = Embedder(_load(fallback), fallback.name, offline_index_name(settings, fallback))
            log.warning(
                "embedding_model_fallback",
                configured=settings.embedding_model,
                used=str(fallback.relative_to(PROJECT_ROOT)) if fallback.is_relative_to(PROJECT_ROOT) else str(fallback),
                index=embedder.index_name,
                reason=f"{type(exc).__name__}: {str(exc)[:200]}",
            )
        _cache[key] = embedder
        return embedder
