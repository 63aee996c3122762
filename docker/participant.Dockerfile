# SecFPP participant daemon: torch + open_clip prompt learning.
# Build from the repository root (or without a Docker engine: bash docker/build.sh):
#   docker build -f docker/participant.Dockerfile -t secfpp-participant .                 # CPU
#   docker build -f docker/participant.Dockerfile --build-arg TORCH=cuda -t secfpp-participant .
# Run (CUDA build on a GPU box: NVIDIA driver >= 580 for CUDA 13.0, NVIDIA Container Toolkit):
#   docker run --gpus all -v secfpp-state:/state -v /srv/images:/data:ro secfpp-participant \
#       run --state /state --data /data --device cuda
# or `docker compose -f docker/compose.yaml --profile participant ...` (GPU reserved there).
#
# TORCH=cpu (default): the pinned torch/torchvision pair's CPU-only wheels from PyTorch's CPU
# wheel index (TORCH_CPU_INDEX): no CUDA libraries in the image.
# TORCH=cuda: the pinned torch wheel from PyPI, the CUDA 13.0 build (torch 2.14.1+cu130); pip
# installs the CUDA user-space libraries it needs (cuBLAS, cuDNN, NCCL, ...) as nvidia-*
# wheels, so no nvidia/cuda base image (and no second copy of those libraries) is needed; the
# driver comes from the host through the container toolkit.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
ARG TORCH=cpu
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

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
 && mkdir -p /state /data /weights \
 && chown secfpp:secfpp /state

WORKDIR /srv/secfpp
COPY constraints.txt ./
# torch first, from constraints.txt (the one place the torch/torchvision pair is pinned). The
# build fails when the wheel is not the variant asked for (a CUDA wheel for TORCH=cpu, a
# CPU-only one for TORCH=cuda).
RUN case "$TORCH" in \
      cpu) pip install -c constraints.txt --index-url "$TORCH_CPU_INDEX" torch torchvision ;; \
      cuda) pip install -c constraints.txt torch torchvision ;; \
      *) echo "TORCH must be cpu or cuda, not $TORCH" >&2; exit 1 ;; \
    esac \
 && python -c "import sys, torch; cuda = torch.version.cuda is not None; sys.exit(0 if cuda == (sys.argv[1] == 'cuda') else 'torch ' + torch.__version__ + ' is not a ' + sys.argv[1] + ' build')" "$TORCH"
COPY pyproject.toml README.md ./
COPY secfpp ./secfpp
COPY crypto ./crypto
COPY participant ./participant
# The [participant] extra: torch, open_clip, httpx; no web server or database driver.
RUN pip install -c constraints.txt ".[participant]"

USER 10001:10001
# /state holds the key pair (0600) and round progress; /data the organization's images;
# /weights (read-only) the organization's own CLIP checkpoint when the federation pins a real
# CLIP model (run ... --pretrained /weights/<file>; the shipped tiny-offline needs none).
# The enrollment token comes from SECFPP_ENROLLMENT_TOKEN (never an argument).
VOLUME ["/state", "/data", "/weights"]
ENTRYPOINT ["secfpp-participant"]
CMD ["run", "--state", "/state", "--data", "/data"]
