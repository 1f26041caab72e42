package nodecmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/internal/testfs"
	"github.com/tah-dev/tah/wire"
)

// runningNode is tah-node run in-process on a data directory; stop sends it
// what SIGTERM does (the end of Run's context) and returns Run's error.
type runningNode struct {
	t      *testing.T
	cancel context.CancelFunc
	ran    chan error
	err    error
	done   bool
	info   localnode.NodeInfo
	c      *client.Client
	stderr *os.File
}

func runNode(t *testing.T, dataDir string) *runningNode {
	t.Helper()
	args := []string{"--data-dir", dataDir, "--tools-root", filepath.Dir(dataDir), "--nats-port", "0", "--http", "127.0.0.1:0",
		"--tools-remote=false", "--llm-mock-pace", "1ms"}
	stdout, stderr := outputFile(t, "stdout"), outputFile(t, "stderr")
	ctx, cancel := context.WithCancel(context.Background())
	n := &runningNode{t: t, cancel: cancel, ran: make(chan error, 1), stderr: stderr}
	go func() { n.ran <- Run(ctx, args, stdout, stderr) }() // owned here: ends with stop
	t.Cleanup(func() { n.stop() })
	n.info = waitNodeInfo(t, dataDir, n.ran)
	c, err := client.Connect(ctx, client.Options{URL: n.info.URL, CredsFile: localnode.AdminCredsPath(dataDir), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	return n
}

// stop ends the node as SIGTERM does, and returns how Run ended.
func (n *runningNode) stop() error {
	if n.done {
		return n.err
	}
	n.done = true
	if n.c != nil {
		n.c.Close()
	}
	n.cancel()
	select {
	case n.err = <-n.ran:
	case <-time.After(2 * StopBound): // a deadline to catch the hang, not a measure: Run keeps the bound itself
		n.err = errors.New("Run did not return")
	}
	return n.err
}

// healthz is the status code and body of the node's /healthz.
func (n *runningNode) healthz() (int, string) {
	resp, err := http.Get("http://" + n.info.HTTP + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// send sends one input to sid and waits for its outcome at most d.
func (n *runningNode) send(sid string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	turn, err := n.c.Run(ctx, sid, wire.Input{Text: "what is in this project?"})
	if err != nil {
		return err
	}
	defer turn.Close()
	_, err = turn.Outcome(ctx)
	return err
}

// poll calls f until it returns nil, for at most a minute (a deadline to
// catch a hang).
func poll(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// On a full disk tah-node says so in /healthz, and SIGTERM still stops it
// within StopBound (past it, Run would return its own error).
func TestFullDiskStopsWithinTheBound(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a small disk that fills needs a tmpfs, which needs root (uid %d): mount: %v %s", os.Geteuid(), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	n := runNode(t, filepath.Join(dir, ".tah"))
	s, err := n.c.Create(context.Background(), wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.send(s.Session, time.Minute); err != nil {
		t.Fatal(err)
	}

	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 64<<10); err == nil; {
		_, err = f.Write(buf)
	}
	f.Close()
	poll(t, func() error {
		code, body := n.healthz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "no space left on device") {
			return nil
		}
		_ = n.send(s.Session, time.Second) // writes, which fail
		return fmt.Errorf("healthz on a full disk: %d %s", code, body)
	})
	// A turn's append that cannot complete may outlast its share of the
	// stop: the node then says so (exit status 1), but it stops.
	if err := n.stop(); err != nil && (!strings.HasPrefix(err.Error(), "shutdown: ") || ExitCode(err) != ExitFailed) {
		t.Fatalf("stopped on a full disk: %v\n%s", err, readFile(t, n.stderr))
	}
}

// A read model tah-node cannot write is refused at start: exit status 1,
// the file named, and what to do.
func TestReadOnlyReadModelIsRefusedAtStart(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), ".tah")
	n := runNode(t, dataDir)
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dataDir, "data.db")
	testfs.ReadOnly(t, db)
	args := []string{"--data-dir", dataDir, "--tools-root", filepath.Dir(dataDir), "--nats-port", "0", "--http", "", "--tools-remote=false"}
	var stdout, stderr bytes.Buffer
	ran := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { ran <- Run(ctx, args, &stdout, &stderr) }() // owned here: ends by itself, or with cancel
	var err error
	select {
	case err = <-ran:
	case <-time.After(time.Minute): // a deadline to catch the start it used to make
		cancel()
		<-ran
		t.Fatalf("the node started on a read-only read model:\n%s", stdout.String())
	}
	if ExitCode(err) != ExitFailed {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	var report bytes.Buffer
	Report(&report, err)
	for _, want := range []string{db, "cannot be written", "Try: make the read model and its directory writable"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, report.String())
		}
	}
}

// A read model that stops taking writes while tah-node runs, and cannot be
// set aside either, stops it: exit status 1 with the file and what to do, so
// that a supervisor starts it again (and the start then refuses, saying the
// same, until a person fixes it).
func TestUnwritableReadModelStopsTahNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a file that takes no write while open needs chattr +i, as root")
	}
	dataDir := filepath.Join(t.TempDir(), ".tah")
	n := runNode(t, dataDir)
	s, err := n.c.Create(context.Background(), wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.send(s.Session, time.Minute); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dataDir, "data.db")
	for _, f := range []string{db, db + "-wal"} {
		if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
			t.Skipf("chattr +i %s: %v %s", f, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", f).Run() })
	}
	_ = n.send(s.Session, time.Minute) // the log goes on; the read model cannot follow
	select {
	case n.err = <-n.ran:
		n.done = true
	case <-time.After(time.Minute): // a deadline to catch the hang, not a measure
		t.Fatalf("the node goes on with a read model it cannot write:\n%s", readFile(t, n.stderr))
	}
	if ExitCode(n.err) != ExitFailed {
		t.Fatalf("exit %d: %v", ExitCode(n.err), n.err)
	}
	var report bytes.Buffer
	Report(&report, n.err)
	for _, want := range []string{"the node cannot go on", db, "chattr -i", "Try: "} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, report.String())
		}
	}
}
