"""A dask.distributed cluster on this machine: a scheduler and worker processes on 127.0.0.1.

    with local_cluster(workers=2) as address:
        annotate.run([..., "--runner=DaskRunner", f"--dask_client_address={address}"])

For tests, benchmarks and trying the DaskRunner; a real cluster is started the same way on
many machines (`dask scheduler`, `dask worker ADDRESS` on each), or by dask-jobqueue (Slurm)
or dask-kubernetes. Each worker is a process with one thread: one engine per worker.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import distributed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_cluster(
    workers: int = 2, cwd: str | None = None, log_dir: str | None = None
) -> Iterator[str]:
    """Starts the scheduler and `workers` single-thread worker processes (in `cwd`, logs in
    `log_dir`), yields the scheduler's address once every worker has joined, and stops them."""
    port = free_port()
    address = f"127.0.0.1:{port}"

    def start(name: str, args: list[str]) -> subprocess.Popen:
        log = open(f"{log_dir}/{name}.log", "wb") if log_dir else subprocess.DEVNULL
        return subprocess.Popen(
            [sys.executable, "-m", *args, "--no-dashboard"],
            cwd=cwd, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip

    processes = [
        start("scheduler", ["distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                            "--port", str(port)])
    ]  # fmt: skip
    try:
        with distributed.Client(address, timeout=60):
            pass  # the scheduler answers
        for i in range(workers):
            processes.append(
                start(f"worker{i}", ["distributed.cli.dask_worker", address, "--nthreads", "1",
                                     "--host", "127.0.0.1", "--no-nanny"])
            )  # fmt: skip
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
