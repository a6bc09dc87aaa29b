"""Exact r x c Fisher p-value by a network algorithm (Mehta & Patel 1983, 1986).

The p-value is the probability, under the multivariate hypergeometric null with
the observed margins, of every table at most as probable as the observed one:

    p = sum_{T : P(T) <= P(obs) * exp(tol)} P(T),
    P(T) = prod_i r_i! prod_j c_j! / (n! prod_ij x_ij!),

with ``tol = 3.45254e-7`` on the log scale, the tie rule of R's ``FEXACT``
(``fisher.test`` for tables larger than 2 x 2).

Network
-------
Columns are processed one at a time (smallest first, as FEXACT does). A node at
stage ``k`` is the sorted vector of the row sums still to fill after ``k``
columns; sorting is allowed because the completions of a node (and their
probabilities) do not depend on the order of its rows. For every node the
shortest and longest remaining path (the min / max of ``sum log x!`` over the
completions) is computed *exactly* by a backward pass over the node graph, and
the total weight of its completions in closed form:
``sum_T prod 1/x! = n'! / (prod r'! prod c'!)``.

The forward pass carries (node, past statistic, multiplicity) entries. An entry
whose every completion is at most as probable as the observed table adds its
whole subtree mass; one whose every completion is more probable is dropped;
the rest are expanded to the next stage. Entries at the same node whose past
statistics agree within ``1e-9`` are merged (the hashing of FEXACT's
``f5xact``), which is what keeps the network small. Everything is vectorised
with numpy per stage.

Meet in the middle: for the last stages a backward pass builds, for every node,
the sorted list of all its future statistics with multiplicities (within a
budget of values). When the forward pass reaches such a stage, each live entry
is finished by one binary search in its node's list (suffix sums of the
completion weights) instead of being expanded further.
"""
from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np

from mrcstats.errors import InputError


class ExactTooLarge(InputError):
    """The exact network is too large for the configured limits; use the Monte Carlo p-value."""


#: the largest table total the exact network takes (its log-factorial table alone is 8 bytes per count);
#: R's FEXACT stops far earlier on such tables ("FEXACT error 40 ... out of workspace")
MAX_EXACT_N = 10_000_000
#: FEXACT's tolerance on the log-probability scale (fexact.c: ``tol = 3.45254e-7``)
FEXACT_TOL = 3.45254e-7
_MERGE = 1e-9
_CHUNK = 2_000_000  # arcs expanded at a time into the joined stage


@cache
def _lfact(n: int) -> np.ndarray:
    """log(k!) for k = 0..n, by cumulative sums of log k (exact to a few ulp)."""
    out = np.zeros(n + 1)
    if n >= 2:
        out[2:] = np.cumsum(np.log(np.arange(2, n + 1, dtype=float)))
    return out


def _splits(caps: np.ndarray, total: int, max_edges: int) -> tuple[np.ndarray, np.ndarray]:
    """Every integer vector x with 0 <= x <= caps[v] and sum x = total, for every row v of ``caps``.

    Returns (parent, x): ``x[e]`` is a split of row ``parent[e]``; parents come out in order.
    """
    n, r = caps.shape
    suffix = np.concatenate([np.cumsum(caps[:, ::-1], axis=1)[:, ::-1], np.zeros((n, 1), dtype=np.int64)],
                            axis=1)
    parent = np.arange(n)
    partial = np.zeros((n, 0), dtype=np.int64)
    sums = np.zeros(n, dtype=np.int64)
    for i in range(r - 1):
        lo = np.maximum(0, total - sums - suffix[parent, i + 1])
        hi = np.minimum(caps[parent, i], total - sums)
        cnt = np.maximum(hi - lo + 1, 0)
        if int(cnt.sum()) > max_edges:
            raise ExactTooLarge(
                f"the exact Fisher test needs more than {max_edges} network arcs for this table; "
                "use the Monte Carlo p-value (simulate=True / --simulate)")
        rep, _ = _expand(np.zeros(len(cnt), dtype=np.int64), cnt)
        vals = lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        partial = np.column_stack([partial[rep], vals])
        sums = sums[rep] + vals
        parent = parent[rep]
    last = total - sums
    keep = (last >= 0) & (last <= caps[parent, r - 1])
    return parent[keep], np.column_stack([partial[keep], last[keep]])


