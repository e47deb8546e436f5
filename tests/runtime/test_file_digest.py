"""runtime.file_digest: the same files give the same digest; a byte or a name changed, another."""

from __future__ import annotations

import hashlib

from runtime.file_digest import add_files


def _digest(folder, base=None) -> tuple[str, int]:
    digest = hashlib.sha256()
    count = add_files(digest, folder, base)
    return digest.hexdigest(), count


def test_a_folders_digest_follows_its_files_names_and_bytes(tmp_path):
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "a" / "x").write_bytes(b"\x00" * (3 << 20))  # more than one read
    (tmp_path / "a" / "deep" / "y").write_bytes(b"y")
    first = _digest(tmp_path / "a")
    assert first[1] == 2 and _digest(tmp_path / "a") == first
    # The bytes read as one: the same as hashing each name and its whole content in order.
    expected = hashlib.sha256(b"deep/yy" + b"x" + b"\x00" * (3 << 20)).hexdigest()
    assert first[0] == expected
    assert _digest(tmp_path / "a", base=tmp_path)[0] != first[0]  # names relative to the base
    (tmp_path / "a" / "deep" / "y").write_bytes(b"z")
    assert _digest(tmp_path / "a")[0] != first[0]
    assert _digest(tmp_path / "empty-missing") == (hashlib.sha256().hexdigest(), 0)
