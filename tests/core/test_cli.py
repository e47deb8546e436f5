import argparse
from dataclasses import dataclass

import pytest

from core.cli import config_from_args


@dataclass(frozen=True)
class Settings:
    out: str
    max_plies: int = 300
    inputs: tuple[str, ...] = ()
    seed: int = 0


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-plies", type=int, default=300)
    parser.add_argument("--inputs", nargs="*", default=[])
    parser.add_argument("--quiet", action="store_true")  # no field: not passed on
    return parser.parse_args(argv)


def test_fields_come_from_arguments_of_the_same_name():
    args = parse(["--out", "o", "--max-plies", "7", "--inputs", "a", "b"])
    config = config_from_args(Settings, args, inputs=tuple(args.inputs))
    assert config == Settings(out="o", max_plies=7, inputs=("a", "b"), seed=0)


def test_given_values_win_and_missing_fields_keep_defaults():
    config = config_from_args(Settings, parse(["--out", "o"]), max_plies=9)
    assert (config.max_plies, config.seed) == (9, 0)


def test_not_a_dataclass_is_refused():
    with pytest.raises(TypeError, match="not a dataclass"):
        config_from_args(dict, parse(["--out", "o"]))
