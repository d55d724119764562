"""The table of a class-count sweep (values against the number of classes) and its plot;
:func:`retrieval_checks.class_count_sweep` fills it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

__all__ = ["SweepTable"]


@dataclass
class SweepTable:
    """Rows of a class-count sweep: one per (number of classes, trial, metric).

    Parameters
    ----------
    rows:
        The rows (default empty): dicts with ``n_classes``, ``trial``, ``metric``,
        ``value``, ``low``, ``high`` and ``n_items``.

    Raises
    ------
    InputError
        :meth:`plot` without matplotlib installed.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(40), 3)  # 40 classes of 3 items
    >>> x = rng.normal(size=(40, 8))[y] + 0.7 * rng.normal(size=(120, 8))
    >>> table = rc.class_count_sweep(x, y, class_counts=[5, 40], metrics=["hit_rate@1"], trials=2)
    >>> len(table.to_rows())
    4
    >>> row = table.summary()[1]
    >>> row["n_classes"], row["trials"], round(row["low"], 4), round(row["high"], 4)
    (40, 2, 0.4292, 0.6333)
    """

    rows: list[dict] = field(default_factory=list)

    def to_rows(self) -> list[dict]:
        return list(self.rows)

    def summary(self) -> list[dict]:
        """Mean value and mean interval bounds per (n_classes, metric) over trials."""
        out: dict[tuple, list] = {}
        for r in self.rows:
            out.setdefault((r["n_classes"], r["metric"]), []).append(r)
        table = []
        for (nc, m), rs in sorted(out.items()):
            table.append(
                {
                    "n_classes": nc,
                    "metric": m,
                    "value": float(np.mean([r["value"] for r in rs])),
                    "low": float(np.mean([r["low"] for r in rs])),
                    "high": float(np.mean([r["high"] for r in rs])),
                    "trials": len(rs),
                }
            )
        return table

    def plot(self, path=None, ax=None):
        """Value against number of classes with interval bands (needs matplotlib)."""
        try:
            import matplotlib

            if ax is None and path is not None:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise InputError(
                "Plotting needs matplotlib: pip install matplotlib (the table works without it)."
            ) from None
        fig = None
        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 4))
        rows = self.summary()
        for m in dict.fromkeys(r["metric"] for r in rows):
            rs = [r for r in rows if r["metric"] == m]
            xs = [r["n_classes"] for r in rs]
            ax.plot(xs, [r["value"] for r in rs], marker="o", label=m)
            ax.fill_between(xs, [r["low"] for r in rs], [r["high"] for r in rs], alpha=0.2)
        ax.set_xscale("log")
        counts = sorted({r["n_classes"] for r in rows})
        ax.set_xticks(counts)
        ax.set_xticklabels([str(c) for c in counts])
        ax.minorticks_off()
        ax.set_xlabel("number of classes in the evaluated subset")
        ax.set_ylabel("metric value (mean over trials, band: interval)")
        ax.set_title("Metric against the number of classes")
        ax.legend()
        if fig is not None and path is not None:
            fig.tight_layout()
            fig.savefig(path)
            plt.close(fig)
        return ax
