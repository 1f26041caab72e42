package node

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// hostile is a node with its API, and credentials issued for the roles, as
// the hostile-client suite attacks it.
type hostile struct {
	t   *testing.T
	n   *Node
	dir string
	ctx context.Context
	sid string // a session with one completed turn
}

func newHostile(t *testing.T) *hostile {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	h := &hostile{t: t, n: startWithAPI(ctx, t, dir), dir: dir, ctx: ctx}
	c := h.client(h.issue(wire.RoleClient, "alice"))
	s, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h.sid = s.Session
	h.run(c, h.sid)
	return h
}

// startWithAPI starts a node with its embedded server and API on the data
// directory dir, closed at the end of the test.
func startWithAPI(ctx context.Context, t *testing.T, dir string) *Node {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	n, err := Start(ctx, Options{Bus: cfg, Provider: mock.Scripted(mock.Say("fine").Always()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// issue writes a credential of role named name and returns its path.
func (h *hostile) issue(role wire.Role, name string, tools ...string) string {
	h.t.Helper()
	trust, err := auth.Load(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	u, err := auth.RoleUser(role, name, tools)
	if err != nil {
		h.t.Fatal(err)
	}
	issued, err := trust.Issue(u)
	if err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(h.t.TempDir(), name+".creds")
	if err := os.WriteFile(path, issued.Creds, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// client is the Go client with creds.
func (h *hostile) client(creds string) *client.Client {
	h.t.Helper()
	c, err := client.Connect(h.ctx, client.Options{URL: h.n.bus.ClientURL(), CredsFile: creds, RequestTimeout: 5 * time.Second})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(c.Close)
	return c
}

// run runs one turn of sid through c and checks that it completed.
func (h *hostile) run(c *client.Client, sid string) {
	h.t.Helper()
	turn, err := c.Run(h.ctx, sid, wire.Input{Text: "hello"})
	if err != nil {
		h.t.Fatal(err)
	}
	defer turn.Close()
	if out, err := turn.Outcome(h.ctx); err != nil || out.Status != "completed" {
		h.t.Fatalf("the turn: %+v %v", out, err)
	}
}

// attacker is a raw NATS connection with a credential, whose permission
// violations (reported asynchronously by the server) arrive on violations.
type attacker struct {
	nc         *nats.Conn
	violations chan error
}

func (h *hostile) attacker(creds, name string) *attacker {
	h.t.Helper()
	a := &attacker{violations: make(chan error, 64)}
	nc, err := nats.Connect(h.n.bus.ClientURL(), nats.UserCredentials(creds), nats.CustomInboxPrefix(wire.CredentialInbox(name)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { a.violations <- err }))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(nc.Close)
	a.nc = nc
	return a
}

// refused waits for the permissions violation of what.
func (h *hostile) refused(a *attacker, what string) {
	h.t.Helper()
	if err := a.nc.Flush(); err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
	select {
	case err := <-a.violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			h.t.Fatalf("%s: want a permissions violation, got %v", what, err)
		}
	case <-time.After(30 * time.Second): // a deadline, not a measure: the server reports at once
		h.t.Fatalf("%s: no permissions violation", what)
	}
}

// snapshot records the last sequence of every stream of the node, to show
// that the attacks changed nothing.
func (h *hostile) snapshot() map[string]uint64 {
	h.t.Helper()
	js := h.n.bus.JetStream()
	out := map[string]uint64{}
	for name := range js.StreamNames(h.ctx).Name() {
		s, err := js.Stream(h.ctx, name)
		if err != nil {
			h.t.Fatal(err)
		}
		out[name] = s.CachedInfo().State.LastSeq
	}
	return out
}

func (h *hostile) unchanged(before map[string]uint64, streams ...string) {
	h.t.Helper()
	after := h.snapshot()
	for _, s := range streams {
		if after[s] != before[s] {
			h.t.Errorf("stream %s: last sequence %d, was %d", s, after[s], before[s])
		}
	}
	h.gone(before, after)
}

// onlyOwnPresence checks that since before every message of the nodes'
// bucket is the node's own entry: the node rewrites it now and then (every
// NodeTTL/5, and when its partitions change), so its last sequence moves
// without any attack, the more often the longer the test runs.
func (h *hostile) onlyOwnPresence(before map[string]uint64) {
	h.t.Helper()
	name := "KV_" + wire.NodeBucket
	s, err := h.n.bus.JetStream().Stream(h.ctx, name)
	if err != nil {
		h.t.Fatal(err)
	}
	own := "$KV." + wire.NodeBucket + "." + h.n.ID()
	info, err := s.Info(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	for seq := before[name] + 1; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(h.ctx, seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			continue // rewritten since: the bucket keeps the last entry of a key
		case err != nil:
			h.t.Fatal(err)
		case m.Subject != own:
			h.t.Errorf("stream %s: message %d on %s, which is not the node's own entry %s", name, seq, m.Subject, own)
		}
	}
}

// gone reports the streams of before that after lacks.
func (h *hostile) gone(before, after map[string]uint64) {
	h.t.Helper()
	for s := range before {
		if _, ok := after[s]; !ok {
			h.t.Errorf("stream %s is gone", s)
		}
	}
}

// TestHostileClient: with a client credential, every attack at the top of
// issue [trust] fails with a permissions error and changes nothing; the
// same credential runs turns.
func TestHostileClient(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	creds := h.issue(wire.RoleClient, "mallory")
	a := h.attacker(creds, "mallory")
	shard := wire.EventShardStream(h.n.bus.ShardOf(h.sid))
	before := h.snapshot()
	for _, stream := range []string{shard, wire.InputStream, wire.ScheduleStream, "KV_" + wire.CheckpointBucket, "OBJ_" + wire.ArtifactBucket,
		wire.UsageStream, wire.UsageDayStream, wire.UsageSecStream, wire.TurnStream} {
		for _, op := range []string{"PURGE", "DELETE"} {
			_ = a.nc.Publish("$JS.API.STREAM."+op+"."+stream, nil)
			h.refused(a, op+" "+stream)
		}
	}
	for what, subj := range map[string]string{
		"a forged record in the log":      wire.ShardSubject(h.n.bus.ShardOf(h.sid), h.sid),
		"node presence":                   wire.NodeSubject("mallory"),
		"node presence in its bucket":     "$KV." + wire.NodeBucket + ".mallory",
		"a forged checkpoint":             "$KV." + wire.CheckpointBucket + "." + h.sid,
		"a tenant's sessions uncounted":   wire.UsageSessionsSubject("acme"),
		"a tenant's tokens uncounted":     wire.UsageDaySubject("acme", time.Now(), wire.UsageDayTokens),
		"a tenant's inputs uncounted":     wire.UsageSecSubject("acme", time.Now()),
		"a tenant's running turn faked":   wire.TurnSubject("acme", 0),
		"a forged tool result":            "$KV." + wire.ToolResultBucket + ".read_file." + h.sid + ".call_1",
		"a pull from the node's consumer": "$JS.API.CONSUMER.MSG.NEXT." + wire.InputStream + "." + wire.PartitionConsumer(0),
		"a delete of the node's consumer": "$JS.API.CONSUMER.DELETE." + wire.InputStream + "." + wire.PartitionConsumer(0),
		// The read model's tail of the log: a consumer of the shard, of a
		// name a client may learn (its consumer info, an advisory).
		"a delete of a consumer of the log": "$JS.API.CONSUMER.DELETE." + shard + ".tail",
		"an ephemeral consumer on TAH_IN":   "$JS.API.CONSUMER.CREATE." + wire.InputStream,
		"a durable consumer":                "$JS.API.CONSUMER.DURABLE.CREATE." + shard + ".mine",
		"an input partition":                wire.PartitionSubject(0, h.sid, ""),
		"an answer as a tool":               wire.ToolSubject("read_file"),
		"an API endpoint of credentials":    wire.CredsAPIPrefix + "add",
		"the system account":                "$SYS.REQ.SERVER.PING",
		"a read of the checkpoints":         "$JS.API.DIRECT.GET.KV_" + wire.CheckpointBucket,
		"a schedule of its own":             wire.ScheduleSubject(h.sid, "mine"),
		"a fired schedule":                  wire.ScheduleFireSubject(h.sid),
		"a read of the schedules":           "$JS.API.STREAM.MSG.GET." + wire.ScheduleStream,
		"a read of the tenants' usage":      "$JS.API.STREAM.MSG.GET." + wire.UsageStream,
		// A tenant's session: its inputs under another credential's name,
		// straight into a partition, a forged record.
		// Inputs name their sender, this credential's name: none, another
		// credential's, or a caller the agent gateway attested are refused.
		"an input that names no sender":          wire.InputSubject(h.sid, ""),
		"a command that names no sender":         wire.APISubject(wire.EndpointApprove),
		"a command as another":                   wire.NamedAPISubject(wire.EndpointCancel, "alice"),
		"an input as another":                    wire.InputSubject(h.sid, "alice"),
		"an input as an attested caller":         wire.InputSubject(h.sid, wire.AttestedSenderPrefix+"mallory"),
		"a tenant's input as an attested caller": wire.InputSubject("acme.s_1", wire.AttestedSenderPrefix+"mallory"),
		"a tenant's input as another":            wire.InputSubject("acme.s_1", "alice"),
		"a tenant's input as the node":           wire.InputSubject("acme.s_1", wire.NodeSender),
		"a tenant's input partition":             wire.PartitionSubject(0, "acme.s_1", "mallory"),
		"a forged record of a tenant's session":  wire.ShardSubject(h.n.bus.ShardOf("acme.s_1"), "acme.s_1"),
		"a purge of the tenants' inputs":         "$JS.API.STREAM.PURGE." + wire.TenantInputStream,
	} {
		_ = a.nc.Publish(subj, []byte(`{}`))
		h.refused(a, what)
	}
	for what, subj := range map[string]string{
		"serving a tool":           wire.ToolSubject("read_file"),
		"serving the API":          wire.APISubject(wire.EndpointCreate),
		"another client's inbox":   "_INBOX.>",
		"another credential's box": wire.CredentialInbox("alice") + ".>",
		"the stored inputs":        "tah.in.>",
	} {
		if _, err := a.nc.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		h.refused(a, what)
	}
	h.unchanged(before, shard, wire.InputStream, wire.TenantInputStream, "KV_"+wire.CheckpointBucket, "KV_"+wire.ToolResultBucket)
	h.onlyOwnPresence(before)
	// What a client is for still works with the same credential: a session
	// of the default tenant's and one of a tenant's, whose inputs go under
	// its own name.
	c := h.client(creds)
	for _, tenant := range []string{"", "acme"} {
		s, err := c.Create(h.ctx, wire.CreateRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		h.run(c, s.Session)
	}
	if evs, err := c.Events(h.ctx, wire.EventsRequest{Session: h.sid}); err != nil || len(evs.Events) == 0 {
		t.Fatalf("reading another session's events: %d %v", len(evs.Events), err)
	}
}

// TestHostileObserver: an observer reads and cannot write.
func TestHostileObserver(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	creds := h.issue(wire.RoleObserver, "olive")
	c := h.client(creds)
	if _, err := c.Get(h.ctx, h.sid); err != nil {
		t.Fatalf("an observer reads: %v", err)
	}
	if l, err := c.List(h.ctx, wire.ListRequest{}); err != nil || len(l.Sessions) == 0 {
		t.Fatalf("an observer lists: %+v %v", l, err)
	}
	if r, err := c.Replay(h.ctx, wire.ReplayRequest{Session: h.sid}); err != nil || !r.Identical {
		t.Fatalf("an observer replays (it writes nothing): %+v %v", r, err)
	}
	a := h.attacker(creds, "olive")
	before := h.snapshot()
	for what, subj := range map[string]string{
		"a create":      wire.APISubject(wire.EndpointCreate),
		"a fork":        wire.APISubject(wire.EndpointFork),
		"a live replay": wire.APISubject(wire.EndpointReplayLive),
		"a cancel":      wire.APISubject(wire.EndpointCancel),
		"an input":      wire.InputSubject(h.sid, ""),
		"a named input": wire.InputSubject(h.sid, "olive"),
		"a compact":     wire.APISubject(wire.EndpointCompact),
	} {
		_ = a.nc.Publish(subj, []byte(`{}`))
		h.refused(a, what)
	}
	h.unchanged(before, wire.InputStream, wire.EventShardStream(h.n.bus.ShardOf(h.sid)))
}

// TestHostileTool: a tool credential serves and stores the results of the
// tools it was issued, and no other.
func TestHostileTool(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	creds := h.issue(wire.RoleTool, "toolie", "shout")
	a := h.attacker(creds, "toolie")
	if _, err := a.nc.Subscribe(wire.ToolSubject("read_file"), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	h.refused(a, "serving a tool it was not issued")
	_ = a.nc.Publish("$KV."+wire.ToolResultBucket+"."+wire.ResultKey("read_file", h.sid, "call_1"), []byte(`{}`))
	h.refused(a, "storing another tool's result")
	_ = a.nc.Publish("$JS.API.DIRECT.GET."+wire.ToolResultStream+".$KV."+wire.ToolResultBucket+"."+wire.ResultKey("read_file", h.sid, "call_1"), nil)
	h.refused(a, "reading another tool's result")

	// Its own tool: served, and its result stored under its name.
	if _, err := a.nc.Subscribe(wire.ToolSubject("shout"), func(m *nats.Msg) { _ = m.Respond([]byte("HI")) }); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(h.ctx, wire.ToolResultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(h.ctx, wire.ResultKey("shout", h.sid, "call_1"), []byte(`{}`)); err != nil {
		t.Fatalf("storing its own result: %v", err)
	}
	if _, err := kv.Get(h.ctx, wire.ResultKey("shout", h.sid, "call_1")); err != nil {
		t.Fatalf("reading its own result: %v", err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	reply, err := h.n.bus.Conn().Request(wire.ToolSubject("shout"), nil, 10*time.Second)
	if err != nil || string(reply.Data) != "HI" {
		t.Fatalf("the node's call of the tool: %v", err)
	}
}

// TestRevokedCredentialIsRefused: a revoked credential is refused, and its
// open connection closed, by the running server, without a restart.
func TestRevokedCredentialIsRefused(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	creds := h.issue(wire.RoleClient, "eve")
	c := h.client(creds)
	if _, err := c.Get(h.ctx, h.sid); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(creds)
	kp, err := jwt.ParseDecoratedUserNKey(b)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	trust, err := auth.Load(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trust.Revoke(h.ctx, []string{pub}); err != nil {
		t.Fatal(err)
	}
	if err := trust.Push(h.ctx, h.n.bus.ClientURL()); err != nil {
		t.Fatal(err)
	}
	_, err = client.Connect(h.ctx, client.Options{URL: h.n.bus.ClientURL(), CredsFile: creds})
	if !errors.Is(err, client.ErrAuth) {
		t.Fatalf("a revoked credential connects: %v", err)
	}
	// Another credential is untouched.
	if _, err := h.client(h.issue(wire.RoleClient, "frank")).Get(h.ctx, h.sid); err != nil {
		t.Fatal(err)
	}
}
