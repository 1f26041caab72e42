package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/internal/upgrade"
)

const upgradeHelp = `Copies the sessions of a cluster of the user-and-password era (its nodes'
data directories hold a credentials.json) into this new operator-mode
cluster: every TAH stream, KV bucket and object store, the event log at the
same sequences. Run it on the machine of a node of the new cluster, which has
served nothing yet, with the old cluster running the previous version and no
client connected to either. It connects to the new cluster with the node's
own credential (the data directory's node.creds, or --creds).
docs/security.md, "Upgrading a data directory of the user-and-password era",
gives the whole procedure.`

// runUpgrade is `tahctl upgrade-cluster --from URL --from-credentials FILE`.
func runUpgrade(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("upgrade-cluster", "--from URL --from-credentials FILE", upgradeHelp)
	from := fs.String("from", "", "NATS URL of the old cluster (comma-separated for several servers)")
	oldCreds := fs.String("from-credentials", "", "the old cluster's credentials.json (in an old node's data directory)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *from == "" || *oldCreds == "" {
		return usageError("`tahctl upgrade-cluster --from nats://old-host:4222 --from-credentials old/.tah/credentials.json`",
			"upgrade-cluster needs --from and --from-credentials, and no other argument")
	}
	if err := g.useNodeCredential(); err != nil {
		return err
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	to, err := jetstream.New(c.Conn())
	if err != nil {
		return err
	}
	old, err := upgrade.ConnectLegacy(ctx, *from, *oldCreds)
	if err != nil {
		return errorf(exitUnavailable, "start the old cluster with the previous version of tah-node, and give its URL and an old node's credentials.json", "%v", err)
	}
	defer old.Close()
	fromJS, err := jetstream.New(old)
	if err != nil {
		return err
	}
	streams, err := upgrade.Copy(ctx, fromJS, to, func(s upgrade.Stream) {
		if !g.json {
			fmt.Fprintln(g.stdout, s)
		}
	})
	if err != nil {
		return upgradeError(err)
	}
	if g.json {
		return printJSON(g.stdout, map[string]any{"from": *from, "to": c.ep.url, "streams": streams})
	}
	total := 0
	for _, s := range streams {
		total += s.Messages
	}
	_, err = fmt.Fprintf(g.stdout, "copied %d message(s) from %s into %s: `tahctl list` shows the sessions; stop the old cluster when they are all there\n",
		total, *from, c.ep.url)
	return err
}

// useNodeCredential makes the data directory's node.creds the credential
// of the connection, unless one was given: only the node's role may write
// the log and the buckets.
func (g *globals) useNodeCredential() error {
	if g.creds != "" || g.getenv("TAH_NATS_CREDS") != "" {
		return nil
	}
	ep := g.resolve()
	if ep.dataDir == "" || !fileExists(localnode.NodeCredsPath(ep.dataDir)) {
		return usageError("run it in the directory of a new node (its data directory holds node.creds), or give --data-dir or --creds",
			"upgrade-cluster writes the log with the node's own credential, and found none")
	}
	g.creds = localnode.NodeCredsPath(ep.dataDir)
	return nil
}

// upgradeError says what to do about a copy that stopped.
func upgradeError(err error) error {
	switch {
	case errors.Is(err, upgrade.ErrNotEmpty):
		return errorf(exitFailed, "start the new cluster on new data directories and run upgrade-cluster before any client connects; nothing was copied", "%v", err)
	case errors.Is(err, upgrade.ErrSequence):
		return errorf(exitFailed, "stop every client and node that writes into the new cluster, start it afresh and copy again", "%v", err)
	case errors.Is(err, upgrade.ErrShards):
		return errorf(exitFailed, "", "%v", err)
	}
	return errorf(exitFailed, "check both clusters (`tahctl status`), then start the new one afresh and copy again", "%v", err)
}
