# Cage orchestrator: the server (`cage serve`) with the source tree it builds runner images from.
#   docker build -t cage/orchestrator .                                  # where pulls work
#   docker build --build-arg BASE_IMAGE=cage/base:bookworm -t cage/orchestrator .   # offline base
# Networks with TLS inspection: put the CA bundle at ./extra-ca.pem before building (ignored by git).
# It needs the engine socket (`-v /var/run/docker.sock:/var/run/docker.sock`) and a data volume at
# /data; see compose.yaml.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
# Optional extra CA bundle, as in the runner images (the same images/common/cage-ca.sh);
# `extra-ca.pe[m]` matches nothing without one.
COPY images/common/cage-ca.sh extra-ca.pe[m] /tmp/cage-ca/
RUN sh /tmp/cage-ca/cage-ca.sh
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1

# Dependencies first (their own layer), then Cage itself, installed in place: the image builder
# reads `images/` and Cage's source next to the package, so they must stay where pip found them.
RUN python3 -m venv /opt/cage && /opt/cage/bin/pip install --upgrade pip setuptools wheel
# The locked runtime packages (versions and hashes of requirements.lock, without the dev tools).
COPY requirements-runtime.lock /opt/cage/src/requirements-runtime.lock
RUN /opt/cage/bin/pip install --require-hashes -r /opt/cage/src/requirements-runtime.lock
COPY pyproject.toml /opt/cage/src/pyproject.toml
COPY README.md /opt/cage/src/README.md
COPY orchestrator /opt/cage/src/orchestrator
COPY runners /opt/cage/src/runners
COPY images /opt/cage/src/images
RUN /opt/cage/bin/pip install --no-deps -e /opt/cage/src \
 && /opt/cage/bin/cage --help >/dev/null

# The default application directory (example assistants); mount your own at /app.
COPY agent.yml /app/agent.yml
COPY assistants /app/assistants
COPY connectors /app/connectors
COPY mcps /app/mcps

RUN useradd --system --uid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin cage \
 && install -d -o cage -g cage -m 0750 /data
ENV PATH=/opt/cage/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CAGE_APP_DIR=/app CAGE_DATA_DIR=/data CAGE_HOST=0.0.0.0 CAGE_PORT=8080 CAGE_LOG_LEVEL=INFO
USER cage
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=6s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=5)"]
CMD ["cage", "serve"]
