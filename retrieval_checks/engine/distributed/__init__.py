"""The sharded pass over ``torch.distributed`` ranks (``process_group=``): a leaf of the
engine that only the entry points import.

- :mod:`._sharded`: :func:`~._sharded.evaluate_sharded`, the one-process pass's
  ``prepare_problem`` and ``stream`` with a column window per rank and :class:`~._sharded.Ranks`
  as the Reduce seam (max / sum / gather over the ranks);
- :mod:`._grouped`: grouped recall's batches scored over the ranks;
- :mod:`._image_text`: image-text's two directions over the ranks' shards;
- :mod:`._comm`: the collectives, with every rank's failure raised on every rank.
"""
