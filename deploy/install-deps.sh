#!/usr/bin/env bash
# Installs the Debian packages pstrain needs, in sets:
#   (no flag)  building and training: what deploy/local/quickstart.sh needs
#              (the compilers and libraries, dataset-fashion-mnist, and
#              pybind11, NumPy and Python's headers for `import pstrain`);
#   --tests    also what only the tests use (tests/run.sh passes it): GoogleTest
#              and Google Benchmark, clang and libFuzzer for the sanitizer and
#              fuzzer builds, PyTorch, the ONNX checker and ONNX Runtime for
#              Node.js (npm onnxruntime-node, with its CPU library inside, in a
#              project-local prefix, .deps/node, that the tests find), Python's
#              grpcio (tests/foreign), yaml and jsonschema (the Kubernetes manifest
#              tests), scikit-learn (its shipped tables and its models are the
#              real-data test's data and peer), systemd-container (tests/systemd
#              boots this machine's OS under systemd in a container to run
#              pstrain@.service);
#   --bench    also what the side-by-side benchmarks need (PyTorch among them).
#   --list     prints the packages of the sets asked for, one per line (npm
#              packages as npm:<name>@<version>), and installs nothing.
# Idempotent: runs `apt-get update` and `apt-get install` only when something is
# missing.
set -euo pipefail

tests=0
bench=0
list=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    --bench) bench=1 ;;
    --list) list=1 ;;
    *)
      echo "install-deps: unknown argument $arg (use --tests, --bench, --list)" >&2
      exit 2
      ;;
  esac
done

# Building and training: exactly what the product's targets link
# (tests/product_build_test.sh configures them with nothing else).
packages=(
  build-essential cmake pkg-config git curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libeigen3-dev libtbb-dev libgflags-dev libgoogle-glog-dev libyaml-cpp-dev
  zlib1g-dev libpng-dev libcurl4-openssl-dev nlohmann-json3-dev libsimdjson-dev
  libssl-dev libonnx-dev libfarmhash-dev
  dataset-fashion-mnist
  python3-dev pybind11-dev python3-pybind11 python3-numpy
)
# Only the tests (libcpp-httplib-dev: the fake cloud servers' and the
# benchmarks' HTTP; lld: tests/run.sh links its builds with it).
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev clang-14 libfuzzer-14-dev lld
  python3-grpcio python3-protobuf python3-onnx python3-torch nodejs npm
  python3-yaml python3-jsonschema python3-sklearn systemd systemd-container
)
ort_version=1.30.0
if ((tests)); then
  packages+=("${test_packages[@]}")
fi
if ((bench)); then
  packages+=(python3 python3-torch python3-numpy python3-sklearn libopenblas0-pthread hyperfine wrk
    libcpp-httplib-dev)
fi

if ((list)); then
  printf '%s\n' "${packages[@]}"
  if ((tests)); then echo "npm:onnxruntime-node@$ort_version"; fi
  exit 0
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

# The tests' ONNX Runtime for Node.js, pinned, into <repo>/.deps/node. Its
# postinstall would fetch CUDA files: ONNXRUNTIME_NODE_INSTALL=skip keeps to
# the CPU library the package holds.
if ((tests)); then
  node_prefix="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.deps/node"
  if ! (cd "$node_prefix" 2>/dev/null &&
    node -e "process.exit(require('onnxruntime-node/package.json').version === '$ort_version' ? 0 : 1)" \
      2>/dev/null); then
    echo "install-deps: installing onnxruntime-node $ort_version into $node_prefix"
    mkdir -p "$node_prefix"
    (cd "$node_prefix" && ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix . --no-audit --no-fund \
      --loglevel=error "onnxruntime-node@$ort_version")
  fi
fi