def _build_network(rows: np.ndarray, cols: np.ndarray, lf: np.ndarray, max_nodes: int, max_edges: int):
    """Nodes of stages 0..C-2 (sorted remaining row sums), CSR arcs between them, terminal futures.

    ``edges[k] = (ptr, child, cost, multiplicity)`` links stage k to k + 1 (k < C - 2).
    At stage C - 2 two columns are left and a split of the first fixes the table, so
    ``term = (ptr, values)`` lists, per node, the statistic of every completion.
    """
    nstage = len(cols)
    base = int(rows.sum()) + 1
    r = len(rows)
    nodes = [np.sort(rows)[None, :].astype(np.int64)]
    edges = []
    for k in range(nstage - 2):
        cur = nodes[k]
        parent, x = _splits(cur, int(cols[k]), max_edges)
        child = np.sort(cur[parent] - x, axis=1)
        cost = lf[x].sum(axis=1)
        if float(base) ** r < 2.0**62:
            key = np.zeros(len(child), dtype=np.int64)
            for i in range(r):
                key = key * base + child[:, i]
            _, first, cidx = np.unique(key, return_index=True, return_inverse=True)
            uniq = child[first]
        else:
            uniq, cidx = np.unique(child, axis=0, return_inverse=True)
        if len(uniq) > max_nodes:
            raise ExactTooLarge(
                f"the exact Fisher test needs more than {max_nodes} network nodes for this table; "
                "use the Monte Carlo p-value (simulate=True / --simulate)")
        nodes.append(uniq)
        ptr = np.searchsorted(parent, np.arange(len(cur) + 1))
        edges.append((ptr, cidx.ravel(), cost, np.ones(len(cost))))
    cur = nodes[-1]
    parent, x = _splits(cur, int(cols[nstage - 2]), max_edges)
    vals = lf[x].sum(axis=1) + lf[cur[parent] - x].sum(axis=1)
    term = (np.searchsorted(parent, np.arange(len(cur) + 1)), vals)
    return nodes, edges, term


