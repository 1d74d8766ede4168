"""The persistent compilation cache: a second identical launch compiles nothing new (and
gives the same energies to the bit), a cache the user configured is left alone, and ''
turns it off."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest

from psijax.run.compile_cache import use_compilation_cache

from runs import command, env, tiny_config


def test_a_configured_cache_is_left_alone(tmp_path):
    configured = jax.config.jax_compilation_cache_dir  # set for the suite by conftest
    assert configured
    assert use_compilation_cache(str(tmp_path / "other")) == type(tmp_path)(configured)
    assert jax.config.jax_compilation_cache_dir == configured
    assert not (tmp_path / "other").exists()


def _uncached_env() -> dict[str, str]:
    return {k: v for k, v in env().items() if k != "JAX_COMPILATION_CACHE_DIR"}


def test_empty_directory_turns_it_off():
    code = (
        "import jax; from psijax.run.compile_cache import use_compilation_cache as u; "
        "assert u('') is None; assert not jax.config.jax_compilation_cache_dir; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], env=_uncached_env(), capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.slow
def test_a_second_launch_compiles_nothing_new(tmp_path):
    cache = tmp_path / "cache"
    config = tiny_config(tmp_path, steps=2, compilation_cache=str(cache))
    # Every program cached, however fast it compiles: with the 0.25 s threshold a program
    # near it is cached by one launch and not the other, depending on the machine's load.
    every = {**_uncached_env(), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    run = lambda: subprocess.run(
        command("train", "--config", config, "--out", tmp_path / "run", "--force", "--quiet"),
        env=every, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    energies = lambda: [
        row.split(",")[:3] for row in (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    ]
    first = run()
    assert first.returncode == 0, first.stderr
    entries = sorted(os.listdir(cache))
    assert entries, "the first launch cached nothing"
    trajectory = energies()
    second = run()
    assert second.returncode == 0, second.stderr
    assert sorted(os.listdir(cache)) == entries
    # one seed, one run: the cached programs give the compiled ones' energies to the bit
    assert energies() == trajectory and len(trajectory) == 3
