// Command tahctl drives TAH sessions from the command line: send input and
// watch the answer stream in, resume, cancel, list, show a session's steps as a
// timeline, follow its events, fork and compact it, replay it against
// today's agent, change its budget, list the tools and check the nodes. It finds the local node and its credential by itself (the data
// directory's node.json and admin.creds), or talks to another with --server
// and --creds. `tahctl help` lists the commands and the exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tah-dev/tah/internal/buildinfo"
)

func main() {
	g := &globals{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv, timeout: 10 * time.Second}
	err := run(context.Background(), g, os.Args[1:])
	report(os.Stderr, err)
	os.Exit(exitCode(err))
}

// command is one tahctl command: its file holds its run function.
type command struct {
	name, args, summary string
	run                 func(ctx context.Context, g *globals, args []string) error
}

func commands() []command {
	return []command{
		{"send", "[-s ID] TEXT", "send input to a session (a new one without -s) and stream the answer", runSend},
		{"resume", "ID", "continue a turn that a crash or a stop interrupted, streaming the rest", runResume},
		{"cancel", "ID", "cancel the running turn (or compaction) of a session", runCancel},
		{"approve", "ID [CALL]", "approve a tool call that waits for approval, and follow the turn on", runApprove},
		{"deny", "ID [CALL]", "deny a tool call that waits for approval (--note tells the model why)", runDeny},
		{"budget", "ID --turn-tokens N... [--resume]", "change a session's limits on tokens, cost and time (--resume: and go on)", runBudget},
		{"schedule", "add|ls|rm ID ...", "send a session an input at a time, every interval or on a cron pattern (JetStream fires it)", runSchedule},
		{"new", "[--label K=V] [--turn-tokens N]...", "create an empty session (labels, a budget) and print its id", runNew},
		{"list", "[--status S] [--limit N]", "list the sessions, most recently updated first", runList},
		{"show", "ID [--request STEP]", "show a session and its steps as a timeline (or the request a step sent)", runShow},
		{"events", "ID [--follow] [--from SEQ]", "print a session's events (--follow: and wait for more)", runEvents},
		{"shard", "ID", "print where a session's events are in the log (its shard, stream and subject)", runShard},
		{"fork", "ID [--turns N | --at STEP] [--edit FILE]", "copy a session's messages (its first N turns, or up to a step, with an edit) into a new session", runFork},
		{"compact", "ID", "summarise a session's turns so far into one message", runCompact},
		{"replay", "ID [--turn N] [--from STEP] [--live]... | --all", "re-run a session's turns against today's agent, with no model call or tool run (--live: then on live from where it departs; --all: every session)", runReplay},
		{"artifacts", "ID", "list a session's artifacts: files its tools made, outputs too large for the log", runArtifacts},
		{"artifact", "get ID ARTIFACT [-o FILE]", "fetch an artifact's content (checked against its SHA-256)", runArtifact},
		{"inspect", "[--listen ADDR]", "serve the step inspector (web UI) with this credential: a tenant's sees its own sessions only", runInspect},
		{"tools", "", "list the tools the node offers to the model", runTools},
		{"status", "", "show the nodes, partitions and sessions", runStatus},
		{"creds", "add|ls|revoke ...", "issue, list and revoke NATS credentials (with an admin credential)", runCreds},
		{"tenant", "add|ls|rm NAME", "add, list and remove tenants, whose credentials see their own sessions only (with an admin credential)", runTenant},
		{"upgrade-cluster", "--from URL --from-credentials FILE", "copy a user-and-password era cluster's sessions into this one", runUpgrade},
		{"mcp", "serve FILE", "serve the tools of MCP servers (an mcpServers file) as TAH tool services", runMCP},
		{"help", "[COMMAND]", "show this help, or a command's", nil},
	}
}

const usageHead = `tahctl drives TAH sessions: durable LLM agent sessions on NATS.

Usage: tahctl [global flags] COMMAND [arguments]

Commands:
`

