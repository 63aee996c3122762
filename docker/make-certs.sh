#!/usr/bin/env bash
# Generate a local CA and a server certificate for the compose deployment, with the
# coordinator image's own `secfpp-certs` (no Python needed on the host):
#   bash docker/build.sh coordinator     # once: the image
#   bash docker/make-certs.sh            # docker/certs/{ca,server,server-key}.pem
# Extra arguments go to secfpp-certs (e.g. --host coordinator.example.org --days 730).
# SECFPP_CERTS_DIR: where to write (default docker/certs); SECFPP_COORDINATOR_IMAGE: the image
# (default secfpp-coordinator:latest, localhost/secfpp-coordinator:latest under buildah).
# What it runs, by hand:
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD/docker/certs:/certs" \
#       --entrypoint secfpp-certs secfpp-coordinator --out /certs --host localhost ...
#   ctr=$(buildah --storage-driver vfs from localhost/secfpp-coordinator)
#   buildah --storage-driver vfs run --isolation chroot --user 0:0 \
#       -v "$PWD/docker/certs:/certs" "$ctr" -- secfpp-certs --out /certs --host localhost ...
#   buildah --storage-driver vfs rm "$ctr"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${SECFPP_CERTS_DIR:-$here/certs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
hosts=(--host localhost --host 127.0.0.1 --host coordinator)  # coordinator: the proxy's name
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    image=${SECFPP_COORDINATOR_IMAGE:-secfpp-coordinator:latest}
    docker run --rm --user "$(id -u):$(id -g)" -v "$out:/certs" --entrypoint secfpp-certs \
        "$image" --out /certs "${hosts[@]}" "$@"
elif command -v buildah >/dev/null 2>&1; then
    image=${SECFPP_COORDINATOR_IMAGE:-localhost/secfpp-coordinator:latest}
    buildah=(buildah --storage-driver vfs)
    ctr=$("${buildah[@]}" from --pull=never "$image")
    trap '"${buildah[@]}" rm "$ctr" >/dev/null' EXIT
    "${buildah[@]}" run --isolation chroot --user "$(id -u):$(id -g)" -v "$out:/certs" "$ctr" -- \
        secfpp-certs --out /certs "${hosts[@]}" "$@"
else
    echo "make-certs.sh: needs Docker or buildah and the coordinator image (docker/build.sh)" >&2
    exit 1
fi
