"""The Reduce seam: how a block's partial states meet across the ranks of a pass.

Every state a block task exchanges is declared here once, with the operation that
combines the ranks' copies (in the spirit of torchmetrics' ``add_state(...,
dist_reduce_fx=...)``):

========================  =======  ===================================================
state                     op       what
========================  =======  ===================================================
``relevant_scores``       max      each relevant pair's score (-inf on the ranks that do
                                   not hold its gallery item)
``counts``                sum      non-relevant scores ``>=`` / ``==`` each relevant one
``tail_histogram``        sum      the 65536-bin key histogram that seeds the tail
``tail_size``             sum      finite scores of the block (torch's seed)
``tail_top``              gather   each rank's top ``capacity`` scores (torch's seed)
``finished``              min      leading blocks a checkpoint holds (the ranks resume
                                   together)
``negatives``             gather   every negative ``>=`` the tail threshold
``fixed_fp``              sum      negatives ``>=`` each fixed threshold
``bins``                  sum      the binning pass's histogram
``column_sums``           sum      neg_l2's centre: the gallery's float64 column sums
========================  =======  ===================================================

:data:`LOCAL` is the identity (one process: the state is already whole); the sharded
pass's :class:`~.distributed._sharded.Ranks` runs the same operations over
``torch.distributed``. A Reduce also says where a block's query rows come from
(:meth:`Local.queries`: the problem's own rows; the ranks: broadcast by their owners).
"""

from __future__ import annotations

__all__ = ["LOCAL", "STATES", "Local"]

#: Each exchanged state's operation over ranks: ``"max"``, ``"sum"`` or ``"gather"``
#: (concatenation in rank order).
STATES = {
    "relevant_scores": "max",
    "counts": "sum",
    "tail_histogram": "sum",
    "tail_size": "sum",
    "tail_top": "gather",
    "negatives": "gather",
    "fixed_fp": "sum",
    "bins": "sum",
    "column_sums": "sum",  # neg_l2's centre: the gallery's float64 column sums
    "finished": "min",  # leading checkpointed blocks: every rank resumes after the same block
}


class Local:
    """One process: every state is whole; the block's query rows are the problem's."""

    local = True

    def __call__(self, state: str, value):
        STATES[state]  # an undeclared state is a programming error (KeyError)
        return value

    def queries(self, p, start: int, stop: int, Qb, qa) -> None:
        """Copy queries ``[start, stop)`` (and their row factors) into the block buffers."""
        m = stop - start
        Qb[:m] = p.Q[start:stop]
        if p.qa is not None:
            qa[:m] = p.qa[start:stop]


LOCAL = Local()
