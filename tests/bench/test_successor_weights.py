"""bench/successor_weights.py: every weight judged from one pass of the network, as the mixed
agent itself plays, on the shipped models/cpu (a BC policy with a value head) and the bundled
puzzles."""

from __future__ import annotations

import json

from bench.successor_weights import main
from core.eval_sets import read_puzzles
from eval.agents.players import make_agent
from eval.puzzles import evaluate
from tests.conftest import ROOT, SAMPLE

MODEL = str(ROOT / "models" / "cpu")
PUZZLES = str(SAMPLE / "puzzles.csv")


def test_each_weight_solves_what_the_mixed_agent_solves(capsys):
    assert main(["--model", MODEL, "--puzzles", PUZZLES, "--skip", "2", "--num", "12",
                 "--weights", "0", "2"]) == 0  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert document["puzzles"] == 12 and set(document["weights"]) == {"0", "2"}
    assert document["policy_ms"] > 0 and document["successor_ms"] > 0
    assert document["mixed_vs_policy"] > 1  # the successors are more boards than one
    puzzles = read_puzzles(PUZZLES, 14)[0][2:]
    for weight in ("0", "2"):
        agent = make_agent(f"neural:{MODEL},successor_weight={weight}")
        assert document["weights"][weight]["solved"] == evaluate(agent, puzzles)["solved"]


def test_a_model_that_cannot_mix_and_bad_arguments_are_one_line(capsys):
    av = str(ROOT / "models" / "cpu-av")
    assert main(["--model", av, "--puzzles", PUZZLES, "--num", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a BC policy with a value head" in err[0]
    assert main(["--model", MODEL, "--puzzles", PUZZLES, "--skip", "100000"]) == 1
    assert "no puzzles after the first 100000" in capsys.readouterr().err
