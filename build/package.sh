#!/usr/bin/env bash
# Linux package of the desktop app: dist/parley-<version>-linux-<arch>.tar.xz holding
# parley/usr/local/{bin/parley, share/applications/parley.desktop, share/pixmaps/parley.png} and a
# Makefile whose `make install` copies them (the layout `fyne package -os linux` makes).
#
# With the fyne packaging tool on PATH (go install fyne.io/tools/cmd/fyne@latest) the tarball
# comes from `fyne package` using FyneApp.toml; without it (offline machines) the same
# layout is written here. PARLEY_PACKAGER=fyne|manual forces one.
set -euo pipefail
cd "$(dirname "$0")/.."
export LANG="${LANG:-C.UTF-8}" CGO_ENABLED=1
GO="${GO:-go}"
TAGS="${TAGS:-libsqlite3}"
version=$(sed -n 's/^ *Version *= *"\(.*\)"/\1/p' FyneApp.toml)
appid=$(sed -n 's/^ *ID *= *"\(.*\)"/\1/p' FyneApp.toml)
arch=$($GO env GOARCH)
dist=dist
out="$dist/parley-$version-linux-$arch.tar.xz"
mkdir -p "$dist"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "building parley $version ($arch)…"
$GO build -tags "$TAGS" -ldflags "-s -w" -o "$tmp/parley" .

packager="${PARLEY_PACKAGER:-}"
if [[ -z "$packager" ]]; then
	if command -v fyne >/dev/null 2>&1 || [[ -x "$($GO env GOPATH)/bin/fyne" ]]; then packager=fyne; else packager=manual; fi
fi
fyne_bin=$(command -v fyne || echo "$($GO env GOPATH)/bin/fyne")

if [[ "$packager" == fyne ]]; then
	echo "packaging with $fyne_bin…"
	# the new tool (fyne.io/tools) spells its flags --app-id/--app-version, the old one
	# (fyne.io/fyne/v2/cmd/fyne, what the module proxy serves here) --appID/--appVersion
	if "$fyne_bin" package --help 2>&1 | grep -q -- '--app-id'; then
		idflag=--app-id verflag=--app-version
	else
		idflag=--appID verflag=--appVersion
	fi
	repo=$PWD
	(cd "$tmp" && cp "$repo/FyneApp.toml" . && mkdir -p app/gui && cp "$repo/app/gui/icon.png" app/gui/ &&
		"$fyne_bin" package --target linux --executable "$tmp/parley" --name Parley "$idflag" "$appid" \
			--icon app/gui/icon.png "$verflag" "$version" --release 2>&1 | grep -v 'deprecated\|fyne.io/tools\|go install fyne.io' || true)
	ls "$tmp"/*.tar.xz >/dev/null 2>&1 || { echo "package.sh: fyne package made no tarball" >&2; exit 1; }
	src=$(ls "$tmp"/*.tar.xz | head -1)
	mv "$src" "$out"
else
	echo "packaging by hand (no fyne tool)…"
	root="$tmp/pkg/parley"
	mkdir -p "$root/usr/local/bin" "$root/usr/local/share/applications" "$root/usr/local/share/pixmaps"
	install -m 0755 "$tmp/parley" "$root/usr/local/bin/parley"
	install -m 0644 app/gui/icon.png "$root/usr/local/share/pixmaps/parley.png"
	cat > "$root/usr/local/share/applications/parley.desktop" <<DESKTOP
[Desktop Entry]
Type=Application
Name=Parley
GenericName=Voice assistant
Comment=Private, offline-first voice assistant: talk, and it answers aloud
Exec=parley
Icon=parley
Terminal=false
Categories=Utility;Audio;AudioVideo;
Keywords=voice;assistant;speech;chat;offline;
StartupWMClass=Parley
X-Fyne-ID=$appid
DESKTOP
	cat > "$root/Makefile" <<'MAKE'
# Install Parley for everyone (sudo make install) or for you (make user-install).
PREFIX ?= /usr/local
install:
	install -Dm755 usr/local/bin/parley $(DESTDIR)$(PREFIX)/bin/parley
	install -Dm644 usr/local/share/applications/parley.desktop $(DESTDIR)$(PREFIX)/share/applications/parley.desktop
	install -Dm644 usr/local/share/pixmaps/parley.png $(DESTDIR)$(PREFIX)/share/pixmaps/parley.png
user-install:
	install -Dm755 usr/local/bin/parley $(HOME)/.local/bin/parley
	install -Dm644 usr/local/share/applications/parley.desktop $(HOME)/.local/share/applications/parley.desktop
	install -Dm644 usr/local/share/pixmaps/parley.png $(HOME)/.local/share/icons/parley.png
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/parley $(DESTDIR)$(PREFIX)/share/applications/parley.desktop $(DESTDIR)$(PREFIX)/share/pixmaps/parley.png
MAKE
	tar -C "$tmp/pkg" -cJf "$out" parley
fi
if command -v desktop-file-validate >/dev/null 2>&1; then
	d="$tmp/check"; mkdir -p "$d"; tar -C "$d" -xJf "$out"
	desktop-file-validate "$(find "$d" -name '*.desktop' | head -1)"
fi
tar -tJf "$out" | grep -q '\.desktop$' || { echo "package.sh: no .desktop entry in $out" >&2; exit 1; }
echo "wrote $out"
