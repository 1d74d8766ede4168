"""Coupled-cluster references for the electron gas in plane-wave bases, with pyscf.

    python benchmarks/heg_reference.py [--electrons 14] [--rs 1.0] [--shells 9 11 12 13 14]

The Hamiltonian is psijax's (``psijax.system.ElectronGas`` with the Ewald interaction):
plane waves k = 2 pi n / L with |n|^2 <= s make the basis (M of them, closed shells of
the cell's cubic symmetry), the two-electron integrals are 4 pi / (V |G|^2) for every
momentum transfer G != 0 and the Madelung term N xi / 2 is a constant. In that basis the
plane waves are the canonical Hartree-Fock orbitals (the real combinations cos and sin
are used, so that pyscf's real closed-shell codes apply), and the singles amplitudes are
zero by momentum conservation, so CCSD is CCD. For each basis the table gives RHF (the
plane-wave determinant's energy, the same in every basis that holds the occupied
shells), CCSD and CCSD(T); below it the correlation energies extrapolated to the
complete basis as E_c(M) = E_c(inf) + A / M (the plane-wave basis's asymptotic form:
Shepherd, Grueneis, Booth, Kresse and Alavi, Phys. Rev. B 86, 035111 (2012)) from the
two, three, four and five largest bases; the middle of their range is the estimate and
half the range its error.
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
import pyscf
from pyscf import cc, gto, scf

from psijax.system.electron_gas import ElectronGas, shells


def real_plane_waves(max_squared: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer vectors n (|n|^2 <= ``max_squared``, sorted by |n|^2) and the unitary U
    [M, M] whose rows are the real orbitals 1, sqrt(2) cos(k . r), sqrt(2) sin(k . r) in
    the complex plane waves exp(i k . r) (all over sqrt(V))."""
    n, _ = shells(max_squared)
    index = {tuple(v): i for i, v in enumerate(n)}
    u = np.zeros((len(n), len(n)), complex)
    row = 0
    for i, v in enumerate(n):
        j = index[tuple(-v)]
        if i == j:
            u[row, i] = 1.0
            row += 1
        elif tuple(v) > tuple(-v):  # one of each pair +-n, in order of |n|^2
            u[row, i], u[row, j] = 1 / math.sqrt(2), 1 / math.sqrt(2)
            u[row + 1, i], u[row + 1, j] = -1j / math.sqrt(2), 1j / math.sqrt(2)
            row += 2
    return n, u  # rows in order of |n|^2, as n


def coulomb_vectors(n: np.ndarray, u: np.ndarray, length: float) -> np.ndarray:
    """Real vectors L [Q, M, M] with (pq|rs) = sum_Q L_Qpq L_Qrs over the real orbitals:
    sqrt(2 v(G)) times the real and imaginary parts of rho_pq(G) = int chi_p chi_q
    exp(-i G . r) for each G != 0 of a half space, v(G) = 4 pi / (V |G|^2)."""
    volume = length**3
    index = {tuple(v): i for i, v in enumerate(n)}
    transfers = {tuple(a + b) for a in n for b in n}
    vectors = []
    for g in sorted(transfers):
        if g <= tuple(-np.asarray(g)):  # G = 0 and the half space's mirror images
            continue
        pairs = [
            (m, index[key]) for m, v in enumerate(n) if (key := tuple(np.asarray(g) - v)) in index
        ]
        ms, partners = (np.array(p) for p in zip(*pairs, strict=True))
        rho = u[:, ms] @ u[:, partners].T  # sum over k_m + k_n = G of U_pm U_qn
        q2 = (2 * math.pi / length) ** 2 * float(np.dot(g, g))
        weight = math.sqrt(2 * 4 * math.pi / (volume * q2))
        vectors += [weight * rho.real, weight * rho.imag]
    return np.array(vectors)


def energies(gas: ElectronGas, max_squared: int) -> dict[str, float]:
    """RHF, CCSD and CCSD(T) energies per cell (Ha) in the plane waves |n|^2 <= max_squared."""
    n, u = real_plane_waves(max_squared)
    size = len(n)
    k2 = (2 * math.pi / gas.length) ** 2 * np.sum(n * n, axis=1)
    kinetic = np.real(np.einsum("pm,m,pm->p", u, 0.5 * k2, u.conj()))
    vectors = coulomb_vectors(n, u, gas.length)
    rows, cols = np.tril_indices(size)
    pairs = vectors[:, rows, cols]
    eri = pairs.T @ pairs  # 4-fold packed (pq|rs)
    del vectors, pairs

    mol = gto.M(verbose=0)
    mol.nelectron = gas.n_electrons
    mol.incore_anyway = True
    mol.nao_nr = lambda *args: size
    mf = scf.RHF(mol)
    mf.get_hcore = lambda *args: np.diag(kinetic)
    mf.get_ovlp = lambda *args: np.eye(size)
    mf.energy_nuc = lambda *args: gas.madelung_energy()
    mf._eri = eri
    mf.max_memory = 20000
    occupied = np.zeros(size)
    occupied[: gas.n_electrons // 2] = 2.0
    mf.kernel(dm0=np.diag(occupied))
    ccsd = cc.RCCSD(mf)
    ccsd.max_memory = 20000
    ccsd.conv_tol = 1e-9
    ccsd.kernel()
    triples = ccsd.ccsd_t()
    return {"M": size, "rhf": mf.e_tot, "ccsd": ccsd.e_tot, "ccsd_t": ccsd.e_tot + triples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--electrons", type=int, default=14)
    parser.add_argument("--rs", type=float, default=1.0)
    parser.add_argument("--shells", type=int, nargs="+", default=[9, 11, 12, 13, 14],
                        help="the bases' |n|^2 cutoffs")  # fmt: skip
    args = parser.parse_args()
    gas = ElectronGas.unpolarised(args.electrons, args.rs)
    print(f"# electron gas {args.electrons} e, rs = {args.rs:g}, Gamma; pyscf {pyscf.__version__}, "
          f"numpy {np.__version__}, {platform.machine()} {platform.processor() or ''}")  # fmt: skip
    print(f"# plane-wave determinant (psijax): {gas.hartree_fock_energy():.8f} Ha per cell")
    print("| |n|^2 <= | M | RHF (Ha) | CCSD (Ha) | CCSD(T) (Ha) | E_c CCSD | E_c CCSD(T) | s |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for s in args.shells:
        t0 = time.perf_counter()
        e = energies(gas, s)
        rows.append(e)
        print(
            f"| {s} | {e['M']} | {e['rhf']:.8f} | {e['ccsd']:.6f} | {e['ccsd_t']:.6f} | "
            f"{e['ccsd'] - e['rhf']:.6f} | {e['ccsd_t'] - e['rhf']:.6f} | "
            f"{time.perf_counter() - t0:.0f} |",
            flush=True,
        )
    e_hf = gas.hartree_fock_energy()
    m = np.array([r["M"] for r in rows], float)
    for method in ("ccsd", "ccsd_t"):
        c = np.array([r[method] - r["rhf"] for r in rows])
        fits = [np.polyfit(1 / m[-take:], c[-take:], 1)[1] for take in range(2, min(len(m), 5) + 1)]
        if fits:
            shown = ", ".join(f"{f:.6f}" for f in fits)
            middle, spread = (max(fits) + min(fits)) / 2, (max(fits) - min(fits)) / 2
            print(f"{method}: E_c(inf) from the 2..{len(fits) + 1} largest bases: {shown}; "
                  f"E = {e_hf + middle:.6f} +- {spread:.6f} Ha per cell")  # fmt: skip


if __name__ == "__main__":
    main()
