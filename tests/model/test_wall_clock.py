"""model/training/wall_clock.py: when a clocked training saves and stops (the training under it is
tests/jobs/test_gpu_window.py's dry run)."""

import time

from model.training.wall_clock import WallClock


def test_a_clock_past_its_time_stops_and_one_before_does_not():
    assert WallClock(time.monotonic() - 1).stop_due()
    assert not WallClock.starting_now(3600).stop_due()


def test_saves_fall_due_each_interval_and_the_hook_sees_each_save():
    seen = []
    clock = WallClock.starting_now(3600, save_every_s=0.05, on_save=lambda s, st: seen.append(s))
    assert not WallClock.starting_now(3600, save_every_s=3600).save_due()  # counted from the start
    deadline = time.monotonic() + 30
    while not clock.save_due():  # event-based: whatever the machine's load
        assert time.monotonic() < deadline
        time.sleep(0.01)
    clock.saved(7, "state")
    assert seen == [7]
    clock.save_every_s = 3600  # the interval counts again from that save
    assert not clock.save_due()


def test_without_an_interval_no_save_falls_due():
    clock = WallClock(time.monotonic() + 3600, save_every_s=None, last_save=0.0)
    assert not clock.save_due()
