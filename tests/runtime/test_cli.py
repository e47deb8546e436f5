import argparse
from dataclasses import dataclass

import pytest

from runtime.cli import config_from_args


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


def typed(argv):
    from runtime.cli import int_at_least, non_negative_int, plain_name, positive_float

    parser = argparse.ArgumentParser(prog="cmd")
    parser.add_argument("--split", type=plain_name, default="train")
    parser.add_argument("--retries", type=non_negative_int, default=0)
    parser.add_argument("--shards", type=int_at_least(1, 10), default=1)
    parser.add_argument("--timeout", type=positive_float, default=1.0)
    return parser.parse_args(argv)


def test_argument_types_take_good_values():
    args = typed(["--split", "val-1", "--retries", "0", "--shards", "10", "--timeout", "0.5"])
    assert (args.split, args.retries, args.shards, args.timeout) == ("val-1", 0, 10, 0.5)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--split", "../x"], "argument --split: expected a plain name"),
        (["--split", "a/b"], "argument --split: expected a plain name"),
        (["--split", "."], "argument --split: expected a plain name"),
        (["--split", ""], "argument --split: expected a plain name"),
        (["--retries", "-1"], "argument --retries: expected an integer >= 0, got -1"),
        (["--retries", "two"], "argument --retries: expected an integer, got 'two'"),
        (["--shards", "11"], "argument --shards: expected an integer >= 1 and <= 10, got 11"),
        (["--timeout", "0"], "argument --timeout: expected a number > 0, got 0"),
        (["--timeout", "inf"], "argument --timeout: expected a number > 0, got inf"),
    ],
)
def test_argument_types_refuse_bad_values_while_parsing(capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        typed(argv)
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"cmd: error: {message}"), last
