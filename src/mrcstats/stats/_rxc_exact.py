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

import math
from functools import cache

import numpy as np

from mrcstats.errors import InputError

#: FEXACT's tolerance on the log-probability scale (fexact.c: ``tol = 3.45254e-7``)
FEXACT_TOL = 3.45254e-7
_MERGE = 1e-9


@cache
def _lfact(n: int) -> np.ndarray:
    """log(k!) for k = 0..n, by cumulative sums of log k (exact to a few ulp)."""
    out = np.zeros(n + 1)
    if n >= 2:
        out[2:] = np.cumsum(np.log(np.arange(2, n + 1, dtype=float)))
    return out


def _splits(caps: tuple[int, ...], total: int) -> np.ndarray:
    """All integer vectors x with 0 <= x_i <= caps_i and sum x = total, shape (m, len(caps))."""
    r = len(caps)
    suffix = np.concatenate([np.cumsum(np.asarray(caps)[::-1])[::-1], [0]])
    partial = np.zeros((1, 0), dtype=np.int64)
    sums = np.zeros(1, dtype=np.int64)
    for i in range(r - 1):
        lo = np.maximum(0, total - sums - suffix[i + 1])
        hi = np.minimum(caps[i], total - sums)
        cnt = np.maximum(hi - lo + 1, 0)
        rep = np.repeat(np.arange(len(sums)), cnt)
        offs = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        vals = lo[rep] + offs
        partial = np.column_stack([partial[rep], vals])
        sums = sums[rep] + vals
    last = total - sums
    keep = (last >= 0) & (last <= caps[r - 1])
    return np.column_stack([partial[keep], last[keep]]).astype(np.int64)


