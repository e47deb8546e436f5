# Worker image for running pipeline/annotate/ (python -m pipeline.annotate) on Dataflow (or any portable Beam runner):
# Beam's own Python SDK image + Debian's Stockfish + this package's pipeline code.
#
#   docker build -f docker/worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/REPO/annotate:2.77.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/REPO/annotate:2.77.0
#
# The Beam version of this image must equal the launcher's (constraints.txt pins 2.77.0).
# The engine build decides the values: every row records it (`engine` column), and runs are
# only comparable between identical builds. Debian bookworm's `stockfish` is 15.1, the same
# as the development machines; check it with `docker run --rm --entrypoint
# /usr/games/stockfish IMAGE <<< uci`.
FROM apache/beam_python3.13_sdk:2.77.0

RUN apt-get update \
    && apt-get install -y --no-install-recommends stockfish \
    && rm -rf /var/lib/apt/lists/*
# find_engine() looks here too; the variable makes the choice explicit.
ENV STOCKFISH=/usr/games/stockfish

WORKDIR /opt/searchless-chess
COPY pyproject.toml constraints.txt README.md ./
COPY core ./core
COPY runtime ./runtime
COPY pipeline ./pipeline
# The SDK image brings Beam, pyarrow and numpy; the pipeline needs only two more libraries.
# --no-deps keeps the training stack (jax, haiku, ...) out of the worker.
RUN pip install --no-cache-dir -c constraints.txt chess zstandard \
    && pip install --no-cache-dir --no-deps . \
    && python -c "import pipeline.annotate.annotate, core.actions" \
    && /usr/games/stockfish quit

# Keep Beam's boot entrypoint from the base image.