def rxc_exact_pvalue(table: np.ndarray, *, tol: float = FEXACT_TOL, max_nodes: int = 2_000_000,
                     max_entries: int = 20_000_000, max_future: int = 4_000_000,
                     max_edges: int = 10_000_000) -> float:
    """Exact two-sided Fisher p-value of an r x c table (R ``fisher.test``, FEXACT tie rule).

    ``table`` must be a non-negative integer matrix without all-zero rows or columns.
    Raises :class:`ExactTooLarge` (an :class:`InputError`) when the network grows past
    ``max_nodes`` nodes, ``max_edges`` arcs or ``max_entries`` live paths (``5 *
    max_entries`` when they can be joined in chunks), R's "FEXACT error 7 ... consider
    simulate.p.value", and at once when the table total exceeds :data:`MAX_EXACT_N` (R's
    "FEXACT error 40"); memory stays below roughly 100 bytes per path or arc.
    """
    x = np.asarray(table, dtype=np.int64)
    if x.shape[0] > x.shape[1]:
        x = x.T
    if x.shape[0] < 2 or x.shape[1] < 2:
        return 1.0
    rows = x.sum(axis=1)
    cols = np.sort(x.sum(axis=0))
    n = int(rows.sum())
    if n > MAX_EXACT_N:
        raise ExactTooLarge(
            f"the exact Fisher test is limited to tables with at most {MAX_EXACT_N:,} counts in all and this "
            f"one has {n:,} (R's fisher.test stops with 'FEXACT error 40' on such tables); use the Monte Carlo "
            "p-value (simulate=True / --simulate, e.g. --B 100000), or chisq for counts this large")
    lf = _lfact(n)
    s_obs = float(lf[x].sum())
    thresh = s_obs - tol           # tables with sum log x! >= thresh count
    const = float(lf[rows].sum() + lf[cols].sum() - lf[n])
    nodes, edges, term = _build_network(rows, cols, lf, max_nodes, max_edges)
    last = len(nodes) - 1          # stage C - 2
    # closed-form log total weight of each node's completions, and exact path bounds
    suffix_cols = np.concatenate([np.cumsum(lf[cols][::-1])[::-1], [0.0]])
    logtot = [lf[nd.sum(axis=1)] - lf[nd].sum(axis=1) - suffix_cols[k] for k, nd in enumerate(nodes)]
    minf: list[np.ndarray] = [np.empty(0)] * len(nodes)
    maxf: list[np.ndarray] = [np.empty(0)] * len(nodes)
    minf[last] = np.minimum.reduceat(term[1], term[0][:-1])
    maxf[last] = np.maximum.reduceat(term[1], term[0][:-1])
    for k in range(last - 1, -1, -1):
        ptr, child, cost, _ = edges[k]
        minf[k] = np.minimum.reduceat(cost + minf[k + 1][child], ptr[:-1])
        maxf[k] = np.maximum.reduceat(cost + maxf[k + 1][child], ptr[:-1])
    # backward lists of future statistics (meet in the middle): the terminal stage always,
    # earlier stages only when the forward side grows large
    fut = _FutureLists(edges, term, last)
    # forward pass
    pval = 0.0
    e_node = np.zeros(1, dtype=np.int64)
    e_past = np.zeros(1)
    e_w = np.ones(1)
    for k in range(last + 1):
        lo = e_past + minf[k][e_node]
        hi = e_past + maxf[k][e_node]
        allin = lo >= thresh
        if allin.any():
            pval += float(np.sum(e_w[allin] * np.exp(const - e_past[allin] + logtot[k][e_node[allin]])))
        mid = ~allin & (hi >= thresh)
        if not mid.any():
            break
        e_node, e_past, e_w = e_node[mid], e_past[mid], e_w[mid]
        if k > 0:  # merge the survivors only (classification first is cheaper than sorting all)
            e_node, e_past, e_w = _merge(e_node, e_past, e_w)
        if len(e_node) > 50_000:
            fut.extend_to(k, max_future)
        if k == fut.stage:
            pval += fut.join(e_node, e_past, e_w, thresh, const)
            break
        ptr, child, cost, mult = edges[k]
        deg = ptr[e_node + 1] - ptr[e_node]
        total = int(deg.sum())
        if k + 1 == fut.stage and total > max_entries:
            # too many paths to merge, but the next stage is joined: expand in chunks of bounded memory
            if total > 5 * max_entries:
                raise ExactTooLarge(
                    f"the exact Fisher test needs more than {5 * max_entries} network paths for this "
                    "table; use the Monte Carlo p-value (simulate=True / --simulate)")
            cum = np.cumsum(deg)
            start = 0
            while start < len(e_node):
                stop = max(int(np.searchsorted(cum, (cum[start] - deg[start]) + _CHUNK, side="right")), start + 1)
                sl = slice(start, stop)
                rep, eidx = _expand(ptr[e_node[sl]], deg[sl])
                pval += fut.join(child[eidx], e_past[sl][rep] + cost[eidx], e_w[sl][rep] * mult[eidx],
                                 thresh, const)
                start = stop
            break
        if total > max_entries:
            raise ExactTooLarge(
                f"the exact Fisher test needs more than {max_entries} network paths for this table; "
                "use the Monte Carlo p-value (simulate=True / --simulate)")
        rep, eidx = _expand(ptr[e_node], deg)
        e_node, e_past, e_w = child[eidx], e_past[rep] + cost[eidx], e_w[rep] * mult[eidx]
    return float(min(1.0, max(0.0, pval))) if math.isfinite(pval) else float("nan")


