#!/usr/bin/env bash
# Installs every Debian package OptiFlow needs. Idempotent; silent when all are present.
# CUDA and NCCL are not Debian packages: they are used where /usr/local/cuda has them.
set -euo pipefail

packages=(
  g++ cmake make pkg-config ccache git
  libboost-graph-dev libeigen3-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev
  libtinyxml2-dev libcurl4-openssl-dev libcpp-httplib-dev
  libopenmpi-dev openmpi-bin
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev xvfb xauth
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  coinor-libcbc-dev coinor-libclp-dev libglpk-dev
  librsvg2-dev fonts-dejavu-core
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (or install sudo)" >&2; exit 1; }
  as_root=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
