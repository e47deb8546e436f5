"""How to run a UCI engine: one start record and one search limit, shared by the pipeline's
client and the evaluation's agents."""

import pytest

from core.engine_settings import DEPTH_ONLY_WATCHDOG_SECONDS, EngineLimit, EngineOptions


def test_a_limit_names_and_sends_each_of_its_parts():
    limit = EngineLimit(nodes=1000, time=0.25, depth=7)
    assert str(limit) == "nodes=1000,time=0.25,depth=7"
    assert limit.go_args == "nodes 1000 movetime 250 depth 7"
    assert not limit.deterministic  # a time part makes the result depend on the machine
    assert EngineLimit(depth=7).deterministic
    assert EngineLimit(time=0.0001).go_args == "movetime 1"  # never `movetime 0`


def test_the_watchdog_bounds_follow_the_limit():
    assert EngineLimit(time=0.5).watchdog_seconds() == pytest.approx(20.0, abs=1e-9)
    assert EngineLimit(nodes=200_000).watchdog_seconds() == pytest.approx(20.0, abs=1e-9)
    assert EngineLimit(depth=3).watchdog_seconds() == DEPTH_ONLY_WATCHDOG_SECONDS


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "at least one of nodes, time and depth"),
        ({"nodes": 0}, "nodes must be positive"),
        ({"time": float("nan")}, "time must be positive"),
    ],
)
def test_a_limit_refuses_nonsense(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineLimit(**fields)


def test_engine_options_become_uci_options():
    assert EngineOptions().uci_options() == {"Threads": 1, "Hash": 16}
    weak = EngineOptions(threads=2, elo=1500, extra_options={"Hash": 64, "Move Overhead": 5})
    assert weak.uci_options() == {
        "Threads": 2,
        "Hash": 64,  # an extra option overrides the record's own
        "UCI_LimitStrength": True,
        "UCI_Elo": 1500,
        "Move Overhead": 5,
    }
    assert EngineOptions(skill=3).uci_options()["Skill Level"] == 3


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"threads": 0}, "threads and hash"),
        ({"hash_mb": 0}, "threads and hash"),
        ({"skill": 21}, "0..20"),
        ({"skill": 3, "elo": 1500}, "skill or elo"),
    ],
)
def test_engine_options_refuse_nonsense(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineOptions(**fields)
