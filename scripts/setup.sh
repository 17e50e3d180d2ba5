#!/usr/bin/env bash
# Idempotent set-up shared by the README's two commands: virtual environment,
# Docker engine, sandbox image. A second run with nothing changed is a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[caisson setup] %s\n' "$*" >&2; }

VENV=${CAISSON_VENV:-.venv}
stamp="$VENV/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  log "creating virtual environment in $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e '.[test]'
  touch "$stamp"
fi

docker_ok() { timeout 5 docker info >/dev/null 2>&1; }

DATA_ROOT=/var/lib/caisson-docker
XFS_IMAGE=/var/lib/caisson-docker.xfs
xfs_data_root() {
  if ! command -v mkfs.xfs >/dev/null 2>&1; then
    log "installing xfsprogs (XFS data-root for disk quotas)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfsprogs >/dev/null || return 1
  fi
  mkdir -p "$DATA_ROOT"
  mountpoint -q "$DATA_ROOT" && return 0
  if [ ! -f "$XFS_IMAGE" ]; then
    truncate -s 64G "$XFS_IMAGE" && mkfs.xfs -q "$XFS_IMAGE" || { rm -f "$XFS_IMAGE"; return 1; }
  fi
  # A kernel built without XFS quota support refuses pquota: then no data-root of our own.
  mount -o loop,pquota "$XFS_IMAGE" "$DATA_ROOT" 2>/dev/null || { rm -f "$XFS_IMAGE"; rmdir "$DATA_ROOT"; return 1; }
}
if ! docker_ok; then
  if ! command -v dockerd >/dev/null 2>&1; then
    log "installing Debian's docker.io"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io runsc >/dev/null
  fi
  if ! command -v runsc >/dev/null 2>&1; then
    log "installing gVisor (runsc) for sessions that ask for it"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null || log "runsc unavailable; gVisor sessions will fail"
  fi
  if ! docker_ok; then
    # Per-session disk quotas need overlay2 on XFS mounted with project quotas: the engine
    # started here keeps its data on an XFS file system in a sparse loop file.
    data_root_flag=()
    if xfs_data_root; then
      data_root_flag=(--data-root "$DATA_ROOT")
    else
      log "no XFS data-root with project quotas here (no loop device, no xfsprogs, or a kernel without XFS quota): sessions get no hard disk quota; caisson doctor says more"
    fi
    log "starting dockerd in the background (log: /var/log/caisson-dockerd.log)"
    # images/dockerd.json: no iptables (sandboxes use network none; nested machines may lack
    # it) and gVisor registered as the runtime "runsc".
    nohup dockerd --config-file "$PWD/images/dockerd.json" "${data_root_flag[@]}" >/var/log/caisson-dockerd.log 2>&1 &
    for _ in $(seq 1 60); do docker_ok && break; sleep 0.5; done
    docker_ok || { log "dockerd did not come up; see /var/log/caisson-dockerd.log"; exit 1; }
  fi
fi
if ! command -v debootstrap >/dev/null 2>&1 && ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  log "installing debootstrap (needed to build the base image offline)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq debootstrap >/dev/null
fi
# clone-exec, the daemon's native clone helper, is compiled here: a C compiler and a static libc.
if ! command -v cc >/dev/null 2>&1 || [ ! -f /usr/lib/"$(gcc -dumpmachine 2>/dev/null || echo none)"/libc.a ]; then
  log "installing gcc and libc6-dev (clone-exec, the daemon's native clone helper)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null
fi
# caisson serve's console test drives Debian's headless Chromium through chromedriver.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  log "installing chromium and chromium-driver (the console's browser test)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
"$VENV/bin/caisson" image build >/dev/null
