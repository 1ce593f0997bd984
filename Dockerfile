# mcp-normalizer as a container: the proxy in front of one MCP server (Streamable HTTP).
#
#   docker build -t mcp-normalizer .
#   docker run --rm -p 8765:8765 --stop-timeout 15 \
#       -e MCP_NORMALIZER_UPSTREAM=http://mcp-server:3001/mcp mcp-normalizer
#
# Configured by MCP_NORMALIZER_* environment variables (docs/running.md, "Flags and environment"; every [proxy]
# key is also MCP_NORMALIZER_<KEY>) and optionally a rule file: mount it read-only at
# /etc/mcp-normalizer/normalizer.toml and set MCP_NORMALIZER_CONFIG=/etc/mcp-normalizer/normalizer.toml.
# Arguments after the image name are flags appended to the entrypoint (flags win over the environment);
# keep the port in MCP_NORMALIZER_PORT, which the HEALTHCHECK reads.
# Listening on 0.0.0.0, the proxy does what the MCP SDKs do on a non-loopback address: with no
# allow-list it checks neither Host nor Origin (DNS-rebinding protection off), and its first log lines
# say so. Containers on the same network then reach it by any name (http://normalizer:8765/mcp).
# Turn the check on with the names your clients dial: MCP_NORMALIZER_ALLOWED_HOSTS (and _ORIGINS, for
# browser clients), e.g. "mcp.example.com,normalizer:*,localhost:*" (config/compose.yaml does).
#
# No Docker engine runs on the dev machines or in CI: hadolint lints this file in CI, and
# tests/test_image.py runs the final stage's ENTRYPOINT, CMD, ENV and HEALTHCHECK exactly as written.

FROM python:3.12-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The venv gets no pip of its own: the builder's pip installs into it, so the final image carries the
# package and its dependencies only.
RUN python -m venv --without-pip /opt/venv
WORKDIR /src
# Nothing is resolved at build time: the dependencies and the build backend come from pinned, hashed
# requirement files (pip refuses a file whose hash differs), and the package itself is installed
# without dependencies. The dependency layer is cached until requirements/image.txt changes.
COPY requirements/ requirements/
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements/build.txt \
    && pip --python /opt/venv/bin/python install --no-cache-dir --require-hashes --no-deps -r requirements/image.txt
# pyproject.toml names README.md; mcp_normalizer/normalizer.toml is a symlink to config/normalizer.toml.
COPY pyproject.toml README.md ./
COPY config/normalizer.toml config/
COPY mcp_normalizer/ mcp_normalizer/
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /tmp/wheel . \
    && pip --python /opt/venv/bin/python install --no-cache-dir --no-deps /tmp/wheel/mcp_normalizer-*.whl

FROM python:3.12-slim-bookworm
RUN groupadd --system --gid 10001 mcp-normalizer \
    && useradd --system --uid 10001 --gid mcp-normalizer --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin mcp-normalizer
COPY --from=builder /opt/venv /opt/venv
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MCP_NORMALIZER_HOST=0.0.0.0 \
    MCP_NORMALIZER_PORT=8765
# A numeric user, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8765
# Liveness without curl: exit 0 when livez answers 200 (urlopen raises on anything else).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as r; r.urlopen('http://127.0.0.1:' + (os.environ.get('MCP_NORMALIZER_PORT') or '8765') + (os.environ.get('MCP_NORMALIZER_ADMIN_PREFIX') or '/.mcp-normalizer') + '/livez', timeout=3)"]
# Exec form: the proxy is PID 1 and gets SIGTERM itself; it stops accepting connections and gives
# open streams MCP_NORMALIZER_GRACEFUL_SHUTDOWN seconds (default 10) to finish, so give `docker stop`
# (default 10 s) or the orchestrator a longer grace period. As PID 1 with no init in the image, the
# proxy also reaps the processes a stdio server leaves behind (no zombies); an init in front is
# welcome too: `docker run --init`, compose's `init: true` (docs/deployment.md, "Zombies").
ENTRYPOINT ["mcp-normalizer"]
CMD []
