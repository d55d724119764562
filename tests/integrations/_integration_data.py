"""Tiny models and synthetic data shared by the integration tests (no download)."""

from __future__ import annotations

import numpy as np


def blobs(
    n_per_class: int = 12, n_classes: int = 4, d: int = 8, seed: int = 0, spread: float = 1.0
):
    """Gaussian blobs: ``n_classes`` labels, ``n_per_class`` items each, float32."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d)) * 2.0
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = centres[y] + spread * rng.normal(size=(y.size, d))
    order = rng.permutation(y.size)
    return x[order].astype(np.float32), y[order]


WORDS = (
    "apple banana cherry grape lemon mango dog cat mouse horse sheep goat car bus train bike boat plane "
    "red green blue black white pink"
).split()
#: Four topics of six words each: a text's topic is its label.
TOPICS = [WORDS[i : i + 6] for i in range(0, 24, 6)]


def tiny_bert(path, seed: int = 0, hidden: int = 16) -> str:
    """A random one-layer BERT with a word-level vocabulary, saved under ``path`` (no
    download); returns the directory as a string."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n"
    )
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=5 + len(WORDS),
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=32,
    )
    BertModel(cfg).save_pretrained(path)
    BertTokenizer(str(path / "vocab.txt")).save_pretrained(path)
    return str(path)


def topic_texts(n: int, seed: int, words_per_text: int = 3):
    """``n`` texts of ``words_per_text`` words drawn from one topic each, and the topics."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(TOPICS), size=n)
    texts = [" ".join(rng.choice(TOPICS[t], size=words_per_text, replace=False)) for t in labels]
    return texts, labels
