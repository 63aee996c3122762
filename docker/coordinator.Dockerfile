# SecFPP coordinator: FastAPI + SQLAlchemy, TLS terminated by uvicorn.
# Build from the repository root:  docker build -f docker/coordinator.Dockerfile -t secfpp-coordinator .
# The image installs the [coordinator] extra: no torch, which the coordinator never imports.
# Without a Docker engine: bash docker/build.sh (buildah on a debootstrap base, BASE below).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    OPENBLAS_NUM_THREADS=1

# A fixed numeric uid/gid: USER then names an id the host can map (compose overrides it
# with the owner of docker/certs/server-key.pem).
RUN groupadd --system --gid 10001 secfpp \
 && useradd --system --uid 10001 --gid secfpp --home-dir /srv/secfpp secfpp

WORKDIR /srv/secfpp
COPY pyproject.toml README.md constraints.txt ./
COPY crypto ./crypto
COPY coordinator ./coordinator
COPY migrations ./migrations
# The [coordinator] extra: the crypto core, FastAPI, SQLAlchemy, psycopg, the job queue; no
# torch and no test-only library (tests/test_extras.py checks both). Versions: constraints.txt.
# Slimmer (docs/results/containers.md): the installed packages' own test suites are removed,
# and bytecode is compiled only for the modules the entry points import at start-up (each
# entry point run once with --help) and the parts of SciPy the crypto core uses; the rest
# (e.g. SQLAlchemy's other dialects, most of SciPy) is never imported by the coordinator.
RUN pip install --no-compile -c constraints.txt ".[coordinator]" \
 && find /usr/local/lib/python3.11 -depth -type d -name tests -path '*-packages/*' -exec rm -rf {} + \
 && for c in coordinator worker migrate certs; do \
      env -u PYTHONDONTWRITEBYTECODE "secfpp-$c" --help >/dev/null || exit 1; \
    done \
 && env -u PYTHONDONTWRITEBYTECODE python -c "import scipy.optimize, scipy.special" \
 && rm -rf /srv/secfpp/crypto /srv/secfpp/coordinator /srv/secfpp/migrations

USER 10001:10001
EXPOSE 8443
# Settings come from the environment (SECFPP_DATABASE_URL, SECFPP_ADMIN_TOKEN,
# SECFPP_TLS_CERTFILE, SECFPP_TLS_KEYFILE, ...); see coordinator/settings.py.
# Exec form: an unanswered or failed request raises, and python exits 1 (unhealthy).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD ["python", "-c", "import ssl,urllib.request as u; u.urlopen('https://127.0.0.1:8443/healthz', context=ssl._create_unverified_context(), timeout=4)"]
ENTRYPOINT ["secfpp-coordinator"]
CMD ["--host", "0.0.0.0", "--port", "8443"]
