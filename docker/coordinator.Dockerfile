# SecFPP coordinator: FastAPI + SQLAlchemy, TLS terminated by uvicorn.
# Build from the repository root:  docker build -f docker/coordinator.Dockerfile -t secfpp-coordinator .
# The image installs the project without torch: the coordinator never imports it.
FROM python:3.11-slim-bookworm AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    OPENBLAS_NUM_THREADS=1

# A fixed numeric uid/gid: USER then names an id the host can map (compose overrides it
# with the owner of docker/certs/server-key.pem).
RUN groupadd --system --gid 10001 secfpp \
 && useradd --system --uid 10001 --gid secfpp --home-dir /srv/secfpp secfpp

WORKDIR /srv/secfpp
COPY pyproject.toml README.md ./
COPY crypto ./crypto
COPY coordinator ./coordinator
COPY migrations ./migrations
COPY participant/__init__.py ./participant/__init__.py
COPY bench/__init__.py ./bench/__init__.py
# --no-deps + an explicit list: the coordinator's runtime needs, not the participant's torch.
RUN pip install --no-deps . \
 && pip install "numpy>=1.26" "galois>=0.4" "cryptography>=42" "dp-accounting>=0.4" "scipy>=1.11" \
        "fastapi>=0.110" "uvicorn[standard]>=0.29" "sqlalchemy>=2.0.25" "alembic>=1.13" \
        "psycopg[binary]>=3.1" "pydantic>=2.6" "pydantic-settings>=2.2" \
        "fastapi-offline>=1.7.7" "jinja2>=3.1" "procrastinate>=3.10,<3.11" "psycopg-pool>=3.2"

USER 10001:10001
EXPOSE 8443
# Settings come from the environment (SECFPP_DATABASE_URL, SECFPP_ADMIN_TOKEN,
# SECFPP_TLS_CERTFILE, SECFPP_TLS_KEYFILE, ...); see coordinator/settings.py.
# Exec form: an unanswered or failed request raises, and python exits 1 (unhealthy).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD ["python", "-c", "import ssl,urllib.request as u; u.urlopen('https://127.0.0.1:8443/healthz', context=ssl._create_unverified_context(), timeout=4)"]
ENTRYPOINT ["secfpp-coordinator"]
CMD ["--host", "0.0.0.0", "--port", "8443"]
