package main

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/tools/remote"
)

// cmdWaitTool: waittool NAME... waits until a tool service of each NAME is
// discoverable on the node's NATS (of $WORK/.tah), as the node discovers it:
// a remote.Registry, whose wait is driven by discovery, never by a delay.
func cmdWaitTool(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waittool NAME...")
	}
	dir := dataDir(ts, nil)
	info, err := localnode.ReadNodeInfo(dir)
	ts.Check(err)
	nc, err := nats.Connect(info.URL, nats.UserCredentials(localnode.NodeCredsPath(dir)))
	ts.Check(err)
	defer nc.Close()
	reg, err := remote.Open(nc, remote.Config{Logger: slog.New(slog.DiscardHandler)})
	ts.Check(err)
	defer func() { _ = reg.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), pollDeadline)
	defer cancel()
	for _, name := range args {
		if err := reg.WaitFor(ctx, name); err != nil {
			ts.Fatalf("no tool service of %s within %v: %v", name, pollDeadline, err)
		}
	}
}
