"""Model kinds of the libraries (sentence_transformers, huggingface, open_clip, timm),
offline, with tiny randomly initialised models built here and saved with
``save_pretrained`` / ``save``: embeddings equal a direct call of the library, the
embedding cache hits on a second run and misses after the weights (or the tokenizer)
change, and errors name the missing directory or the wrong modality.

open_clip and timm need torchvision; where it does not import beside torch (PyPI's
torchvision against a local CPU torch: ``operator torchvision::nms does not exist``),
their tests skip with that reason."""

from __future__ import annotations

import json
import os
import textwrap
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import InputError, SuiteError, SuiteRunner, load_suite
from retrieval_checks.models import EmbeddingCache, HubModel, load

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")

TEXTS = [
    "the cat and the dog",
    "a blue bird in the river",
    "search model",
    "text query document",
    "red fish",
    "green tree stone",
    "the",
    "dog dog dog cat",
]
WORDS = (
    "the a of and to in is retrieval model query document search text cat dog bird fish red blue green tree "
    "stone river"
).split()


def make_bert(path, seed: int = 0, vocab_extra: tuple = ()):
    """A randomly initialised 1-layer BERT (hidden 16) and its WordPiece tokenizer (a
    vocabulary written here), saved with save_pretrained."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *WORDS,
        *letters,
        *("##" + c for c in letters),
        *vocab_extra,
    ]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    import inspect

    if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters:  # transformers >= 5
        tokenizer = BertTokenizerFast(
            vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True, model_max_length=24
        )
    else:
        tokenizer = BertTokenizerFast(
            vocab_file=str(path / "vocab.txt"), do_lower_case=True, model_max_length=24
        )
    assert tokenizer.convert_ids_to_tokens(tokenizer("cat river").input_ids) == [
        "[CLS]",
        "cat",
        "river",
        "[SEP]",
    ]
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def make_sentence_transformer(path, seed: int = 0):
    """A sentence-transformers model (the tiny BERT + mean pooling) with a 'query: '
    prompt, saved with model.save."""
    from sentence_transformers import SentenceTransformer, models

    bert = make_bert(path.parent / (path.name + "_bert"), seed)
    transformer = models.Transformer(str(bert))
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(
        modules=[transformer, pooling], prompts={"query": "query: ", "document": ""}, device="cpu"
    ).save(str(path))
    return path


def _vision(name: str):
    """The module, or a skip saying why it cannot be imported here (any exception:
    torchvision's missing operators are a RuntimeError)."""
    try:
        return __import__(name)
    except Exception as exc:  # noqa: BLE001
        why = (
            ""
            if isinstance(exc, ImportError)
            else "; PyPI torchvision does not load beside this CPU torch"
        )
        pytest.skip(f"{name} cannot be imported here ({type(exc).__name__}: {str(exc)[:120]}){why}")


# ---------------------------------------------------------------- sentence-transformers
def test_sentence_transformers_equals_encode_query_and_encode_document(tmp_path):
    from sentence_transformers import SentenceTransformer

    path = make_sentence_transformer(tmp_path / "st")
    model = load("sentence_transformers", path, device="cpu", normalize=True)
    direct = SentenceTransformer(str(path), local_files_only=True, device="cpu")
    q = rc.embed(model, TEXTS, part="queries", batch_size=3)
    d = rc.embed(model, TEXTS, part="gallery", batch_size=3)
    np.testing.assert_allclose(
        q, direct.encode_query(TEXTS, normalize_embeddings=True), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        d, direct.encode_document(TEXTS, normalize_embeddings=True), rtol=1e-5, atol=1e-6
    )
    assert np.abs(q - d).max() > 1e-3  # the model's own 'query: ' prompt applies to queries only
    assert q.dtype == np.float32 and q.shape == (len(TEXTS), 16)


def test_sentence_transformers_explicit_prompts_and_max_length(tmp_path):
    from sentence_transformers import SentenceTransformer

    path = make_sentence_transformer(tmp_path / "st")
    model = load(
        "sentence_transformers",
        path,
        device="cpu",
        query_prompt="search query ",
        document_prompt="text ",
        max_length=5,
    )
    direct = SentenceTransformer(str(path), local_files_only=True, device="cpu")
    direct.max_seq_length = 5
    np.testing.assert_allclose(
        model.encode(TEXTS, part="queries"),
        direct.encode(TEXTS, prompt="search query "),
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        model.encode(TEXTS, part="gallery"),
        direct.encode(TEXTS, prompt="text "),
        rtol=1e-5,
        atol=1e-6,
    )
    named = load("sentence_transformers", path, device="cpu", query_prompt_name="document")
    direct.max_seq_length = 24
    np.testing.assert_allclose(
        named.encode(TEXTS, part="queries"), direct.encode(TEXTS, prompt=""), rtol=1e-5, atol=1e-6
    )


# ---------------------------------------------------------------- huggingface
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_huggingface_pooling_equals_a_direct_transformers_call(tmp_path, pooling):
    from transformers import AutoModel, AutoTokenizer

    path = make_bert(tmp_path / "bert")
    model = load("huggingface", path, device="cpu", pooling=pooling, max_length=6, normalize=True)
    got = rc.embed(model, TEXTS, batch_size=3)
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    net = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
    with torch.no_grad():
        enc = tok(TEXTS, padding=True, truncation=True, max_length=6, return_tensors="pt")
        h = net(**enc).last_hidden_state
        if pooling == "cls":
            want = h[:, 0]
        else:
            m = enc["attention_mask"].unsqueeze(-1).float()
            want = (h * m).sum(1) / m.sum(1)
        want = torch.nn.functional.normalize(want, dim=-1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_truncated_texts_are_counted_and_reported(tmp_path):
    from transformers import AutoTokenizer

    path = make_bert(tmp_path / "bert")
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    lengths = [len(tok("q " + t).input_ids) for t in TEXTS]
    want = sum(n > 6 for n in lengths)
    assert 0 < want < len(TEXTS)
    model = load("huggingface", path, device="cpu", max_length=6, query_prompt="q ")
    with pytest.warns(
        RuntimeWarning,
        match=rf"{want} of {len(TEXTS)} texts \(queries\) are longer than "
        r"max_length=6 tokens and were cut",
    ):
        model.encode(TEXTS, part="queries")
    st = load(
        "sentence_transformers",
        make_sentence_transformer(tmp_path / "st"),
        device="cpu",
        max_length=6,
        query_prompt="q ",
    )
    with pytest.warns(
        RuntimeWarning, match=rf"{want} of {len(TEXTS)} texts \(queries\) are longer"
    ):
        st.encode(TEXTS, part="queries")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load("huggingface", path, device="cpu", max_length=24).encode(
            TEXTS
        )  # nothing cut: no warning


def test_huggingface_default_max_length_is_the_tokenizers(tmp_path):
    path = make_bert(tmp_path / "bert")
    long = [" ".join(["dog"] * 40), " ".join(["dog"] * 22) + " cat" * 18]
    model = load("huggingface", path, device="cpu")
    with pytest.warns(
        RuntimeWarning, match=r"2 of 2 texts \(inputs\) are longer than max_length=24"
    ):
        a, b = model.encode(long)
    np.testing.assert_array_equal(
        a, b
    )  # both cut at the tokenizer's 24 tokens: the same first 22 words
    np.testing.assert_allclose(
        model.encode(["query document"], part="queries"),
        load("huggingface", path, device="cpu", query_prompt="query ").encode(
            ["document"], part="queries"
        ),
        rtol=1e-5,
        atol=1e-6,
    )


# ---------------------------------------------------------------- the cache
SUITE = """
datasets:
  toy: {queries: data/q.npz, gallery: data/g.npz}
models:
  st: {sentence_transformers: st, normalize: true, batch_size: 4}
  bert: {huggingface: bert, pooling: cls}
checks:
  - {metric: map, at_least: 0.01}
"""


def _text_dataset(tmp_path):
    (tmp_path / "data").mkdir()
    rng = np.random.default_rng(0)
    q = np.array(TEXTS)
    g = np.array([" ".join(rng.choice(WORDS, 4)) for _ in range(20)])
    np.savez(tmp_path / "data/q.npz", inputs=q, labels=np.arange(len(q)) % 3)
    np.savez(tmp_path / "data/g.npz", inputs=g, labels=np.arange(len(g)) % 3)
    (tmp_path / "rc_suite.yaml").write_text(textwrap.dedent(SUITE).lstrip())
    return q, g


def _run(tmp_path):
    suite = load_suite(tmp_path / "rc_suite.yaml")
    runner = SuiteRunner(cache_dir=tmp_path / "cache", device="cpu")
    for case in suite.cases:
        runner.run(suite, case)
    return runner


def test_suite_values_cache_hits_and_misses_after_the_weights_change(tmp_path):
    from sentence_transformers import SentenceTransformer

    q, g = _text_dataset(tmp_path)
    make_sentence_transformer(tmp_path / "st")
    make_bert(tmp_path / "bert")
    first = _run(tmp_path)
    assert (first.cache.hits, first.cache.misses, first.embedded) == (0, 4, 4)
    st = SentenceTransformer(str(tmp_path / "st"), local_files_only=True, device="cpu")
    want = rc.evaluate(
        st.encode_query(list(q), normalize_embeddings=True),
        st.encode_document(list(g), normalize_embeddings=True),
        query_labels=np.arange(len(q)) % 3,
        gallery_labels=np.arange(len(g)) % 3,
        metrics=["map"],
    )["map"]
    got = {k[1]: v["map"] for k, v in first.evaluations._results.items()}
    assert got["st"] == pytest.approx(want, abs=1e-6)
    second = _run(tmp_path)
    assert (second.cache.hits, second.cache.misses, second.embedded) == (4, 0, 0)
    assert {k[1]: v["map"] for k, v in second.evaluations._results.items()} == got
    make_sentence_transformer(tmp_path / "st", seed=1)  # new weights, same files
    third = _run(tmp_path)
    assert (third.cache.hits, third.cache.misses, third.embedded) == (
        2,
        2,
        2,
    )  # bert hits, st misses
    tokenizer = json.loads((tmp_path / "bert/tokenizer_config.json").read_text())
    tokenizer["do_lower_case"] = False  # a tokenizer change alone misses too
    (tmp_path / "bert/tokenizer_config.json").write_text(json.dumps(tokenizer))
    fourth = _run(tmp_path)
    assert (fourth.cache.hits, fourth.cache.misses) == (2, 2)


def test_the_fingerprint_covers_settings_and_every_file(tmp_path):
    path = make_bert(tmp_path / "bert")
    a = load("huggingface", path, device="cpu")
    assert a.fingerprint() == load("huggingface", path, device="cpu").fingerprint()
    assert a.fingerprint() != load("huggingface", path, device="cpu", pooling="cls").fingerprint()
    (path / "notes.txt").write_text("x")
    assert a.fingerprint() != HubModel("huggingface", path, {}, device="cpu").fingerprint()
    key = EmbeddingCache.key(a.fingerprint(), TEXTS, "queries")
    assert key != EmbeddingCache.key(a.fingerprint(), TEXTS[::-1], "queries")
    assert key != EmbeddingCache.key(
        a.fingerprint(), ["the cat and the", "dog", *TEXTS[1:]], "queries"
    )
    assert key == EmbeddingCache.key(a.fingerprint(), list(TEXTS), "queries")


# ---------------------------------------------------------------- errors
def test_a_missing_directory_is_named(tmp_path):
    with pytest.raises(
        InputError,
        match=rf"huggingface model: {tmp_path}/nowhere does not exist .*nothing is "
        "downloaded",
    ):
        load("huggingface", tmp_path / "nowhere")
    with pytest.raises(
        InputError, match=rf"sentence_transformers model: {tmp_path}/nowhere does not exist"
    ):
        load("sentence_transformers", tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=rf"{tmp_path}/empty: not a Hugging Face model directory"):
        load("huggingface", tmp_path / "empty")
    (tmp_path / "suite.yaml").write_text(
        textwrap.dedent("""
        datasets:
          toy: {queries: q.npz}
        models:
          st: {sentence_transformers: models/minilm}
        checks:
          - {metric: map, at_least: 0.1}
        """).lstrip()
    )
    np.savez(tmp_path / "q.npz", inputs=np.array(TEXTS), labels=np.zeros(len(TEXTS)))
    with pytest.raises(
        SuiteError,
        match=r"suite.yaml:4: models.st.sentence_transformers: directory "
        r"'models/minilm' does not exist \(looked for .*models/minilm'\)",
    ):
        load_suite(tmp_path / "suite.yaml")


def test_the_wrong_modality_is_named(tmp_path):
    model = load("huggingface", make_bert(tmp_path / "bert"), device="cpu")
    images = np.zeros((2, 8, 8, 3), np.uint8)
    with pytest.raises(
        InputError,
        match=r"huggingface model .*: embeds text, but the gallery are images \(a uint8 "
        r"array of shape \(2, 8, 8, 3\)\)",
    ):
        rc.embed(model, images, part="gallery")
    with pytest.raises(
        InputError,
        match=r"torch module, which takes numeric tensors; embed texts with a text model",
    ):
        rc.embed(torch.nn.Linear(3, 2), TEXTS)
    with pytest.raises(InputError, match=r"transform= applies to torch modules' input tensors"):
        rc.embed(model, TEXTS, transform=lambda x: x)
    with pytest.raises(InputError, match=r"inputs\[1\] is int, not a text"):
        rc.embed(model, ["a", 3])
    with pytest.raises(InputError, match=r"inputs\[1\] is int among texts"):
        rc.embed(lambda texts: np.zeros((len(texts), 2)), ["a", 3])


def test_a_library_error_names_the_model_and_the_rows(tmp_path):
    """max_length beyond the model's 64 positions: the library's own error on that batch,
    with the model's path, the part and the rows."""
    path = make_bert(tmp_path / "bert")
    model = load("huggingface", path, device="cpu", max_length=100)
    with pytest.raises(
        InputError, match=rf"huggingface model {path}: embedding gallery rows 2-3 failed \("
    ):
        model.encode(["cat", "dog", "red", " ".join(["dog"] * 90)], part="gallery", batch_size=2)


def test_wrong_settings_are_located(tmp_path):
    make_bert(tmp_path / "bert")
    np.savez(tmp_path / "q.npz", inputs=np.array(TEXTS), labels=np.zeros(len(TEXTS)))
    cases = [
        ("{huggingface: bert, pooling: max}", r"models.m.pooling: expected one of mean, cls"),
        ("{huggingface: bert, max_length: 0}", r"models.m.max_length: expected an integer >= 1"),
        (
            "{huggingface: bert, normalize: yes please}",
            r"models.m.normalize: expected true or false",
        ),
        (
            "{huggingface: bert, query_prompt_name: q}",
            r"models.m.query_prompt_name: query_prompt_name goes "
            r"with sentence_transformers models, not huggingface",
        ),
        (
            "{callable: x.py:f, pooling: cls}",
            r"models.m.pooling: pooling goes with huggingface models",
        ),
        (
            "{open_clip: ViT-B-32}",
            r"models.m: open_clip: names the architecture; give its weights in "
            r"checkpoint:",
        ),
        ("{timm: bert, checkpoint: nothing.pt}", r"models.m.checkpoint: file 'nothing.pt'"),
        (
            "{sentence_transformers: bert, query_prompt: a, query_prompt_name: b}",
            r"models.m.query_prompt_name: give query_prompt or query_prompt_name, not both",
        ),
    ]
    for model, message in cases:
        (tmp_path / "s.yaml").write_text(
            f"datasets:\n  toy: {{queries: q.npz}}\nmodels:\n  m: {model}\n"
            "checks:\n  - {metric: map, at_least: 0.1}\n"
        )
        with pytest.raises(SuiteError, match=message):
            load_suite(tmp_path / "s.yaml")
    with pytest.raises(InputError, match=r"unknown setting 'pooling'; sentence_transformers takes"):
        load("sentence_transformers", tmp_path / "bert", pooling="cls")


def test_hf_hub_offline_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    load("huggingface", make_bert(tmp_path / "bert"), device="cpu")
    assert os.environ["HF_HUB_OFFLINE"] == "1"


# ---------------------------------------------------------------- open_clip and timm (need torchvision)
TINY_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def _images(n=5, size=40, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(n, size, size + 6, 3), dtype=np.uint8)


def test_open_clip_towers_equal_direct_calls(tmp_path):
    open_clip = _vision("open_clip")
    from PIL import Image

    config = tmp_path / "rc-tiny-clip.json"
    config.write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(str(config))
    torch.manual_seed(0)
    net, _, preprocess = open_clip.create_model_and_transforms("rc-tiny-clip")
    torch.save(net.state_dict(), tmp_path / "clip.pt")
    model = load(
        "open_clip",
        tmp_path / "clip.pt",
        model_name="rc-tiny-clip",
        config=config,
        normalize=True,
        device="cpu",
    )
    images = _images()
    got_i = rc.embed(model, images, part="images", batch_size=2)
    got_t = rc.embed(model, TEXTS, part="captions", batch_size=3)
    net.eval()
    with torch.no_grad():
        want_i = net.encode_image(
            torch.stack([preprocess(Image.fromarray(im)) for im in images]), normalize=True
        )
        want_t = net.encode_text(open_clip.get_tokenizer("rc-tiny-clip")(TEXTS), normalize=True)
    np.testing.assert_allclose(got_i, want_i.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_t, want_t.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(
        InputError, match=r"images: dtype float32; the model's own preprocessing takes uint8"
    ):
        rc.embed(model, images.astype(np.float32))
    # an image_text suite: images and caption texts through the two towers, under the cache
    np.savez(tmp_path / "images.npz", inputs=images)
    captions = np.array(TEXTS[:5] + TEXTS[:5])
    np.savez(tmp_path / "captions.npz", inputs=captions, image=np.arange(10) % 5)
    (tmp_path / "rc_clip.yaml").write_text(
        textwrap.dedent(f"""
        datasets:
          pairs: {{type: image_text, images: images.npz, captions: captions.npz, protocol: all}}
        models:
          clip: {{open_clip: rc-tiny-clip, checkpoint: clip.pt, config: {config.name}, normalize: true}}
        checks:
          - {{metric: i2t_recall@1, at_least: 0.01}}
        """).lstrip()
    )
    suite = load_suite(tmp_path / "rc_clip.yaml")
    for expected in ((0, 2), (2, 0)):
        runner = SuiteRunner(cache_dir=tmp_path / "cache", device="cpu")
        try:
            runner.run(suite, suite.cases[0])
        except AssertionError:
            pass  # the gate's verdict on random weights does not matter here
        assert (runner.cache.hits, runner.cache.misses) == expected
    (value,) = [v["i2t_recall@1"] for v in runner.evaluations._results.values()]
    with torch.no_grad():
        want_c = net.encode_text(
            open_clip.get_tokenizer("rc-tiny-clip")(list(captions)), normalize=True
        ).numpy()
    want = rc.evaluate_image_text(
        want_i.numpy(), want_c, np.arange(10) % 5, metrics=["i2t_recall@1"], protocol="all"
    )["i2t_recall@1"]
    assert value == pytest.approx(want, abs=1e-6)


def test_timm_equals_a_direct_call_from_a_directory_and_a_checkpoint(tmp_path):
    timm = _vision("timm")
    from PIL import Image
    from timm.data import create_transform, resolve_data_config

    torch.manual_seed(0)
    net = timm.create_model("test_vit", pretrained=False, num_classes=0).eval()
    timm.models.save_for_hf(net, str(tmp_path / "vit"))
    torch.save(net.state_dict(), tmp_path / "vit.pth")
    images = _images(size=64)
    transform = create_transform(**resolve_data_config({}, model=net))
    with torch.no_grad():  # in the library's batches of 2: BLAS sums depend on the batch shape
        batches = [images[i : i + 2] for i in range(0, len(images), 2)]
        want = np.concatenate(
            [
                net(torch.stack([transform(Image.fromarray(im)) for im in b])).numpy()
                for b in batches
            ]
        )
    for model in (
        load("timm", tmp_path / "vit", device="cpu"),
        load("timm", tmp_path / "vit.pth", model_name="test_vit", device="cpu"),
    ):
        # atol 1e-5 on outputs of order 1: the float32 sums of another thread count or BLAS
        # build move near-zero outputs by ~1e-6 (seen on a 16-core GPU host: 1.1e-6 on one
        # value of 320); a wrong transform or weight moves them by ~1e-1
        np.testing.assert_allclose(
            rc.embed(model, images, batch_size=2), want, rtol=1e-5, atol=1e-5
        )
        with pytest.raises(
            InputError, match=r"timm model .*: embeds image, but the queries are texts"
        ):
            rc.embed(model, TEXTS, part="queries")
    # a pretrained config laid over the architecture's: its mean, std and size make the transform
    cfg = {"mean": [0.2, 0.3, 0.4], "std": [0.5, 0.6, 0.7], "crop_pct": 0.75}
    (tmp_path / "cfg.json").write_text(
        json.dumps({"architecture": "test_vit", "pretrained_cfg": cfg})
    )
    model = load(
        "timm",
        tmp_path / "vit.pth",
        model_name="test_vit",
        config=tmp_path / "cfg.json",
        device="cpu",
    )
    twin = timm.create_model(
        "test_vit", pretrained=False, num_classes=0, pretrained_cfg_overlay=cfg
    ).eval()
    twin.load_state_dict(net.state_dict())
    own = create_transform(**resolve_data_config({}, model=twin))
    assert tuple(resolve_data_config({}, model=twin)["mean"]) == (0.2, 0.3, 0.4)
    with torch.no_grad():
        want_cfg = twin(torch.stack([own(Image.fromarray(im)) for im in images])).numpy()
    np.testing.assert_allclose(rc.embed(model, images), want_cfg, rtol=1e-5, atol=1e-6)
    assert np.abs(want_cfg - want).max() > 1e-3
    with pytest.raises(
        InputError, match=r"timm model: config goes with model_name and a checkpoint"
    ):
        load("timm", tmp_path / "vit", config=tmp_path / "cfg.json")
    before = load("timm", tmp_path / "vit", device="cpu").fingerprint()
    torch.manual_seed(1)
    timm.models.save_for_hf(
        timm.create_model("test_vit", pretrained=False, num_classes=0), str(tmp_path / "vit")
    )
    assert load("timm", tmp_path / "vit", device="cpu").fingerprint() != before


def test_vision_kinds_without_torchvision_are_a_clear_error(tmp_path):
    """Where open_clip cannot be imported, loading one says which package and why."""
    try:
        import open_clip  # noqa: F401
    except Exception:  # noqa: BLE001
        (tmp_path / "c.pt").write_bytes(b"x")
        with pytest.raises(
            InputError,
            match=r"model kind 'open_clip' needs the open_clip_torch package, which "
            r"cannot be imported here",
        ):
            load("open_clip", tmp_path / "c.pt", model_name="ViT-B-32")
    else:
        pytest.skip("open_clip imports here: the error path is not reachable")
