"""Running models: ``embed`` (batched, eval mode, any device), the model runners of
YAML suites and their content-addressed embedding cache, and ``load``: models of
sentence-transformers, Hugging Face transformers, open_clip and timm from local files."""

from ._embed import EmbeddingCache, embed, load_model, model_fingerprint
from ._hub import HubModel, load
from ._timeout import call_with_timeout

__all__ = [
    "embed",
    "load",
    "load_model",
    "model_fingerprint",
    "EmbeddingCache",
    "HubModel",
    "call_with_timeout",
]