def _build_network(rows: np.ndarray, cols: np.ndarray, lf: np.ndarray, max_nodes: int):
    """Stages of nodes (sorted remaining row sums) and CSR edges with costs and multiplicities."""
    nstage = len(cols)
    base = int(rows.sum()) + 1
    nodes = [np.sort(rows)[None, :].astype(np.int64)]
    edges = []  # per stage k: (ptr, child, cost, mult)
    for k in range(nstage - 1):
        cur = nodes[k]
        parent_l, child_l, cost_l = [], [], []
        for v in range(len(cur)):
            x = _splits(tuple(int(t) for t in cur[v]), int(cols[k]))
            child = np.sort(cur[v][None, :] - x, axis=1)
            parent_l.append(np.full(len(x), v))
            child_l.append(child)
            cost_l.append(lf[x].sum(axis=1))
        parent = np.concatenate(parent_l)
        child = np.concatenate(child_l)
        cost = np.concatenate(cost_l)
        key = np.zeros(len(child), dtype=np.int64)
        for i in range(child.shape[1]):
            key = key * base + child[:, i]
        ukeys, first, cidx = np.unique(key, return_index=True, return_inverse=True)
        if len(ukeys) > max_nodes:
            raise InputError(
                f"the exact Fisher test needs more than {max_nodes} network nodes for this table; "
                "use the Monte Carlo p-value (simulate=True / --simulate)")
        nodes.append(child[first])
        # merge parallel edges (same parent, same child, same cost) into multiplicities
        q = np.round(cost / _MERGE).astype(np.int64)
        order = np.lexsort((q, cidx, parent))
        p_s, c_s, q_s = parent[order], cidx[order], q[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (p_s[1:] != p_s[:-1]) | (c_s[1:] != c_s[:-1]) | (q_s[1:] != q_s[:-1])
        starts = np.flatnonzero(new)
        mult = np.diff(np.append(starts, len(order))).astype(float)
        e_parent = p_s[starts]
        ptr = np.searchsorted(e_parent, np.arange(len(cur) + 1))
        edges.append((ptr, c_s[starts], cost[order][starts], mult))
    return nodes, edges


def rxc_exact_pvalue(table: np.ndarray, *, tol: float = FEXACT_TOL, max_nodes: int = 2_000_000,
                     max_entries: int = 20_000_000, max_future: int = 4_000_000) -> float:
    """Exact two-sided Fisher p-value of an r x c table (R ``fisher.test``, FEXACT tie rule).

    ``table`` must be a non-negative integer matrix without all-zero rows or columns.
    Raises :class:`InputError` when the network grows past ``max_nodes`` nodes or
    ``max_entries`` live paths (R's "FEXACT error 7 ... consider simulate.p.value").
    """
    x = np.asarray(table, dtype=np.int64)
    if x.shape[0] > x.shape[1]:
        x = x.T
    rows = x.sum(axis=1)
    cols = np.sort(x.sum(axis=0))
    n = int(rows.sum())
    if x.shape[0] < 2 or x.shape[1] < 2:
        return 1.0
    lf = _lfact(n)
    s_obs = float(lf[x].sum())
    thresh = s_obs - tol           # tables with sum log x! >= thresh count
    const = float(lf[rows].sum() + lf[cols].sum() - lf[n])
    nodes, edges = _build_network(rows, cols, lf, max_nodes)
    nst = len(cols)
    # closed-form log total weight of each node's completions, and exact path bounds
    suffix_cols = np.concatenate([np.cumsum(lf[cols][::-1])[::-1], [0.0]])
    logtot = [lf[nd.sum(axis=1)] - lf[nd].sum(axis=1) - suffix_cols[k] for k, nd in enumerate(nodes)]
    minf: list[np.ndarray] = [None] * nst  # type: ignore[list-item]
    maxf: list[np.ndarray] = [None] * nst  # type: ignore[list-item]
    last = lf[nodes[nst - 1]].sum(axis=1)
    minf[nst - 1] = last
    maxf[nst - 1] = last
    for k in range(nst - 2, -1, -1):
        ptr, child, cost, _ = edges[k]
        lo = cost + minf[k + 1][child]
        hi = cost + maxf[k + 1][child]
        minf[k] = np.minimum.reduceat(lo, ptr[:-1])
        maxf[k] = np.maximum.reduceat(hi, ptr[:-1])
    # backward: complete lists of future statistics for the last stages (meet in the middle)
    # small budget first; extended down to the current stage only when the forward side grows large
    fut = _FutureLists(nodes, edges, lf)
    fut.extend_to(0, min(max_future, 200_000))
    # forward pass
    pval = 0.0
    e_node = np.zeros(1, dtype=np.int64)
    e_past = np.zeros(1)
    e_w = np.ones(1)
    for k in range(nst):
        if len(e_node) == 0:
            break
        lo = e_past + minf[k][e_node]
        hi = e_past + maxf[k][e_node]
        allin = lo >= thresh
        if allin.any():
            pval += float(np.sum(e_w[allin] * np.exp(const - e_past[allin] + logtot[k][e_node[allin]])))
        mid = ~allin & (hi >= thresh)
        if k == nst - 1 or not mid.any():
            break
        e_node, e_past, e_w = e_node[mid], e_past[mid], e_w[mid]
        if len(e_node) > 50_000:
            fut.extend_to(k, max_future)
        if k == fut.stage:
            pval += _join(e_node, e_past, e_w, fut.lists, thresh, const)
            break
        ptr, child, cost, mult = edges[k]
        deg = ptr[e_node + 1] - ptr[e_node]
        total = int(deg.sum())
        if total > max_entries:
            raise InputError(
                f"the exact Fisher test needs more than {max_entries} network paths for this table; "
                "use the Monte Carlo p-value (simulate=True / --simulate)")
        rep, eidx = _expand(ptr[e_node], deg)
        e_node, e_past, e_w = _merge(child[eidx], e_past[rep] + cost[eidx], e_w[rep] * mult[eidx])
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
    """Backward pass: every node's sorted future statistics with multiplicities.

    Starts at the last stage (one value per node) and goes back one stage at a time
    (:meth:`extend_to`) while a stage's lists stay within a budget of values;
    ``lists`` = (offsets, values, counts) of stage ``stage``.
    """

    def __init__(self, nodes, edges, lf):
        self.edges = edges
        self.stage = len(nodes) - 1
        vals = lf[nodes[self.stage]].sum(axis=1)
        self.lists = (np.arange(len(vals) + 1), vals, np.ones(len(vals)))

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
        return self.stage == k


def _join(e_node, e_past, e_w, fut, thresh: float, const: float) -> float:
    """Sum of P over completions of the live entries whose total statistic reaches ``thresh``."""
    off, vals, cnt = fut
    total = 0.0
    order = np.argsort(e_node, kind="stable")
    e_node, e_past, e_w = e_node[order], e_past[order], e_w[order]
    bounds = np.flatnonzero(np.diff(e_node)) + 1
    for seg in np.split(np.arange(len(e_node)), bounds):
        v = int(e_node[seg[0]])
        f = vals[off[v]:off[v + 1]]
        g = cnt[off[v]:off[v + 1]] * np.exp(-(f - f[0]))
        suffix = np.concatenate([np.cumsum(g[::-1])[::-1], [0.0]])
        i = np.searchsorted(f, thresh - e_past[seg], side="left")
        total += float(np.sum(e_w[seg] * np.exp(const - e_past[seg] - f[0]) * suffix[i]))
    return total
