#!/usr/bin/env bash
# Installs, from Debian packages only, everything parity's build, tests and main job need.
# Idempotent: when every package is already installed it changes nothing and needs no network.
# Uses sudo only when not running as root. Never prompts (CI runs it with no standard input).
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config   # toolchain; ccache keeps LibTorch rebuilds short
  libtorch-dev                              # LibTorch 1.13: ddp_ref's models, autograd, c10d Reducer
  libgloo-dev                               # Gloo: the collectives under c10d::ProcessGroupGloo
  libopenblas-dev                           # BLAS for pmap_engine's CPU backend
  libdnnl-dev                               # oneDNN: pmap_engine's convolutions and batched products
  nlohmann-json3-dev                        # JSON: run.json, metrics.jsonl, safetensors headers
  libtomlplusplus-dev                       # TOML case files
  libcli11-dev                              # the `parity` command line
  libfmt-dev                                # message formatting
  zlib1g-dev                                # gzip'd IDX files of Fashion-MNIST
  libzip-dev                                # .npz archives (zip, stored or deflated) of tensors
  nettle-dev                                # SHA-1, with which Flax derives each parameter's key
  libboost-math-dev                         # Student's t for the equivalence test over seeds
  python3-torch python3-numpy               # real PyTorch DDP runs through interop/python's helper
  libgtest-dev libgmock-dev                 # tests
  libbenchmark-dev                          # bench/
  chromium                                  # the browser test renders report.html headless
  dataset-fashion-mnist                     # the real dataset, /usr/share/datasets/fashion-mnist
)

# --fuzz (make fuzz): also clang's libFuzzer and sanitizers; the normal build needs neither.
if [ "${1:-}" = "--fuzz" ]; then packages+=(clang-14 libclang-rt-14-dev); fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  as_root=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
