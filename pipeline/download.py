"""Fetch a Lichess monthly dump: streamed, resumable, verified, renamed into place only when good.

    python -m pipeline.download --month 2023-02 [--out data/raw]
    python -m pipeline.download --url URL [--sha256 HEX] [--out DIR]

The file streams to `<name>.part`. After an interruption (this run's connection dropping, or
an earlier run killed) the download resumes from the bytes already on disk with an HTTP Range
request. The SHA-256 is checked against `--sha256`, or else the `sha256sums.txt` list Lichess
publishes beside the dumps when it can be fetched; a file that does not match is moved aside to
`<name>.bad` and never used. Only a verified file (or, with no checksum to be had, a complete
one, reported as unverified) is renamed to its final name. Progress (MB, rate, ETA) goes to
stderr; the result is one JSON object on stdout.

Two runs of the same file at once do not mix their bytes: the `.part` is held with an OS lock
(`flock`) while it is written, and a second run waits for it (saying so), then finds the file
in place and checks it like any file already present. The SHA-256 is that of the bytes on disk
in the `.part` just before it is renamed, not a running sum of what this process received. A
malformed `--sha256` is refused before anything is fetched. Ctrl-C keeps the `.part` (exit 130).
A failure before the first byte (an HTTP 404, say) leaves no `.part`: it would be empty.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass

from runtime.cli import non_negative_int, positive_float
from runtime.interrupts import interrupted
from runtime.outputs import check_dir
from runtime.progress import Progress

LICHESS_STANDARD = "https://database.lichess.org/standard/"
CHECKSUM_LIST = "sha256sums.txt"
_CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class DownloadError(RuntimeError):
    """The download could not be completed (the partial file is kept for a resume)."""


class ChecksumMismatch(DownloadError):
    """The downloaded bytes are not the published file; they were moved aside."""


@dataclass(frozen=True)
class Downloaded:
    path: str
    url: str
    bytes: int
    sha256: str
    verified: bool
    checksum_source: str  # "--sha256", the list's URL, or "" when unverified
    resumed_from: int  # bytes kept from an earlier run (0 when the download started over)


def month_url(month: str) -> str:
    if not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", month):
        raise ValueError(f"--month must look like 2023-02, got {month!r}")
    return f"{LICHESS_STANDARD}lichess_db_standard_rated_{month}.pgn.zst"


def check_sha256(text: str) -> str:
    """The lower-case digest `text` spells; ValueError unless it is 64 hex digits."""
    if not _SHA256.fullmatch(text.strip()):
        raise ValueError(f"--sha256 must be 64 hexadecimal digits, got {text!r}")
    return text.strip().lower()


def target_path(url: str, out_dir: str) -> str:
    """Where `url` is saved in `out_dir`; ValueError if the URL names no file."""
    name = os.path.basename(urllib.parse.urlparse(url).path)
    if not name:
        raise ValueError(f"{url!r} does not name a file")
    return os.path.join(out_dir, name)


def published_sha256(url: str, timeout: float = 30.0) -> tuple[str, str] | None:
    """(hex digest, list URL) from the `sha256sums.txt` beside `url`, or None if unavailable."""
    list_url = urllib.parse.urljoin(url, CHECKSUM_LIST)
    name = os.path.basename(urllib.parse.urlparse(url).path)
    try:
        with urllib.request.urlopen(list_url, timeout=timeout) as response:  # noqa: S310
            text = response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        print(f"download: no checksum list at {list_url} ({e})", file=sys.stderr)
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == name and _SHA256.fullmatch(parts[0]):
            return parts[0].lower(), list_url
    print(f"download: {list_url} does not list {name}", file=sys.stderr)
    return None


def _hash_file(path: str, hasher) -> int:
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
            size += len(chunk)
    return size


class _LockedPart:
    """The `.part` file, opened and held with an exclusive `flock` by this process.

    Every writer takes the lock before touching the file, so bytes are only appended by the
    holder; another run blocks in `acquire` until the holder is done.
    """

    def __init__(self, path: str, handle):
        self.path = path
        self._handle = handle
        self.size = os.fstat(handle.fileno()).st_size
        self.resumed_from = self.size

    @classmethod
    def acquire(cls, path: str) -> _LockedPart | None:
        """Opens (creating it if need be) and locks `path`, waiting for another holder.

        None when, by the time the lock is ours, `path` is no longer the file we opened (the
        holder renamed it into place or moved it aside): the caller looks again.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print(
                    f"download: another process is downloading {path}; waiting for it",
                    file=sys.stderr,
                    flush=True,
                )
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            if current is None or not os.path.samestat(os.fstat(fd), current):
                os.close(fd)
                return None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, open(fd, "r+b"))  # noqa: SIM115 - closed by close()

    def append(self, data: bytes) -> None:
        self._handle.seek(0, os.SEEK_END)
        self._handle.write(data)
        self.size += len(data)

    def restart(self) -> None:
        """Empties the file: the server sends the whole file again."""
        self._handle.seek(0)
        self._handle.truncate()
        self.size = self.resumed_from = 0

    def sha256(self, progress_every: float) -> str:
        """The SHA-256 of the bytes now in the file (read back from disk)."""
        self._handle.flush()
        self._handle.seek(0)
        digest = hashlib.sha256()
        progress = Progress(
            f"sha256 {os.path.basename(self.path)}", self.size, "MB", progress_every, scale=1e-6
        )
        done = 0
        while chunk := self._handle.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            progress.update(done)
        return digest.hexdigest()

    def unlink(self) -> None:
        os.unlink(self.path)

    def close(self) -> None:
        self._handle.close()  # releases the lock


