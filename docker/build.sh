#!/usr/bin/env bash
# Build the SecFPP container images: secfpp-coordinator and secfpp-participant.
#
#   bash docker/build.sh [--if-changed] [--report FILE] [coordinator] [participant]
#
# With a reachable Docker engine: `docker build` of docker/*.Dockerfile on their default base
# (python:3.11-slim-bookworm), as a user would. Without one (BUILDER=buildah forces this
# path): Debian's buildah (vfs storage, chroot isolation, run as root) builds the same
# Dockerfiles on a base made offline with debootstrap (minbase bookworm + python3.11, the
# --build-arg BASE of the Dockerfiles), mounting this machine's pip configuration, the files
# and local package indexes it names, and its CA certificates read-only, so that pip inside
# the build reaches the package registry exactly as pip does here.
#
# Environment:
#   BUILDER=docker|buildah   default: docker when `docker info` answers, else buildah
#   TORCH=cpu|cuda           the participant's torch wheel (default cpu; when PyTorch's CPU
#                            wheel index is unreachable and TORCH is unset: cuda, with a note)
#   TAG                      image tag (default latest); every image is also tagged
#                            src-<hash of its Dockerfile, pyproject, constraints and sources>
# --if-changed               build an image only when its src-<hash> tag does not exist yet
# --report FILE            append a markdown report (times, sizes, largest parts) to FILE
#
# Each image's size and what its largest layers and directories hold are printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

if_changed=0
report=""
roles=()
while [ $# -gt 0 ]; do
    case "$1" in
        --if-changed) if_changed=1 ;;
        --report) report=$2; shift ;;
        coordinator|participant) roles+=("$1") ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#roles[@]} -gt 0 ] || roles=(coordinator participant)
TAG=${TAG:-latest}
BASE_TAG=localhost/secfpp-base:bookworm-py311
# How long each image took to build (image:src-<hash>, seconds, date), so that a report of an
# up-to-date image still names its build time.
TIMES=${XDG_CACHE_HOME:-$HOME/.cache}/secfpp/build-times.tsv
CPU_INDEX=https://download.pytorch.org/whl/cpu

say() { printf '[build %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [ -z "${BUILDER:-}" ]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        BUILDER=docker
    else
        BUILDER=buildah
    fi
fi
case "$BUILDER" in
    docker) ;;
    buildah)
        command -v buildah >/dev/null 2>&1 || {
            echo "build.sh: no Docker engine answers and buildah is not installed;" \
                "as root: apt-get install -y buildah debootstrap" >&2
            exit 1
        }
        [ "$(id -u)" = 0 ] || {
            echo "build.sh: the buildah path (vfs storage, chroot isolation) runs as root" >&2
            exit 1
        }
        ;;
    *) echo "build.sh: BUILDER must be docker or buildah, not $BUILDER" >&2; exit 2 ;;
esac
BUILDAH=(buildah --storage-driver vfs)

# The files each image is built from; their hash names the image (src-<hash>).
sources_of() {
    case "$1" in
        coordinator) echo docker/coordinator.Dockerfile pyproject.toml README.md constraints.txt \
            secfpp crypto coordinator migrations ;;
        participant) echo docker/participant.Dockerfile pyproject.toml README.md constraints.txt \
            secfpp crypto participant ;;
    esac
}
source_hash() {
    # pyproject.toml without the tables of the dev tools (pytest, ruff, mypy), which do not
    # change what an image installs; every other file whole.
    # shellcheck disable=SC2046
    {
        awk '/^\[/ { skip = ($0 ~ /^\[\[?tool\.(pytest|ruff|mypy)/) } !skip' pyproject.toml
        find $(sources_of "$1" | tr ' ' '\n' | grep -v -x pyproject.toml) -type f \
            ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 \
            | LC_ALL=C sort -z | xargs -0 sha256sum
    } | sha256sum | cut -c1-16
}

