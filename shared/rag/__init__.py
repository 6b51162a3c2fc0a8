"""Retrieval: model2vec embeddings, the TuringDB vector index, vector search."""

from shared.rag.embedder import Embedder, load_embedder
from shared.rag.index import IndexReport, build_vector_index
from shared.rag.search import vector_search

__all__ = ["Embedder", "IndexReport", "build_vector_index", "load_embedder", "vector_search"]
