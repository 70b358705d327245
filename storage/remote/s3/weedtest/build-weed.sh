#!/usr/bin/env bash
# build-weed.sh OUT builds SeaweedFS's weed binary at a pinned version to
# OUT (used by `make weed`). `go install ...@version` refuses seaweedfs
# because its go.mod has replace directives, so the module is downloaded
# into the module cache, copied to a writable build directory next to OUT
# and built there. The Go build cache is left alone, so a rebuild after
# `make clean` is a warm build.
set -euo pipefail

WEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
GO=${GO:-go}
out=$(realpath -m "$1")
src="$(dirname "$out")/.weed-src-$WEED_VERSION"

dir=$(cd / && GO111MODULE=on GOFLAGS=-mod=mod "$GO" mod download -json "github.com/seaweedfs/seaweedfs@$WEED_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
	echo "build-weed.sh: go mod download gave no directory for seaweedfs@$WEED_VERSION" >&2
	exit 1
fi
if [ ! -f "$src/go.mod" ]; then
	rm -rf "$src" "$src.tmp"
	mkdir -p "$(dirname "$src")"
	cp -r "$dir" "$src.tmp"
	chmod -R u+w "$src.tmp"
	mv "$src.tmp" "$src"
fi
cd "$src"
CGO_ENABLED=0 "$GO" build -trimpath -ldflags="-s -w" -o "$out.tmp" ./weed
mv "$out.tmp" "$out"
