"""``import psijax`` changes nothing outside psijax: JAX's lowerings, the environment,
the BLAS libraries' threads and folx's modules are as they were, with every module of the
package imported. ``psijax.configure()`` does the set-up (where this jaxlib needs it) and
``psijax.unconfigure()`` undoes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import json, os, pkgutil, importlib
    import jax, numpy
    import scipy.linalg.cython_lapack  # the BLAS jaxlib's LAPACK calls, loaded
    import threadpoolctl
    from jax._src.interpreters import mlir
    from jax._src.lax import linalg
    from folx import jvp, utils

    def snapshot():
        rules = mlir._platform_specific_lowerings["cpu"]
        return dict(
            lowerings=[id(rules[p].rule) for p in (linalg.lu_p, linalg.triangular_solve_p)],
            environ=dict(os.environ),
            blas={i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()},
            folx=[type(m.jnp).__name__ for m in (jvp, utils)],
        )

    # every BLAS at two threads first: one thread after configure() is psijax's doing
    threadpoolctl.ThreadpoolController().limit(limits=2, user_api="blas")
    before = snapshot()
    import psijax
    for module in pkgutil.walk_packages(psijax.__path__, "psijax."):
        if not module.name.startswith("psijax.cli.__main__"):
            importlib.import_module(module.name)
    imported = snapshot()
    setup = psijax.configure()
    configured = snapshot()
    psijax.unconfigure()
    undone = snapshot()
    print(json.dumps(dict(before=before, imported=imported, configured=configured,
                          undone=undone, pieces=setup.lapack_in_pieces)))
    """
)


def test_import_changes_nothing_and_configure_is_undone():
    variables = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS", "PJRT_NPROC")
    env = {k: v for k, v in os.environ.items() if k not in variables}
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    before, imported = seen["before"], seen["imported"]
    for key in ("lowerings", "environ", "blas", "folx"):
        assert imported[key] == before[key], key
    configured = seen["configured"]
    assert (configured["lowerings"] != before["lowerings"]) == seen["pieces"]
    changed_blas = {p for p, n in configured["blas"].items() if n != before["blas"][p]}
    assert changed_blas, "configure() set no BLAS library behind LAPACK to one thread"
    assert all(configured["blas"][p] == 1 for p in changed_blas)
    assert configured["folx"] == before["folx"]  # folx's shims live only while psijax traces
    assert seen["undone"] == before


def test_a_runs_plots_leave_the_users_matplotlib_as_it_was(tmp_path):
    """A run's plots are drawn outside pyplot: the backend a user (a notebook, a GUI)
    chose and the figures they have open are theirs after psijax wrote its PNGs (a
    relaxation's and a scan's plots are drawn the same way, ``plots.new_figure``)."""
    import matplotlib
    import numpy as np

    from psijax.rundir import plots

    backend = matplotlib.get_backend()
    matplotlib.use("svg")  # a backend no plot of psijax's would choose
    try:
        energies = np.linspace(-1.0, -1.17, 50)
        plots.plot_energy(tmp_path / "e.png", energies, -1.174, "-1.17(1)", "H2")
        plots.plot_states(tmp_path / "s.png", np.stack([energies, energies + 0.5], 1),
                          ["-1.17(1)", "-0.67(1)"], "H2")  # fmt: skip
        rows = [{"energy": str(e)} for e in energies]
        plots.plot_evaluation(tmp_path / "v.png", rows, {"energy_text": "-1.17(1)"}, "H2")
        assert matplotlib.get_backend() == "svg"
        for name in ("e", "s", "v"):
            assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        matplotlib.use(backend)
