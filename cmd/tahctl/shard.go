package main

import (
	"context"
	"fmt"

	"github.com/tah-dev/tah/wire"
)

const shardHelp = `Prints where session ID's events are in the log: its shard, the shard's stream
and the subject of its records (tah.evt.<shard>.<ID>), so that a client that
reads the log itself (the nats CLI, nats.js) follows the session without
computing FNV-1a(ID) mod N by hand. The node tells the log's shard count
(tah.api.status's log_shards); --shards N computes without a node. To
follow the session's events live with the nats CLI, the command it prints:
  nats sub tah.evt.<shard>.<ID> --stream TAH_EVT_<shard> --all
(with --server, --creds and --inbox-prefix _INBOX_<name>); to read them
without the shard, tah.api.events ({"session": ID, "from_seq": N}).`

// runShard is `tahctl shard ID`.
func runShard(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("shard", "ID [--shards N]", shardHelp)
	shards := fs.Int("shards", 0, "the log's shard count `N` (default: the node's, from tah.api.status)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	sid, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	n := *shards
	if n < 0 {
		return usageError("`tahctl shard ID`, or --shards N with N of 1 or more", "--shards %d: a log has at least one shard", n)
	}
	if n == 0 {
		c, err := g.connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		st, err := c.Status(ctx)
		if err != nil {
			return c.failed(wire.EndpointStatus, err)
		}
		if n = st.LogShards; n <= 0 {
			return errorf(exitFailed, "give the log's shard count with --shards N", "the node did not say how many shards its log has")
		}
	}
	k := wire.Shard(sid, n)
	r := struct {
		Session string `json:"session"`
		Shard   int    `json:"shard"`
		Shards  int    `json:"shards"`
		Stream  string `json:"stream"`
		Subject string `json:"subject"`
	}{sid, k, n, wire.EventShardStream(k), wire.ShardSubject(k, sid)}
	if g.json {
		return printJSON(g.stdout, r)
	}
	fmt.Fprintf(g.stdout, "%s is in shard %d of %d: stream %s, subject %s\n", sid, k, n, r.Stream, r.Subject)
	fmt.Fprintf(g.stdout, "follow it: nats sub %s --stream %s --all\n", r.Subject, r.Stream)
	return nil
}
