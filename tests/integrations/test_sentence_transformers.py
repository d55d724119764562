"""The sentence-transformers evaluator on a tiny random BERT built and saved in the
test (offline): its numbers equal sentence-transformers' own
InformationRetrievalEvaluator on the same model and data, and retrieval_checks.evaluate
on the model's embeddings; names, primary_metric and greater_is_better follow the
library's conventions; gates raise or warn; it runs inside SentenceTransformerTrainer."""

from __future__ import annotations

import os
import warnings

import pytest

# One xdist worker runs this module, the Lightning DDP launch (test_lightning_ddp.py) and
# the Hugging Face modules (test_hf_trainer.py, test_sentence_transformers.py): each of
# Lightning and transformers (with accelerate, datasets) costs ~4.6 CPU-s to import after
# torch, paid by every worker that runs one of their tests (Lightning pulls transformers
# in too, through torchmetrics); under `--dist loadgroup` both workers did. The
# "processes" group already holds the DDP launch, whose worker imports Lightning.
pytestmark = pytest.mark.xdist_group("processes")

os.environ["HF_HUB_OFFLINE"] = "1"

from _integration_data import tiny_bert, topic_texts  # noqa: E402

import retrieval_checks as rc  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)

# sentence-transformers (and the integrations' evaluator, which imports it) is imported by
# the module's autouse fixture, not at collection: the import costs seconds (tens of
# seconds on a loaded 2-core machine), paid by every xdist worker that collects this
# module, also those that run none of its tests. Skipped, saying why, where it is absent.
SentenceTransformer = SentenceEvaluator = InformationRetrievalEvaluator = None
RetrievalChecksEvaluator = None


@pytest.fixture(scope="module", autouse=True)
def _sentence_transformers():
    global SentenceTransformer, SentenceEvaluator, InformationRetrievalEvaluator
    global RetrievalChecksEvaluator
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.evaluation import SentenceEvaluator
    from sentence_transformers.sentence_transformer.evaluation import (
        InformationRetrievalEvaluator,
    )

    from retrieval_checks.integrations import RetrievalChecksEvaluator


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return SentenceTransformer(tiny_bert(tmp_path_factory.mktemp("st") / "bert"), device="cpu")


@pytest.fixture(scope="module")
def ir_data():
    """Queries and a corpus keyed by string ids; a document is relevant to a query of
    the same topic."""
    q_texts, q_topics = topic_texts(8, seed=1)
    c_texts, c_topics = topic_texts(20, seed=2)
    queries = {f"q{i}": t for i, t in enumerate(q_texts)}
    corpus = {f"d{i}": t for i, t in enumerate(c_texts)}
    relevant = {
        f"q{i}": {f"d{j}" for j in range(len(c_texts)) if c_topics[j] == q_topics[i]}
        for i in range(len(q_texts))
    }
    assert all(relevant.values())
    return queries, corpus, relevant, (q_topics, c_topics)


def test_is_a_sentence_evaluator():
    assert issubclass(RetrievalChecksEvaluator, SentenceEvaluator)


def test_equals_the_librarys_information_retrieval_evaluator(model, ir_data):
    queries, corpus, relevant, _ = ir_data
    n = len(corpus)
    ours = RetrievalChecksEvaluator(
        queries,
        corpus,
        relevant,
        name="topics",
        metrics=["hit_rate@1", "hit_rate@3", "precision@3", "recall@3", "mrr", "map", "ndcg"],
    )
    theirs = InformationRetrievalEvaluator(
        queries,
        corpus,
        relevant,
        name="topics",
        mrr_at_k=[n],
        ndcg_at_k=[n],
        accuracy_at_k=[1, 3],
        precision_recall_at_k=[3],
        map_at_k=[n],
        write_csv=False,
        score_functions=None,
    )
    got = model.evaluate(ours)
    ref = model.evaluate(theirs)
    pairs = {
        "hit_rate@1": "accuracy@1",
        "hit_rate@3": "accuracy@3",
        "precision@3": "precision@3",
        "recall@3": "recall@3",
        "mrr": f"mrr@{n}",
        "map": f"map@{n}",
        "ndcg": f"ndcg@{n}",
    }
    for mine, lib in pairs.items():
        assert got[f"topics_{mine}"] == pytest.approx(ref[f"topics_cosine_{lib}"], abs=1e-6), mine
    assert ours.primary_metric == "topics_hit_rate@1" and ours.greater_is_better is True
    assert ours.last_result.n_skipped == 0


