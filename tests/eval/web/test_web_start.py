"""The web board's first minute where XLA's disk cache is empty: the search's shapes compile
in the background, the policy answers meanwhile, GET /api/status says what a search waits
for, and Ctrl-C ends the server at once and quietly."""

from __future__ import annotations

import os
import signal
import time
import urllib.parse

import pytest

from tests.eval.web.test_web_cancel import WAIT_S, open_request, status, wait_until

# Many batch shapes to compile: the compile outlasts everything the test does meanwhile.
SEARCH_BATCH = "64"


@pytest.mark.slow
def test_the_policy_answers_while_the_search_compiles(launch, tmp_path):
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla")}
    started = time.monotonic()
    process, client, lines = launch("--search-batch", SEARCH_BATCH, env=env)
    print(f"started in {time.monotonic() - started:.1f} s")
    url = client.url
    try:
        waiting = wait_until(lambda: status(client)["waiting"], "the search's compile to start")
        assert waiting.startswith("compiling the search for cpu")
        search = open_request(
            url, "GET", "/api/analysis?" + urllib.parse.urlencode({"simulations": 8})
        )
        started = time.monotonic()
        code, body = client.get("/api/analysis", moves="e2e4")
        seconds = time.monotonic() - started
        assert code == 200 and body["search"] is None, body
        print(f"the policy answered in {seconds:.2f} s during the compile")
        # Answered during the compile, which the search still waits for.
        assert status(client)["waiting"], f"the compile ended first ({seconds:.1f} s)"
        search.setblocking(False)
        with pytest.raises(BlockingIOError):
            search.recv(1)
        search.close()
        printed = len(lines)
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        assert process.wait(timeout=WAIT_S) == 130
        print(f"stopped in {time.monotonic() - started:.1f} s")
        time.sleep(0.5)  # the output pump's last lines
        assert lines[printed:] == ["python -m eval.web: stopped"]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
