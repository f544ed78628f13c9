#!/usr/bin/env bash
# Refreshes the vendored front-end library of `tprof report` (third_party/uplot/)
# from the npm registry. Run by hand when upgrading; the build never runs it
# and never downloads anything (CMake embeds the files in third_party/).
#   scripts/refresh_frontend_assets.sh            the pinned version below
#   scripts/refresh_frontend_assets.sh 1.6.33     another version (then update UPLOT_VERSION here)
set -euo pipefail

UPLOT_VERSION="${1:-1.6.32}"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/third_party/uplot"

command -v npm >/dev/null || { echo "refresh: npm is needed (apt-get install npm)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "uplot@${UPLOT_VERSION}" >/dev/null && tar xzf "uplot-${UPLOT_VERSION}.tgz")
pkg="$tmp/package"
for f in dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE; do
  [[ -f "$pkg/$f" ]] || { echo "refresh: uplot@${UPLOT_VERSION} has no $f" >&2; exit 1; }
done
mkdir -p "$dest"
cp "$pkg/dist/uPlot.iife.min.js" "$pkg/dist/uPlot.min.css" "$pkg/LICENSE" "$dest/"
echo "uplot ${UPLOT_VERSION}" > "$dest/VERSION"
echo "refresh: third_party/uplot now holds uplot ${UPLOT_VERSION}:"
(cd "$dest" && sha256sum uPlot.iife.min.js uPlot.min.css LICENSE)
