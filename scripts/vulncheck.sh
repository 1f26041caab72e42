#!/usr/bin/env bash
# make vulncheck: known vulnerabilities that TAH's code reaches.
#
# govulncheck (pinned) checks every package of the module against a pinned
# snapshot of the Go vulnerability database: the golang.org/x/vulndb module,
# indexed offline by its own cmd/indexdb into the user's cache once per
# snapshot. Pinning both makes the answer reproducible: CI fails because the
# code or its modules changed, never because the database did. To take a newer
# database, raise VULNDB_VERSION to the snapshot that
# `go list -m golang.org/x/vulndb@latest` names.
#
# Exit status: 0 when nothing is reachable (vulnerabilities in modules or
# packages that the code never calls are listed as information), 1 when the
# code calls a vulnerable symbol, 2 when the check itself could not run.
#
# Run it through make, which exports the toolchain that go.mod names: the
# standard library checked is the one of the Go that runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."

GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.9.0
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
GO=${GO:-go}

fail() {
	printf 'make vulncheck: %s\n' "$*" >&2
	exit 2
}

goversion=$("$GO" env GOVERSION) || fail "no go command ($GO)"
cache_root=${TAH_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:?set HOME, XDG_CACHE_HOME or TAH_CACHE_DIR for the vulnerability index}/.cache}/tah}
db=$cache_root/vulndb-$VULNDB_VERSION

# build_index indexes the database snapshot into $db, through a temporary
# directory renamed at the end, so that an interrupted build leaves no index
# that looks whole; then it deletes the indexes of other snapshots.
build_index() {
	local info src tmp
	echo "make vulncheck: indexing golang.org/x/vulndb@$VULNDB_VERSION into $db (once per database version)"
	info=$("$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION") ||
		fail "cannot download golang.org/x/vulndb@$VULNDB_VERSION through the module proxy (GOPROXY=$("$GO" env GOPROXY)): $(sed -n 's/^\t"Error": //p' <<<"$info")"
	src=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")
	[ -d "$src/data/osv" ] || fail "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv directory (in '$src')"
	mkdir -p "$cache_root"
	tmp=$(mktemp -d "$cache_root/.building.XXXXXX")
	if ! "$GO" run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$src/data/osv" -out "$tmp/db"; then
		rm -rf "$tmp"
		fail "indexdb could not index $src/data/osv"
	fi
	rm -rf "$db"
	mv "$tmp/db" "$db"
	rm -rf "$tmp"
	find "$cache_root" -mindepth 1 -maxdepth 1 -name 'vulndb-*' ! -path "$db" -exec rm -rf {} +
}

[ -f "$db/index/db.json" ] || build_index

out=$(mktemp "${TMPDIR:-/tmp}/tah-vulncheck.XXXXXX")
trap 'rm -f "$out"' EXIT
echo "make vulncheck: $GOVULNCHECK, $goversion, golang.org/x/vulndb@$VULNDB_VERSION"
# Installed, not go run: go run turns the exit status (3: vulnerable code
# is called) into 1. One binary per Go version, which it must match to load
# the standard library's packages.
bindir=$cache_root/bin-$goversion
GOBIN=$bindir "$GO" install "$GOVULNCHECK" || fail "cannot install $GOVULNCHECK (through the module proxy)"
status=0
"$bindir/govulncheck" -db "file://$db" -show verbose ./... >"$out" 2>&1 || status=$?
# The lists of the packages and modules scanned are long and say nothing
# about the result: show from the results on.
case $status in
0)
	sed -n '/^=== Symbol Results ===/,$p' "$out"
	echo "make vulncheck: ok, no known vulnerability is reachable from TAH's code (any listed above are in code it does not call)"
	;;
3)
	sed -n '/^=== Symbol Results ===/,$p' "$out"
	cat >&2 <<-EOF
		make vulncheck: FAILED: TAH's code calls the vulnerable symbols listed under "Symbol Results".
		  In a module: raise it to its "Fixed in" version (go get MODULE@VERSION && go mod tidy).
		  In the standard library: raise the toolchain line of go.mod (the Makefile and .ci/run export it as GOTOOLCHAIN).
	EOF
	exit 1
	;;
*)
	cat "$out" >&2
	fail "govulncheck could not run (exit $status)"
	;;
esac
