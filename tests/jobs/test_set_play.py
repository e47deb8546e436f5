"""jobs/set_play.py: a trained run's `[play]` section rewritten in place, read back by every
reader, and refused (nothing written) where the model cannot play so."""

from __future__ import annotations

import pathlib
import tomllib

import jax
import numpy as np
import pytest

from eval.agents.players import make_agent
from jobs import set_play
from model import config as config_lib
from model.checkpoint import Checkpointer, load_params
from model.networks import gateau
from tests.eval.test_successor_mix import tiny


def _run(path: pathlib.Path, policy_value: bool = True, steps=(1, 2)) -> pathlib.Path:
    """A run dir of `steps` checkpoints saved by the trainer's checkpointer, no [play] weight."""
    config = tiny(policy_value)
    rng = np.random.default_rng(0)
    params = jax.tree_util.tree_map(
        lambda x: rng.standard_normal(x.shape).astype(np.float32), gateau.param_shapes(config)
    )
    checkpoints = Checkpointer(str(path / "checkpoints"), keep=len(steps))
    for step in steps:
        meta = {"step": step, "config": config.to_dict(), "source": "test"}
        checkpoints.save(step, None, params, None, meta)
    checkpoints.close()
    (path / "config.toml").write_text(config_lib.to_toml(config))
    return path


def test_the_weight_reaches_every_checkpoint_and_every_reader(tmp_path, capsys):
    run = _run(tmp_path / "run")
    before = load_params(str(run))[0]
    assert make_agent(f"neural:{run}").successor_weight == 0.0

    assert set_play.main([str(run), "--successor-weight", "3"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{run}: [play] successor_weight = 3 in 2 checkpoint(s) (1, 2) and config.toml"
    )
    for step in (1, 2):
        params, config, meta = load_params(str(run / "checkpoints" / str(step)))
        assert config.play.successor_weight == 3.0
        assert meta["source"] == "test" and meta["step"] == step  # the rest of the meta kept
    after = load_params(str(run))[0]
    jax.tree_util.tree_map(np.testing.assert_array_equal, before, after)  # bitwise untouched
    assert tomllib.loads((run / "config.toml").read_text())["play"]["successor_weight"] == 3.0
    assert config_lib.load(run / "config.toml").play.successor_weight == 3.0
    assert make_agent(f"neural:{run}").successor_weight == 3.0
    assert not list(run.rglob(".partial-*"))

    assert set_play.main([str(run), "--successor-weight", "0"]) == 0  # and back
    assert make_agent(f"neural:{run}").successor_weight == 0.0


def test_a_model_that_cannot_play_so_is_refused_in_one_line_and_left_as_it_was(tmp_path, capsys):
    policy = _run(tmp_path / "policy", policy_value=False)
    files = {p: p.read_bytes() for p in policy.rglob("*") if p.is_file()}
    assert set_play.main([str(policy), "--successor-weight", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"config error: {policy}: ")
    assert "needs" in err and "policy_value" in err
    assert {p: p.read_bytes() for p in policy.rglob("*") if p.is_file()} == files

    run = _run(tmp_path / "run")
    assert set_play.main([str(run), "--successor-weight", "-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"config error: {run}: play.successor_weight must be >= 0, got -1.0"
    )
    assert set_play.main([str(tmp_path / "none"), "--successor-weight", "1"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path / 'none'}: no checkpoint with its parameters and meta"
    )
    with pytest.raises(SystemExit) as exit_:
        set_play.main([str(run), "--successor-weight", "nan"])
    assert exit_.value.code == 2
    assert "expected a finite number, got 'nan'" in capsys.readouterr().err
