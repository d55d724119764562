"""Statistics on evaluation results: intervals, generalization gaps, paired
comparisons and correlations over model sets. Pure functions of results: nothing here
ranks anything again."""

from ._compare import Comparison, compare
from ._correlation import MeasureCorrelation, correlate_with_gap, selection_accuracy
from ._gaps import Gap, generalization_gap
from ._intervals import Interval, bootstrap_interval, newcombe_interval, wilson_interval
from ._plan import Plan, plan_queries
from ._power import Power
from ._slices import SliceInterval, slice_intervals, slice_rows
from ._sweep import SweepTable

__all__ = [
    "Interval",
    "Gap",
    "Comparison",
    "SweepTable",
    "MeasureCorrelation",
    "bootstrap_interval",
    "wilson_interval",
    "newcombe_interval",
    "generalization_gap",
    "compare",
    "correlate_with_gap",
    "selection_accuracy",
    "SliceInterval",
    "slice_intervals",
    "slice_rows",
    "Power",
    "Plan",
    "plan_queries",
]
