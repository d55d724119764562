"""Running models: ``embed`` (batched, eval mode, any device), the model runners of
YAML suites and their content-addressed embedding cache."""

from ._embed import EmbeddingCache, embed, load_model, model_fingerprint
from ._timeout import call_with_timeout

__all__ = ["embed", "load_model", "model_fingerprint", "EmbeddingCache", "call_with_timeout"]
