"""The BLAS behind jaxlib's CPU LAPACK runs on one thread once psijax.configure() has run
(psijax.parallel.cpu_blas); numpy's own copy and a count the user chose are left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy
import pytest

from psijax.parallel import cpu_blas

PROGRAM = textwrap.dedent(
    """
    import json, os
    import jax, jax.numpy as jnp
    import scipy.linalg.cython_lapack
    import threadpoolctl

    # every BLAS at two threads first, so that one thread after the import is psijax's doing
    # whatever the machine's cores (unless the user's variable says otherwise)
    if not any(name in os.environ for name in {env}):
        threadpoolctl.ThreadpoolController().limit(limits=2, user_api="blas")
    before = {{i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()}}
    import psijax
    psijax.configure()
    from psijax.parallel import cpu_blas
    jax.block_until_ready(jnp.linalg.slogdet(jnp.eye(3) + 0.5))  # jaxlib's LAPACK in use
    after = {{i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()}}
    private = {{p: cpu_blas._numpy_private(p) for p in after}}
    threads = cpu_blas.lapack_threads()
    print(json.dumps(dict(before=before, after=after, private=private, threads=threads)))
    """
).format(env=cpu_blas.ENV)


def _run(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in cpu_blas.ENV}
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env={**clean, **env}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.compat  # threadpoolctl's and scipy's layouts at the floors and the newest
def test_lapacks_blas_gets_one_thread_and_numpys_keeps_its_own():
    seen = _run()
    lapack = [p for p, private in seen["private"].items() if not private]
    assert lapack, "no BLAS library outside numpy's wheel: scipy's LAPACK must have one"
    for path in lapack:
        assert seen["before"][path] == 2 and seen["after"][path] == 1, path
    assert seen["threads"] == [1] * len(lapack)
    for path, private in seen["private"].items():
        if private:
            assert seen["after"][path] == seen["before"][path], path


def test_a_count_the_user_chose_is_kept():
    seen = _run(OPENBLAS_NUM_THREADS="2")
    assert seen["after"] == seen["before"]
    lapack = [p for p, private in seen["private"].items() if not private]
    assert sorted(seen["threads"]) == sorted(seen["before"][p] for p in lapack)


def test_numpys_private_copy_is_told_apart_from_scipys():
    site = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    assert cpu_blas._numpy_private(os.path.join(site, "numpy.libs", "libopenblas64_.so"))
    assert cpu_blas._numpy_private(os.path.join(site, "numpy", ".dylibs", "libopenblas.dylib"))
    assert not cpu_blas._numpy_private(os.path.join(site, "scipy.libs", "libopenblas.so"))
    assert not cpu_blas._numpy_private("/usr/lib/x86_64-linux-gnu/libopenblas.so.0")
