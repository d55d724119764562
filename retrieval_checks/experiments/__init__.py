"""Experiment protocols: evaluations on subsets of a dataset, then statistics
(:func:`split_difference`, :func:`class_count_sweep`)."""

from ._protocols import class_count_sweep, split_difference

__all__ = ["split_difference", "class_count_sweep"]
