"""The source paper's Table 3 in miniature: which measure predicts the generalization gap?

    python example_suites/canvas_digits/model_set.py          # trains the 12 models (about a minute)
    python example_suites/canvas_digits/measure_model_set.py  # measures them, prints the table

For every model of ``model_set.CONFIGS`` it computes, on (up to 400 of) its own
training canvases, as the paper does, without test labels:

- ``cam_iou`` and ``cam_iou_box``: Grad-CAM of the predicted class at the last conv
  activation (``features``), threshold rho = 0.1, against the pasted digit's box;
- ``effective_invariance`` (rotations by 90, 180, 270 degrees), ``nuclear_norm``;
- ``spectral_measure`` (log scale; its 10th-percentile margin is negative for models
  that misfit a tenth of their training set, which leaves it undefined: those models
  are left out of its row and counted);

then the Pearson and Spearman correlation of each with the measured gap (train - test
accuracy, from ``models/models.json``), with 95% intervals, and the pairwise
model-selection accuracy (the paper's Table 4). Models at chance on their training data
(train accuracy < 0.2) have no meaningful CAM and are left out, counted in the output.
Writes ``models/measures.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from canvas_data import make_canvases, split  # noqa: E402
from cnn import build  # noqa: E402
from model_set import CONFIGS, training_subset  # noqa: E402

import retrieval_checks as rc  # noqa: E402

N_IMAGES = 400  # training canvases measured per model


def measure(model, images, labels, boxes) -> dict:
    res = rc.evaluate_classifier(
        model,
        images,
        labels,
        boxes=boxes,
        layer="features",
        metrics=["cam_iou", "cam_iou_box", "effective_invariance", "nuclear_norm"],
        n_resamples=0,
    )
    row = {m: float(res[m]) for m in res}
    try:
        row["spectral_measure_log"] = rc.spectral_measure(model, images, labels).log_value
    except rc.InputError:
        row["spectral_measure_log"] = None  # undefined: the margin percentile is <= 0
    return row


def main(models_dir: Path = HERE / "models") -> list:
    rows = json.loads((models_dir / "models.json").read_text())
    train, _ = split(make_canvases())
    kept, skipped = [], []
    for row in rows:
        if row["train_accuracy"] < 0.2:
            skipped.append(row["index"])
            continue
        model = build(row["width"], row["depth"], row["dropout"])
        model.load_state_dict(
            torch.load(models_dir / f"model_{row['index']:02d}.pt", weights_only=True)
        )
        # the model's own training images (a subsample for train_fraction < 1), true labels
        own = training_subset(CONFIGS[row["index"]], train, seed=0)
        idx = np.random.default_rng(0).permutation(len(own["labels"]))[:N_IMAGES]
        kept.append(
            {
                **row,
                **measure(model.eval(), own["images"][idx], own["labels"][idx], own["boxes"][idx]),
            }
        )
    tables = {}
    for threshold in (
        0.0,
        0.8,
    ):  # the paper's columns: models whose training accuracy exceeds a threshold
        subset = [r for r in kept if r["train_accuracy"] >= threshold]
        gaps = np.array([r["gap"] for r in subset])
        table = []
        for name, hib in (
            ("cam_iou", True),
            ("cam_iou_box", True),
            ("effective_invariance", True),
            ("nuclear_norm", True),
            ("spectral_measure_log", False),
        ):
            have = [i for i, r in enumerate(subset) if r[name] is not None]
            if len(have) < 3:
                table.append(
                    {
                        "measure": name,
                        "n_models": len(have),
                        "models_left_out": len(subset) - len(have),
                    }
                )
                continue
            (c,) = rc.correlate_with_gap(
                {name: [subset[i][name] for i in have]}, gaps[have], higher_is_better={name: hib}
            )
            table.append({**c.as_row(), "models_left_out": len(subset) - len(have)})
        tables[f"train_accuracy>={threshold}"] = table
    (models_dir / "measures.json").write_text(
        json.dumps({"models": kept, "correlations": tables, "skipped_at_chance": skipped}, indent=2)
    )
    print(
        f"{len(kept)} models measured on {N_IMAGES} training canvases; left out at chance: {skipped}"
    )
    for label, table in tables.items():
        print(f"\nmodels with {label}")
        print(
            f"{'measure':<22}{'n':>3}  {'Pearson r [95% CI]':<26}{'Spearman rho [95% CI]':<27}{'selection':>9}"
        )
        for t in table:
            if "pearson" not in t:
                print(
                    f"{t['measure']:<22}{t['n_models']:>3}  (undefined for {t['models_left_out']} models: "
                    "margin percentile <= 0)"
                )
                continue
            print(
                f"{t['measure']:<22}{t['n_models']:>3}  {t['pearson']:+.2f} [{t['pearson_low']:+.2f}, "
                f"{t['pearson_high']:+.2f}]      {t['spearman']:+.2f} [{t['spearman_low']:+.2f}, "
                f"{t['spearman_high']:+.2f}]       {t['selection_accuracy']:.2f}"
            )
    return tables


if __name__ == "__main__":
    main()
