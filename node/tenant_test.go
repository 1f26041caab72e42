package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// issueTenant writes a credential of tenant (role client or observer) named
// name, issued through the credentials API as tahctl creds add --tenant
// does, and returns its path.
func (h *hostile) issueTenant(tenant string, role wire.Role, name string) string {
	h.t.Helper()
	admin := h.client(h.issue(wire.RoleAdmin, "root-"+name))
	if _, err := admin.AddTenant(h.ctx, tenant); err != nil && !errors.Is(err, client.ErrConflict) {
		h.t.Fatal(err)
	}
	creds, c, err := admin.IssueTenantCreds(h.ctx, tenant, name, role)
	if err != nil {
		h.t.Fatal(err)
	}
	if c.Tenant != tenant || c.Role != role {
		h.t.Fatalf("issued %+v", c)
	}
	path := filepath.Join(h.t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// acmeSession issues tenant acme's client alice, and creates a session
// with it: one of acme's.
func (h *hostile) acmeSession() (*client.Client, string) {
	h.t.Helper()
	acme := h.client(h.issueTenant("acme", wire.RoleClient, "alice"))
	created, err := acme.Create(h.ctx, wire.CreateRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	if !strings.HasPrefix(created.Session, "acme.s_") {
		h.t.Fatalf("acme's credential created %q", created.Session)
	}
	return acme, created.Session
}

// TestHostileTenant: credentials of tenant beta (a client and an observer)
// try every read and write of tenant acme's session, through the tenants'
// API, inputs, deltas and refusals, the JetStream API and the all-tenant
// API; the server or the node refuses each, and acme's client works
// throughout, its sessions confined to acme.
func TestHostileTenant(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	acme, sid := h.acmeSession()
	h.run(acme, sid)

	// Through the node: beta's client asks the tenants' API for acme's
	// session, and acme's client for the default tenant's.
	bob := h.client(h.issueTenant("beta", wire.RoleClient, "bob"))
	for _, c := range []struct {
		who string
		cl  *client.Client
		sid string
	}{{"beta's client", bob, sid}, {"acme's client", acme, h.sid}} {
		if _, err := c.cl.Get(h.ctx, c.sid); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s gets %s: %v", c.who, c.sid, err)
		}
		if _, err := c.cl.Events(h.ctx, wire.EventsRequest{Session: c.sid}); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s reads %s's events: %v", c.who, c.sid, err)
		}
		if _, err := c.cl.Fork(h.ctx, wire.ForkRequest{Session: c.sid}); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s forks %s: %v", c.who, c.sid, err)
		}
		if _, err := c.cl.Cancel(h.ctx, c.sid, ""); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s cancels %s: %v", c.who, c.sid, err)
		}
	}
	if _, err := bob.Create(h.ctx, wire.CreateRequest{Tenant: "acme"}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("beta's client creates a session of acme: %v", err)
	}
	// A field in another case, which encoding/json would take for the one
	// checked.
	for _, body := range []string{`{"session":"beta.s_1","Session":"` + sid + `"}`, `{"SESSION":"` + sid + `"}`} {
		m, err := bob.Conn().Request(wire.TenantAPISubject("beta", "bob", wire.EndpointGet), []byte(body), 5*time.Second)
		if err != nil || m.Header.Get("Nats-Service-Error-Code") != "400" {
			t.Errorf("beta's client gets %s: %v %v %s", body, err, m.Header, m.Data)
		}
	}
	if _, err := bob.Create(h.ctx, wire.CreateRequest{Session: "acme.mine"}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("beta's client creates acme.mine: %v", err)
	}
	page, err := bob.List(h.ctx, wire.ListRequest{Tenant: "acme"})
	if err != nil || len(page.Sessions) != 0 {
		t.Errorf("beta's client lists %d sessions (%v), want none of acme's", len(page.Sessions), err)
	}
	if page, err := acme.List(h.ctx, wire.ListRequest{}); err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != sid {
		t.Errorf("acme's client lists %+v (%v), want its session only", page.Sessions, err)
	}

	// Every endpoint of a tenant's API, through the Go client and raw:
	// beta's client at acme's session and at the default tenant's, acme's
	// at the default tenant's. Each is refused, and nothing changes.
	h.everyTenantEndpoint(acme, sid, bob)

	// Through the server: beta's credentials publish and subscribe where
	// acme's are, and reach for the JetStream API and the all-tenant API.
	for _, who := range []struct{ creds, name string }{
		{h.issueTenant("beta", wire.RoleClient, "carol"), "carol"},
		{h.issueTenant("beta", wire.RoleObserver, "olga"), "olga"},
	} {
		a := h.attacker(who.creds, who.name)
		before := h.snapshot()
		for what, subj := range map[string]string{
			"acme's API as itself":           wire.TenantAPISubject("acme", who.name, wire.EndpointGet),
			"acme's API as acme's alice":     wire.TenantAPISubject("acme", "alice", wire.EndpointGet),
			"its tenant's API as alice":      wire.TenantAPISubject("beta", "alice", wire.EndpointGet),
			"the all-tenant API":             wire.APISubject(wire.EndpointList),
			"an input to acme's session":     wire.InputSubject(sid, who.name),
			"an input as alice":              wire.InputSubject(sid, "alice"),
			"an input to a default session":  wire.InputSubject(h.sid, ""),
			"a named input to a default one": wire.InputSubject(h.sid, who.name),
			"an input partition":             wire.PartitionSubject(0, sid, who.name),
			"the JetStream API":              "$JS.API.INFO",
			"a consumer of acme's records":   "$JS.API.CONSUMER.CREATE." + wire.EventShardStream(h.n.bus.ShardOf(sid)) + ".x." + wire.ShardSubject(h.n.bus.ShardOf(sid), sid),
			"a direct get of the log":        "$JS.API.DIRECT.GET." + wire.EventShardStream(h.n.bus.ShardOf(sid)),
			"a pull of a consumer it learns": "$JS.API.CONSUMER.MSG.NEXT." + wire.EventShardStream(0) + ".x",
			"the credentials' API":           wire.CredsAPIPrefix + "ls",
			"an answer to a query":           wire.AnswerSubject(h.sid, "call_1"),
			"a prompt to an agent":           wire.AgentsPrefix + wire.AgentVerbPrompt + ".tah.tah.new",
			"a tool's endpoint":              wire.ToolPrefix + "read_file",
			"a bucket":                       "$KV." + wire.CheckpointBucket + "." + sid,
			"the live feed":                  wire.LiveSubject(sid),
		} {
			_ = a.nc.Publish(subj, []byte(`{"session":"`+sid+`"}`))
			h.refused(a, who.name+": "+what)
		}
		for what, subj := range map[string]string{
			"acme's deltas":         wire.DeltaSubject(sid),
			"every tenant's deltas": wire.TenantDeltaSubjects,
			"acme's refusals":       wire.ErrorSubject(sid),
			"acme's live feed":      wire.LiveSubject(sid),
			"every live feed":       wire.LiveSubjects,
			"acme's inputs":         "tah.sess.acme.>",
			"the log":               "tah.evt.>",
			"alice's inbox":         wire.CredentialInbox("alice") + ".>",
			"acme's API requests":   wire.TenantAPIPrefix + "acme.>",
			"the all-tenant API":    wire.APISubject("*"),
			"a tool's calls":        wire.ToolPrefix + ">",
			"agents' prompts":       wire.AgentsPrefix + ">",
			"services' discovery":   "$SRV.>",
			"the JetStream API":     "$JS.>",
			"the buckets":           "$KV.>",
			"the object store":      "$O.>",
			"everything":            ">",
		} {
			if _, err := a.nc.Subscribe(subj, func(*nats.Msg) {}); err != nil {
				t.Fatal(err)
			}
			h.refused(a, who.name+": "+what)
		}
		h.unchanged(before, wire.InputStream, wire.TenantInputStream, wire.EventShardStream(h.n.bus.ShardOf(sid)))
	}

	// acme's observer reads and cannot write.
	olive := h.client(h.issueTenant("acme", wire.RoleObserver, "olive"))
	if s, err := olive.Get(h.ctx, sid); err != nil || s.ID != sid {
		t.Fatalf("acme's observer gets %s: %v", sid, err)
	}
	if _, err := olive.Create(h.ctx, wire.CreateRequest{}); err == nil {
		t.Fatal("acme's observer created a session")
	}
	// And acme's client still works.
	h.run(acme, sid)
}

