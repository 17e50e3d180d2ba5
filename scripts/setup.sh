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

# The engine started here keeps its data on a file system that bounds each container's disk:
# XFS with project quotas where the kernel has them, else btrfs with quotas (qgroups), each in
# a sparse loop file under the state directory; else overlay2 on the host's disk with only the
# soft watch. The loop file survives a reboot; the next run mounts it again.
STATE_DIR=${CAISSON_STATE_DIR:-$HOME/.caisson}
ENGINE_DIR="$STATE_DIR/engine"
DATA_ROOT=/var/lib/caisson-docker
ensure_pkg() {  # ensure_pkg COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
loop_file_size() {  # 80 % of the free space where the file lives, at least 8 GiB, at most 256 GiB
  local free_kib
  free_kib=$(df -Pk "$ENGINE_DIR" | awk 'NR==2 {print $4}')
  local size=$((free_kib * 8 / 10 / 1024 / 1024))
  [ "$size" -lt 8 ] && size=8
  [ "$size" -gt 256 ] && size=256
  echo "${size}G"
}
mounted_fs() { findmnt -n -o FSTYPE "$DATA_ROOT" 2>/dev/null || true; }
xfs_data_root() {
  ensure_pkg mkfs.xfs xfsprogs || return 1
  local img="$ENGINE_DIR/data-root.xfs" fresh=0
  if [ ! -f "$img" ]; then
    truncate -s "$(loop_file_size)" "$img" && mkfs.xfs -q "$img" || { rm -f "$img"; return 1; }
    fresh=1
  fi
  # A kernel built without XFS quota support refuses pquota: then try btrfs.
  if ! mount -o loop,pquota "$img" "$DATA_ROOT" 2>/dev/null; then
    [ "$fresh" = 1 ] && rm -f "$img"
    return 1
  fi
}
btrfs_data_root() {
  ensure_pkg mkfs.btrfs btrfs-progs || return 1
  local img="$ENGINE_DIR/data-root.btrfs"
  if [ ! -f "$img" ]; then
    truncate -s "$(loop_file_size)" "$img" && mkfs.btrfs -q "$img" >/dev/null || { rm -f "$img"; return 1; }
  fi
  mount -o loop "$img" "$DATA_ROOT" 2>/dev/null || return 1
  btrfs_quotas || { umount "$DATA_ROOT"; return 1; }
}
# Quotas on the mounted btrfs, kept on: dockerd's btrfs driver turns them off when it stops.
btrfs_quotas() {
  [ "$(cat "/sys/fs/btrfs/$(findmnt -n -o UUID "$DATA_ROOT")/qgroups/enabled" 2>/dev/null)" = 1 ] && return 0
  # Simple quotas (kernel 6.7+) where the kernel has them: each extent counts against the
  # subvolume that wrote it, so removing a container costs no accounting walk (full qgroups
  # kept btrfs-cleaner busy for minutes under a test load). Else full qgroups.
  python3 - "$DATA_ROOT" <<'PY' 2>/dev/null || btrfs quota enable "$DATA_ROOT"
import fcntl, os, struct, sys
BTRFS_IOC_QUOTA_CTL, ENABLE_SIMPLE_QUOTA = 0xC0109428, 4
fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), BTRFS_IOC_QUOTA_CTL, bytearray(struct.pack("QQ", ENABLE_SIMPLE_QUOTA, 0)))
PY
}
# Prints the dockerd flags for the data-root it prepared; nothing when only overlay2 is left.
engine_storage_flags() {
  mkdir -p "$ENGINE_DIR" "$DATA_ROOT"
  case "$(mounted_fs)" in
    xfs) echo "--data-root $DATA_ROOT"; return ;;
    btrfs)
      btrfs_quotas || log "WARNING: cannot turn on quotas of the btrfs on $DATA_ROOT: sessions get only the soft disk watch"
      echo "--data-root $DATA_ROOT --storage-driver btrfs"; return ;;
    "") ;;
    *) log "$DATA_ROOT holds a $(mounted_fs) mount that caisson did not make; leaving it alone"; return ;;
  esac
  if [ -n "$(ls -A "$DATA_ROOT" 2>/dev/null)" ]; then
    log "$DATA_ROOT is not empty and not mounted: an earlier engine's data is there; caisson neither moves nor deletes it. Remove it yourself to get a quota-capable data-root."
    echo "--data-root $DATA_ROOT"
    return
  fi
  if [ -f "$ENGINE_DIR/data-root.btrfs" ] && btrfs_data_root; then
    echo "--data-root $DATA_ROOT --storage-driver btrfs"; return
  fi
  if xfs_data_root; then echo "--data-root $DATA_ROOT"; return; fi
  if btrfs_data_root; then echo "--data-root $DATA_ROOT --storage-driver btrfs"; return; fi
  log "WARNING: no quota-capable data-root here (no XFS project quotas, no btrfs): sessions get only the soft disk watch, which a fast writer outruns; caisson doctor says more"
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
    read -r -a data_root_flag <<<"$(engine_storage_flags)"
    log "starting dockerd in the background (log: /var/log/caisson-dockerd.log)"
    # images/dockerd.json: no iptables (sandboxes use network none; nested machines may lack
    # it) and gVisor registered as the runtime "runsc".
    nohup dockerd --config-file "$PWD/images/dockerd.json" "${data_root_flag[@]}" >/var/log/caisson-dockerd.log 2>&1 &
    for _ in $(seq 1 60); do docker_ok && break; sleep 0.5; done
    docker_ok || { log "dockerd did not come up; see /var/log/caisson-dockerd.log"; exit 1; }
  fi
fi
# Every gVisor session may hold 16 x limits.pids host threads (at least 2,048), and caisson
# refuses gVisor sessions past a share of the host's pid_max (and threads-max). systemd raises
# pid_max to 4194304 on 64-bit hosts; a host without it keeps the kernel's 32768 (two default
# gVisor sessions), so it is raised here the same way.
if [ "$(cat /proc/sys/kernel/pid_max)" -lt 4194304 ] && [ "$(getconf LONG_BIT)" = 64 ]; then
  log "raising kernel.pid_max to 4194304 (systemd's default on 64-bit hosts) for gVisor sessions' host threads"
  sysctl -q -w kernel.pid_max=4194304 || log "could not raise kernel.pid_max: fewer gVisor sessions fit at once"
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