def _expand(start: np.ndarray, deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For segments [start_i, start_i + deg_i): (segment number, flat index) of every element."""
    total = int(deg.sum())
    rep = np.repeat(np.arange(len(start)), deg)
    idx = np.repeat(start, deg) + (np.arange(total) - np.repeat(np.cumsum(deg) - deg, deg))
    return rep, idx


def _merge(node: np.ndarray, val: np.ndarray, w: np.ndarray):
    """Sort by (node, value) and add the weights of entries whose values agree within 1e-9."""
    q = np.round(val / _MERGE).astype(np.int64)
    if len(q) == 0:
        return node, val, w
    q -= q.min()
    span = int(q.max()) + 1
    if (int(node.max()) + 1) * span < 2**62:
        order = np.argsort(node * span + q)  # one int64 key sorts faster than lexsort
    else:
        order = np.lexsort((q, node))
    node, val, w, q = node[order], val[order], w[order], q[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (node[1:] != node[:-1]) | (q[1:] != q[:-1])
    starts = np.flatnonzero(new)
    return node[starts], val[starts], np.add.reduceat(w, starts)


class _FutureLists:
    """Backward pass: every node's future statistics with multiplicities.

    Starts at the terminal stage (C - 2) and goes back one stage at a time
    (:meth:`extend_to`) while a stage's lists stay within a budget of values;
    ``lists`` = (offsets, values, counts) of stage ``stage``, grouped by node.
    """

    def __init__(self, edges, term, stage: int):
        self.edges = edges
        self.stage = stage
        ptr, vals = term
        self.lists = (ptr, vals, np.ones(len(vals)))
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def extend_to(self, k: int, budget: int) -> bool:
        """Go back to stage ``k`` if every step fits ``budget``; True when ``stage == k``."""
        while self.stage > k:
            off, vals, cnt = self.lists
            ptr, child, cost, mult = self.edges[self.stage - 1]
            length = off[child + 1] - off[child]
            if int(length.sum()) > budget:
                return False
            rep, idx = _expand(off[child], length)
            parent = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
            par, v, c = _merge(parent[rep], cost[rep] + vals[idx], mult[rep] * cnt[idx])
            self.lists = (np.searchsorted(par, np.arange(len(ptr))), v, c)
            self.stage -= 1
            self._cache.clear()
        return self.stage == k

    def _node(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        """Node ``v``'s sorted future statistics and suffix sums of cnt * exp(-(f - f_min))."""
        got = self._cache.get(v)
        if got is None:
            off, vals, cnt = self.lists
            f = vals[off[v]:off[v + 1]]
            o = np.argsort(f, kind="stable")
            f = f[o]
            g = cnt[off[v]:off[v + 1]][o] * np.exp(-(f - f[0]))
            got = (f, np.concatenate([np.cumsum(g[::-1])[::-1], [0.0]]))
            self._cache[v] = got
        return got

    def join(self, e_node, e_past, e_w, thresh: float, const: float) -> float:
        """Sum of P over the completions of entries at this stage whose statistic reaches ``thresh``."""
        total = 0.0
        order = np.argsort(e_node, kind="stable")
        e_node, e_past, e_w = e_node[order], e_past[order], e_w[order]
        bounds = np.concatenate([[0], np.flatnonzero(np.diff(e_node)) + 1, [len(e_node)]])
        for a, b in itertools.pairwise(bounds):
            f, suffix = self._node(int(e_node[a]))
            past = e_past[a:b]
            i = np.searchsorted(f, thresh - past, side="left")
            total += float(np.sum(e_w[a:b] * np.exp(const - past - f[0]) * suffix[i]))
        return total