// TestTenantFollows: a tenant's client, which has no JetStream API, follows
// its session's turn on the live feed the log republishes, and reads what
// came before the feed through its API: a Follower from the session's
// start gets every record once, in order, then the next turn's as they
// come. The default tenant's records are not republished.
func TestTenantFollows(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	acme, sid := h.acmeSession()
	// Every record republished, seen by a connection of the node's own.
	var mu sync.Mutex
	var fed []string
	feed, err := h.n.bus.Conn().Subscribe(wire.LiveSubjects, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		fed = append(fed, m.Subject)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = feed.Unsubscribe() }()

	turn, err := acme.Run(h.ctx, sid, wire.Input{Text: "hello"}, client.WithEvents(), client.WithDeltas())
	if err != nil {
		t.Fatal(err)
	}
	deltas := make(chan int)
	go func() {
		n := 0
		for range turn.Deltas() {
			n++
		}
		deltas <- n
	}()
	var types []event.Type
	for ev := range turn.Events() {
		types = append(types, ev.Type)
	}
	if n := <-deltas; n == 0 {
		t.Error("no delta")
	}
	out, err := turn.Outcome(h.ctx)
	turn.Close()
	if err != nil || out.Status != "completed" {
		t.Fatalf("the turn: %+v %v", out, err)
	}
	if len(types) == 0 || types[len(types)-1] != event.AgentFinished {
		t.Fatalf("the turn's events: %v", types)
	}

	// A Follower from the start: the API's records, then the feed's.
	f, err := acme.Follow(h.ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seqs []uint64
	next := func() event.Event {
		t.Helper()
		select {
		case ev, ok := <-f.Events():
			if !ok {
				t.Fatal("the Follower stopped")
			}
			if len(seqs) > 0 && ev.Seq < seqs[len(seqs)-1] {
				t.Fatalf("seq %d after %d", ev.Seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, ev.Seq)
			return ev
		case <-h.ctx.Done():
			t.Fatal(h.ctx.Err())
		}
		return event.Event{}
	}
	for ev := next(); ev.Type != event.AgentFinished; ev = next() {
	}
	h.run(acme, sid)
	for ev := next(); ev.Type != event.AgentFinished; ev = next() {
	}
	all, err := acme.Events(h.ctx, wire.EventsRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Events) != len(seqs) {
		t.Fatalf("the Follower delivered %d events, the log has %d", len(seqs), len(all.Events))
	}

	h.run(h.client(h.issue(wire.RoleClient, "dora")), h.sid) // a default tenant's turn
	mu.Lock()
	defer mu.Unlock()
	for _, subj := range fed {
		if subj != wire.LiveSubject(sid) {
			t.Errorf("republished on %s", subj)
		}
	}
	if len(fed) == 0 {
		t.Error("nothing republished")
	}
}

// TestTenantLifecycle: an admin adds a tenant (once), issues its
// credentials (not before), lists it with its credentials and sessions
// counted, and removes it: its credentials are refused at once, its
// sessions stay.
func TestTenantLifecycle(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	admin := h.client(h.issue(wire.RoleAdmin, "root"))
	if _, _, err := admin.IssueTenantCreds(h.ctx, "acme", "alice", wire.RoleClient); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a credential of a tenant not added: %v", err)
	}
	added, err := admin.AddTenant(h.ctx, "acme")
	if err != nil || added.Name != "acme" || added.Added.IsZero() {
		t.Fatalf("add: %+v %v", added, err)
	}
	if _, err := admin.AddTenant(h.ctx, "acme"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("added twice: %v", err)
	}
	alice := h.issueTenant("acme", wire.RoleClient, "alice")
	acme := h.client(alice)
	created, err := acme.Create(h.ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := admin.Tenants(h.ctx)
	if err != nil || len(tenants) != 1 || tenants[0].Name != "acme" || tenants[0].Credentials != 1 {
		t.Fatalf("ls: %+v %v", tenants, err)
	}
	// The read model counts the session once it has folded it.
	for tenants[0].Sessions == nil || *tenants[0].Sessions != 1 {
		select {
		case <-h.ctx.Done():
			t.Fatalf("ls never counted acme's session: %+v", tenants)
		case <-time.After(10 * time.Millisecond):
		}
		if tenants, err = admin.Tenants(h.ctx); err != nil || len(tenants) != 1 {
			t.Fatalf("ls: %+v %v", tenants, err)
		}
	}
	if creds, err := admin.ListCreds(h.ctx); err != nil || slices.ContainsFunc(creds, func(c wire.Credential) bool { return c.Name == "" }) {
		t.Fatalf("the registry's tenants listed as credentials: %+v %v", creds, err)
	}

	removed, err := admin.RemoveTenant(h.ctx, "acme")
	if err != nil || removed.Tenant.Name != "acme" || len(removed.Revoked) != 1 || removed.Revoked[0].Name != "alice" {
		t.Fatalf("rm: %+v %v", removed, err)
	}
	if _, err := client.Connect(h.ctx, client.Options{URL: h.n.bus.ClientURL(), CredsFile: alice}); !errors.Is(err, client.ErrAuth) {
		t.Fatalf("a removed tenant's credential connects: %v", err)
	}
	if s, err := admin.Get(h.ctx, created.Session); err != nil || s.ID != created.Session {
		t.Fatalf("the removed tenant's session: %+v %v", s, err)
	}
	if tenants, err := admin.Tenants(h.ctx); err != nil || len(tenants) != 0 {
		t.Fatalf("ls after rm: %+v %v", tenants, err)
	}
	if _, err := admin.RemoveTenant(h.ctx, "acme"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("removed twice: %v", err)
	}
}

// TestTenantQuotas: a tenant's quotas (docs/tenancy.md), set by an admin
// and reached by its credential: a create, a fork or a replay's live
// session over its sessions are refused with 429, the quota's figures in
// the reply; a turn over its tokens per day fails before its LLM call with
// quota_exceeded, its input kept; raised, the tenant works on, and nothing
// stored was lost. Another tenant is not affected.
func TestTenantQuotas(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	admin := h.client(h.issue(wire.RoleAdmin, "root"))
	acme, sid := h.acmeSession()
	h.run(acme, sid)
	beta := h.client(h.issueTenant("beta", wire.RoleClient, "bob"))

	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "nobody", MaxSessions: ptr(int64(1))}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the limits of a tenant not added: %v", err)
	}
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme"}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("no limit given: %v", err)
	}
	tn, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", MaxSessions: ptr(int64(1))})
	if err != nil || tn.Limits.MaxSessions == nil || *tn.Limits.MaxSessions != 1 || tn.Usage == nil || tn.Usage.Sessions != 1 || tn.Usage.TokensDay == 0 {
		t.Fatalf("set: %+v %v", tn, err)
	}
	if _, err := acme.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", MaxSessions: ptr(int64(-1))}); err == nil {
		t.Fatal("a tenant's client raised its own quota")
	}

	over := func(what string, err error, quota string) {
		t.Helper()
		var ae *client.APIError
		if !errors.Is(err, client.ErrQuotaExceeded) || !errors.As(err, &ae) || ae.Quota == nil || ae.Quota.Quota != quota || ae.Quota.Tenant != "acme" {
			t.Fatalf("%s over the quota: %v (%+v)", what, err, ae)
		}
		if !strings.Contains(err.Error(), "tahctl tenant set acme") {
			t.Errorf("%s: the error says not what to do: %v", what, err)
		}
	}
	_, err = acme.Create(h.ctx, wire.CreateRequest{})
	over("a create", err, event.QuotaSessions)
	_, err = acme.Fork(h.ctx, wire.ForkRequest{Session: sid})
	over("a fork", err, event.QuotaSessions)
	if _, err := beta.Create(h.ctx, wire.CreateRequest{}); err != nil {
		t.Fatalf("another tenant's create: %v", err)
	}

	// A day's tokens used up: the next turn stops before its LLM call.
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", TokensPerDay: ptr(tn.Usage.TokensDay)}); err != nil {
		t.Fatal(err)
	}
	turn, err := acme.Run(h.ctx, sid, wire.Input{Text: "once more"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := turn.Outcome(h.ctx)
	turn.Close()
	if err != nil || out.Code != event.CodeQuotaExceeded || out.Quota == nil || out.Quota.Quota != event.QuotaTokensPerDay ||
		out.Quota.Resets == nil || out.Steps != 0 {
		t.Fatalf("the turn over the quota: %+v %v", out, err)
	}
	evs, err := acme.Events(h.ctx, wire.EventsRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	var types []event.Type
	for _, ev := range evs.Events {
		types = append(types, ev.Type)
	}
	turns := 0
	for _, ty := range types {
		if ty == event.TurnStarted {
			turns++
		}
	}
	if n := len(types); n < 2 || types[n-1] != event.AgentFailed || !slices.Contains(types, event.AgentFinished) || turns != 2 {
		t.Fatalf("the log: %v: want the first turn finished and the second started and failed", types)
	}

	// No input a second: a run is refused, saying so, and never stored; a
	// cancel is not counted.
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", TokensPerDay: ptr(int64(-1)), InputsPerSec: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	turn, err = acme.Run(h.ctx, sid, wire.Input{Text: "too fast"})
	if err != nil {
		t.Fatal(err)
	}
	out, err = turn.Outcome(h.ctx)
	turn.Close()
	var ce *client.CommandError
	if !errors.Is(err, client.ErrQuotaExceeded) || !errors.As(err, &ce) || ce.Outcome.Quota == nil || ce.Outcome.Quota.Quota != event.QuotaInputsPerSecond ||
		!strings.Contains(ce.Message, "--inputs-per-second") {
		t.Fatalf("an input over the rate: %+v %v", out, err)
	}
	if _, err := acme.Cancel(h.ctx, sid, "nothing runs"); err != nil {
		t.Fatalf("a cancel over the rate: %v", err)
	}
	if after, err := acme.Events(h.ctx, wire.EventsRequest{Session: sid}); err != nil || len(after.Events) != len(evs.Events) {
		t.Fatalf("the refused input reached the log: %d events, were %d (%v)", len(after.Events), len(evs.Events), err)
	}

	// Its storage used up: the records of its turns are counted; a create
	// is refused, and a turn stops before its LLM call.
	tn, err = admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", MaxSessions: ptr(int64(-1)), InputsPerSec: ptr(int64(-1))})
	if err != nil || tn.Usage.StorageBytes == 0 {
		t.Fatalf("the storage of acme's sessions was not counted: %+v %v", tn.Usage, err)
	}
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", MaxStorage: ptr(tn.Usage.StorageBytes)}); err != nil {
		t.Fatal(err)
	}
	_, err = acme.Create(h.ctx, wire.CreateRequest{})
	over("a create over the storage", err, event.QuotaStorage)
	turn, err = acme.Run(h.ctx, sid, wire.Input{Text: "more to keep"})
	if err != nil {
		t.Fatal(err)
	}
	out, err = turn.Outcome(h.ctx)
	turn.Close()
	if err != nil || out.Code != event.CodeQuotaExceeded || out.Quota == nil || out.Quota.Quota != event.QuotaStorage || out.Quota.Resets != nil {
		t.Fatalf("a turn over the storage: %+v %v", out, err)
	}

	// No running turn allowed: a turn waits, started, until it is
	// cancelled (or a slot frees).
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", MaxStorage: ptr(int64(-1)), MaxTurns: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	turn, err = acme.Run(h.ctx, sid, wire.Input{Text: "wait for a slot"})
	if err != nil {
		t.Fatal(err)
	}
	for started := false; !started; {
		evs, err := acme.Events(h.ctx, wire.EventsRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		last := evs.Events[len(evs.Events)-1]
		started = last.Type == event.TurnStarted
		if !started {
			select {
			case <-h.ctx.Done():
				t.Fatalf("the turn never started: %s last", last.Type)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if _, err := acme.Cancel(h.ctx, sid, "no slot"); err != nil {
		t.Fatal(err)
	}
	out, err = turn.Outcome(h.ctx)
	turn.Close()
	if out.Status != "cancelled" {
		t.Fatalf("a turn waiting for a slot, cancelled: %+v %v", out, err)
	}
	// Who ran the turn and who cancelled it, as the server authenticated
	// them (the inputs' subjects), whatever their bodies say.
	logged, err := acme.Events(h.ctx, wire.EventsRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	var startedBy, cancelledBy string
	for _, ev := range logged.Events {
		switch ev.Type {
		case event.TurnStarted:
			d, _ := event.DecodeAs[event.TurnStartedData](ev)
			startedBy = d.By
		case event.AgentCancelled:
			d, _ := event.DecodeAs[event.AgentCancelledData](ev)
			cancelledBy = d.By
		}
	}
	if startedBy != "alice" || cancelledBy != "alice" {
		t.Fatalf("the last turn was started by %q and cancelled by %q: want alice and alice", startedBy, cancelledBy)
	}

	// Raised: the tenant works on, from the same session.
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", MaxTurns: ptr(int64(-1))}); err != nil {
		t.Fatal(err)
	}
	h.run(acme, sid)
	if _, err := acme.Create(h.ctx, wire.CreateRequest{}); err != nil {
		t.Fatalf("a create once raised: %v", err)
	}
	tenants, err := admin.Tenants(h.ctx)
	if err != nil || len(tenants) != 2 || tenants[0].Usage == nil || tenants[0].Usage.Sessions != 2 || !tenants[0].Limits.IsZero() {
		t.Fatalf("ls: %+v %v", tenants, err)
	}
}

func ptr[T any](v T) *T { return &v }

// errConfined is what a tenantCall of an endpoint that names no session
// (list, tools) returns when the node answered it for the caller's own
// tenant only: the call was confined, as a refused one is.
var errConfined = errors.New("answered for the caller's own tenant only")

// tenantCall is one way a credential of a tenant reaches an endpoint of
// its tenant's API about session sid (another tenant's) through the Go
// client: it returns the client's error.
type tenantCall struct {
	what string
	call func(ctx context.Context, c *client.Client, sid string) error
}

// tenantCalls are the tenantCalls of every endpoint of wire.TenantEndpoints
// (TestHostileTenant fails for an endpoint that has none), stepOf giving a
// step of an LLM call of a session. An endpoint whose command is also an
// input (compact, resume, cancel, approve, deny, budget) is called both
// ways: through the API, and as the Client's method, which publishes the
// input itself.
func tenantCalls(stepOf func(sid string) string) map[string][]tenantCall {
	command := func(cmd wire.Command, req wire.CommandRequest) tenantCall {
		return tenantCall{"the API's " + string(cmd), func(ctx context.Context, c *client.Client, sid string) error {
			req.Session = sid
			_, err := c.Command(ctx, cmd, req)
			return err
		}}
	}
	tokens := int64(1)
	change := wire.BudgetChange{Turn: &wire.LimitsChange{Tokens: &tokens}, Session: &wire.LimitsChange{Tokens: &tokens}}
	schedule := wire.ScheduleRequest{Name: "nightly", Every: "1h", Text: "a stranger's run"}
	return map[string][]tenantCall{
		wire.EndpointCreate: {
			{"create it", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.Create(ctx, wire.CreateRequest{Session: sid})
				return err
			}},
			{"create it in its tenant", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.Create(ctx, wire.CreateRequest{Session: sid, Tenant: event.TenantOf(sid)})
				return err
			}},
		},
		wire.EndpointList: {{"list its tenant's sessions", func(ctx context.Context, c *client.Client, sid string) error {
			page, err := c.List(ctx, wire.ListRequest{Tenant: event.TenantOf(sid), Limit: 1000})
			if err != nil {
				return err
			}
			for _, s := range page.Sessions {
				if event.TenantOf(s.ID) != c.Tenant() {
					return fmt.Errorf("listed %s, a session of another tenant", s.ID)
				}
			}
			return errConfined
		}}},
		wire.EndpointTools: {{"list its tenant's tools", func(ctx context.Context, c *client.Client, sid string) error {
			theirs, err := c.ToolsOf(ctx, event.TenantOf(sid))
			if err != nil {
				return err
			}
			own, err := c.Tools(ctx)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(theirs, own) {
				return fmt.Errorf("the tools of tenant %q differ from its own: %+v", event.TenantOf(sid), theirs)
			}
			return errConfined
		}}},
		wire.EndpointGet: {{"get it", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Get(ctx, sid)
			return err
		}}},
		wire.EndpointFork: {
			{"fork it", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.Fork(ctx, wire.ForkRequest{Session: sid})
				return err
			}},
			{"fork it at a step", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.Fork(ctx, wire.ForkRequest{Session: sid, AtStep: stepOf(sid)})
				return err
			}},
		},
		wire.EndpointMessages: {{"read its messages", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Messages(ctx, sid)
			return err
		}}},
		wire.EndpointSteps: {{"read its steps", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Steps(ctx, wire.StepsRequest{Session: sid})
			return err
		}}},
		wire.EndpointEvents: {
			{"read its events", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.Events(ctx, wire.EventsRequest{Session: sid})
				return err
			}},
			{"follow it", func(ctx context.Context, c *client.Client, sid string) error {
				f, err := c.Follow(ctx, sid, 0)
				if err != nil {
					return err
				}
				f.Close()
				return errors.New("a Follower of it started")
			}},
		},
		wire.EndpointRequest: {{"read a step's request", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.StepRequest(ctx, sid, stepOf(sid))
			return err
		}}},
		wire.EndpointCompact: {command(wire.CommandCompact, wire.CommandRequest{}), {"compact it", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Compact(ctx, sid)
			return err
		}}},
		wire.EndpointResume: {command(wire.CommandResume, wire.CommandRequest{}), {"resume it", func(ctx context.Context, c *client.Client, sid string) error {
			t, err := c.Resume(ctx, sid)
			return turnErr(ctx, t, err)
		}}},
		wire.EndpointCancel: {command(wire.CommandCancel, wire.CommandRequest{Reason: "hostile"}), {"cancel it", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Cancel(ctx, sid, "hostile")
			return err
		}}},
		wire.EndpointApprove: {command(wire.CommandApprove, wire.CommandRequest{Decision: &wire.Decision{}}), {"approve its calls", func(ctx context.Context, c *client.Client, sid string) error {
			t, err := c.Approve(ctx, sid, wire.Decision{})
			return turnErr(ctx, t, err)
		}}},
		wire.EndpointDeny: {command(wire.CommandDeny, wire.CommandRequest{Decision: &wire.Decision{Note: "hostile"}}), {"deny its calls", func(ctx context.Context, c *client.Client, sid string) error {
			t, err := c.Deny(ctx, sid, wire.Decision{Note: "hostile"})
			return turnErr(ctx, t, err)
		}}},
		wire.EndpointBudget: {command(wire.CommandBudget, wire.CommandRequest{Budget: &change}), {"set its budget", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.SetBudget(ctx, sid, change, "hostile")
			return err
		}}},
		wire.EndpointArtifacts: {{"list its artifacts", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Artifacts(ctx, sid)
			return err
		}}},
		wire.EndpointArtifact: {
			{"read a piece of an artifact", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.ArtifactPiece(ctx, wire.ArtifactRequest{Session: sid, Artifact: "notes"})
				return err
			}},
			{"fetch an artifact", func(ctx context.Context, c *client.Client, sid string) error {
				_, err := c.FetchArtifact(ctx, sid, "notes", io.Discard)
				return err
			}},
		},
		wire.EndpointSchedule: {{"schedule a run of it", func(ctx context.Context, c *client.Client, sid string) error {
			req := schedule
			req.Session = sid
			_, err := c.Schedule(ctx, req)
			return err
		}}},
		wire.EndpointSchedules: {{"list its schedules", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Schedules(ctx, sid)
			return err
		}}},
		wire.EndpointUnschedule: {{"remove its schedule", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Unschedule(ctx, sid, schedule.Name)
			return err
		}}},
		wire.EndpointReplay: {{"replay it", func(ctx context.Context, c *client.Client, sid string) error {
			_, err := c.Replay(ctx, wire.ReplayRequest{Session: sid})
			return err
		}}},
		wire.EndpointReplayLive: {{"replay it live", func(ctx context.Context, c *client.Client, sid string) error {
			prompt := "another prompt, for a divergence"
			_, err := c.ReplayLive(ctx, wire.ReplayLiveRequest{Session: sid, SystemPrompt: &prompt})
			return err
		}}},
	}
}

