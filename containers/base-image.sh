#!/usr/bin/env bash
# The local base image for a machine with no image registry (make image calls it when
# BASE_IMAGE is the local tag and that tag is missing):
#
#   containers/base-image.sh [TAG]      # default r2adapter-base:bookworm
#
# debootstrap --variant=minbase of Debian bookworm with python3.11, python3.11-venv (and its
# python3.11-distutils, provided by python3-distutils, which debootstrap does not resolve by
# itself: without it dpkg leaves
# python3.11-venv unconfigured and debootstrap fails) and
# ca-certificates (~1 min, needs the Debian mirror), imported with `docker import`. Made
# only when the tag is missing. debootstrap is installed with apt-get when missing (root).
# A user with a registry skips all this: make image BASE_IMAGE=python:3.11-slim
set -euo pipefail
TAG=${1:-r2adapter-base:bookworm}
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
die() { echo "base-image: $*" >&2; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker daemon reachable: run containers/docker-up.sh"
docker image inspect "$TAG" >/dev/null 2>&1 && exit 0

if ! command -v debootstrap >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "base image $TAG is missing and debootstrap is not installed: as root, apt-get install -y debootstrap (or build with BASE_IMAGE=python:3.11-slim from a registry)"
  echo "base-image: installing debootstrap (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed: install debootstrap by hand"
  apt-get install -y -qq --no-install-recommends debootstrap >/dev/null || die "apt-get install debootstrap failed"
fi
[ "$(id -u)" = 0 ] || die "debootstrap needs root to make $TAG (or build with BASE_IMAGE=python:3.11-slim from a registry)"

ROOTFS=$(mktemp -d /var/tmp/r2a-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
echo "base-image: debootstrap $SUITE into $ROOTFS (about a minute)" >&2
debootstrap --variant=minbase --include=python3.11,python3.11-venv,python3-distutils,ca-certificates \
  "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 \
  || die "debootstrap failed (mirror $MIRROR reachable?): see $ROOTFS.log"
rm -f "$ROOTFS.log"
# what an image does not need: apt lists and caches, docs, man pages
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
tar -C "$ROOTFS" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --message "debootstrap --variant=minbase $SUITE + python3.11, python3.11-venv, ca-certificates" \
  - "$TAG" >/dev/null
echo "base-image: made $TAG ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))" >&2