def test_equals_evaluate_on_the_models_embeddings_with_labels(model):
    texts, topics = topic_texts(24, seed=3)
    ev = RetrievalChecksEvaluator(
        texts, query_labels=topics, metrics=["map@R", "medr"], primary_metric="medr"
    )
    got = ev(model)
    emb = model.encode(texts, convert_to_numpy=True)
    ref = rc.evaluate(emb, query_labels=topics, metrics=["map@R", "medr"])
    assert got == {"map@R": ref["map@R"], "medr": ref["medr"]}
    assert ev.primary_metric == "medr" and ev.greater_is_better is False  # a rank: lower is better


def test_gates_raise_or_warn(model):
    texts, topics = topic_texts(24, seed=3)
    strict = {"map@R": {"at_least": 0.99}}
    with pytest.raises(AssertionError, match="map@R value"):
        RetrievalChecksEvaluator(texts, query_labels=topics, gates=strict)(model)
    ev = RetrievalChecksEvaluator(
        texts, query_labels=topics, gates=strict, on_failure="warn", name="val"
    )
    with pytest.warns(RuntimeWarning, match="gate on map@R failed"):
        got = ev(model)
    assert got["val_gates_passed"] == 0.0 and ev.primary_metric == "val_map@R"
    loose = RetrievalChecksEvaluator(
        texts, query_labels=topics, gates={"map@R": {"at_least": 0.01}}
    )(model)
    assert loose["gates_passed"] == 1.0


def test_queries_without_relevant_documents_are_reported_and_can_fail_a_gate(model, ir_data):
    queries, corpus, relevant, _ = ir_data
    partial = {
        q: d for q, d in relevant.items() if q != "q0"
    }  # q0 has no relevant document: skipped
    ev = RetrievalChecksEvaluator(
        queries,
        corpus,
        partial,
        gates={"map": {"at_least": 0.01, "max_skipped": 0}},
        on_failure="warn",
    )
    with pytest.warns(RuntimeWarning, match="skipped"):
        got = ev(model)
    assert ev.last_result.n_skipped == 1 and got["gates_passed"] == 0.0
    assert "more than max_skipped" in ev.last_outcomes[0].message


def test_a_gate_on_the_interval_bound(model):
    texts, topics = topic_texts(24, seed=3)
    ev = RetrievalChecksEvaluator(
        texts, query_labels=topics, gates={"map@R": {"at_least": 0.01, "on": "interval"}}
    )
    assert ev(model)["gates_passed"] == 1.0
    with pytest.raises(AssertionError, match="interval's lower bound"):
        RetrievalChecksEvaluator(
            texts, query_labels=topics, gates={"map@R": {"at_least": 0.52, "on": "interval"}}
        )(model)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"relevant_docs": {"q9": {"d0"}}}, r"relevant_docs\['q9'\]: no query has the id"),
        ({"relevant_docs": {"q0": {"nope"}}}, r"corpus id 'nope'"),
        ({"relevant_docs": None}, r"pass relevant_docs"),
        ({"relevant_docs": {"q0": {"d0": 1.5}}}, r"whole number"),
        ({"metrics": ["map"], "primary_metric": "mrr"}, r"primary_metric='mrr': not among"),
        ({"on_failure": "ignore"}, r"on_failure='ignore'"),
        ({"gates": {"map": {"at_most": 1.0}}}, r"never fail"),
    ],
)
def test_inputs_are_checked_when_built(ir_data, kwargs, match):
    queries, corpus, relevant, _ = ir_data
    args = {"relevant_docs": relevant, "metrics": ["map"]} | kwargs
    with pytest.raises(rc.InputError, match=match):
        RetrievalChecksEvaluator(queries, corpus, **args)


