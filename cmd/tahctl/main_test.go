package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/cmd/node/nodecmd"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// The end-to-end tests run real processes: tah-node and tahctl are this test
// binary, run again under those names by testscript (so a node can be killed
// with SIGKILL and started again), with real NATS, real SQLite and a data
// directory in each script's $WORK. Both print "[exit N]" on stderr as their
// last line, so that scripts check exit codes.
func TestMain(m *testing.M) {
	// Four scripts at a time, not GOMAXPROCS (two here): a script mostly
	// waits on its node, so that measured alone on two quiet cores the
	// package took 140 s instead of 231 s for about the same CPU (183 s and
	// 172 s), and it was make test's longest. Set before the flags are
	// parsed: go test's -parallel still wins.
	bustest.WaitingTestsAtOnce(scriptsAtOnce)
	testscript.Main(m, map[string]func(){
		"tahctl": func() {
			g := &globals{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv, timeout: 20 * time.Second}
			err := run(context.Background(), g, os.Args[1:])
			report(os.Stderr, err)
			code := exitCode(err)
			fmt.Fprintf(os.Stderr, "[exit %d]\n", code)
			os.Exit(code)
		},
		"tah-node": func() {
			err := nodecmd.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
			nodecmd.Report(os.Stderr, err)
			code := nodecmd.ExitCode(err)
			fmt.Fprintf(os.Stderr, "[exit %d]\n", code)
			os.Exit(code)
		},
	})
}

func TestScripts(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		// The scripts run side by side: on two loaded cores under -race,
		// all of them take about four minutes; each bounds its own waits.
		Deadline: time.Now().Add(10 * time.Minute),
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			// testscript passes on none of the caller's environment (no TAH_*
			// variable); no colours either.
			env.Setenv("NO_COLOR", "1")
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "jsdeps": // the JavaScript client's npm dependencies are installed
				_, err := os.Stat(filepath.Join(repo, "examples", "client-js", "node_modules", "nats"))
				return err == nil, nil
			case "agentjsdeps": // the JavaScript agent protocol caller's
				_, err := os.Stat(filepath.Join(repo, "examples", "agent-caller-js", "node_modules", "nats"))
				return err == nil, nil
			case "tooldeps": // the JavaScript tool service's
				_, err := os.Stat(filepath.Join(repo, "examples", "tool-service-js", "node_modules", "nats"))
				return err == nil, nil
			case "natscli": // bin/nats, the NATS CLI
				return natscliBuilt(repo)
			case "mcpdeps": // the MCP servers from npm (tools/mcp/testdata/npm)
				_, err := os.Stat(filepath.Join(repo, "tools", "mcp", "testdata", "npm", "node_modules", ".bin", "mcp-server-filesystem"))
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitnode":      cmdWaitNode,
			"sid":           cmdSID,
			"waitfor":       cmdWaitFor,
			"waittool":      cmdWaitTool,
			"nodeenv":       cmdNodeEnv,
			"strangercreds": cmdStrangerCreds,
			"httpget":       cmdHTTPGet,
			"bigfile":       cmdBigFile,
			"listen":        cmdListen,
			"freeport":      cmdFreePort,
			"tlsfiles":      cmdTLSFiles,
			"shard":         cmdShard,
			"inputs":        cmdInputs,
			"waitsub":       cmdWaitSub,
			"grab":          cmdGrab,
		},
	})
}

// natscliBuilt tells whether bin/nats is there. The Makefile builds it
// before the tests run (make test and make unit depend on bin/nats), so under
// make its absence is an error, not a reason to skip.
func natscliBuilt(repo string) (bool, error) {
	_, err := os.Stat(filepath.Join(repo, "bin", "nats"))
	if err == nil {
		return true, nil
	}
	if os.Getenv("MAKELEVEL") != "" {
		return false, fmt.Errorf("make runs the tests but bin/nats is missing (%v): make nats (a prerequisite of make test and make unit) should have built it", err)
	}
	return false, nil
}

// scriptsAtOnce is the package's default -parallel (see TestMain).
const scriptsAtOnce = 4

// pollDeadline bounds every wait of the scripts' own commands.
const pollDeadline = 60 * time.Second

