#!/usr/bin/env bash
# Installs every Debian package that pstrain's build, tests and quickstart need.
# Idempotent: runs `apt-get update` and `apt-get install` only when something is
# missing. Pass --bench to also install what the side-by-side benchmarks need.
# ONNX: the schema pstrain compiles (libonnx-dev), the checker and PyTorch the
# tests run (python3-onnx, python3-torch), and ONNX Runtime for Node.js
# (npm onnxruntime-node, with its CPU library inside) in a project-local
# prefix, .deps/node, that the tests find. Kubernetes: the manifest tests
# validate deploy/kubernetes/ with python3-yaml and python3-jsonschema.
# systemd: tests/systemd/ boots this machine's own OS under systemd in a
# container (systemd-container's systemd-nspawn) to run pstrain@.service.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libeigen3-dev libtbb-dev libgflags-dev libgoogle-glog-dev libyaml-cpp-dev
  zlib1g-dev libpng-dev libcurl4-openssl-dev nlohmann-json3-dev libcpp-httplib-dev libsimdjson-dev
  libssl-dev python3-grpcio python3-protobuf clang-14 libfuzzer-14-dev libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  libonnx-dev python3-onnx python3-torch nodejs npm libfarmhash-dev
  python3-yaml python3-jsonschema systemd systemd-container
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3 libopenblas0-pthread hyperfine wrk)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# A node and npm already on the machine (e.g. Node.js 20 from NodeSource)
# serve as well as Debian's.
if command -v node >/dev/null && command -v npm >/dev/null; then
  kept=()
  for p in "${missing[@]}"; do
    [[ "$p" == nodejs || "$p" == npm ]] || kept+=("$p")
  done
  missing=("${kept[@]}")
fi

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime for Node.js, pinned, into <repo>/.deps/node. Its postinstall
# would fetch CUDA files: ONNXRUNTIME_NODE_INSTALL=skip keeps to the CPU
# library the package holds.
ort_version=1.30.0
node_prefix="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.deps/node"
if ! (cd "$node_prefix" 2>/dev/null &&
  node -e "process.exit(require('onnxruntime-node/package.json').version === '$ort_version' ? 0 : 1)" \
    2>/dev/null); then
  echo "install-deps: installing onnxruntime-node $ort_version into $node_prefix"
  mkdir -p "$node_prefix"
  (cd "$node_prefix" && ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix . --no-audit --no-fund \
    --loglevel=error "onnxruntime-node@$ort_version")
fi
