"""The transformers TrainerCallback with a tiny random BERT classifier built in the test
and a real transformers.Trainer on the CPU, offline: the metrics added at each
evaluation equal retrieval_checks.evaluate on the same model's embeddings, they reach
trainer.evaluate()'s result and the log history, and a failing gate stops training."""

from __future__ import annotations

import os
import warnings

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")

# One xdist worker runs this module, the Lightning DDP launch (test_lightning_ddp.py) and
# the Hugging Face modules (test_hf_trainer.py, test_sentence_transformers.py): each of
# Lightning and transformers (with accelerate, datasets) costs ~4.6 CPU-s to import after
# torch, paid by every worker that runs one of their tests (Lightning pulls transformers
# in too, through torchmetrics); under `--dist loadgroup` both workers did. The
# "processes" group already holds the DDP launch, whose worker imports Lightning.
pytestmark = pytest.mark.xdist_group("processes")

from _integration_data import tiny_bert, topic_texts  # noqa: E402

import retrieval_checks as rc  # noqa: E402

# transformers' classes (and the integrations' callback, which imports transformers) are
# imported by the module's autouse fixture, not at collection: the import costs seconds,
# paid by every xdist worker that collects this module, also those that run none of its
# tests. Skipped, saying why, where transformers or accelerate is absent.
BertForSequenceClassification = BertTokenizer = Trainer = TrainingArguments = None
RetrievalChecksTrainerCallback = None


@pytest.fixture(scope="module", autouse=True)
def _transformers():
    global BertForSequenceClassification, BertTokenizer, Trainer, TrainingArguments
    global RetrievalChecksTrainerCallback
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    from transformers import (
        BertForSequenceClassification,
        BertTokenizer,
        Trainer,
        TrainingArguments,
    )

    from retrieval_checks.integrations import RetrievalChecksTrainerCallback


warnings.filterwarnings("ignore", category=FutureWarning)