// pollPause is the pause before try n+1 of a wait that runs a command
// (waitnode, waitfor): each try starts a process of the race-built test
// binary, so a wait that goes on takes longer pauses, lest the waiting
// scripts take the cores from the nodes they wait for (make test runs this
// package beside the cluster's).
func pollPause(n int) time.Duration {
	switch {
	case n < 10:
		return 100 * time.Millisecond
	case n < 30:
		return 250 * time.Millisecond
	default:
		return 500 * time.Millisecond
	}
}

// dataDir is the script's node data directory: $WORK/.tah, or the argument.
func dataDir(ts *testscript.TestScript, args []string) string {
	if len(args) > 0 {
		return ts.MkAbs(args[0])
	}
	return ts.MkAbs(".tah")
}

// waitnode [DATADIR]: waits until the node of DATADIR ($WORK/.tah) wrote its
// node.json and answers `tahctl status`.
func cmdWaitNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! waitnode")
	}
	dir := dataDir(ts, args)
	deadline := time.Now().Add(pollDeadline)
	var last error
	for try := 0; time.Now().Before(deadline); try++ {
		info, err := localnode.ReadNodeInfo(dir)
		if err == nil && syscall.Kill(info.PID, 0) == nil {
			if last = ts.Exec("tahctl", "--data-dir", dir, "status"); last == nil {
				return
			}
		} else {
			last = err
		}
		time.Sleep(pollPause(try))
	}
	ts.Fatalf("the node of %s is not ready after %v: %v", dir, pollDeadline, last)
}

var sidRE = regexp.MustCompile(`(?:\b[a-z][a-z0-9-]{0,31}\.)?s_[0-9a-z]{20}`) // a tenant's too (acme.s_…)

// sid NAME: sets $NAME to the first session id in the last command's stdout.
func cmdSID(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: sid NAME")
	}
	id := sidRE.FindString(ts.ReadFile("stdout"))
	if id == "" {
		ts.Fatalf("no session id in stdout")
	}
	ts.Setenv(args[0], id)
}

// waitfor REGEXP COMMAND ARGS...: runs the command until its stdout matches.
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: waitfor REGEXP COMMAND [ARGS...]")
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	deadline := time.Now().Add(pollDeadline)
	for try := 0; time.Now().Before(deadline); try++ {
		if ts.Exec(args[1], args[2:]...) == nil && re.MatchString(ts.ReadFile("stdout")) {
			return
		}
		time.Sleep(pollPause(try))
	}
	ts.Fatalf("%s never printed %q within %v", strings.Join(args[1:], " "), args[0], pollDeadline)
}

// nodeenv [DATADIR]: sets NATS_URL, NATS_CREDS (the path of the node's
// admin.creds) and PORT from the node's data directory (for clients in other
// languages, and to restart a node on the same port).
func cmdNodeEnv(ts *testscript.TestScript, neg bool, args []string) {
	dir := dataDir(ts, args)
	info, err := localnode.ReadNodeInfo(dir)
	ts.Check(err)
	ts.Setenv("NATS_URL", info.URL)
	ts.Setenv("NATS_CREDS", localnode.AdminCredsPath(dir))
	ts.Setenv("PORT", info.URL[strings.LastIndex(info.URL, ":")+1:])
	ts.Setenv("HTTP_ADDR", info.HTTP)
}

// tlsfiles DIR: writes a fresh CA and a certificate it signed for
// 127.0.0.1 into DIR: ca.pem, cert.pem, key.pem.
func cmdTLSFiles(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: tlsfiles DIR")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o700))
	_, err := natstest.WriteTLSFiles(dir)
	ts.Check(err)
}

// shard SID NAME: sets $NAME to the shard of the event log that holds
// session SID's events (a log of wire.DefaultShards shards, as a node
// creates it), for clients that read the log's streams themselves.
func cmdShard(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: shard SID NAME")
	}
	ts.Setenv(args[1], strconv.Itoa(wire.Shard(args[0], wire.DefaultShards)))
}

