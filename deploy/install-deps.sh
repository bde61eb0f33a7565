#!/usr/bin/env bash
# Installs every Debian package that pstrain's build, tests and quickstart need.
# Idempotent: runs `apt-get update` and `apt-get install` only when something is
# missing. Pass --bench to also install what the side-by-side PyTorch benchmark
# needs (python3-torch with OpenBLAS).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libeigen3-dev libtbb-dev libgflags-dev libgoogle-glog-dev libyaml-cpp-dev
  zlib1g-dev libpng-dev libcurl4-openssl-dev nlohmann-json3-dev libcpp-httplib-dev libsimdjson-dev
  libssl-dev python3-grpcio python3-protobuf clang-14 libfuzzer-14-dev libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3 python3-torch libopenblas0-pthread hyperfine)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