class Texts(torch.utils.data.Dataset):
    def __init__(self, tokenizer, texts, labels):
        self.enc = tokenizer(texts, padding="max_length", max_length=8, return_tensors="pt")
        self.labels = torch.as_tensor(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {
            "input_ids": self.enc["input_ids"][i],
            "attention_mask": self.enc["attention_mask"][i],
            "labels": self.labels[i],
        }


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    path = tiny_bert(tmp_path_factory.mktemp("hf") / "bert")
    tok = BertTokenizer.from_pretrained(path)
    train_texts, train_topics = topic_texts(16, seed=11)
    val_texts, val_topics = topic_texts(20, seed=12)
    return path, tok, Texts(tok, train_texts, train_topics), (val_texts, val_topics)


def _embed_fn(tok, texts):
    enc = tok(texts, padding=True, return_tensors="pt")

    def embed(model):  # mean-pooled last hidden states of the encoder
        h = model.bert(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        return (h * m).sum(1) / m.sum(1)

    return embed


def _trainer(tmp_path, path, train, callback, max_steps, **more):
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(path, num_labels=4)
    options = {
        "output_dir": str(tmp_path / "out"),
        "max_steps": max_steps,
        "eval_strategy": "steps",
        "eval_steps": 1,
        "per_device_train_batch_size": 8,
        "report_to": [],
        "use_cpu": True,
        "save_strategy": "no",
        "logging_steps": 1,
        "learning_rate": 1e-2,
    }
    args = TrainingArguments(**(options | more))
    return Trainer(
        model=model, args=args, train_dataset=train, eval_dataset=train, callbacks=[callback]
    )


def test_metrics_added_at_each_evaluation_equal_evaluate(tmp_path, setup):
    path, tok, train, (texts, topics) = setup
    embed = _embed_fn(tok, texts)
    cb = RetrievalChecksTrainerCallback(
        lambda model: (embed(model), topics),
        ["map@R", "hit_rate@1"],
        gates={"map@R": {"at_least": 0.01}},
    )
    trainer = _trainer(
        tmp_path,
        path,
        train,
        cb,
        max_steps=2,
        metric_for_best_model="rc_map@R",
        greater_is_better=True,
    )
    trainer.train()
    entries = [h for h in trainer.state.log_history if "eval_rc_map@R" in h]
    assert [e["step"] for e in entries] == [1, 2]
    model = trainer.model.eval()
    with torch.no_grad():
        ref = rc.evaluate(embed(model), query_labels=topics, metrics=["map@R", "hit_rate@1"])
    assert (
        entries[-1]["eval_rc_map@R"] == ref["map@R"]
        and entries[-1]["eval_rc_hit_rate@1"] == ref["hit_rate@1"]
    )
    assert entries[-1]["eval_rc_gate/map@R"] == 1.0
    assert trainer.state.best_metric == max(
        e["eval_rc_map@R"] for e in entries
    )  # model selection reads them
    out = (
        trainer.evaluate()
    )  # the returned metrics hold them too (what metric_for_best_model reads)
    assert out["eval_rc_map@R"] == ref["map@R"]
    assert trainer.state.global_step == 2  # a passing gate does not stop training


def test_a_failing_gate_stops_training(tmp_path, setup):
    path, tok, train, (texts, topics) = setup
    embed = _embed_fn(tok, texts)
    cb = RetrievalChecksTrainerCallback(
        lambda model: {"queries": embed(model), "query_labels": topics},
        gates={"map@R": {"at_least": 0.999}},
        stop_on_failure=True,
    )
    trainer = _trainer(tmp_path, path, train, cb, max_steps=6)
    with pytest.warns(RuntimeWarning, match="gate on map@R failed at step 1"):
        trainer.train()
    assert trainer.state.global_step == 1  # stopped at the first evaluation, not after 6 steps
    assert cb.last_values["eval_rc_gate/map@R"] == 0.0


def test_a_training_run_whose_gates_never_ran_says_so(tmp_path, setup):
    """The Trainer never evaluated (a new user's trial: eval_strategy="no" ended training
    quietly with raise_on_failure=True and last_values={}): warned at the end of
    training, not raised (h16: train() then evaluate() is the common way to gate once,
    and the failing gate raises there, under raise_on_failure)."""
    path, tok, train, (texts, topics) = setup
    embed = _embed_fn(tok, texts)
    gates = {"map@R": {"at_least": 0.999}}

    def callback(**flags):
        return RetrievalChecksTrainerCallback(
            lambda model: (embed(model), topics), gates=gates, **flags
        )

    for flags in ({}, {"raise_on_failure": True}):
        cb = callback(**flags)
        trainer = _trainer(tmp_path, path, train, cb, max_steps=2, eval_strategy="no")
        with pytest.warns(
            RuntimeWarning, match=r"the Trainer never evaluated.*never ran.*trainer\.evaluate\(\)"
        ):
            trainer.train()
        assert cb.last_values == {}
    with pytest.raises(AssertionError, match="map@R"):  # the gates run, and fail, there
        trainer.evaluate()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"embed": None}, "embed=None"),
        ({"gates": {"map@R": {"at_least": 70}}}, r"0\.7"),
        ({"stop_on_failure": 1}, "stop_on_failure=1"),
        ({"max_memory": "lots"}, "max_memory"),
        ({"prefix": ""}, "starts with eval_"),  # h15: values the Trainer could never find
        ({"prefix": "rc_"}, "starts with eval_"),
    ],
)
def test_options_are_checked_when_built(kwargs, match):
    args = {"embed": lambda m: None, "metrics": ["map@R"]} | kwargs
    with pytest.raises(rc.InputError, match=match):
        RetrievalChecksTrainerCallback(**args)


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_a_cuda_device_is_checked_when_built(monkeypatch, device):
    """device="cuda" on a machine without one was accepted and failed only at the first
    evaluation, after training steps (a new user's trial); refused now, as the pytest
    plugin refuses --rc-device cuda at start-up."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(rc.BackendError, match=rf"device='{device}'.*no CUDA device.*'cpu'"):
        RetrievalChecksTrainerCallback(lambda m: None, ["map@R"], device=device)
    with pytest.raises(rc.InputError, match=r"device='mps'"):
        RetrievalChecksTrainerCallback(lambda m: None, ["map@R"], device="mps")


def test_nan_embeddings_are_said_to_be_the_models(tmp_path):
    """A diverged model's NaN embeddings were blamed on the data ("queries has 1 row(s)
    with NaN ... drop or repair those items"); the engine's message is kept, saying it is
    the model's embeddings at this step. A label error is not the model's and passes
    unchanged."""
    from transformers import TrainerControl, TrainerState

    x = torch.randn(12, 4)
    x[3, 1] = float("nan")
    labels = [0, 1, 2] * 4
    state = TrainerState(global_step=120)
    cb = RetrievalChecksTrainerCallback(lambda m: (x, labels), ["map@R"])
    with pytest.raises(rc.InputError) as info:
        cb.on_evaluate(None, state, TrainerControl(), model=torch.nn.Linear(2, 2), metrics={})
    message = str(info.value)
    assert message.startswith("embeddings of the model at step 120: queries has 1 row(s) with NaN")
    assert "training diverged" in message
    x[3, 1] = 0.0
    cb = RetrievalChecksTrainerCallback(
        lambda m: {
            "queries": x[4:],
            "gallery": x[:4],
            "query_labels": labels[4:],
            "gallery_labels": labels[:3],
        },
        ["map@R"],
    )
    with pytest.raises(rc.InputError) as info:
        cb.on_evaluate(None, state, TrainerControl(), model=torch.nn.Linear(2, 2), metrics={})
    assert not str(info.value).startswith("embeddings of the model")


@pytest.mark.parametrize(
    "chosen, greater, warned",
    [
        ("rc_medr", None, True),  # the Trainer's default, greater_is_better=True
        ("rc_medr", False, False),
        ("eval_rc_meanr_high", None, True),
        ("rc_map@R", None, False),
        ("rc_map@R", False, True),
        ("rc_n_skipped", None, True),
        ("loss", None, False),  # not the callback's
    ],
)
def test_best_model_direction_is_checked(tmp_path, chosen, greater, warned):
    """metric_for_best_model="rc_medr" (a rank, lower is better) with the Trainer's
    greater_is_better=True kept the worst checkpoint as the best (a new user's trial):
    warned when training begins."""
    from transformers import TrainerControl, TrainerState

    more = {} if greater is None else {"greater_is_better": greater}
    args = TrainingArguments(
        output_dir=str(tmp_path), metric_for_best_model=chosen, report_to=[], **more
    )
    cb = RetrievalChecksTrainerCallback(lambda m: None, ["map@R", "medr", "meanr"])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cb.on_train_begin(args, TrainerState(), TrainerControl())
    said = [str(r.message) for r in record if "metric_for_best_model" in str(r.message)]
    assert bool(said) == warned, said
    if warned:
        assert f"set greater_is_better={not args.greater_is_better}" in said[0]


def test_embed_output_is_checked(tmp_path, setup):
    path, tok, train, _ = setup
    cb = RetrievalChecksTrainerCallback(lambda model: {"querys": 1}, ["map"])
    with pytest.raises(rc.InputError, match="'querys'.*queries"):
        _trainer(tmp_path, path, train, cb, max_steps=1).train()
