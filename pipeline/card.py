"""The dataset card: `<out>/README.md`, describing every split in `<out>`.

A Hugging Face dataset card: a YAML header whose `configs` name each split's board files (so
`datasets.load_dataset(<out>)` finds the splits and nothing else), then the schema and, per
split, its provenance (where the rows came from, the engine and its limit, the source files)
and counts, taken from the split's stats.json and its shards' footers. Annotate and the
importers rewrite it after each split they finish, from everything then in `<out>`.

The card is not put inside a split folder: pyarrow and polars would try to read it as data.
A README.md in `<out>` that this code did not write (it lacks the marker line) is left alone.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from core.schema import (
    BOARD_FIELDS,
    BOARDS_PREFIX,
    CARD_FILE,
    COLUMN_DOCS,
    META_SUFFIX,
    SCHEMA_VERSION,
    STATS_FILE,
)
from pipeline.beam.shards import list_files

MARKER = "<!-- written by searchless-chess (pipeline/card.py); rewritten as splits finish -->"


def _splits(out: str) -> list[tuple[str, dict]]:
    """(split name, stats document) for each finished split in `out`, either layout."""
    found = {}
    for path in list_files(out, f"*{META_SUFFIX}/{STATS_FILE}") + list_files(
        out, f"*/{STATS_FILE}"
    ):
        parent = os.path.basename(os.path.dirname(path))
        split = parent[: -len(META_SUFFIX)] if parent.endswith(META_SUFFIX) else parent
        if split in found or not list_files(FileSystems.join(out, split), f"{BOARDS_PREFIX}-*"):
            continue
        with FileSystems.open(path) as handle:
            found[split] = json.loads(handle.read().decode())
    return sorted(found.items())


def _rows(out: str, split: str) -> tuple[int, int]:
    """(rows, files) of a split's board shards, from their footers."""
    files = list_files(FileSystems.join(out, split), f"{BOARDS_PREFIX}-*.parquet")
    rows = 0
    for file in files:
        with FileSystems.open(file) as handle:
            rows += pq.ParquetFile(handle).metadata.num_rows
    return rows, len(files)


def provenance(document: dict) -> list[tuple[str, str]]:
    """What a split's stats.json says about where its rows came from, as (label, text)."""
    source = document.get("source", "annotate")
    items = [("source", f"`{source}`")]
    if source == "annotate":
        engine = document.get("engine") or {}
        items.append(
            ("engine", f"{engine.get('name') or ', '.join(document.get('engine_names', []))}")
        )
        items.append(
            ("limit", f"`{document.get('limit')}` per move (each legal move searched alone)")
        )
        inputs = document.get("inputs", [])
        items.append(("source files", ", ".join(f"`{os.path.basename(p)}`" for p in inputs[:20])
                      + (f" and {len(inputs) - 20} more" if len(inputs) > 20 else "")))  # fmt: skip
        games, boards = document.get("games", {}), document.get("boards", {})
        sampling = document.get("sampling", {})
        items.append(("games", f"{games.get('used', 0):,} used of {games.get('read', 0):,} read "
                      f"(sample rate {sampling.get('rate')}, seed {sampling.get('seed')}, "
                      f"max games {sampling.get('max_games')})"))  # fmt: skip
        items.append(("boards", f"{boards.get('unique', 0):,} unique, "
                      f"{boards.get('failed', 0):,} failed (in the failures shards)"))  # fmt: skip
    elif source == "chessbench":
        items.append(("engine", "Stockfish 16 (ChessBench, the paper's released data)"))
        items.append(("kind", f"`{document.get('kind')}`"))
        items.append(("source files", f"`{document.get('input')}` "
                      f"({document.get('num_input_shards')} shards)"))  # fmt: skip
        records, boards = document.get("records", {}), document.get("boards", {})
        items.append(("records", f"{records.get('read', 0):,} read"))
        items.append(("boards", f"{boards.get('written', 0):,} written "
                      f"({boards.get('partial', 0):,} partial), "
                      f"{boards.get('failed', 0):,} failed"))  # fmt: skip
    elif source == "select":
        inputs = sorted({os.path.basename(os.path.dirname(p)) for p in document["inputs"]})
        items.append(("selected from", ", ".join(f"`{split}`" for split in inputs)))
        kind = document["best_move"]
        items.append(("kept", f"{document['kept']:,} of {document['rows']:,} boards: those "
                      f"whose best move is `{kind}` (pipeline/select_boards.py)"))  # fmt: skip
    else:
        items.append(("engine", f"{document.get('engine')}"))
        items.append(("source files", f"`{os.path.basename(str(document.get('input')))}`"))
        failures = document.get("failures", {})
        items.append(("lines", f"{document.get('lines', 0):,}, of which "
                      f"{failures.get('total', 0):,} failed"))  # fmt: skip
    items.append(("action values", f"{document.get('action_values', 0):,}"))
    when = document.get("started_at") or document.get("finished_at")
    if when:
        items.append(("made", f"{when}, runner {document.get('runner', 'local')}"))
    return items


def render(out: str) -> str:
    splits = _splits(out)
    lines = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split, _ in splits:
        lines += [f"  - split: {split}", f"    path: {split}/{BOARDS_PREFIX}-*.parquet"]
    lines += [
        "---",
        MARKER,
        "",
        f"# {os.path.basename(out.rstrip('/')) or out}: annotated chess boards",
        "",
    ]
    lines += [
        "One row per unique board (deduplicated on the full FEN) with Stockfish values for its",
        "moves, made by [searchless-chess](https://github.com/google-deepmind/searchless_chess)'s",
        "reproduction pipeline. Each split folder holds only its Parquet board shards, so it",
        "opens as a dataset in pyarrow, polars, duckdb and Hugging Face `datasets` as it is;",
        f"`<split>{META_SUFFIX}/` beside it holds `{STATS_FILE}` (every count of the run) and",
        "the boards that could not be made (`failures-*.parquet`, with the reason).",
        "",
        "## Splits",
        "",
    ]
    for split, document in splits:
        rows, files = _rows(out, split)
        lines += [f"### {split}", "", f"- rows: {rows:,} boards in {files} shard(s)"]
        lines += [f"- {label}: {text}" for label, text in provenance(document)]
        lines.append("")
    lines += [
        f"## Schema (version {SCHEMA_VERSION})",
        "",
        "| column | type | meaning |",
        "|---|---|---|",
    ]
    for field in BOARD_FIELDS:
        lines.append(f"| `{field.name}` | `{field.type}` | {COLUMN_DOCS[field.name]} |")
    return "\n".join(lines) + "\n"


def write_card(out: str) -> str | None:
    """Writes `<out>/README.md` for the splits now in `out`; returns its path, or None when
    a README.md not written by this code is there (left alone, with a warning)."""
    path = FileSystems.join(out, CARD_FILE)
    if FileSystems.exists(path):
        with FileSystems.open(path) as handle:
            if MARKER not in handle.read().decode(errors="replace"):
                print(f"WARNING: {path} was not written by searchless-chess: no dataset card "
                      "written", file=sys.stderr)  # fmt: skip
                return None
    text = render(out)
    temporary = path + ".tmp"
    with FileSystems.create(temporary) as handle:
        handle.write(text.encode())
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temporary], [path])
    return path
