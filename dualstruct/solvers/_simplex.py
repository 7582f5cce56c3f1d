"""The Euclidean projection onto the probability simplex, shared by the GDMM kernels of the
chain (a factor's active labels) and multi-label (an edge's four pair states) models."""

from numba import njit


@njit(cache=True, inline="always")
def project_to_simplex(v, n, out, scratch):
    """Euclidean projection of v[:n] onto the probability simplex, ``out = max(v − τ, 0)``.

    The threshold τ is at least ``max(v) − 1``, since the largest entry ends at most at 1, so
    only the entries above ``max(v) − 1`` are candidates: on a large active set most labels
    carry no mass and stay far below. Among them τ is found without sorting, by Michelot's
    (1986) fixed point: τ = (Σ_S v − 1) / |S| over the candidates S, drop those <= τ,
    repeat until none drops. τ only grows and a dropped entry is below the final τ, so this
    ends at the sort-based threshold, in a few sweeps instead of a sort (which costs a
    sizeable share of a pass on large active sets). Up to 8 entries
    the sort-based threshold is cheaper and is used directly."""
    if n <= 8:  # a few entries (a pair factor's four states): sort them, no sweeps
        for j in range(n):  # insertion sort into scratch, descending
            x = v[j]
            k = j
            while k > 0 and scratch[k - 1] < x:
                scratch[k] = scratch[k - 1]
                k -= 1
            scratch[k] = x
        cum = 0.0
        tau = 0.0
        for j in range(n):
            cum += scratch[j]
            t = (cum - 1.0) / (j + 1)
            if scratch[j] > t:
                tau = t
        for k in range(n):
            x = v[k] - tau
            out[k] = x if x > 0.0 else 0.0
        return
    top = v[0]
    for k in range(1, n):
        top = max(top, v[k])
    m = 0
    for k in range(n):
        if v[k] > top - 1.0:
            scratch[m] = v[k]
            m += 1
    cum = 0.0
    for r in range(m):
        cum += scratch[r]
    tau = (cum - 1.0) / m
    while True:
        kept = 0
        cum = 0.0
        for r in range(m):
            x = scratch[r]
            if x > tau:
                scratch[kept] = x
                kept += 1
                cum += x
        if kept == m or kept == 0:  # (0 only by rounding at absurd scales: keep τ)
            break
        m = kept
        tau = (cum - 1.0) / m
    for k in range(n):
        x = v[k] - tau
        out[k] = x if x > 0.0 else 0.0