def test_nan_embeddings_are_said_to_be_the_models():
    """A model whose encoder gives NaN: the engine's message ("queries has ... row(s)
    with NaN") is kept, saying the rows are the model's embeddings at this step."""
    import numpy as np

    class Diverged:
        def encode(self, texts, **_):
            out = np.ones((len(texts), 4), np.float32)
            out[1, 0] = np.nan
            return out

    texts, topics = topic_texts(8, seed=3)
    ev = RetrievalChecksEvaluator(texts, query_labels=topics, metrics=["map"])
    with pytest.raises(
        rc.InputError, match=r"^embeddings of the model at epoch 2, step 40: queries has 1 row"
    ):
        ev(Diverged(), epoch=2, steps=40)
    with pytest.raises(
        rc.InputError, match=r"^embeddings of the model: queries has 1 row.*diverged"
    ):
        ev(Diverged())


def test_a_cuda_device_is_checked_when_built(monkeypatch, ir_data):
    """device="cuda" on a machine without one failed only at the first evaluation;
    refused when the evaluator is built."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    queries, corpus, relevant, _ = ir_data
    with pytest.raises(rc.BackendError, match=r"device='cuda'.*no CUDA device.*'cpu'"):
        RetrievalChecksEvaluator(queries, corpus, relevant, metrics=["map"], device="cuda")


def test_runs_inside_the_sentence_transformers_trainer(tmp_path, ir_data):
    pytest.importorskip("datasets", reason="SentenceTransformerTrainer needs datasets")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(tiny_bert(tmp_path / "bert", seed=1), device="cpu")
    queries, corpus, relevant, _ = ir_data
    texts, topics = topic_texts(16, seed=5)
    pairs = Dataset.from_dict({"anchor": texts[0::2], "positive": texts[1::2]})
    ev = RetrievalChecksEvaluator(
        queries, corpus, relevant, metrics=["map", "medr"], primary_metric="medr", name="topics"
    )
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        eval_strategy="steps",
        eval_steps=1,
        per_device_train_batch_size=4,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=pairs,
        loss=MultipleNegativesRankingLoss(model),
        evaluator=ev,
    )
    trainer.train()
    logged = [h for h in trainer.state.log_history if "eval_topics_map" in h]
    assert len(logged) == 2
    ref = rc.evaluate(
        model.encode_query(list(queries.values())),
        model.encode_document(list(corpus.values())),
        relevance=[[int(d[1:]) for d in relevant[q]] for q in queries],
        metrics=["map", "medr"],
    )
    assert logged[-1]["eval_topics_map"] == pytest.approx(ref["map"], abs=1e-6)
    assert logged[-1]["eval_topics_medr"] == pytest.approx(ref["medr"], abs=1e-6)
    rows = (
        (tmp_path / "out" / "eval" / "retrieval_checks_evaluation_topics_results.csv")
        .read_text()
        .splitlines()
    )
    assert (
        rows[0] == "epoch,steps,map,medr" and len(rows) == 3
    )  # the header and one row per evaluation
    assert float(rows[-1].split(",")[2]) == pytest.approx(ref["map"], abs=1e-6)


def test_leave_one_out_items_are_encoded_as_queries_as_a_suite_encodes_them():
    """A model with a query prompt scored map 0.22229 in training and 0.22179 in the
    suite's sentence_transformers kind (h13): the evaluator used encode, the suite
    encode_query. Both now take the query side."""
    import numpy as np

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(6), 4)
    as_query = rng.normal(size=(24, 8)) + labels[:, None]
    plain = rng.normal(size=(24, 8))  # a model whose plain encode knows nothing

    class Card:
        def set_evaluation_metrics(self, *args):
            pass

    class Model:
        model_card_data = Card()

        def encode_query(self, texts, **kw):
            return as_query

        def encode(self, texts, **kw):
            return plain

    texts = [f"t{i}" for i in range(24)]
    got = RetrievalChecksEvaluator(texts, query_labels=labels, metrics=["map"], write_csv=False)(
        Model()
    )
    want = rc.evaluate(as_query, query_labels=labels, metrics=["map"])["map"]
    assert got["map"] == pytest.approx(want, abs=1e-6)
