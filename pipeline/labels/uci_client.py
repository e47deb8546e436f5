"""A minimal UCI client for Stockfish: one process, search limits, a watchdog, scores per move.

Why not python-chess's engine module: it costs ~0.6 ms per `analyse` call on top of the
search, a quarter of the time at 2,000 nodes. This client writes UCI commands to the
process's pipe and scans its output in bulk, waking a few times per board rather than once
per output line. With a `nodes=` limit it queues whole boards (`submit`), the next one behind
the current: Stockfish reads commands in order and each `go` waits for the previous search,
so the engine never idles while Python parses or sleeps. A `time=` limit is sent one search
at a time because Stockfish starts a search's clock when it *reads* `go`.

Each move's value is a search restricted to that root move (`go ... searchmoves <move>`), so
its score is from the root side to move's view: the mover's view of the move, as the paper did.
A root search (`submit_root`/`collect_root`, `search`) is one unrestricted search instead: the
engine's best move and the first moves and scores of its `multipv` best lines (the cheap
annotation, and the moves of self-play games).
Before each board the engine gets `ucinewgame` (Stockfish then clears its hash and history
tables), so with a node limit and one thread a board's values depend only on the board, not
on which boards the same process searched before: runs are reproducible on any runner.
"""

from __future__ import annotations

import collections
import os
import select
import subprocess
import time
from dataclasses import dataclass

from core.engine_path import find_engine
from core.engine_settings import EngineLimit, EngineOptions
from core.values import Score


class EngineError(RuntimeError):
    """The engine process misbehaved (died, hung, or said something unexpected)."""


class EngineDied(EngineError):
    pass


class EngineTimeout(EngineError):
    pass


class EngineProtocolError(EngineError):
    pass


@dataclass(frozen=True)
class PvLine:
    """One principal variation of a root search: its first move and its score."""

    move: str
    score: Score


@dataclass(frozen=True)
class RootSearch:
    """One unrestricted search: its lines in the engine's order (MultiPV 1 first, the best
    by the engine's last complete reckoning), the move it played and the nodes it searched."""

    lines: tuple[PvLine, ...]
    best_move: str
    nodes: int


@dataclass(frozen=True)
class _Job:
    """A board waiting in the engine's queue: `moves` are the root moves each searched alone;
    None for one unrestricted root search from `fen` after `played` (UCI moves)."""

    fen: str
    moves: tuple[str, ...] | None
    limit: EngineLimit
    submitted: float
    played: tuple[str, ...] = ()
    new_game: bool = True

    @property
    def searches(self) -> int:
        return 1 if self.moves is None else len(self.moves)

    def commands(self) -> str:
        """The board's UCI commands: a clear (unless continuing a game), the position and
        its `go` lines."""
        text = "ucinewgame\n" if self.new_game else ""
        text += f"position fen {self.fen}"
        text += f" moves {' '.join(self.played)}\n" if self.played else "\n"
        if self.moves is None:
            return text + f"go {self.limit.go_args}\n"
        return text + "".join(f"go {self.limit.go_args} searchmoves {m}\n" for m in self.moves)


@dataclass(frozen=True)
class MoveSearch:
    """One restricted search: the move, its score and the nodes the engine reported."""

    move: str
    score: Score
    nodes: int


def _parse_pv_lines(output: bytes) -> tuple[dict[int, PvLine], int]:
    """The last reported line per MultiPV index of one search's output, and its last node
    count (info lines without a score or a pv, e.g. `currmove` lines, are not lines)."""
    lines: dict[int, PvLine] = {}
    nodes = 0
    for raw in output.split(b"\n"):
        if not raw.startswith(b"info ") or b" score " not in raw:
            continue
        score, reported = _parse_score_line(raw)
        nodes = reported or nodes
        tokens = raw.split()
        try:
            index = int(tokens[tokens.index(b"multipv") + 1]) if b"multipv" in tokens else 1
            move = tokens[tokens.index(b"pv") + 1].decode()
        except (ValueError, IndexError):
            continue  # a score with no pv: nothing to name the line by
        lines[index] = PvLine(move, score)
    return lines, nodes


