"""Configs: shipped files, overrides, validation and the resolved-config round trip."""

from __future__ import annotations

import pathlib

import pytest

from model import config as config_lib
from model.config import ConfigError
from model.training import step as train_step
from model.training import train as train_lib

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "model" / "configs"


@pytest.mark.parametrize("name", ["small", "9M", "136M", "270M"])
def test_shipped_configs_are_valid(name):
    config = config_lib.load(CONFIGS / f"{name}.toml")
    assert config.model.size == name
    config_lib.validate(config, check_data=False)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_config_loads_and_validates(path):
    """Every file of model/configs, comments and all, is TOML that trains (data aside)."""
    config_lib.validate(config_lib.load(path), check_data=False)


def test_named_size_fills_the_shape_and_fields_override_it():
    config = config_lib.load(CONFIGS / "9M.toml", ["model.num_layers=2"])
    assert (config.model.num_layers, config.model.embedding_dim, config.model.num_heads) == (
        2,
        256,
        8,
    )


def test_overrides_parse_as_toml_with_or_without_section():
    config = config_lib.load(
        CONFIGS / "small.toml",
        [
            "train.batch_size=64",
            "learning_rate=1e-3",
            "lr_schedule=cosine",  # a bare word is a string
            "hl_gauss=true",
            "data.test=''",
        ],
    )
    t = config.train
    assert (t.batch_size, t.learning_rate, t.lr_schedule, t.hl_gauss) == (64, 1e-3, "cosine", True)
    assert config.data.test == ""


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.batch_size=sixty", "batch_size = 'sixty' should be a int"),
        ("train.bacth_size=64", r"unknown key\(s\) \['bacth_size'\]"),
        ("nonsense=1", "not a config field"),
        ("batch_size", "not of the form key=value"),
        ("model.size='1B'", "model.size '1B' is not one of"),
    ],
)
def test_bad_overrides_name_the_problem(override, message):
    with pytest.raises(ConfigError, match=message):
        config_lib.load(CONFIGS / "small.toml", [override])


@pytest.mark.parametrize(
    "override, message",
    [
        ("target=q", "train.target 'q' is not one of"),
        ("num_bins=1", "train.num_bins must be >= 2"),
        ("sampler=natural", "train.sampler 'natural'"),
        ("num_heads=3", "not divisible by model.num_heads 3"),
        ("ema_decay=1.0", "ema_decay must lie in"),
        ("dtype=float16", "train.dtype 'float16'"),
    ],
)
def test_validate_rejects_untrainable_settings(override, message):
    config = config_lib.load(CONFIGS / "small.toml", [override])
    with pytest.raises(ConfigError, match=message):
        config_lib.validate(config, check_data=False)


def test_validate_rejects_a_missing_data_path(tmp_path):
    config = config_lib.load(CONFIGS / "small.toml", [f"data.train='{tmp_path}/none'"])
    with pytest.raises(ConfigError, match="data.train = .*none.*no annotated board shards"):
        config_lib.validate(config)


def test_resolved_config_round_trips_through_toml(tmp_path):
    config = config_lib.load(CONFIGS / "small.toml", ["seed=7", "data.train='a \"q\" b'"])
    path = tmp_path / "config.toml"
    path.write_text(config_lib.to_toml(config))
    assert config_lib.load(path) == config


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--target", "xyz"], "train.target 'xyz'"),
        (["--set", "num_bins=1"], "num_bins must be >= 2"),
        (["--data", "/nonexistent/boards"], "data.train = '/nonexistent/boards'"),
    ],
)
def test_cli_reports_bad_configs_before_compiling_anything(
    flags, message, tmp_path, monkeypatch, capsys, synthetic_data
):
    def must_not_run(*args, **kwargs):
        raise AssertionError("parameters were initialised before the config was checked")

    monkeypatch.setattr(train_step, "init_params", must_not_run)
    argv = ["--config", str(CONFIGS / "small.toml"), "--out", str(tmp_path / "run")]
    argv += ["--data", str(synthetic_data / "train"), "--test-data", ""]
    assert train_lib.main(argv + flags) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_config_that_cannot_be_read_is_one_line(tmp_path, capsys):
    directory = tmp_path / "configs"
    directory.mkdir()
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    loop = tmp_path / "loop.toml"
    loop.symlink_to(tmp_path / "loop2.toml")
    (tmp_path / "loop2.toml").symlink_to(loop)
    expected = {
        directory: "is a directory, not a TOML file",
        latin: "is not UTF-8 text (byte 0xe9 at offset 11)",
        loop: "cannot be read: Too many levels of symbolic links",
    }
    for path, words in expected.items():
        assert train_lib.main(["--config", str(path), "--out", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"config error: config file {str(path)!r} {words}")
    assert not (tmp_path / "run").exists()
