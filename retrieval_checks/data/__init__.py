"""Reading embeddings, labels and ids from files (.npy, .npz, .safetensors, .pt, .parquet)."""

from ._files import EmbeddingSet, load_embeddings, read_arrays

__all__ = ["EmbeddingSet", "load_embeddings", "read_arrays"]
