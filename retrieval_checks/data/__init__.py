"""Reading embeddings, labels and ids from files (.npy, .npz, .safetensors, .pt, .parquet)."""

from ._files import EmbeddingSet, load_embeddings, read_arrays, read_npy

__all__ = ["EmbeddingSet", "load_embeddings", "read_arrays", "read_npy"]
