#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of ZCode from Debian's archive.
# Idempotent: packages already present are skipped by apt-get; the update runs only
# when something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-filesystem-dev libboost-program-options-dev libboost-system-dev
  libyaml-cpp-dev rapidjson-dev
  libsentencepiece-dev sentencepiece
  libgtest-dev libgmock-dev
  libopenblas-dev libopenblas0-pthread libopenblas0-openmp
  libdlpack-dev
  zlib1g-dev libzstd-dev libssl-dev
  libkainjow-mustache-dev
  clang libclang-rt-14-dev libfuzzer-14-dev
  clang-format-14 clang-tidy-14
  python3 python3-numpy python3-torch
  libjemalloc2
  openmpi-bin libopenmpi-dev
  fortunes fortunes-min fortunes-de fortunes-ru fortunes-zh
  unicode-data
  prometheus-cpp-dev prometheus libcpp-httplib-dev
  libprotobuf-dev protobuf-compiler python3-protobuf python3-crc32c
  libicu-dev python3-nltk wordnet-base wamerican
  pybind11-dev python3-pytest python3-requests python3-httpx curl
)
# Node.js and npm fetch data assets (tokenizer files) and run the tokenizer reference
# implementations. The machine image may carry its own Node.js; Debian's is used only when
# none is on PATH, since the two conflict.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PKGS+=(nodejs npm); fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
