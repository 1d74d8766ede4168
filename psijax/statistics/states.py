"""The K states' energies and error bars from a series of energy matrices (on the host).

The energy matrix's average under |det Psi|^2 (``psijax.hamiltonian.states``) has the states'
energies as eigenvalues. A series of per-step (or per-batch) matrices is averaged in
blocks as long as the blocking analysis of its trace asks for (``psijax.statistics``);
the energies are the eigenvalues of the mean matrix, and their error bars the spread of
the eigenvalues over bootstrap resamples of the blocks (the eigenvalues are nonlinear in
the matrix: no error propagation by hand). Eigenvectors of the same mean matrix turn any
other matrix observable into state-to-state elements (a dipole's) or each state's
expectation value (S^2's).
"""

from __future__ import annotations

import numpy as np

from psijax.statistics import blocking

BOOTSTRAP = 400  # resamples of the blocks


def energies(matrix: np.ndarray) -> np.ndarray:
    """The eigenvalues of one ``[K, K]`` energy matrix, real parts, lowest first."""
    return np.sort(np.linalg.eigvals(np.asarray(matrix, np.float64)).real)


def eigenbasis(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(energies, V, V^-1)`` of the mean energy matrix E = V diag(energies) V^-1, lowest
    energy first. A noisy matrix may have complex pairs of eigenvalues: the energies are
    the real parts, V and V^-1 stay complex (the real parts of a pair's eigenvectors are
    the same vector); a defective V gives a V^-1 of nan."""
    values, vectors = np.linalg.eig(np.asarray(matrix, np.float64))
    order = np.argsort(values.real, kind="stable")
    vectors = vectors[:, order]
    try:
        inverse = np.linalg.inv(vectors)
    except np.linalg.LinAlgError:
        inverse = np.full_like(vectors, np.nan)
    return values.real[order], vectors, inverse


def _blocks(series: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], blocking.Estimate]:
    """Block means of every ``[T, K, K]`` series, blocked as the energy trace asks."""
    m = {name: np.asarray(v, np.float64) for name, v in series.items()}
    energy = m["energy"]
    if energy.ndim != 3 or energy.shape[1] != energy.shape[2]:
        raise ValueError(f"give a series of square matrices [T, K, K], got {energy.shape}")
    finite = np.all([np.all(np.isfinite(v), axis=(1, 2)) for v in m.values()], axis=0)
    m = {name: v[finite] for name, v in m.items()}
    if len(m["energy"]) < 2:
        raise ValueError("fewer than two finite energy matrices: run more steps")
    trace = blocking.blocking_estimate(np.trace(m["energy"], axis1=1, axis2=2))
    size, n = trace.block_size, len(m["energy"]) // trace.block_size
    blocks = {
        name: v[len(v) - n * size :].reshape(n, size, *v.shape[1:]).mean(axis=1)
        for name, v in m.items()
    }
    return blocks, trace


def bootstrap(
    series: dict[str, np.ndarray], fn, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, blocking.Estimate]:
    """``fn(means)`` of the mean matrices of ``series`` (``{"energy": [T, K, K], ...}``) and
    its error: the spread of ``fn`` over bootstrap resamples of the blocks. Returns (value,
    error, the blocking estimate of the energy trace)."""
    blocks, trace = _blocks(series)
    n = len(blocks["energy"])
    value = np.asarray(fn({k: v.mean(axis=0) for k, v in blocks.items()}), np.float64)
    if n < 2:
        return value, np.full(value.shape, np.nan), trace
    picks = np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP, n))
    resampled = np.stack([fn({k: v[p].mean(axis=0) for k, v in blocks.items()}) for p in picks])
    return value, np.nanstd(resampled, axis=0, ddof=1), trace


def estimate(matrices: np.ndarray, *, seed: int = 0) -> list[blocking.Estimate]:
    """Each state's energy, lowest first, from a series of ``[K, K]`` energy matrices
    ``[T, K, K]`` (non-finite ones left out); block size and autocorrelation time are the
    trace's."""
    mean, error, trace = bootstrap({"energy": matrices}, lambda m: energies(m["energy"]), seed=seed)
    return [
        blocking.Estimate(float(e), float(d), trace.n_samples, trace.block_size,
                          trace.n_blocks, trace.autocorrelation_time)
        for e, d in zip(mean, error, strict=True)
    ]  # fmt: skip


def spectrum(
    means: dict[str, np.ndarray], dipoles: tuple[str, ...] = (), spin: str | None = None
) -> np.ndarray:
    """From mean matrices: the K energies, the K - 1 excitation energies from state 0 and,
    with ``dipoles`` (the names of the x, y, z dipole matrices), for each excited state k
    |d_0k|^2 = sum_a T^a_0k T^a_k0 (T^a = V^-1 D^a V in the energies' eigenbasis) and the
    oscillator strength f_0k = 2/3 (E_k - E_0) |d_0k|^2 (atomic units), then the sum of
    the f_0k (well defined where degenerate states make each one ill-defined); with
    ``spin`` (the name of the S^2 matrix), each state's <S^2>: the diagonal of
    V^-1 S V, lowest energy first."""
    values, v, v_inv = eigenbasis(means["energy"])
    gaps = values[1:] - values[0]
    out = [values, gaps]
    if dipoles:
        t = [v_inv @ means[name] @ v for name in dipoles]
        d2 = np.real(sum(ta[0, 1:] * ta[1:, 0] for ta in t))
        strengths = 2.0 / 3.0 * gaps * d2
        out += [d2, strengths, [np.sum(strengths)]]
    if spin is not None:
        out.append(np.real(np.diag(v_inv @ means[spin] @ v)))
    return np.concatenate(out)


def tail(matrices: np.ndarray, fraction: float) -> list[blocking.Estimate]:
    """``estimate`` of the trailing ``fraction`` of a run's per-step matrices."""
    m = np.asarray(matrices)
    n = max(2, int(np.ceil(fraction * len(m))))
    return estimate(m[-n:])


def matrix_names(name: str, k: int) -> tuple[str, ...]:
    """The metrics columns of the K-state matrix of ``name`` (energy, dipole_x, s2), row by
    row."""
    return tuple(f"{name}_matrix_{i}_{j}" for i in range(k) for j in range(k))


def matrices_of(rows: list[dict[str, float]], k: int) -> np.ndarray:
    """``[T, K, K]`` from metrics rows holding ``matrix_columns(k)``."""
    names = matrix_names("energy", k)
    return np.asarray([[r[n] for n in names] for r in rows], np.float64).reshape(-1, k, k)


def per_step_energies(matrices: np.ndarray) -> np.ndarray:
    """``[T, K]``: each step's energies (``energies``), nan for a non-finite matrix."""
    k = matrices.shape[-1]
    return np.asarray(
        [energies(m) if np.all(np.isfinite(m)) else np.full(k, np.nan) for m in matrices]
    ).reshape(-1, k)


def step_energies(metrics: dict[str, float], k: int) -> dict[str, float]:
    """``{"energy_state_i": E_i}`` of one step from its energy-matrix columns."""
    m = np.asarray([metrics[n] for n in matrix_names("energy", k)], np.float64).reshape(1, k, k)
    return {f"energy_state_{i}": float(e) for i, e in enumerate(per_step_energies(m)[0])}
