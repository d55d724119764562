"""The capability registry: what each metric family is and what can be done with it.

One :class:`Family` per line of the metric contract (``docs/metrics.md``). The name
parser, the YAML schema, the gates, the baselines and the regression direction all
read these records instead of keeping lists of names of their own:

- ``unit`` and ``low`` / ``high``: the unit of the value and its attainable range
  (``math.inf`` where it has no upper bound), which thresholds are checked against;
- ``higher_is_better``: the direction of "worse";
- ``per_query``: one value per query is kept, so intervals can be bootstrapped over
  queries or classes, two models compared pairwise, and baselines store per-class
  sums;
- ``interval``: where an interval comes from: ``"bootstrap"`` (computed on demand
  from per-query values), ``"groups"`` (grouped recall's own t interval),
  ``"images"`` (the bootstrap over images an image-text or CAM result carries),
  ``"wilson"`` (accuracy's score interval), or None;
- ``gap`` / ``compare``: whether a generalization gap or a paired comparison is
  defined for it;
- ``entry`` and ``dataset``: which function computes it and on which kind of dataset;
- ``gate``: the assertion that gates a lower bound on it (``assert_metric`` for the
  rest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Family", "FAMILIES", "family", "families_of_kind"]


@dataclass(frozen=True)
class Family:
    """A metric family (``recall`` for ``recall@K``) and its capabilities."""

    name: str
    template: str  # as a user writes it: "recall@K"
    kind: str  # query | pair | grouped | embedding | crossmodal | classifier
    unit: str = "fraction"
    low: float = 0.0
    high: float = 1.0
    higher_is_better: bool = True
    per_query: bool = False
    interval: str | None = None
    gap: bool = False
    compare: bool = False
    entry: str = "evaluate"
    dataset: str = "retrieval"
    summary: str = ""
    gate: str = "assert_metric"

    @property
    def param(self) -> str | None:
        """The parameter after '@' in the template (K, P, Q, T), or None."""
        _, at, p = self.template.partition("@")
        return p.rpartition("=")[2] if at and p != "R" else None

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.high)

    def range_text(self) -> str:
        hi = "inf" if not self.bounded else f"{self.high:g}"
        return f"[{self.low:g}, {hi}]" if self.bounded else f"[{self.low:g}, {hi})"


_INF = math.inf


def _q(name, template, summary, **kw):
    """A per-query ranking metric: bootstrap intervals, gaps and paired comparisons."""
    kw.setdefault("per_query", True)
    kw.setdefault("interval", "bootstrap")
    kw.setdefault("gap", kw.get("unit", "fraction") != "rank")
    kw.setdefault("compare", True)
    return Family(name, template, "query", summary=summary, **kw)


def _pair(name, template, summary, **kw):
    return Family(name, template, "pair", summary=summary, **kw)


def _it(name, template, summary, **kw):
    return Family(
        name,
        template,
        "crossmodal",
        interval="images",
        entry="evaluate_image_text",
        dataset="image_text",
        summary=summary,
        **kw,
    )


def _clf(name, summary, **kw):
    return Family(
        name,
        name,
        "classifier",
        entry="evaluate_classifier",
        dataset="images",
        summary=summary,
        **kw,
    )


_RANK = dict(unit="rank", low=1.0, high=_INF, higher_is_better=False)

#: Every family of the contract, in the order the contract lists them.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _q(
            "hit_rate",
            "hit_rate@K",
            "1 if a relevant item ranks <= K (metric learning's Recall@K, CMC)",
            gate="assert_recall_at_least",
        ),
        _q(
            "recall",
            "recall@K",
            "relevant items ranked <= K / R (information-retrieval recall)",
            gate="assert_recall_at_least",
        ),
        _q("precision", "precision@K", "relevant items ranked <= K / K"),
        _q(
            "map",
            "map",
            "average precision over the full ranking; map@K divides by the hits in the top K",
            gate="assert_map_at_least",
        ),
        _q(
            "map_cut",
            "map_cut@K",
            "AP truncated at K, divided by R (trec_eval map_cut)",
            gate="assert_map_at_least",
        ),
        _q(
            "map_capped",
            "map_capped@K",
            "AP truncated at K, divided by min(K, R) (Kaggle apk)",
            gate="assert_map_at_least",
        ),
        _q("map@R", "map@R", "AP truncated at R, divided by R (MAP@R)", gate="assert_map_at_least"),
        _q("r_precision", "r_precision", "relevant items ranked <= R / R"),
        _q(
            "mrr",
            "mrr",
            "1 / rank of the first relevant item; mrr@K counts 0 beyond rank K (MS MARCO MRR@10)",
        ),
        _q("medr", "medr", "median rank of the first relevant item", interval=None, **_RANK),
        _q("meanr", "meanr", "mean rank of the first relevant item", **_RANK),
        _q(
            "ndcg",
            "ndcg",
            "DCG / ideal DCG, gain = grade, discount log2(rank + 1); ndcg@K cuts both at K "
            "(trec_eval ndcg_cut_K)",
        ),
        _q(
            "ndcg_exp",
            "ndcg_exp",
            "nDCG with gain 2^grade - 1 (equals ndcg on binary relevance); ndcg_exp@K cuts at K",
        ),
        _q(
            "dcg",
            "dcg",
            "DCG: sum of gain = grade over log2(rank + 1), not normalised; dcg@K cuts at K",
            unit="gain",
            high=_INF,
        ),
        _q(
            "dcg_exp",
            "dcg_exp",
            "DCG with gain 2^grade - 1; dcg_exp@K cuts at K",
            unit="gain",
            high=_INF,
        ),
        _q("f1", "f1@K", "2 precision@K recall@K / (precision@K + recall@K) = 2 hits / (K + R)"),
        _q(
            "recall_cap",
            "recall_cap@K",
            "relevant items ranked <= K / min(K, R) (BEIR's R_cap)",
            gate="assert_recall_at_least",
        ),
        _q(
            "bpref",
            "bpref",
            "binary preference: per retrieved relevant item, 1 - min(judged non-relevant above, R) "
            "/ min(N, R), summed over R (trec_eval bpref; unjudged documents ignored)",
        ),
        _q("rbp", "rbp@p", "rank-biased precision (1 - p) sum p^(rank - 1) over relevant items"),
        _q(
            "rbp_residual",
            "rbp_residual@p",
            "what RBP could still gain: (1 - p) sum p^(rank - 1) over unjudged retrieved "
            "documents, plus p^depth",
            higher_is_better=False,
            gap=False,
        ),
        _q(
            "gm_map",
            "gm_map",
            "geometric mean over queries of AP (each at least 1e-5), trec_eval gm_map",
            interval=None,
            gap=False,
            compare=False,
            gate="assert_map_at_least",
        ),
        _q(
            "iprec_at_recall",
            "iprec_at_recall@L",
            "interpolated precision at recall level L: the best precision at recall >= L "
            "(trec_eval iprec_at_recall_L)",
        ),
        _q(
            "iprec_11pt",
            "iprec_11pt",
            "mean of iprec_at_recall at 0, 0.1, ..., 1 (trec_eval 11pt_avg)",
        ),
        _q(
            "ann_recall",
            "ann_recall@K",
            "share of an approximate top K that is in the exact top K (ties with the K-th "
            "exact score count)",
            entry="ann_recall",
            gap=False,
        ),
        _pair(
            "pair_precision",
            "pair_precision@t=T",
            "TP / (TP + FP) over all pairs at similarity >= T",
        ),
        _pair("pair_recall", "pair_recall@t=T", "TP / (TP + FN) over all pairs at similarity >= T"),
        _pair("pair_f1", "pair_f1@t=T", "2TP / (2TP + FP + FN) over all pairs at similarity >= T"),
        _pair(
            "recall_at_precision",
            "recall_at_precision@P",
            "highest pair recall at pair precision >= P",
            gate="assert_recall_at_precision",
        ),
        _pair(
            "precision_at_recall",
            "precision_at_recall@Q",
            "highest pair precision at pair recall >= Q",
        ),
        Family(
            "discriminant_ratio",
            "discriminant_ratio",
            "embedding",
            unit="ratio",
            high=_INF,
            summary="Tr(S_B) / Tr(S_W) of the embedding set",
        ),
        Family(
            "grouped_recall",
            "grouped_recall@K",
            "grouped",
            interval="groups",
            gap=True,
            compare=True,
            summary="hit_rate@K inside label groups of S labels, mean over groups",
            gate="assert_grouped_recall_ci",
        ),
        _it("i2t_recall", "i2t_recall@K", "image queries: hit rate at K among all captions"),
        _it("t2i_recall", "t2i_recall@K", "caption queries: hit rate at K of the caption's image"),
        _it(
            "rsum",
            "rsum",
            "sum of i2t and t2i recall at 1, 5, 10 in percentage points",
            unit="percentage points",
            high=600.0,
            gate="assert_rsum",
        ),
        _it("mean_recall", "mean_recall", "rsum / 6", unit="percent", high=100.0),
        _it("i2t_medr", "i2t_medr", "median rank of an image's first caption", **_RANK),
        _it("t2i_medr", "t2i_medr", "median rank of a caption's image", **_RANK),
        _it("i2t_meanr", "i2t_meanr", "mean rank of an image's first caption", **_RANK),
        _it("t2i_meanr", "t2i_meanr", "mean rank of a caption's image", **_RANK),
        _clf("accuracy", "fraction of correct top-1 predictions", interval="wilson", gap=True),
        _clf(
            "cam_iou",
            "IoU of the thresholded Grad-CAM map with the object",
            interval="images",
            gate="assert_cam_iou_at_least",
        ),
        _clf(
            "cam_iou_box",
            "IoU of the rectangle enclosing the thresholded map with the object",
            interval="images",
            gate="assert_cam_iou_at_least",
        ),
        _clf("effective_invariance", "agreement under rotations, weighted by confidence"),
        _clf("nuclear_norm", "normalised nuclear norm of the softmax prediction matrix"),
        _clf(
            "spectral_measure",
            "product of spectral norms times the sum of norm ratios over margin^2",
            unit="ratio",
            high=_INF,
            higher_is_better=False,
        ),
    )
}


def family(name: str) -> Family:
    """The family record of a family name (``"hit_rate"``, ``"map@R"``, ``"rsum"``)."""
    return FAMILIES[name]


def families_of_kind(*kinds: str) -> tuple[str, ...]:
    return tuple(f.name for f in FAMILIES.values() if f.kind in kinds)