const usageGlobals = `
Global flags (before or after the command):
  --server URL       NATS URL of the node [TAH_URL]; default: the url in the data
                     directory's node.json, else nats://127.0.0.1:4222
  --data-dir DIR     the node's data directory [TAH_DATA_DIR]; default: .tah here or
                     in a parent directory. tahctl reads node.json (the node's address)
                     and admin.creds (the local admin's NATS credential) there
  --creds FILE       NATS credential, a .creds file [TAH_NATS_CREDS]; default: the
                     data directory's admin.creds
  --tls-ca FILE      CA (PEM) to verify a node that serves TLS (tls:// URL) against
                     [TAH_TLS_CA]; default: the CA the data directory's node.json names
  --json             print JSON: one object, or one per line (NDJSON) for streams
  --timeout DURATION how long to wait for the node to answer a request (default 10s)
  --version          print tahctl's version (module version, VCS revision and time)

`

func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-15s %-35s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, usageGlobals)
	fmt.Fprint(w, exitCodesHelp)
	fmt.Fprint(w, "\nExamples:\n  tahctl send \"Analyse this project's directory structure\"\n  tahctl send -s s_4f2k9q1w7e3r5t6y8v0b \"and now the tests\"\n  tahctl show s_4f2k9q1w7e3r5t6y8v0b\n  tahctl events s_4f2k9q1w7e3r5t6y8v0b --follow --json\n")
}

// run is tahctl: the global flags, then the command.
func run(ctx context.Context, g *globals, args []string) error {
	fs := flag.NewFlagSet("tahctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")
	version := fs.Bool("version", false, "")
	if err := fs.Parse(args); err != nil {
		return usageError("`tahctl help`", "%v", err)
	}
	if *version {
		_, err := fmt.Fprintln(g.stdout, buildinfo.Describe("tahctl"))
		return err
	}
	if *help {
		printUsage(g.stdout)
		return nil
	}
	rest := fs.Args()
	if len(rest) == 0 {
		printUsage(g.stderr)
		return usageError("`tahctl send \"your question\"`, or `tahctl help`", "no command given")
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			printUsage(g.stdout)
			return nil
		}
		name, rest = rest[0], []string{"--help"}
	}
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			if err := c.run(ctx, g, rest); err != errHelp {
				return err
			}
			return nil
		}
	}
	return usageError("`tahctl help` lists the commands", "unknown command %q", name)
}

// flags is a command's flag set, with the global flags and a usage text.
func (g *globals) flags(name, args, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet("tahctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	fs.Usage = func() {
		w := g.stdout
		fmt.Fprintf(w, "Usage: tahctl %s %s\n\n%s\n", name, args, summary)
		var own []string
		fs.VisitAll(func(f *flag.Flag) {
			switch f.Name {
			case "server", "data-dir", "user", "password", "json", "timeout":
				return
			}
			name, usage := flag.UnquoteUsage(f)
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			own = append(own, fmt.Sprintf("  %-24s %s", dash+strings.TrimSpace(f.Name+" "+name), usage))
		})
		if len(own) > 0 {
			fmt.Fprintf(w, "\nFlags:\n%s\n", strings.Join(own, "\n"))
		}
		fmt.Fprint(w, usageGlobals)
		fmt.Fprint(w, exitCodesHelp)
	}
	return fs
}

// parse parses a command's arguments, with flags anywhere among them ("--"
// ends the flags). --help prints the usage and returns errHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	// The flag package prints the whole usage on any error: a mistyped flag
	// gets its one line and a hint instead, and --help the usage.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return nil, errHelp
		}
		if err != nil {
			return nil, usageError("`"+fs.Name()+" --help`", "%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// errHelp ends a command after its usage was printed on request.
var errHelp = exitStatus(exitOK)

// sessionCommand parses the arguments of a command that takes one session id
// and connects: the start of cancel, compact, events, resume and show. The
// caller closes c.
func (g *globals) sessionCommand(ctx context.Context, fs *flag.FlagSet, args []string) (id string, c *conn, err error) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", nil, err
	}
	if id, err = oneID(fs, pos); err != nil {
		return "", nil, err
	}
	if c, err = g.connect(ctx); err != nil {
		return "", nil, err
	}
	return id, c, nil
}

// oneID is the single session id a command takes.
func oneID(fs *flag.FlagSet, pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usageError("`"+fs.Name()+" ID`; `tahctl list` shows the sessions", "no session id given")
	case 1:
		return pos[0], checkID(pos[0])
	}
	return "", usageError("`"+fs.Name()+" --help`", "%s takes one session id, got %d arguments", fs.Name(), len(pos))
}
