#!/usr/bin/env bash
# make test's tests and vulnerability check, with what each does and how long.
#
# Every package's tests run with the race detector (go test's own output, as
# it comes, so that a hang shows where it is); then the slowest packages are
# listed with their times; then the vulnerability check runs even when a test
# failed, so that one run reports both. The exit status is 0 only when both
# passed. make test runs lint, the JS packages, the nats CLI and the browser
# before this script.
#
# Run it through make, which exports the toolchain that go.mod names.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
PKGS=${PKGS:-./...}
# go test starts packages in the order they are given, two at a time on two
# cores (-p is GOMAXPROCS): the slowest first, so that none of them starts
# late and runs alone at the end (in import path order, node started after
# ten and a half minutes, and the suite waited for it alone at the end). go
# test lists a package given twice once. Not three at a time: the suite then
# takes the two cores (measured: 165% of them, against 130% two at a time),
# and tests of node and bus failed under that load. Inside a package, the
# tests that mostly wait on their servers run four at a time instead
# (node, bus, cmd/tahctl: bustest.WaitingTestsAtOnce): that took go test
# from 16m25s to 13m10s, the node package from 408 s to 220 s.
SLOWEST="./node ./cmd/tahctl ./internal/clustertest ./bus"
if [ "$PKGS" = "./..." ]; then
	PKGS="$SLOWEST ./..."
fi
# SQLite's C, translated to Go (modernc.org/sqlite/lib, and the libc and
# allocator it runs on), is built without the race detector's
# instrumentation, everything else with it: under -race it cost three times
# the CPU (the store package's tests: 145 CPU-s instead of 34), and the read
# model is in most packages' tests. Races in TAH's code, database/sql and
# the driver (modernc.org/sqlite itself) are still caught; those inside
# SQLite's C were never ours to find. Not the driver: it uses
# atomic.Pointer, a generic type, and the linker keeps one copy of each of
# its instantiations for the whole program: compiled uninstrumented there,
# atomics everywhere lost their happens-before edges, and the detector
# reported races in encoding/json's type cache in every run of node's tests.
# lib, libc and memory instantiate none of the standard library's generics
# on Linux (if an upgrade makes them, such reports come back: take the
# package out of this list). Through GOFLAGS, so that the tah-node
# processes tahtest builds for the cluster tests get it too.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=modernc.org/sqlite/lib=-race=false -gcflags=modernc.org/libc/...=-race=false -gcflags=modernc.org/memory=-race=false"
log=$(mktemp "${TMPDIR:-/tmp}/tah-test.XXXXXX")
trap 'rm -f "$log"' EXIT

clock() { date +%s; }
took() { local s=$(($(clock) - $1)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

start=$(clock)
echo "== go test -race: every package (about 13 minutes on 2 quiet cores; the node, tahctl, cluster and bus packages take longest: they start first, and their results print when they end)"
# shellcheck disable=SC2086 # PKGS is a list of patterns
"$GO" test -race -count=1 -timeout 15m $PKGS 2>&1 | tee "$log"
tests=${PIPESTATUS[0]}
echo "== go test -race took $(took "$start"); the slowest packages:"
awk '$1 == "ok" || $1 == "FAIL" { if ($3 ~ /s$/) { t = $3; sub(/s$/, "", t); printf "%9.1fs  %s %s\n", t, $1, $2 } }' "$log" |
	sort -rn | head -8

# After the tests, not beside them: its first run on a machine builds its
# tools and index for minutes, and the cluster tests must not share the two
# cores with it.
vstart=$(clock)
echo "== vulncheck (the first run on a machine builds its index: a few minutes)"
GO="$GO" bash scripts/vulncheck.sh
vuln=$?
echo "== vulncheck took $(took "$vstart")"

if [ "$tests" -ne 0 ] || [ "$vuln" -ne 0 ]; then
	echo "make test: FAILED: tests $([ "$tests" -eq 0 ] && echo passed || echo "failed (exit $tests)"), vulncheck $([ "$vuln" -eq 0 ] && echo passed || echo "failed (exit $vuln)"); total $(took "$start")"
	exit 1
fi
echo "make test: tests and vulncheck passed in $(took "$start")"
