#!/usr/bin/env bash
# Generate a local CA and a server certificate for the compose deployment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
python -m secfpp.coordinator.cli certs --out "$here/certs" --host localhost --host 127.0.0.1 --host coordinator "$@"
