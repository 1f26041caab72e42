#!/usr/bin/env bash
# make demo (scripts/demo.sh): build tah-node and tahctl, saying what takes
# time; start a node on a fresh data directory of its own (mktemp, never a
# shared fixed path) on free ports, so that it works beside anything on 4222
# or 9464; run the specification's example over this repository with the
# mock model; show the session; stop.
#
# make ui (scripts/demo.sh ui): a node on the last demo's data, with the web
# UI on a free port (UI_HTTP), until Ctrl-C; its banner's Try line is a
# command that works from this directory.
#
# The language of the example (its prompt, hence the mock's answer) follows
# DEMO_LANG (en or zh), else the locale (LC_ALL, LC_MESSAGES, LANG: zh_* is
# Chinese), else English; PROMPT replaces the prompt. DEMO_DIR names the
# directory to use (it must be empty, missing, or a previous demo's);
# DEMO_BUILD=no uses the binaries in BIN as they are.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-demo}
bin=${BIN:-bin}
go=${GO:-go}
# The directory of the last demo, for make ui (bin/ is ignored by git).
record=$bin/.demo-dir
# A file every demo directory holds: only a directory that has it, and is
# the user's own, is ever removed.
marker=.tah-demo

b=$'\e[1m' d=$'\e[2m' r=$'\e[0m'
if [ ! -t 1 ] || [ -n "${NO_COLOR:-}" ]; then b="" d="" r=""; fi
say() { printf '%s\n' "$b$*$r"; }
note() { printf '%s\n' "$d$*$r"; }

# The example's prompt: the specification's, in English unless Chinese is
# asked for (DEMO_LANG) or is the locale's language.
lang=${DEMO_LANG:-}
if [ -z "$lang" ]; then
	for v in "${LC_ALL:-}" "${LC_MESSAGES:-}" "${LANG:-}"; do
		if [ -n "$v" ]; then
			lang=$v
			break
		fi
	done
fi
case "$lang" in
zh*) prompt=${PROMPT:-分析这个项目的目录结构} ;;
*) prompt=${PROMPT:-"Analyse this project's directory structure"} ;;
esac

