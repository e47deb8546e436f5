import io
import json
import math

import pytest

from runtime import progress as progress_module
from runtime.progress import Progress, format_duration, print_result


class Clock:
    """A controllable time.monotonic, so rates and ETAs are exact."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", fake)
    return fake


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (7.4, "7s"),
        (59.6, "1m00s"),
        (185, "3m05s"),
        (3600 + 2 * 60 + 9, "1h02m"),
        (-5, "0s"),
        (math.nan, "?"),
        (math.inf, "?"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_line_shows_count_rate_elapsed_eta_and_extra(clock):
    progress = Progress("puzzles", 100, "puzzles")
    clock.now += 20
    line = progress.line(40, "accuracy 50.0%")
    assert line == (
        "puzzles: 40/100 puzzles (40.0%), 2.00 puzzles/s, elapsed 20s, ETA 30s accuracy 50.0%"
    )


def test_scaled_quantity_and_baseline(clock):
    """A resumed download: the baseline counts towards the percentage but not the rate."""
    progress = Progress("file", 10_000_000, "MB", scale=1e-6)
    clock.now += 2
    line = progress.line(6_000_000, baseline=4_000_000)
    assert line == "file: 6/10 MB (60.0%), 1.00 MB/s, elapsed 2s, ETA 4s"
    assert "5.5/10" in progress.line(5_500_000, baseline=4_000_000)


def test_unknown_total_shows_amount_and_rate_only(clock):
    progress = Progress("file", None, "MB", scale=1e-6)
    clock.now += 4
    assert progress.line(50_000_000) == "file: 50 MB, 12.5 MB/s, elapsed 4s"


def test_eta_is_unknown_before_any_progress(clock):
    progress = Progress("games", 10)
    clock.now += 3
    assert progress.line(0).endswith("0.00/s, elapsed 3s, ETA ?")


def test_update_prints_at_most_every_interval_and_done_always(clock):
    stream = io.StringIO()
    progress = Progress("games", 10, "games", every=5.0, stream=stream)
    progress.update(1, "first")
    clock.now += 4
    progress.update(2, "second")
    assert stream.getvalue() == ""
    clock.now += 1
    progress.update(3, "third")
    progress.update(4, "fourth", force=True)
    progress.update(5, "fifth")
    progress.done("final")
    lines = stream.getvalue().splitlines()
    assert [line.split(" ")[-1] for line in lines] == ["third", "fourth", "final"]
    assert lines[-1].startswith("games: 5/10 games (50.0%), 1.00 games/s, elapsed 5s")


def test_a_result_is_json_on_stdout_and_a_summary_on_stderr(capsys):
    print_result("job: 3 boards", {"boards": 3, "nested": {"ok": True}})
    out, err = capsys.readouterr()
    assert json.loads(out) == {"boards": 3, "nested": {"ok": True}}
    assert err == "job: 3 boards\n"
