"""The annotate run's engine settings: core's EngineOptions plus the client's watchdog and
retries, and nothing the labels' client would silently ignore."""

import pytest

from pipeline.annotate.settings import EngineConfig


def test_the_stats_record_holds_what_the_client_uses():
    config = EngineConfig("/usr/games/stockfish", threads=2, timeout=5.0)
    assert config.record() == {
        "path": "/usr/games/stockfish",
        "threads": 2,
        "hash_mb": 16,
        "timeout": 5.0,
        "retries": 2,
    }


@pytest.mark.parametrize(
    "fields", [{"skill": 3}, {"elo": 1500}, {"extra_options": {"Move Overhead": 5}}]
)
def test_a_weakened_labelling_engine_is_refused(fields):
    with pytest.raises(ValueError, match="no skill, elo or extra UCI options"):
        EngineConfig(**fields)


def test_the_start_options_are_checked_as_everywhere():
    with pytest.raises(ValueError, match="threads and hash"):
        EngineConfig(threads=0)
