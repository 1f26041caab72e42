#!/usr/bin/env bash
# make demo: start a TAH node on a fresh temporary data directory (on free
# ports, so that it works beside anything on 4222), run the specification's
# example over this repository with the mock model, show the session, stop;
# make ui then serves the web UI on the same data.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BIN:-bin}
prompt=${PROMPT:-分析这个项目的目录结构}
# The demo's data stays after it for make ui; each demo starts afresh.
tmp=${DEMO_DIR:-${TMPDIR:-/tmp}/tah-demo}
rm -rf "$tmp" && mkdir -p "$tmp"
node_pid=""

b=$'\e[1m' d=$'\e[2m' r=$'\e[0m'
if [ ! -t 1 ] || [ -n "${NO_COLOR:-}" ]; then b="" d="" r=""; fi
say() { printf '%s\n' "$b$*$r"; }

stop() {
	if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
		kill -TERM "$node_pid" 2>/dev/null || true
		wait "$node_pid" 2>/dev/null || true
	fi
	node_pid=""
}
trap stop EXIT
trap 'exit 130' INT TERM

say "Starting a TAH node on a fresh data directory ($tmp/.tah)…"
"$bin/tah-node" --data-dir "$tmp/.tah" --nats-port 0 --http 127.0.0.1:0 --tools-root . \
	>"$tmp/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 1 300); do
	[ -f "$tmp/.tah/node.json" ] && break
	if ! kill -0 "$node_pid" 2>/dev/null; then
		echo "the node did not start:" >&2
		cat "$tmp/node.log" >&2
		exit 1
	fi
	sleep 0.1
done
if [ ! -f "$tmp/.tah/node.json" ]; then
	echo "the node did not get ready within 30s:" >&2
	cat "$tmp/node.log" >&2
	exit 1
fi
sed -n '/is ready/,/^Try:/p' "$tmp/node.log" | grep -v '^Try:' | sed "s/^/$d  │ $r/"
export TAH_DATA_DIR="$tmp/.tah"
echo

say "\$ tahctl send \"$prompt\""
"$bin/tahctl" send "$prompt"
echo

sid=$("$bin/tahctl" list --json --limit 1 | grep -o '"id":"[^"]*"' | head -n 1 | cut -d'"' -f4)
say "\$ tahctl show $sid"
"$bin/tahctl" show "$sid"
echo

say "Stopping the node."
stop
echo "${d}Next: \`make install\` puts tah-node and tahctl on your PATH; run \`tah-node\` in your project's directory, then \`tahctl send \"…\"\` (\`tahctl help\` lists the commands).$r"
echo "${d}See it step by step in the web UI: \`make ui\` (a node on this demo's data; open the address it prints, Ctrl-C stops it).$r"
