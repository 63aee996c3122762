# SecFPP participant daemon: torch + open_clip prompt learning on the organization's GPU.
# Build from the repository root:  docker build -f docker/participant.Dockerfile -t secfpp-participant .
# The CUDA runtime comes with the torch wheel; run with `--gpus all` to train on the GPU.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

RUN groupadd --system secfpp && useradd --system --gid secfpp --home-dir /srv/secfpp secfpp

WORKDIR /srv/secfpp
# torch and torchvision are pinned to the pair open_clip is tested with.
RUN pip install "torch==2.14.1" "torchvision==0.29.1"
COPY pyproject.toml README.md ./
COPY crypto ./crypto
COPY coordinator ./coordinator
COPY participant ./participant
COPY migrations ./migrations
COPY bench ./bench
RUN pip install "torch==2.14.1" "torchvision==0.29.1" .

USER secfpp
# /state holds the key pair (0600) and round progress; /data the organization's images.
VOLUME ["/state", "/data"]
ENTRYPOINT ["secfpp-participant"]
CMD ["run", "--state", "/state", "--data", "/data"]
