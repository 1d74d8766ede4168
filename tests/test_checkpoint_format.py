"""Self-describing checkpoints: arrays under their pytree names with the software versions,
readable by orbax alone; format-1 checkpoints (leaf_0000, ...) still restore."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import config as config_lib
from psijax import parallel, registry, system
from psijax.errors import InputError
from psijax.rundir import checkpoint
from psijax.training.state import abstract_train_state


@pytest.fixture(scope="module")
def template():
    config = config_lib.Config(system="H2", layers=((8, 4),), determinants=1, walkers=8)
    molecule = system.resolve("H2")
    net = registry.ansatz(molecule, config)
    return abstract_train_state(
        net,
        registry.optimizer(config),
        config.walkers,
        molecule.n_electrons,
        parallel.make_mesh(1),
    )


def concrete(template, seed: int = 0):
    """A state with distinct values in every leaf, laid out like ``template``."""
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), len(jax.tree.leaves(template))))

    def fill(s):
        if jnp.issubdtype(s.dtype, jnp.floating):
            x = jax.random.normal(next(keys), s.shape, s.dtype)
        else:
            x = jnp.arange(int(np.prod(s.shape)), dtype=s.dtype).reshape(s.shape) + 7
        return jax.device_put(x, s.sharding)

    return jax.tree.map(fill, template)


def save(tmp_path, state, identity=None):
    ckpts = checkpoint.Checkpoints(tmp_path)
    ckpts.save(state, identity or {"molecule": "x"})
    ckpts.close()
    return tmp_path / checkpoint.SUBDIR / str(int(state.step))


def test_orbax_alone_reads_the_arrays_by_name_and_meta_names_the_versions(tmp_path, template):
    import orbax.checkpoint as ocp

    state = concrete(template)
    where = save(tmp_path, state)
    arrays = ocp.StandardCheckpointer().restore(where / "state")
    assert "walkers" in arrays and "params.layers.0.one.w" in arrays
    np.testing.assert_array_equal(arrays["walkers"], state.walkers)
    np.testing.assert_array_equal(
        arrays["params.layers.0.one.w"], state.params["layers"][0]["one"]["w"]
    )
    meta = json.loads((where / "meta" / "metadata").read_text())
    assert meta["format"] == 3 and meta["names"][-1] == "key" and "sampler" in meta["names"]
    assert {"psijax", "jax", "folx", "orbax-checkpoint"} <= set(meta["versions"])


def test_a_format_1_checkpoint_still_restores(tmp_path, template, monkeypatch):
    state = concrete(template, seed=1)
    monkeypatch.setattr(checkpoint, "FORMAT", 1)
    where = save(tmp_path, state)
    import orbax.checkpoint as ocp

    assert sorted(ocp.StandardCheckpointer().restore(where / "state"))[0] == "leaf_0000"
    monkeypatch.setattr(checkpoint, "FORMAT", 3)
    reader = checkpoint.Checkpoints(tmp_path, read_only=True)
    restored = reader.restore(template, {"molecule": "x"})
    arrays = reader.arrays()
    reader.close()
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(arrays) == len(jax.tree.leaves(state))


def test_a_format_2_checkpoint_restores_its_width_as_the_samplers_state(tmp_path, template,
                                                                        monkeypatch):  # fmt: skip
    """Format 2 named Metropolis's state ``width``; it is the state's ``sampler`` now."""
    import orbax.checkpoint as ocp

    state = concrete(template, seed=2)
    monkeypatch.setattr(checkpoint, "FORMAT", 2)
    where = save(tmp_path, state)
    arrays = ocp.StandardCheckpointer().restore(where / "state")
    assert "width" in arrays and "sampler" not in arrays
    monkeypatch.setattr(checkpoint, "FORMAT", 3)
    reader = checkpoint.Checkpoints(tmp_path, read_only=True)
    restored = reader.restore(template, {"molecule": "x"})
    reader.close()
    np.testing.assert_array_equal(restored.sampler, state.sampler)
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_unknown_format_is_refused_in_one_line(tmp_path, template):
    where = save(tmp_path, concrete(template))
    meta_file = where / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    meta["format"] = 99
    meta["versions"]["psijax"] = "9.9.9"
    meta_file.write_text(json.dumps(meta))
    reader = checkpoint.Checkpoints(tmp_path, read_only=True)
    with pytest.raises(
        InputError, match=r"has format 99, this psijax reads 1, 2, 3; .*\(9\.9\.9\)"
    ):
        reader.restore(template, {"molecule": "x"})
    reader.close()


def test_arrays_that_do_not_match_their_checksums_are_refused_in_one_line(tmp_path, template):
    """A bit flipped in an array's stored bits, as the reader sees it: the meta's checksum of
    that array no longer matches (the files themselves are compressed, so a flipped byte
    there reads as unreadable files or as changed bits, tests/test_bad_input.py)."""
    where = save(tmp_path, concrete(template))
    meta_file = where / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    meta["checksums"][len(meta["checksums"]) // 2] ^= 1 << 4
    meta_file.write_text(json.dumps(meta))
    reader = checkpoint.Checkpoints(tmp_path, read_only=True)
    with pytest.raises(InputError, match=r"is damaged \(its arrays do not match their checksums\)"):
        reader.restore(template, {"molecule": "x"})
    reader.close()


def test_opening_a_directory_keeps_the_newest_checkpoints_a_killed_run_left(tmp_path, template):
    """A run killed after its last save but before orbax pruned the older ones has nothing
    left to save when resumed; opening the directory prunes them."""
    ckpts = checkpoint.Checkpoints(tmp_path, keep=4)
    for step in (4, 8, 12):
        ckpts.save(concrete(template)._replace(step=jnp.int32(step)), {"molecule": "x"})
    ckpts.close()
    reopened = checkpoint.Checkpoints(tmp_path, keep=2)
    assert reopened.steps() == [8, 12]
    reopened.close()
    assert sorted(int(p.name) for p in (tmp_path / checkpoint.SUBDIR).iterdir()
                  if p.name.isdigit()) == [8, 12]  # fmt: skip
    reader = checkpoint.Checkpoints(tmp_path, read_only=True)  # a reader never deletes
    assert reader.steps() == [8, 12]
