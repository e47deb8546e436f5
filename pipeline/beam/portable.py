"""Beam building blocks that give the same results on every runner, Beam's DaskRunner included.

The DaskRunner (Beam 2.77) translates Create, ParDo, GroupByKey and Flatten into dask.bag
operations. Measured on a dask.distributed cluster, it differs from the other runners in ways
that lose or corrupt data without an error, so the pipelines here keep to what it does right:

- It computes only the last transform applied and what that depends on; a branch ending
  elsewhere never runs (Beam's WriteToText wrote nothing). A job's outputs (the shard
  writers' results, as counts) all flow into its stats, whose writing is the last step.
- Outputs emitted from `finish_bundle` are dropped, so DoFns emit only from `process` (they
  may still flush side effects in `finish_bundle`).
- Every output of a multi-output ParDo reaches every consumer. DoFns emit one main output of
  `(tag, value)` pairs instead, and `select` takes one tag.
- Side inputs are recomputed inside each task, from the start of the pipeline, and two side
  inputs with a common ancestor saw its elements twice. None are used: a value that every
  element needs (a count, a threshold) reaches the groups through a join (`GroupInto`'s
  `context`).
- Reshuffle does nothing, and a collection keeps the partitions of the Create it comes
  from, so one input file is read and parsed in one task. `GroupInto` groups by a hash
  together with a Create of every group number, whose partitions (about one per 128 groups,
  or `--dask_npartitions`) the groups then spread over.
- A Flatten's partitions are the sum of its inputs', a GroupByKey's those of its input, and
  a GroupByKey of n partitions takes about n * min(n, 32) tasks: the jobs here keep their
  shuffles few and small (a six-game annotate took 23,000 tasks and 15 minutes before).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam

from pipeline.beam.shards import shard_of

DEFAULT_GROUPS = 256  # --groups: work units of a stage (on Dask: 2 partitions by default)


def tagged(tag: str, value: Any) -> tuple[str, Any]:
    """One output of a DoFn with several kinds of output (see `select`)."""
    return tag, value


def select(outputs: beam.PCollection, tag: str, label: str) -> beam.PCollection:
    """The values of one tag among a DoFn's `(tag, value)` outputs."""
    return outputs | label >> beam.FlatMap(
        lambda item, wanted: [item[1]] if item[0] == wanted else [], tag
    )


def split(
    outputs: beam.PCollection, tags: Sequence[str], label: str
) -> dict[str, beam.PCollection]:
    """`select` for each of `tags`."""
    return {tag: select(outputs, tag, f"{label}.{tag}") for tag in tags}


def singleton(values: beam.PCollection, label: str, combine: beam.CombineFn) -> beam.PCollection:
    """All of `values` combined into one element (none when there are no values). Like
    CombineGlobally, but without the default that CombineGlobally injects through a side
    input."""
    return (
        values
        | f"{label}.Key" >> beam.Map(lambda value: (None, value))
        | f"{label}.Combine" >> beam.CombinePerKey(combine)
        | f"{label}.Value" >> beam.Map(lambda item: item[1])
    )


class GroupInto(beam.PTransform):
    """Elements -> `(group, [elements], context)` for each non-empty group of `num_groups`,
    an element's group being `shard_of(key(element), num_groups)` (a stable hash).

    The portable Reshuffle and batcher: a group is the unit of work a worker takes. `context`,
    a collection of at most one element, is given to every group (None when it is empty): the
    portable side input for a value every element needs.
    """

    def __init__(
        self,
        num_groups: int,
        key: Callable[[Any], str],
        context: beam.PCollection | None = None,
    ):
        super().__init__()
        if num_groups < 1:
            raise ValueError(f"groups must be >= 1, got {num_groups}")
        self.num_groups = num_groups
        self.key = key
        self.context = context

    def expand(self, elements):
        n, key = self.num_groups, self.key
        parts = {
            "items": elements | "ByGroup" >> beam.Map(lambda e: (shard_of(key(e), n), e)),
            # Every group number, from a Create: on Dask the groups inherit its partitions.
            "groups": elements.pipeline
            | "EveryGroup" >> beam.Create([(g, True) for g in range(n)]),
        }
        if self.context is not None:
            parts["context"] = self.context | "ToEveryGroup" >> beam.FlatMap(
                lambda value: [(g, value) for g in range(n)]
            )
        return parts | "Group" >> beam.CoGroupByKey() | "NonEmpty" >> beam.FlatMap(_non_empty)


def _non_empty(element):
    group, parts = element
    items = list(parts["items"])
    if items:
        context = list(parts.get("context", ()))
        yield group, items, context[0] if context else None


# -- runners ------------------------------------------------------------------------------

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
# Beam knows the DaskRunner only by its full name.
_RUNNER_ALIASES = {"DaskRunner": DASK_RUNNER, "dask": DASK_RUNNER}


def runner_args(beam_args: Sequence[str]) -> list[str]:
    """Beam's options with `--runner` resolved: the DirectRunner when none is given (Beam's
    default would first download its Prism runner), `DaskRunner` by its full name.

    A ValueError when the DaskRunner is asked for and dask.distributed is not installed."""
    args, named = [], None
    words = list(beam_args)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--runner" and i + 1 < len(words):
            named, i = words[i + 1], i + 2
            continue
        if word.startswith("--runner="):
            named = word.split("=", 1)[1]
        else:
            args.append(word)
        i += 1
    runner = _RUNNER_ALIASES.get(named or "DirectRunner", named or "DirectRunner")
    if runner == DASK_RUNNER:
        try:
            import distributed  # noqa: F401 - only to fail early with a clear message
        except ImportError:
            raise ValueError(
                "--runner=DaskRunner needs dask.distributed: pip install 'dask[distributed]'"
            ) from None
    return [*args, f"--runner={runner}"]


def is_dask(runner: str) -> bool:
    return runner in (DASK_RUNNER, *_RUNNER_ALIASES)


def for_workers(path: str) -> str:
    """A local path made absolute, for workers that run in another directory (a Dask
    worker's is where it was started); a URL (gs://, s3://, http://) as it is."""
    return path if "://" in path else os.path.abspath(path)