def _parse_score_line(line: bytes) -> tuple[Score, int]:
    tokens = line.split()
    try:
        at = tokens.index(b"score")
        kind, value = tokens[at + 1], int(tokens[at + 2])
        nodes = int(tokens[tokens.index(b"nodes") + 1]) if b"nodes" in tokens else 0
    except (ValueError, IndexError):
        raise EngineProtocolError(f"unreadable info line {line[:200]!r}") from None
    if kind == b"cp":
        return Score(cp=value), nodes
    if kind == b"mate":
        return Score(mate=value), nodes
    raise EngineProtocolError(f"unknown score kind in {line[:200]!r}")


def _uci_value(value: str | int | bool) -> str:
    """An option's value as UCI writes it: check options are `true`/`false`."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class UciEngine:
    """One UCI engine process. Not thread-safe; one per worker.

    `engine` is how to start it (core.engine_settings.EngineOptions; a bare path stands for
    that engine at the default options, and `path` None finds Stockfish). Every UCI option the
    record sets (Threads, Hash, skill, Elo, extra options) is sent before the first search.
    `timeout` is the watchdog: the longest the engine may stay silent while a result is due
    (None: the limit's own generous default). Stockfish reports every finished iteration, so
    silence means a hang. On EngineError the process is killed; call `restart()` (or make a
    new one) to go on.
    """

    def __init__(self, engine: EngineOptions | str, timeout: float | None = None):
        self.options = EngineOptions(path=engine) if isinstance(engine, str) else engine
        # A path given is run as given, so a wrong one fails here with the engine's own words.
        self.path = self.options.path or find_engine()
        self.timeout = timeout
        self.name = ""
        self._process: subprocess.Popen | None = None
        self._buffer = bytearray()
        self._queue: collections.deque[_Job] = collections.deque()
        self.multipv = 1  # lines a root search reports (`set_multipv`)
        self._search_seconds = 0.0  # running mean wall time of one queued search
        self._last_collected = 0.0
        self.start()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> None:
        try:
            self._process = subprocess.Popen(
                [self.path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
            )
        except OSError as e:
            raise EngineDied(f"cannot start engine {self.path!r}: {e}") from e
        self._buffer.clear()
        try:
            self._handshake()
        except EngineError as e:
            # Say which engine and when: this is where a wrong --engine shows up.
            detail = str(e).removeprefix(f"engine {self.path!r} ")
            raise type(e)(f"engine {self.path!r} failed the UCI handshake: {detail}") from None

    def _handshake(self) -> None:
        self._send("uci\n")
        handshake = self._read_until(b"uciok", 30.0)
        for line in handshake.splitlines():
            if line.startswith(b"id name "):
                self.name = line[len(b"id name ") :].decode(errors="replace").strip()
        if not self.name:
            self.name = os.path.basename(self.path)
        options = self.options.uci_options() | {"MultiPV": self.multipv}
        self._send(
            "".join(f"setoption name {k} value {_uci_value(v)}\n" for k, v in options.items())
        )
        self._send("isready\n")
        self._read_until(b"readyok", 60.0)

    def close(self) -> None:
        """Asks the engine to quit, then makes sure it is gone."""
        self._queue.clear()
        process, self._process = self._process, None
        if process is None:
            return
        try:
            os.write(process.stdin.fileno(), b"quit\n")
        except OSError:
            pass
        try:
            process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout):
            stream.close()

    def kill(self) -> None:
        self._queue.clear()  # whatever was queued died with the process
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.kill()
        except ProcessLookupError:
            pass
        process.wait()
        for stream in (process.stdin, process.stdout):
            stream.close()

    def restart(self) -> None:
        self.kill()
        self.start()

    def __enter__(self) -> UciEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- I/O -------------------------------------------------------------------------------

    def _send(self, text: str) -> None:
        if self._process is None:
            raise EngineDied("engine is not running")
        data = text.encode()
        try:
            while data:
                written = os.write(self._process.stdin.fileno(), data)
                data = data[written:]
        except OSError as e:  # BrokenPipeError: the engine is gone
            self._fail(EngineDied, f"engine {self.path!r} stopped reading commands ({e})")

    def _fill(self, silence_limit: float) -> None:
        """Reads whatever the engine has written, waiting at most `silence_limit` seconds."""
        fd = self._process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], silence_limit)
        if not ready:
            self._fail(EngineTimeout, f"engine silent for {silence_limit:.1f}s (hung?)")
        data = os.read(fd, 1 << 16)
        if not data:
            code = self._process.poll()
            if code is None:
                try:
                    code = self._process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    code = "unknown"
            self._fail(EngineDied, f"engine {self.path!r} exited (code {code})")
        self._buffer += data

    def _fail(self, error: type[EngineError], message: str) -> None:
        pid = self.pid
        self.kill()
        raise error(f"{message} [pid {pid}]")

    def _read_until(self, token: bytes, silence_limit: float) -> bytes:
        """Output up to and including the first line starting with `token`."""
        searched = 0
        while True:
            at = self._buffer.find(token, searched)
            if at > 0 and self._buffer[at - 1] != 10:  # not at a line start: look further
                searched = at + 1
                continue
            if at >= 0:
                end = self._buffer.find(b"\n", at)
                if end >= 0:
                    out = bytes(self._buffer[: end + 1])
                    del self._buffer[: end + 1]
                    return out
                searched = at
            else:
                searched = max(0, len(self._buffer) - len(token))
            self._fill(silence_limit)

    def _read_answers(self, count: int, silence_limit: float) -> bytes:
        """Output through the `count`-th `bestmove` line, read in few large gulps.

        The engine prints a line per iteration; waking up for each would cost more CPU than
        everything else the client does. Between reads it sleeps for half the time the
        outstanding searches should still take (from the running mean), so it wakes a few
        times per board and at most ~half a search late at the end.
        """
        found = scan = 0
        while True:
            while found < count:
                at = self._buffer.find(b"bestmove", scan)
                end = self._buffer.find(b"\n", at) if at >= 0 else -1
                if end < 0:
                    scan = at if at >= 0 else max(0, len(self._buffer) - 8)
                    break
                found, scan = found + 1, end + 1
            if found == count:
                out = bytes(self._buffer[:scan])
                del self._buffer[:scan]
                return out
            self._fill(silence_limit)
            time.sleep(min(0.01, 0.5 * (count - found) * self._search_seconds))

    # -- searches ------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        """Boards submitted and not yet collected."""
        return len(self._queue)

    def submit(self, fen: str, moves: list[str], limit: EngineLimit) -> None:
        """Queues one board: a clear, then one search per move restricted to that root move.

        With a node limit the commands are written at once, behind any board still
        searching (Stockfish reads them in order and each `go` waits for the previous search),
        so the engine never waits for this process. A time limit's commands are only sent
        by `collect`, one search at a time.
        """
        self._enqueue(_Job(fen, tuple(moves), limit, time.perf_counter()))

    def submit_root(
        self,
        fen: str,
        limit: EngineLimit,
        played: tuple[str, ...] | list[str] = (),
        new_game: bool = True,
    ) -> None:
        """Queues one unrestricted search of the position after `played` (UCI moves) from
        `fen`, after a clear unless `new_game` is False (the next move of the same game:
        the engine keeps its hash, and sees the game's repetitions through `played`).
        Collected by `collect_root`; queued like `submit`."""
        self._enqueue(_Job(fen, None, limit, time.perf_counter(), tuple(played), new_game))

    def _enqueue(self, job: _Job) -> None:
        self._queue.append(job)
        if job.limit.deterministic:
            self._send(job.commands())

    def set_multipv(self, lines: int) -> None:
        """How many best lines root searches report (UCI MultiPV), from the next search on.
        Only between searches: nothing may be queued."""
        if lines < 1:
            raise ValueError(f"multipv must be >= 1, got {lines}")
        if self._queue:
            raise RuntimeError("set_multipv with boards still queued: collect them first")
        if lines != self.multipv:
            self._send(f"setoption name MultiPV value {lines}\nisready\n")
            self._read_until(b"readyok", 60.0)
            self.multipv = lines

    def _take(self, root: bool) -> tuple[_Job, bytes | None]:
        """The oldest job and, with a node limit, its whole output (read in bulk); a time
        limit's job is returned unsent (None) for the caller to run search by search."""
        if not self._queue:
            raise RuntimeError("nothing submitted to collect")
        if (self._queue[0].moves is None) != root:
            wanted, queued = ("collect_root", "submit") if not root else ("collect", "submit_root")
            raise RuntimeError(f"the oldest board was queued by {queued}: use {wanted}")
        job = self._queue.popleft()
        if not job.limit.deterministic:
            return job, None
        output = self._read_answers(job.searches, self.timeout or job.limit.watchdog_seconds())
        now = time.perf_counter()
        # The board ran from when it was sent or the previous board finished, whichever is later.
        took = now - max(job.submitted, self._last_collected)
        self._last_collected = now
        self._search_seconds = 0.5 * self._search_seconds + 0.5 * took / job.searches
        return job, output

    def collect(self) -> list[MoveSearch]:
        """Results of the oldest submitted board, one per move in the order submitted.

        Each is the last score the engine reported for that search (the root side to move's
        view) and its node count; the engine must answer each search with its move.
        """
        job, output = self._take(root=False)
        if output is None:
            silence = self.timeout or job.limit.watchdog_seconds()
            self._send(f"ucinewgame\nposition fen {job.fen}\n")
            results = []
            for move in job.moves:
                self._send(f"go {job.limit.go_args} searchmoves {move}\n")
                results.append(self._read_search(move, silence))
            return results
        results, start = [], 0
        for move in job.moves:
            end = output.find(b"\n", output.find(b"bestmove", start)) + 1
            results.append(self._parse_search(output[start:end], move))
            start = end
        return results

    def collect_root(self) -> RootSearch:
        """The oldest root search's result (see RootSearch); scores are the root side to
        move's view. EngineProtocolError if the engine reported no scored line."""
        job, output = self._take(root=True)
        if output is None:
            self._send(job.commands())
            output = self._read_until(b"bestmove", self.timeout or job.limit.watchdog_seconds())
        end = output.rfind(b"bestmove")
        best = output[end:].split()
        lines, nodes = _parse_pv_lines(output[:end])
        if 1 not in lines or len(best) < 2:
            self._fail(EngineProtocolError, f"root search gave no scored line: {output[-300:]!r}")
        ordered = tuple(lines[i] for i in sorted(lines) if i <= self.multipv)
        return RootSearch(ordered, best[1].decode(), nodes)

    def search(
        self,
        fen: str,
        limit: EngineLimit,
        played: tuple[str, ...] | list[str] = (),
        new_game: bool = True,
    ) -> RootSearch:
        """One root search, start to finish (`submit_root` then `collect_root`)."""
        if self._queue:
            raise RuntimeError("search with boards still queued: collect them first")
        self.submit_root(fen, limit, played, new_game)
        return self.collect_root()

    def search_moves(self, fen: str, moves: list[str], limit: EngineLimit) -> list[MoveSearch]:
        """One board's searches, start to finish (`submit` then `collect`)."""
        if self._queue:
            raise RuntimeError("search_moves with boards still queued: collect them first")
        self.submit(fen, moves, limit)
        return self.collect()

    def timed_search(self, fen: str, limit: EngineLimit) -> tuple[int, int]:
        """One unrestricted search after a clear: (nodes, milliseconds), as the engine counts.

        Benchmarks use it for the engine's own speed, free of any client overhead.
        """
        silence = self.timeout or limit.watchdog_seconds()
        self._send(f"ucinewgame\nposition fen {fen}\ngo {limit.go_args}\n")
        output = self._read_until(b"bestmove", silence)
        lines = [line for line in output.split(b"\n") if b" nodes " in line and b" time " in line]
        if not lines:
            self._fail(EngineProtocolError, f"search gave no nodes/time: {output[-300:]!r}")
        tokens = lines[-1].split()
        return int(tokens[tokens.index(b"nodes") + 1]), int(tokens[tokens.index(b"time") + 1])

    def _read_search(self, move: str, silence: float) -> MoveSearch:
        return self._parse_search(self._read_until(b"bestmove", silence), move)

    def _parse_search(self, output: bytes, move: str) -> MoveSearch:
        """One search's output (through its `bestmove` line) -> its last score and nodes."""
        end = output.rfind(b"bestmove")
        best = output[end:].split()
        at = output.rfind(b" score ", 0, end)
        if at < 0:
            self._fail(EngineProtocolError, f"search of {move} gave no score: {output[-300:]!r}")
        start = output.rfind(b"\n", 0, at) + 1
        stop = output.find(b"\n", at)
        try:
            score, nodes = _parse_score_line(output[start:stop])
        except EngineProtocolError as e:
            self._fail(EngineProtocolError, str(e))
        played = best[1].decode() if len(best) > 1 else "(none)"
        if played != move:
            self._fail(
                EngineProtocolError,
                f"engine answered {played} to a search restricted to {move}"
                " (is the move legal in this position and in UCI notation?)",
            )
        return MoveSearch(played, score, nodes)