def _total_size(response, offset: int) -> int | None:
    content_range = response.headers.get("Content-Range")
    if content_range:
        match = _CONTENT_RANGE.match(content_range)
        if match and match.group(3) != "*":
            return int(match.group(3))
    length = response.headers.get("Content-Length")
    return offset + int(length) if length is not None else None


def _fetch_into(url: str, part: _LockedPart, timeout: float, progress_every: float) -> None:
    """One attempt: appends the rest of the file to `part`.

    Raises OSError/HTTPException when the connection fails; the caller resumes.
    """
    offset = part.size
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:  # nothing after `offset`: the part is already whole
            return
        raise
    with response:
        if offset and response.status != 206:  # the server ignored Range: start over
            print("download: the server does not resume; starting over", file=sys.stderr)
            part.restart()
            offset = 0
        total = _total_size(response, offset)
        progress = Progress(os.path.basename(part.path), total, "MB", progress_every, scale=1e-6)
        while chunk := response.read(_CHUNK):
            part.append(chunk)
            progress.update(part.size, baseline=offset)
        progress.update(part.size, baseline=offset, force=True)
    if total is not None and part.size < total:
        raise http.client.IncompleteRead(b"", total - part.size)


def download(
    url: str,
    out_dir: str,
    sha256: str | None = None,
    retries: int = 5,
    timeout: float = 60.0,
    progress_every: float = 5.0,
    backoff: float = 2.0,
) -> Downloaded:
    """Downloads `url` into `out_dir` (see the module doc). Returns what was fetched."""
    expected = check_sha256(sha256) if sha256 is not None else None  # before any byte moves
    final = target_path(url, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    if expected:
        source = "--sha256"
    else:
        expected, source = published_sha256(url, timeout) or (None, "")
    while True:
        if os.path.exists(final):
            return _already_present(final, url, expected, source)
        part = _LockedPart.acquire(final + ".part")
        if part is None:  # another run finished (or gave up on) that .part meanwhile
            continue
        try:
            if os.path.exists(final):  # finished by another run before ours opened the .part
                if part.size == 0:
                    part.unlink()  # the empty one this run just created
                continue
            return _download_into(
                url, part, final, expected, source, retries, timeout, progress_every, backoff
            )
        except BaseException:
            # An empty `.part` holds nothing to resume (a 404, a refused connection): it would
            # only be litter. One with bytes stays for the next run.
            if part.size == 0 and os.path.exists(part.path):
                part.unlink()
            raise
        finally:
            part.close()


def _already_present(final: str, url: str, expected: str | None, source: str) -> Downloaded:
    digest = hashlib.sha256()
    size = _hash_file(final, digest)
    if expected and digest.hexdigest() != expected:
        raise ChecksumMismatch(
            f"{final} exists but its SHA-256 {digest.hexdigest()} is not {expected} "
            f"({source}); move it away and download again"
        )
    print(f"download: {final} already present", file=sys.stderr)
    return Downloaded(final, url, size, digest.hexdigest(), bool(expected), source, size)


def _download_into(
    url: str,
    part: _LockedPart,
    final: str,
    expected: str | None,
    source: str,
    retries: int,
    timeout: float,
    progress_every: float,
    backoff: float,
) -> Downloaded:
    """Completes the locked `part`, checks the bytes on disk, renames them to `final`."""
    if part.size:
        print(f"download: resuming {part.path} at {part.size:,} bytes", file=sys.stderr)
    for attempt in range(retries + 1):
        try:
            _fetch_into(url, part, timeout, progress_every)
            break
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code not in (408, 429):
                raise DownloadError(f"{url}: HTTP {e.code} {e.reason}") from e
            error: Exception = e
        except (OSError, http.client.HTTPException) as e:
            error = e
        if attempt == retries:
            # Only bytes are kept: an empty .part is removed on the way out (download()).
            kept = (
                f"{part.path} keeps its {part.size:,} bytes and the next run resumes it"
                if part.size
                else "nothing was received; the next run starts afresh"
            )
            tries = f"{retries + 1} attempt{'s' if retries else ''}"
            raise DownloadError(f"{url}: gave up after {tries} ({error!r}); {kept}")
        print(f"download: connection failed ({error!r}); resuming", file=sys.stderr)
        time.sleep(backoff * (attempt + 1))

    digest = part.sha256(progress_every)
    if expected and digest != expected:
        bad = final + ".bad"
        os.replace(part.path, bad)
        raise ChecksumMismatch(
            f"{url}: SHA-256 of the download is {digest}, expected {expected} ({source}); "
            f"the bytes were moved aside to {bad} and not used"
        )
    if not expected:
        print(
            f"download: WARNING: no checksum for {os.path.basename(final)}; "
            "it is complete but unverified",
            file=sys.stderr,
        )
    os.replace(part.path, final)  # still locked: the bytes just hashed are the ones renamed
    return Downloaded(final, url, part.size, digest, bool(expected), source, part.resumed_from)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.download", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--month", help="Lichess standard rated month, e.g. 2023-02")
    which.add_argument("--url", help="any HTTP(S) URL")
    parser.add_argument("--out", default="data/raw", help="directory (default data/raw)")
    parser.add_argument("--sha256", help="expected SHA-256 (default: Lichess's published list)")
    parser.add_argument(
        "--retries", type=non_negative_int, default=5, help="resumes after failures"
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=60.0, help="socket timeout, seconds"
    )
    args = parser.parse_args(argv)
    try:
        url = args.url or month_url(args.month)
        if args.sha256 is not None:
            check_sha256(args.sha256)
        final = target_path(url, args.out)
    except ValueError as e:
        parser.error(str(e))
    try:
        check_dir(args.out)
        result = download(url, args.out, args.sha256, args.retries, args.timeout)
    except KeyboardInterrupt:
        part = final + ".part"
        if os.path.exists(part) and os.path.getsize(part):
            return interrupted(
                f"download: interrupted; {part} keeps the bytes so far and the same "
                "command resumes it"
            )
        return interrupted("download: interrupted before any byte arrived; nothing was kept")
    except (DownloadError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
