"""runtime/outputs.py: outputs checked before any work, and a full disk found and said."""

from __future__ import annotations

import errno
import logging
import os
import sys

import pytest

from runtime.outputs import (
    OutputError,
    check_dir,
    check_file,
    disk_full,
    disk_full_line,
    quiet_disk_full,
    writing,
)


def test_writable_outputs_pass_and_nothing_is_created(tmp_path):
    existing = tmp_path / "kept.json"
    existing.write_text("old")
    check_file(str(existing))
    check_file(str(tmp_path / "new" / "deeper" / "r.json"))
    check_dir(str(tmp_path / "run" / "a"))
    check_file("")  # an output not asked for
    check_dir("gs://bucket/out")  # object stores: the job's own writes say
    assert existing.read_text() == "old"  # opened for writing, not truncated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]


def test_unwritable_outputs_are_one_line_naming_the_option_and_what_is_in_the_way(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError) as refused:
        check_file(str(blocker / "r.json"), "--plot")
    assert (
        str(refused.value)
        == f"--plot {blocker / 'r.json'} cannot be written: {blocker} is not a directory"
    )
    with pytest.raises(OutputError, match=r"cannot be written: it is a directory$"):
        check_file(str(tmp_path))
    with pytest.raises(OutputError, match=rf"^--out {blocker} cannot be written: {blocker} is not"):
        check_dir(str(blocker))


def test_a_full_disk_is_found_wrapped_or_as_text_and_named():
    plain = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    try:
        try:
            raise plain
        except OSError as e:
            raise RuntimeError("a library's own error") from e
    except RuntimeError as wrapped:
        assert disk_full(wrapped) is plain
    # Beam re-raises a worker's error as another exception holding its text.
    beam = RuntimeError("OSError: [Errno 28] No space left on device: '/d/part-1.parquet' "
                        "[while running 'AnnotateBoards']")  # fmt: skip
    assert disk_full(beam).filename == "/d/part-1.parquet"
    assert disk_full(ValueError("RESOURCE_EXHAUSTED: ... [os_error_code='28']")) is not None
    assert disk_full(OSError(errno.EACCES, "Permission denied")) is None
    with pytest.raises(OSError) as named:
        with writing("/d/metrics.jsonl"):
            raise plain
    assert named.value.filename == "/d/metrics.jsonl"
    assert disk_full_line(named.value, "/d", "rerun to resume") == (
        "error: no space left on device writing /d/metrics.jsonl; free some space: rerun to resume"
    )


def test_a_full_disks_log_records_are_dropped_and_others_kept(caplog, monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # restored afterwards
    log = logging.getLogger("a.library")
    with caplog.at_level(logging.INFO):
        with quiet_disk_full("a.library"):
            log.error("before: kept")
        with pytest.raises(OSError), quiet_disk_full("a.library"):
            log.error("write failed: [Errno 28] No space left on device")
            log.error("a consequence of it, dropped too")
            log.info("not an error: kept")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        log.error("after: still dropped, the library's threads may still be failing")
    assert [r.getMessage() for r in caplog.records] == ["before: kept", "not an error: kept"]
    log.filters.clear()
