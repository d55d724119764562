"""numba twins of :func:`retrieval_checks.engine._runs`'s whole-array steps (issue 32):
one pass over a run's document id bytes where numpy takes several, the order of each
query's entries (one integer sort of packed keys, or a stable sort per query) and each
entry's grade, giving the same integers as the numpy code in ``_runs`` (``_plain_text``,
``_code_ids``, ``_query_order``, ``_run_grades``), which serves where numba cannot be
imported or ``RETRIEVAL_CHECKS_KERNELS=numpy``. Compiled on first use and cached on
disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def id_bounds(buf, n):
    """(ok, starts, lengths, bytes used) of the ``n`` ids that ``buf`` joins with
    newlines (byte 10); ok: exactly ``n`` ids, each non-empty and of bytes 33..126
    (printable ASCII without the space)."""
    starts = np.empty(n, np.int64)
    lens = np.empty(n, np.int64)
    used = np.zeros(256, np.bool_)
    k = 0
    s = 0
    for p in range(buf.size):
        c = buf[p]
        if c == 10:
            if p == s or k >= n - 1:
                return False, starts, lens, used
            starts[k] = s
            lens[k] = p - s
            k += 1
            s = p + 1
        elif c < 33 or c > 126:
            return False, starts, lens, used
        else:
            used[c] = True
    if k != n - 1 or s == buf.size:
        return False, starts, lens, used
    starts[k] = s
    lens[k] = buf.size - s
    return True, starts, lens, used


@njit(cache=True, nogil=True)
def id_numbers(buf, starts, lens, digit, base, width, index_bits):
    """Each id as a number in ``base`` (``digit`` of each byte, 0 past its end, ``width``
    digits), shifted left by ``index_bits`` above the id's index (``index_bits`` 0: the
    number alone)."""
    n = starts.size
    out = np.empty(n, np.uint64)
    b = np.uint64(base)
    shift = np.uint64(index_bits)
    for i in range(n):
        v = np.uint64(0)
        s = starts[i]
        m = lens[i]
        for j in range(width):
            d = digit[buf[s + j]] if j < m else np.uint64(0)
            v = v * b + d
        out[i] = (v << shift) | np.uint64(i) if index_bits else v
    return out


@njit(cache=True, nogil=True)
def codes_of_sorted(packed, index_bits):
    """From the sorted numbers of :func:`id_numbers`: each id's rank among the distinct
    ones, and the index of the first id of each rank (in sorted order)."""
    n = packed.size
    shift = np.uint64(index_bits)
    mask = (np.uint64(1) << shift) - np.uint64(1)
    codes = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    c = -1
    prev = np.uint64(0)
    for p in range(n):
        v = packed[p] >> shift
        i = np.int64(packed[p] & mask)
        if p == 0 or v != prev:
            c += 1
            first[c] = i
            prev = v
        codes[i] = c
    return codes, first[: c + 1]


@njit(cache=True, nogil=True)
def block_order(score, doc_key, by_key, starts, ends, blocks):
    """``np.lexsort((-doc_key, -score, q))`` (without ``doc_key`` unless ``by_key``) where
    each query's entries are the contiguous block ``starts[b] .. ends[b] - 1``, taken in
    the order ``blocks``: each block by stable sorts (equal keys in input order)."""
    out = np.empty(score.size, np.int64)
    at = 0
    for b in blocks:
        s = starts[b]
        m = ends[b] - s
        if by_key:
            first = np.argsort(-doc_key[s : s + m], kind="mergesort")
            neg = -score[s : s + m]
            second = np.argsort(neg[first], kind="mergesort")
            for i in range(m):
                out[at + i] = s + first[second[i]]
        else:
            part = np.argsort(-score[s : s + m], kind="mergesort")
            for i in range(m):
                out[at + i] = s + part[i]
        at += m
    return out


@njit(cache=True, nogil=True)
def grades_of(q, doc, jstart, jdoc, jgrade):
    """The grade of each retrieved entry (0 where the qrels do not list it) and whether
    the qrels judge it (grade >= 0): a binary search among its query's judged documents,
    ``jdoc[jstart[q] : jstart[q + 1]]``, sorted."""
    n = q.size
    grade = np.zeros(n, np.int64)
    judged = np.zeros(n, np.bool_)
    for i in range(n):
        lo = jstart[q[i]]
        end = jstart[q[i] + 1]
        hi = end
        d = doc[i]
        while lo < hi:
            mid = (lo + hi) // 2
            if jdoc[mid] < d:
                lo = mid + 1
            else:
                hi = mid
        if lo < end and jdoc[lo] == d:
            grade[i] = jgrade[lo]
            judged[i] = jgrade[lo] >= 0
    return grade, judged


@njit(cache=True, nogil=True, inline="always")
def _descending(u):
    """From the bits ``u`` of a finite float64 x, a 64-bit key that sorts ascending as x
    descending (-0.0 as 0.0: equal floats, equal keys)."""
    sign = np.uint64(1) << np.uint64(63)
    if u == sign:  # -0.0
        u = np.uint64(0)
    up = ~u if u & sign else u | sign  # ascending as x
    return ~up


@njit(cache=True, nogil=True)
def packed_by_score(q, bits, qstart, qbits, bbits):
    """Each entry as one 64-bit number: its query (``qbits``), the top bits of its
    descending score key, its index in its query's block (``bbits``). One sort of them
    orders the entries by query, then (nearly) by decreasing score, then by input order;
    :func:`order_of_packed` settles the entries whose top bits are equal. ``bits``: the
    scores (finite float64) viewed as uint64."""
    n = q.size
    sbits = 64 - qbits - bbits
    out = np.empty(n, np.uint64)
    for i in range(n):
        key = _descending(bits[i]) >> np.uint64(64 - sbits)
        v = (key << np.uint64(bbits)) | np.uint64(i - qstart[q[i]])
        if qbits:
            v |= np.uint64(q[i]) << np.uint64(sbits + bbits)
        out[i] = v
    return out


@njit(cache=True, nogil=True)
def order_of_packed(packed, q, score, doc_key, by_key, qstart, qbits, bbits):
    """The entries' order from the sorted numbers of :func:`packed_by_score`, each run
    of one query and equal top bits sorted by its full scores (descending; under
    ``by_key`` then ``doc_key`` descending; else input order) as :func:`block_order`:
    ``np.lexsort((-doc_key, -score, q))``."""
    n = packed.size
    sbits = 64 - qbits - bbits
    bmask = (np.uint64(1) << np.uint64(bbits)) - np.uint64(1)
    order = np.empty(n, np.int64)
    for p in range(n):
        v = packed[p]
        row = np.int64(v >> np.uint64(sbits + bbits)) if qbits else 0
        order[p] = qstart[row] + np.int64(v & bmask)
    p = 0
    while p < n:
        top = packed[p] >> np.uint64(bbits)
        r = p + 1
        while r < n and packed[r] >> np.uint64(bbits) == top:
            r += 1
        if r - p > 1:  # in input order: sort by the full score where it is not in order
            run = order[p:r]
            ordered = True
            for i in range(p, r - 1):
                a, b = order[i], order[i + 1]
                if score[a] < score[b] or (
                    by_key and score[a] == score[b] and doc_key[a] < doc_key[b]
                ):
                    ordered = False
                    break
            if not ordered:
                if by_key:
                    first = np.argsort(-doc_key[run], kind="mergesort")
                    run = run[first]
                neg = -score[run]
                second = np.argsort(neg, kind="mergesort")
                order[p:r] = run[second]
        p = r
    return order


@njit(cache=True, nogil=True)
def grades_by_query(doc, start, jstart, jdoc, jgrade, n_docs):
    """:func:`grades_of` where the entries are grouped by query (query i's at
    ``start[i] .. start[i + 1] - 1``): each query's judged documents marked in a table
    of the ``n_docs`` documents, each entry's grade one lookup, the marks then cleared."""
    n = doc.size
    grade = np.zeros(n, np.int64)
    judged = np.zeros(n, np.bool_)
    mark = np.full(n_docs, -1, np.int64)
    for q in range(start.size - 1):
        if start[q] == start[q + 1] or jstart[q] == jstart[q + 1]:
            continue
        for t in range(jstart[q], jstart[q + 1]):
            mark[jdoc[t]] = t
        for i in range(start[q], start[q + 1]):
            t = mark[doc[i]]
            if t >= 0:
                grade[i] = jgrade[t]
                judged[i] = jgrade[t] >= 0
        for t in range(jstart[q], jstart[q + 1]):
            mark[jdoc[t]] = -1
    return grade, judged