// turnErr is the error of a turn that a call started: its start's, else
// its outcome's.
func turnErr(ctx context.Context, t *client.Turn, err error) error {
	if err != nil {
		return err
	}
	defer t.Close()
	_, err = t.Outcome(ctx)
	return err
}

// tenantRefused reports whether err is a refusal of a tenant's call (or
// the answer of a call confined to the caller's tenant).
func tenantRefused(err error) bool {
	return errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrBadRequest) || errors.Is(err, client.ErrPermissionDenied) ||
		errors.Is(err, errConfined)
}

// everyTenantEndpoint: tenant beta's client bob calls every endpoint of
// its tenant's API about acme's session sid and the default tenant's
// h.sid, and acme's client about h.sid, through the Go client (tenantCalls)
// and as raw requests; each is refused, or answered for the caller's own
// tenant only. Nothing changes: not the log, the inputs or the schedules,
// nor what acme's and the default tenant's clients read; both still run
// turns.
func (h *hostile) everyTenantEndpoint(acme *client.Client, sid string, bob *client.Client) {
	t := h.t
	t.Helper()
	dave := h.client(h.issue(wire.RoleClient, "dave")) // the default tenant's
	// What the targets hold: an LLM step each, and a schedule of acme's.
	steps := map[string]string{}
	for _, target := range []struct {
		c   *client.Client
		sid string
	}{{acme, sid}, {dave, h.sid}} {
		st, err := target.c.Steps(h.ctx, wire.StepsRequest{Session: target.sid})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Steps {
			if s.Type == projection.StepLLM {
				steps[target.sid] = s.ID
			}
		}
		if steps[target.sid] == "" {
			t.Fatalf("%s has no LLM step: %+v", target.sid, st.Steps)
		}
	}
	if _, err := acme.Schedule(h.ctx, wire.ScheduleRequest{Session: sid, Name: "nightly", Every: "24h", Text: "acme's run"}); err != nil {
		t.Fatal(err)
	}
	own, err := bob.Create(h.ctx, wire.CreateRequest{}) // beta's, for the reply_to below
	if err != nil {
		t.Fatal(err)
	}

	type seen struct {
		summary wire.SessionSummary
		events  int
		sched   []wire.Schedule
	}
	look := func(c *client.Client, sid string) seen {
		t.Helper()
		s, err := c.Get(h.ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := c.Events(h.ctx, wire.EventsRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		sched, err := c.Schedules(h.ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return seen{s, len(evs.Events), sched}
	}
	acmeBefore, daveBefore := look(acme, sid), look(dave, h.sid)
	shards := []string{wire.EventShardStream(h.n.bus.ShardOf(sid)), wire.EventShardStream(h.n.bus.ShardOf(h.sid))}
	before := h.snapshot()

	calls := tenantCalls(func(s string) string { return steps[s] })
	for _, ep := range wire.TenantEndpoints() {
		if len(calls[ep]) == 0 {
			t.Errorf("endpoint %s of a tenant's API: no hostile call of it (add one to tenantCalls)", ep)
		}
	}
	for ep := range calls {
		if !slices.Contains(wire.TenantEndpoints(), ep) {
			t.Errorf("tenantCalls calls %s, not an endpoint of a tenant's API", ep)
		}
	}
	// The endpoints that name no session; every other must refuse a
	// request that names another tenant's.
	noSession := map[string]bool{wire.EndpointCreate: true, wire.EndpointList: true, wire.EndpointTools: true}
	attacks := []struct {
		who    string
		c      *client.Client
		tenant string
		cred   string
		sid    string
	}{
		{"beta's client at acme's session", bob, "beta", "bob", sid},
		{"beta's client at the default tenant's session", bob, "beta", "bob", h.sid},
		{"acme's client at the default tenant's session", acme, "acme", "alice", h.sid},
	}
	for _, a := range attacks {
		for _, ep := range wire.TenantEndpoints() {
			for _, call := range calls[ep] {
				ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second) // a deadline against a hang
				err := call.call(ctx, a.c, a.sid)
				cancel()
				if !tenantRefused(err) {
					t.Errorf("HOLE? %s: %s (%s): not refused: %v", a.who, call.what, ep, err)
				}
			}
			// Raw, as the client would not send them.
			bodies := []string{
				fmt.Sprintf(`{"session":%q}`, a.sid),
				fmt.Sprintf(`{"session":%q,"tenant":%q}`, a.sid, event.TenantOf(a.sid)),
				fmt.Sprintf(`{"session":%q,"name":"nightly","every":"1h","text":"x","artifact":"notes","step_id":%q,"calls":["call_1"],"budget":{"turn":{"tokens":1}}}`, a.sid, steps[a.sid]),
				fmt.Sprintf(`{"Session":%q}`, a.sid),
				fmt.Sprintf(`{"session":%q,"Session":%q}`, own.Session, a.sid),
				fmt.Sprintf(`{"session":%q,"sessioN":%q}`, own.Session, a.sid),
				fmt.Sprintf(`{"session":%q,"\u017fession":%q}`, own.Session, a.sid), // ſ, which folds to s
			}
			if noSession[ep] {
				bodies = append(bodies, fmt.Sprintf(`{"tenant":%q}`, otherTenant(a.tenant)))
			}
			for _, body := range bodies {
				m, err := h.request(a.c.Conn(), wire.TenantAPISubject(a.tenant, a.cred, ep), body)
				if err != nil {
					t.Errorf("%s: %s %s: %v", a.who, ep, body, err)
					continue
				}
				code := m.Header.Get(wire.HeaderServiceErrorCode)
				switch {
				case strings.HasPrefix(code, "4") && len(code) == 3:
				case code == "" && noSession[ep] && ep != wire.EndpointCreate && !strings.Contains(string(m.Data), a.sid) &&
					!strings.Contains(string(m.Data), `"`+otherTenant(a.tenant)+`.`):
					// answered for the caller's tenant only
				default:
					t.Errorf("HOLE? %s: raw %s %s: answered %q %q: %.300s", a.who, ep, body, code, m.Header.Get(wire.HeaderServiceError), m.Data)
				}
			}
		}
	}
	// A command's outcome sent to another tenant's credential: refused
	// even for the caller's own session.
	for _, ep := range []string{wire.EndpointCompact, wire.EndpointResume, wire.EndpointCancel, wire.EndpointApprove, wire.EndpointDeny, wire.EndpointBudget} {
		body := fmt.Sprintf(`{"session":%q,"reply_to":%q}`, own.Session, wire.CredentialInbox("alice")+".x")
		m, err := h.request(bob.Conn(), wire.TenantAPISubject("beta", "bob", ep), body)
		if err != nil {
			t.Errorf("beta's client: %s %s: %v", ep, body, err)
		} else if code := m.Header.Get(wire.HeaderServiceErrorCode); code != wire.APIErrBadRequest {
			t.Errorf("HOLE? beta's client: %s %s: answered %q %q: %.300s", ep, body, code, m.Header.Get(wire.HeaderServiceError), m.Data)
		}
	}

	h.unchanged(before, append(shards, wire.InputStream, wire.TenantInputStream, wire.ScheduleStream)...)
	if after := look(acme, sid); !reflect.DeepEqual(after, acmeBefore) {
		t.Errorf("acme's session changed: %+v, was %+v", after, acmeBefore)
	}
	if after := look(dave, h.sid); !reflect.DeepEqual(after, daveBefore) {
		t.Errorf("the default tenant's session changed: %+v, was %+v", after, daveBefore)
	}
	h.run(acme, sid)
	h.run(dave, h.sid)
}

// request sends body on subj through nc and returns the reply, waiting
// for it until a deadline against a hang.
func (h *hostile) request(nc *nats.Conn, subj, body string) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	return nc.RequestWithContext(ctx, subj, []byte(body))
}

// otherTenant is the tenant of TestHostileTenant that is not tenant.
func otherTenant(tenant string) string {
	if tenant == "acme" {
		return "beta"
	}
	return "acme"
}
