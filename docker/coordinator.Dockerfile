# SecFPP coordinator: FastAPI + SQLAlchemy, TLS terminated by uvicorn.
# Build from the repository root:  docker build -f docker/coordinator.Dockerfile -t secfpp-coordinator .
# Without a Docker engine: bash docker/build.sh (buildah on a debootstrap base, BASE below).
# The image installs the [coordinator] extra: no torch, which the coordinator never imports.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE} AS build

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1

# strip (binutils) is needed in this stage only: the image gets the installed packages alone.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY secfpp ./secfpp
COPY crypto ./crypto
COPY coordinator ./coordinator
COPY migrations ./migrations
# The [coordinator] extra into a venv without pip: the crypto core, FastAPI, SQLAlchemy,
# psycopg, the job queue; no torch and no test-only library (tests/test_extras.py checks both).
# Versions: constraints.txt. Slimmer (docs/results/containers.md): the installed packages'
# own test suites are removed, their extension modules stripped of symbols (not the vendored
# libraries in *.libs/: strip breaks the patchelf edits of auditwheel), and bytecode is
# compiled only for the modules the entry points import at start-up (each run once with
# --help) and the parts of SciPy the crypto core uses; the rest (e.g. SQLAlchemy's other
# dialects, most of SciPy) is never imported by the coordinator.
RUN python -m venv --without-pip /opt/secfpp \
 && pip --python /opt/secfpp/bin/python install --no-compile -c constraints.txt ".[coordinator]" \
 && find /opt/secfpp -depth -type d -name tests -exec rm -rf {} + \
 && find /opt/secfpp -type f -name '*.so' ! -path '*.libs/*' -exec strip --strip-unneeded {} + \
 && for c in coordinator worker migrate certs; do \
      env -u PYTHONDONTWRITEBYTECODE "/opt/secfpp/bin/secfpp-$c" --help >/dev/null || exit 1; \
    done \
 && env -u PYTHONDONTWRITEBYTECODE /opt/secfpp/bin/python -c "import scipy.optimize, scipy.special"

FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OPENBLAS_NUM_THREADS=1 \
    PATH=/opt/secfpp/bin:$PATH

# A fixed numeric uid/gid: USER then names an id the host can map (compose overrides it
# with the owner of docker/certs/server-key.pem).
RUN groupadd --system --gid 10001 secfpp \
 && useradd --system --uid 10001 --gid secfpp --home-dir /srv/secfpp secfpp

COPY --from=build /opt/secfpp /opt/secfpp
WORKDIR /srv/secfpp
USER 10001:10001
EXPOSE 8443
# Settings come from the environment (SECFPP_DATABASE_URL, SECFPP_ADMIN_TOKEN,
# SECFPP_TLS_CERTFILE, SECFPP_TLS_KEYFILE, ...); see coordinator/settings.py.
# Exec form: an unanswered or failed request raises, and python exits 1 (unhealthy).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD ["python", "-c", "import ssl,urllib.request as u; u.urlopen('https://127.0.0.1:8443/healthz', context=ssl._create_unverified_context(), timeout=4)"]
ENTRYPOINT ["secfpp-coordinator"]
CMD ["--host", "0.0.0.0", "--port", "8443"]