# elapsed START: the seconds since START ($SECONDS) for people: 42s, 3m05s.
elapsed() {
	local s=$((SECONDS - $1))
	if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

# build builds tah-node and tahctl into $bin, saying first what takes time:
# the first build of a clone fetches the Go toolchain go.mod names (when the
# machine's go is older) and compiles every dependency, which took 3 to 7
# minutes on 2 cores; later builds take seconds. While it compiles, a line
# every 30 s says it still does.
build() {
	if [ "${DEMO_BUILD:-yes}" = no ]; then
		return
	fi
	local want=${GOTOOLCHAIN:-} t0 ticker
	if [ -n "$want" ] && [ "$want" != local ] && [ "$(GOTOOLCHAIN=local "$go" env GOVERSION 2>/dev/null)" != "$want" ]; then
		local cache os arch
		cache=$(GOTOOLCHAIN=local "$go" env GOMODCACHE)
		os=$(GOTOOLCHAIN=local "$go" env GOOS)
		arch=$(GOTOOLCHAIN=local "$go" env GOARCH)
		if [ ! -d "$cache/golang.org/toolchain@v0.0.1-$want.$os-$arch" ]; then
			say "Fetching $want, the Go toolchain go.mod names (once: about 75 MB, a minute or two on a slow line)…"
			t0=$SECONDS
			"$go" version >/dev/null
			note "  fetched in $(elapsed "$t0")"
		fi
	fi
	if [ -x "$bin/tah-node" ] && [ -x "$bin/tahctl" ]; then
		say "Building tah-node and tahctl (seconds, unless the sources or the toolchain changed)…"
	else
		say "Building tah-node and tahctl: the first build compiles every dependency, 3 to 7 minutes on 2 cores (later builds take seconds)…"
	fi
	t0=$SECONDS
	(
		while sleep 30 </dev/null >/dev/null 2>&1; do
			note "  still compiling ($(elapsed "$t0"))…"
		done
	) &
	ticker=$!
	local ok=0
	"$go" build ${BUILDFLAGS:-} -o "$bin/tah-node" ./cmd/node && "$go" build ${BUILDFLAGS:-} -o "$bin/tahctl" ./cmd/tahctl || ok=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	if [ "$ok" != 0 ]; then
		echo "the build failed" >&2
		exit "$ok"
	fi
	note "  built in $(elapsed "$t0"): $bin/tah-node, $bin/tahctl"
}

# ours DIR: DIR is a demo's directory (it holds the marker) and the user's.
ours() { [ -d "$1" ] && [ -O "$1" ] && [ -f "$1/$marker" ]; }

# running DIR: a node runs on DIR's data (its node.json names a live pid).
running() {
	local pid
	pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$1/.tah/node.json" 2>/dev/null || true)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# fresh prints the directory of a new demo: DEMO_DIR (made afresh when it
# is a previous demo's; refused when it holds anything else), or a new
# directory under the temporary directory, made by mktemp, which no other
# user or clone shares. The previous demo's directory that this clone
# recorded is removed then, unless a node (make ui) still runs on it.
fresh() {
	local dir prev
	if [ -n "${DEMO_DIR:-}" ]; then
		dir=$DEMO_DIR
		if ours "$dir"; then
			if running "$dir"; then
				echo "a node still runs on $dir (make ui?): stop it (Ctrl-C), or give another DEMO_DIR" >&2
				exit 1
			fi
			rm -rf -- "$dir"
		elif [ -e "$dir" ] && [ -n "$(ls -A -- "$dir" 2>/dev/null || echo x)" ]; then
			echo "DEMO_DIR=$dir holds files no demo made: give an empty or missing directory (nothing was removed)" >&2
			exit 2
		fi
		mkdir -p -- "$dir"
	else
		prev=$(cat "$record" 2>/dev/null || true)
		if [ -n "$prev" ] && ours "$prev"; then
			if running "$prev"; then
				note "(the previous demo's data, $prev, is kept: a node still runs on it)" >&2
			else
				rm -rf -- "$prev"
			fi
		fi
		dir=$(mktemp -d "${TMPDIR:-/tmp}/tah-demo.XXXXXX")
	fi
	printf 'made by make demo (scripts/demo.sh) of %s\n' "$PWD" >"$dir/$marker"
	mkdir -p "$bin"
	printf '%s\n' "$dir" >"$record"
	printf '%s\n' "$dir"
}

if [ "$mode" = ui ]; then
	dir=${DEMO_DIR:-$(cat "$record" 2>/dev/null || true)}
	if [ -z "$dir" ] || [ ! -d "$dir/.tah" ]; then
		echo "no demo's data to show${dir:+ (in $dir)}: run make demo first" >&2
		exit 1
	fi
	build
	# The node's banner says "Try: tahctl send ...", which, run here, would
	# not find it (its data directory is not ./.tah): the line is rewritten
	# into one that does. The filter ignores Ctrl-C, so that it passes on
	# what the node writes while it stops.
	try="Try, in another terminal in $PWD: $bin/tahctl --data-dir $dir/.tah send \"$prompt\"   (Ctrl-C here stops the node)"
	exec "$bin/tah-node" --data-dir "$dir/.tah" --nats-port 0 --http "${UI_HTTP:-127.0.0.1:0}" --tools-root . \
		> >(
			trap '' INT
			while IFS= read -r line; do
				case "$line" in
				"Try: tahctl "*) printf '%s\n' "$try" ;;
				*) printf '%s\n' "$line" ;;
				esac
			done
		)
fi

build
tmp=$(fresh)
node_pid=""

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
t0=$SECONDS
"$bin/tah-node" --data-dir "$tmp/.tah" --nats-port 0 --http 127.0.0.1:0 --tools-root . \
	>"$tmp/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 1 600); do
	[ -f "$tmp/.tah/node.json" ] && break
	if ! kill -0 "$node_pid" 2>/dev/null; then
		echo "the node did not start:" >&2
		cat "$tmp/node.log" >&2
		exit 1
	fi
	sleep 0.1
done
if [ ! -f "$tmp/.tah/node.json" ]; then
	echo "the node did not get ready within 60s:" >&2
	cat "$tmp/node.log" >&2
	exit 1
fi
sed -n '/is ready/,/^Try:/p' "$tmp/node.log" | grep -v '^Try:' | sed "s/^/$d  │ $r/"
note "  ready in $(elapsed "$t0")"
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
note "The demo's data stays in $tmp (the next make demo removes it)."
note "Next: \`make install\` puts tah-node and tahctl on your PATH; run \`tah-node\` in your project's directory, then \`tahctl send \"…\"\` (\`tahctl help\` lists the commands)."
note "See it step by step in the web UI: \`make ui\` (a node on this demo's data, the UI on a free port: open the address it prints; Ctrl-C stops it)."
if [ "${prompt}" != 分析这个项目的目录结构 ]; then
	note "The specification's example in Chinese: \`make demo DEMO_LANG=zh\`."
fi
