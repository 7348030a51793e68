#!/usr/bin/env bash
# Make the sandbox engine ready on this machine (called by `make setup`; idempotent):
#   1. as root, install Debian's docker.io, debootstrap and bubblewrap when missing;
#   2. start dockerd in the background when no engine answers (log: $RLWB_DOCKERD_LOG);
#   3. build the rlwb-sandbox image (cached by recipe; ~1 min the first time).
# Without root or apt it says what is missing and leaves the local fallback backend as the
# only choice (weaker isolation; `rlwb sandbox status` shows what works).
set -uo pipefail
RLWB="${1:-.venv/bin/rlwb}"
LOG="${RLWB_DOCKERD_LOG:-/tmp/rlwb-dockerd.log}"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "sandbox engine: installing ${need[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/tmp/rlwb-apt.log 2>&1 \
      || { echo "sandbox engine: apt-get install ${need[*]} failed; see /tmp/rlwb-apt.log" >&2; exit 1; }
  else
    echo "sandbox engine: missing ${need[*]} and not root with apt-get; only what is installed will work" >&2
  fi
fi

if command -v dockerd >/dev/null && ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "sandbox engine: starting dockerd (log: $LOG)"
    # its own session: a signal to the caller's process group (Ctrl-C, `timeout make ...`)
    # must not take the engine down with the command that started it
    setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  fi
fi
if docker info >/dev/null 2>&1; then
  "$RLWB" sandbox build-image
else
  echo "sandbox engine: no Docker engine answers; Docker sandboxes are unavailable (see $LOG);" \
       "the local backend (weaker isolation) is what is left" >&2
  [ "${RLWB_REQUIRE_DOCKER:-0}" = 1 ] && exit 1
  exit 0
fi