image_exists() {
    if [ "$BUILDER" = docker ]; then
        docker image inspect "$1" >/dev/null 2>&1
    else
        "${BUILDAH[@]}" inspect --type image "$1" >/dev/null 2>&1
    fi
}

# -- the offline base (buildah path) --------------------------------------------------------
host_mirror() {
    # The Debian mirror this machine's apt uses (deb822 or one-line sources), else
    # debootstrap's own default.
    local uri
    uri=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
    if [ -z "$uri" ]; then
        uri=$(grep -h -E '^deb ' /etc/apt/sources.list 2>/dev/null \
            | awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
    fi
    echo "$uri"
}

make_base() {
    if image_exists "$BASE_TAG"; then
        say "base $BASE_TAG exists"
        return
    fi
    command -v debootstrap >/dev/null 2>&1 || {
        echo "build.sh: debootstrap is not installed; as root: apt-get install -y debootstrap" >&2
        exit 1
    }
    local work start mirror ctr
    start=$(date +%s)
    work=$(mktemp -d /var/tmp/secfpp-base.XXXXXX)
    mirror=$(host_mirror)
    say "debootstrap minbase bookworm + python3.11 into $work/rootfs (mirror: ${mirror:-default})"
    # shellcheck disable=SC2086
    debootstrap --variant=minbase \
        --include=python3.11,python3-pip,python3-venv,ca-certificates \
        bookworm "$work/rootfs" $mirror >"$work/debootstrap.log" 2>&1 || {
        tail -n 20 "$work/debootstrap.log" >&2
        rm -rf "$work"
        exit 1
    }
    # What python:3.11-slim-bookworm offers the Dockerfiles: `python`, and a pip that installs
    # system-wide (Debian marks its Python externally managed, PEP 668; an image is its own
    # environment). Then drop the package caches.
    ln -sf python3.11 "$work/rootfs/usr/bin/python"
    rm -f "$work"/rootfs/usr/lib/python3.*/EXTERNALLY-MANAGED
    rm -rf "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/var/cache/apt/*.bin \
        "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/log/*.log
    tar -C "$work/rootfs" --numeric-owner -cf "$work/rootfs.tar" .
    rm -rf "$work/rootfs"
    ctr=$("${BUILDAH[@]}" from scratch)
    "${BUILDAH[@]}" add "$ctr" "$work/rootfs.tar" / >/dev/null
    "${BUILDAH[@]}" config \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd python3 \
        --label org.opencontainers.image.description="debootstrap minbase bookworm + python3.11" \
        "$ctr"
    "${BUILDAH[@]}" commit --rm "$ctr" "$BASE_TAG" >/dev/null
    rm -rf "$work"
    say "base $BASE_TAG made in $(( $(date +%s) - start )) s"
    BASE_SECONDS=$(( $(date +%s) - start ))
}

# The build machine's pip setup, for pip inside the build (read-only mounts): the config
# files where pip looks for them, PIP_* variables as a site config (/usr/pip.conf: pip reads
# it after the global and user files, as variables override files), every absolute path or
# file:// URL they name, and the CA certificates.
PIP_MOUNTS=()
pip_mounts() {
    local conf_dir files=() f path
    conf_dir=$(mktemp -d /var/tmp/secfpp-pip.XXXXXX)
    TO_REMOVE+=("$conf_dir")
    {
        echo "[global]"
        env | grep -E '^PIP_[A-Z_]+=' | grep -v -E '^PIP_(CONFIG_FILE|NO_CACHE_DIR)=' \
            | while IFS='=' read -r name value; do
                key=${name#PIP_}
                key=$(echo "$key" | tr 'A-Z_' 'a-z-')
                echo "$key = $value"
            done
    } >"$conf_dir/pip.conf"
    PIP_MOUNTS+=(-v "$conf_dir/pip.conf:/usr/pip.conf:ro")
    files+=("$conf_dir/pip.conf")
    if [ -f /etc/pip.conf ]; then PIP_MOUNTS+=(-v /etc/pip.conf:/etc/pip.conf:ro); files+=(/etc/pip.conf); fi
    if [ -d /etc/xdg/pip ]; then PIP_MOUNTS+=(-v /etc/xdg/pip:/etc/xdg/pip:ro); files+=(/etc/xdg/pip/*); fi
    for f in "$HOME/.config/pip" "$HOME/.pip"; do
        if [ -d "$f" ]; then
            PIP_MOUNTS+=(-v "$f:/root/${f#"$HOME"/}:ro")
            files+=("$f"/*)
        fi
    done
    if [ -n "${PIP_CONFIG_FILE:-}" ] && [ -f "$PIP_CONFIG_FILE" ]; then
        PIP_MOUNTS+=(-v "$PIP_CONFIG_FILE:/etc/xdg/secfpp-pip-config-file.conf:ro")
        files+=("$PIP_CONFIG_FILE")
    fi
    local named=()
    for f in "${files[@]}"; do
        [ -f "$f" ] || continue
        while read -r path; do
            case "$path" in
                # a local index (PEP 503): its pages link to files beside simple/
                file://*/simple|file://*/simple/) path=${path#file://}; path=$(dirname "$path") ;;
                *) path=${path#file://} ;;
            esac
            case "$path" in
                /etc/xdg/pip*|/etc/pip.conf) continue ;;
            esac
            [ -e "$path" ] && named+=("$path")
        done < <(grep -o -E '(file://)?/[^ ,"]+' "$f" || true)
    done
    named+=(/etc/ssl/certs)
    local seen=" "
    for path in "${named[@]}"; do
        # a path inside a directory already mounted (e.g. the CA bundle) needs no mount
        case "$path" in /etc/ssl/certs/*) continue ;; esac
        case "$seen" in *" $path "*) continue ;; esac
        seen="$seen$path "
        PIP_MOUNTS+=(-v "$path:$path:ro")
    done
}

# -- the builds ---------------------------------------------------------------------------
TO_REMOVE=()
cleanup() { [ ${#TO_REMOVE[@]} -eq 0 ] || rm -rf "${TO_REMOVE[@]}"; }
trap cleanup EXIT

torch_variant() {
    if [ -n "${TORCH:-}" ]; then
        echo "$TORCH"
    elif curl -fsS -o /dev/null --max-time 15 "$CPU_INDEX/torch/" 2>/dev/null; then
        echo cpu
    else
        say "PyTorch's CPU wheel index ($CPU_INDEX) is unreachable from here: building the" \
            "participant with PyPI's CUDA torch wheel (TORCH=cuda; set TORCH=cpu to insist)"
        echo "The participant is the CUDA variant: PyTorch's CPU wheel index was unreachable" \
            "from this machine, and TORCH was not set." >"$TORCH_NOTE_FILE"
        echo cuda
    fi
}

build_one() {
    local role=$1 hash image args=() start seconds
    hash=$(source_hash "$role")
    image="secfpp-$role"
    [ "$BUILDER" = buildah ] && image="localhost/$image"
    if [ "$role" = participant ]; then
        local variant
        variant=$(torch_variant)
        args+=(--build-arg "TORCH=$variant")
        hash="$hash-$variant"
    fi
    if [ "$if_changed" = 1 ] && image_exists "$image:src-$hash"; then
        say "$image:src-$hash is up to date"
        [ "$TAG" = "src-$hash" ] || tag_image "$image:src-$hash" "$image:$TAG"
        [ -z "${variant:-}" ] || tag_image "$image:src-$hash" "$image:$TAG-$variant"
        local recorded
        recorded=$(awk -F'\t' -v k="$image:src-$hash" '$1 == k {s = $2 " s, " $3} END {print s}' \
            "$TIMES" 2>/dev/null || true)
        BUILT+=("$role|$image:src-$hash|cached${recorded:+ (built in $recorded)}|${variant:-}")
        return
    fi
    say "building $image:$TAG (sources $hash) with $BUILDER"
    start=$(date +%s)
    if [ "$BUILDER" = docker ]; then
        docker build -f "docker/$role.Dockerfile" "${args[@]}" \
            -t "$image:$TAG" -t "$image:src-$hash" .
    else
        make_base
        pip_mounts
        "${BUILDAH[@]}" build --isolation chroot --layers=false --format docker \
            --build-arg "BASE=$BASE_TAG" "${args[@]}" "${PIP_MOUNTS[@]}" \
            -f "docker/$role.Dockerfile" -t "$image:$TAG" -t "$image:src-$hash" .
    fi
    seconds=$(( $(date +%s) - start ))
    say "$image built in $seconds s"
    mkdir -p "$(dirname "$TIMES")"
    printf '%s\t%s\t%s\n' "$image:src-$hash" "$seconds" "$(date -u '+%Y-%m-%d %H:%M UTC')" >>"$TIMES"
    [ -z "${variant:-}" ] || tag_image "$image:src-$hash" "$image:$TAG-$variant"
    prune_old "$image" "src-$hash"
    BUILT+=("$role|$image:src-$hash|$seconds|${variant:-}")
}

# Older builds of the same image (other src-<hash> tags) go, and so do untagged images: with
# vfs storage every image is a full copy of its file system.
prune_old() {
    local repo=$1 keep=$2 ref
    if [ "$BUILDER" = docker ]; then
        docker image ls --format '{{.Repository}}:{{.Tag}}' "$repo" | grep ':src-' \
            | grep -v -F ":$keep" | xargs -r docker image rm >/dev/null || true
        docker image prune -f >/dev/null || true
        return
    fi
    for ref in $("${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}}' "$repo" 2>/dev/null); do
        case "$ref" in
            *":$keep"|*":$keep-"*) ;;
            *:src-*) "${BUILDAH[@]}" rmi "$ref" >/dev/null 2>&1 || true ;;
        esac
    done
    "${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
}

tag_image() {
    if [ "$BUILDER" = docker ]; then docker tag "$1" "$2"; else "${BUILDAH[@]}" tag "$1" "$2"; fi
}

# -- sizes --------------------------------------------------------------------------------
mib() { echo $(( ($1 + 524288) / 1048576 )); }

# The vfs directory of an image's top layer (a full copy of its file system, so it can be
# measured without starting a container).
top_layer_dir() {
    local graph id layer
    graph=$("${BUILDAH[@]}" info --format '{{.store.GraphRoot}}' 2>/dev/null || echo /var/lib/containers/storage)
    id=$("${BUILDAH[@]}" inspect --type image --format '{{.FromImageID}}' "$1")
    layer=$(python3 - "$graph" "$id" <<'EOF' 2>/dev/null || true
import json, sys
graph, image = sys.argv[1:3]
for entry in json.load(open(f"{graph}/vfs-images/images.json")):
    if entry["id"] == image:
        print(entry["layer"])
EOF
)
    [ -n "$layer" ] && echo "$graph/vfs/dir/$layer"
}

describe() {
    local role=$1 image=$2 seconds=$3 variant=$4 size base_size dir site
    echo
    echo "== $image"
    if [ "$BUILDER" = docker ]; then
        size=$(docker image inspect --format '{{.Size}}' "$image")
        echo "size: $(mib "$size") MiB"
        echo "largest layers:"
        docker history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$image" \
            | sort -h -r | awk 'NR <= 5' | cut -c1-160
        return
    fi
    size=$("${BUILDAH[@]}" inspect --type image --format '{{.ImageSize}}' "$image" 2>/dev/null || true)
    dir=$(top_layer_dir "$image" || true)
    local base_dir
    base_dir=$(top_layer_dir "$BASE_TAG" || true)
    [ -n "$dir" ] && size=$(du -sb "$dir" | cut -f1)
    [ -n "$base_dir" ] && base_size=$(du -sb "$base_dir" | cut -f1)
    echo "size: $(mib "$size") MiB (base $BASE_TAG: $(mib "${base_size:-0}") MiB; added: $(mib $(( size - ${base_size:-0} ))) MiB)"
    REPORT_ROWS+=("| \`$role\`${variant:+ (torch $variant)} | ${seconds} | $(mib "$size") | $(mib "${base_size:-0}") | $(mib $(( size - ${base_size:-0} ))) |")
    if [ -n "$dir" ]; then
        for site in "$dir"/opt/secfpp/lib/python3.11/site-packages \
            "$dir"/usr/local/lib/python3.11/dist-packages "$dir"/usr/local/lib/python3.11/site-packages; do
            [ -d "$site" ] && break
        done
        echo "largest installed packages ($site):"
        du -s -B1M "$site"/* 2>/dev/null | sort -n -r | awk 'NR <= 8' \
            | awk -v s="$site/" '{sub(s, "", $2); printf "  %6d MiB  %s\n", $1, $2}' | tee "/tmp/secfpp-largest-$role.txt"
        local largest
        largest=$(awk '{printf "%s%s %s", (NR>1?", ":""), $3, $1}' "/tmp/secfpp-largest-$role.txt")
        REPORT_PARTS+=("- \`$role\`: $largest")
        rm -f "/tmp/secfpp-largest-$role.txt"
    fi
}

TORCH_NOTE_FILE=$(mktemp)
TO_REMOVE+=("$TORCH_NOTE_FILE")
BUILT=()
REPORT_ROWS=()
REPORT_PARTS=()
BASE_SECONDS=""
total_start=$(date +%s)
for role in "${roles[@]}"; do
    build_one "$role"
done
for entry in "${BUILT[@]}"; do
    IFS='|' read -r role image seconds variant <<<"$entry"
    describe "$role" "$image" "$seconds" "$variant"
done
total=$(( $(date +%s) - total_start ))
TORCH_NOTE=$(cat "$TORCH_NOTE_FILE")
say "done in $total s"

if [ -n "$report" ]; then
    if [ ! -s "$report" ]; then
        cat >"$report" <<'HEADER'
# Container images: build times and sizes

Generated by `bash docker/build.sh --report docs/results/containers.md` (each run appends a
dated section; edit nothing by hand). Sizes are of the image's file system (MiB); "added" is
what the image adds over its base. Without a Docker engine the base is the debootstrap one
(minbase bookworm + python3.11, `localhost/secfpp-base:bookworm-py311`); with Docker it is
`python:3.11-slim-bookworm`. What each image holds: [../deployment.md](../deployment.md).
HEADER
    fi
    {
        echo
        echo "## $(date -u '+%Y-%m-%d %H:%M UTC'): $BUILDER, $(uname -m), $(nproc) cores," \
            "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
            "$(sed -n 's/^model name[[:space:]]*: //p;T;q' /proc/cpuinfo)"
        echo
        echo "Command: \`bash docker/build.sh $( [ "$if_changed" = 1 ] && echo '--if-changed ')${roles[*]}\`" \
            "(total $total s${BASE_SECONDS:+, of which the debootstrap base $BASE_SECONDS s});" \
            "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores when it ended."
        [ -z "$TORCH_NOTE" ] || echo "$TORCH_NOTE"
        echo
        echo "| image | build s | size MiB | base MiB | added MiB |"
        echo "| --- | ---: | ---: | ---: | ---: |"
        printf '%s\n' "${REPORT_ROWS[@]}"
        echo
        echo "Largest installed packages (MiB, site-packages of the image):"
        echo
        printf '%s\n' "${REPORT_PARTS[@]}"
    } >>"$report"
fi
