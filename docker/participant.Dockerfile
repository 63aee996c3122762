# SecFPP participant daemon: torch + open_clip prompt learning on the organization's GPU.
# Build from the repository root:  docker build -f docker/participant.Dockerfile -t secfpp-participant .
# Run on a GPU box (NVIDIA driver >= 580 for CUDA 13.0, NVIDIA Container Toolkit):
#   docker run --gpus all -v secfpp-state:/state -v /srv/images:/data:ro secfpp-participant \
#       run --state /state --data /data --device cuda
# or `docker compose -f docker/compose.yaml --profile participant ...` (GPU reserved there).
#
# This is the CUDA image: the pinned torch wheel from PyPI is the CUDA 13.0 build
# (torch 2.14.1+cu130), and pip installs the CUDA user-space libraries it needs (cuBLAS,
# cuDNN, NCCL, ...) as nvidia-* wheels, so no nvidia/cuda base image (and no second copy of
# those libraries) is needed; the driver comes from the host through the container toolkit.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# A fixed numeric uid/gid so that USER names an id the host can map (volume ownership).
# /state is created owned by it: a new named volume copies that ownership, so the daemon can
# write its key pair there.
RUN groupadd --system --gid 10001 secfpp \
 && useradd --system --uid 10001 --gid secfpp --home-dir /srv/secfpp secfpp \
 && mkdir -p /state /data \
 && chown secfpp:secfpp /state

WORKDIR /srv/secfpp
COPY constraints.txt ./
# torch first, from constraints.txt (the one place the torch/torchvision pair is pinned).
# The build fails on a CPU-only wheel (e.g. from another index): it has no CUDA version.
RUN pip install -c constraints.txt torch torchvision \
 && python -c "import sys, torch; sys.exit(0 if torch.version.cuda else 'torch ' + torch.__version__ + ' is a CPU-only build')"
COPY pyproject.toml README.md ./
COPY secfpp ./secfpp
COPY crypto ./crypto
COPY participant ./participant
# The [participant] extra: torch, open_clip, httpx; no web server or database driver.
RUN pip install -c constraints.txt ".[participant]"

USER 10001:10001
# /state holds the key pair (0600) and round progress; /data the organization's images.
VOLUME ["/state", "/data"]
ENTRYPOINT ["secfpp-participant"]
CMD ["run", "--state", "/state", "--data", "/data"]