// grab NAME REGEXP: sets $NAME to REGEXP's first group in the last
// command's stdout (a shard tahctl printed, say).
func cmdGrab(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: grab NAME REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("no %q in stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// waitsub SUBJECT [DATADIR]: waits until something subscribes to SUBJECT
// (a nats sub started in the background): it publishes a request there as
// the node (node.creds) until the server no longer answers "no
// responders". The flush after each publish is a round trip, after which
// the server's no-responders status, if it sent one, has arrived: so the
// absence of that status says for sure that a subscriber was there, and that
// subscriber received exactly one message, the last probe ("waitsub probe").
func cmdWaitSub(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitsub SUBJECT [DATADIR]")
	}
	dir := dataDir(ts, args[1:])
	info, err := localnode.ReadNodeInfo(dir)
	ts.Check(err)
	nc, err := nats.Connect(info.URL, nats.UserCredentials(filepath.Join(dir, localnode.NodeCredsFile)))
	ts.Check(err)
	defer nc.Close()
	deadline := time.Now().Add(pollDeadline)
	for time.Now().Before(deadline) {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		ts.Check(err)
		ts.Check(nc.PublishRequest(args[0], inbox, []byte("waitsub probe")))
		ts.Check(nc.Flush())
		_, err = sub.NextMsg(10 * time.Millisecond)
		ts.Check(sub.Unsubscribe())
		if errors.Is(err, nats.ErrTimeout) {
			return // no status came back: a subscriber took the probe
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("nothing subscribed to %s within %v", args[0], pollDeadline)
}

// strangercreds FILE: writes to FILE an admin credential of another
// operator, which no node of the script trusts.
func cmdStrangerCreds(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: strangercreds FILE")
	}
	dir := ts.MkAbs(".stranger")
	_, err := auth.Ensure(dir)
	ts.Check(err)
	b, err := os.ReadFile(localnode.AdminCredsPath(dir))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o600))
}

// httpget PATH|URL FILE [DATADIR]: GETs PATH from the node's HTTP address
// (node.json), or the whole URL (http://…), into FILE; it fails unless the
// status is 200 (! httpget: unless it is not). A URL's server may still be
// starting (a command in the background): a refused connection is tried
// again until it listens.
func cmdHTTPGet(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 && len(args) != 3 {
		ts.Fatalf("usage: httpget PATH|URL FILE [DATADIR]")
	}
	url := args[0]
	if !strings.HasPrefix(url, "http://") {
		info, err := localnode.ReadNodeInfo(dataDir(ts, args[2:]))
		ts.Check(err)
		url = "http://" + info.HTTP + args[0]
	}
	resp, err := http.Get(url)
	deadline := time.Now().Add(pollDeadline)
	for try := 0; errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(deadline); try++ {
		time.Sleep(pollPause(try))
		resp, err = http.Get(url)
	}
	ts.Check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ts.Check(err)
	ts.Logf("%s: %s", args[0], resp.Status)
	if ok := resp.StatusCode == http.StatusOK; ok == neg {
		ts.Fatalf("GET %s: %s", args[0], resp.Status)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), body, 0o644))
}

// freeport NAME: sets $NAME to a local port free now (for a command in the
// background to listen on, whose address a script must know).
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport NAME")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := ln.Addr().(*net.TCPAddr).Port
	ts.Check(ln.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}

// bigfile NAME BYTES: writes a file of BYTES letters.
func cmdBigFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: bigfile NAME BYTES")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(strings.Repeat("a", n)), 0o644))
}

// listen NAME: holds a free local port for the rest of the script and sets
// $NAME to it (to see a node refuse a port in use).
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: listen NAME")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	ts.Defer(func() { ln.Close() })
	ts.Setenv(args[0], strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}

// inputs N [DATADIR]: waits until the node's input stream (TAH_IN) holds N
// inputs not yet acknowledged: one queued behind a turn stays there until
// its work ends.
func cmdInputs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: inputs N [DATADIR]")
	}
	want, err := strconv.ParseUint(args[0], 10, 64)
	ts.Check(err)
	dir := dataDir(ts, args[1:])
	info, err := localnode.ReadNodeInfo(dir)
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), pollDeadline)
	defer cancel()
	c, err := client.Connect(ctx, client.Options{URL: info.URL, CredsFile: localnode.AdminCredsPath(dir)})
	ts.Check(err)
	defer c.Close()
	js, err := jetstream.New(c.Conn())
	ts.Check(err)
	var have uint64
	for ctx.Err() == nil {
		if s, err := js.Stream(ctx, wire.InputStream); err == nil {
			if have = s.CachedInfo().State.Msgs; have == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("%s holds %d inputs, not %d, after %v", wire.InputStream, have, want, pollDeadline)
}
