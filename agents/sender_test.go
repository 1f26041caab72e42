package agents_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// signer is a caller holding its credential's seed: it signs its requests
// (an Agent-Sender header, the protocol's §13).
type signer struct {
	nc      *nats.Conn
	kp      nkeys.KeyPair
	account string
	user    string
}

// issueSigner issues a client credential named name through the node's
// credentials API (so that its registry names the key) and connects with it.
func issueSigner(t *testing.T, c *tahtest.Cluster, name string) *signer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := client.Connect(ctx, client.Options{URL: c.Node(0).Bus().ClientURL(), CredsFile: localnode.AdminCredsPath(c.Config(0).DataDir)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	creds, cred, err := admin.IssueCreds(ctx, name, wire.RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	kp, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.Node(0).Bus().ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(wire.CredentialInbox(name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	account := uc.IssuerAccount
	if account == "" {
		account = uc.Issuer
	}
	return &signer{nc: nc, kp: kp, account: account, user: cred.PublicKey}
}

// msg is subj with data, signed by s (header is nil: not signed).
func (s *signer) msg(t *testing.T, subj, reply string, data []byte, header func(wire.AgentSender) string) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Reply, m.Data = reply, data
	if header != nil {
		as, err := wire.SignAgentSender(s.kp, s.account, "test caller", subj, data, time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		m.Header.Set(wire.HeaderAgentSender, header(as))
	}
	return m
}

// request sends m and reads its response stream.
func (s *signer) request(t *testing.T, m *nats.Msg) []msg {
	t.Helper()
	sub, err := s.nc.SubscribeSync(m.Reply)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	return readStream(t, sub)
}

func signed(as wire.AgentSender) string { return as.Header() }

// startedBy is the by of the last turn.started of session sid.
func startedBy(t *testing.T, c *tahtest.Cluster, sid string) string {
	t.Helper()
	evs, err := c.Log(sid)
	if err != nil {
		t.Fatal(err)
	}
	by := "(no turn.started)"
	for _, ev := range evs {
		if ev.Type == event.TurnStarted {
			var d struct {
				By string `json:"by"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			by = d.By
		}
	}
	return by
}

// TestSignedCallerIsRecorded: a prompt signed with the caller's seed
// (§13.6) records the caller's credential's name as who ran the turn, and
// a signed answer to a query as who approved; an unsigned prompt is served
// and records no caller; a malformed header is a 400, a signature that
// does not verify (another payload, a replay) a 401, and nothing runs.
func TestSignedCallerIsRecorded(t *testing.T) {
	c := oneWith(t, mock.Scripted(mock.CallTool("write_file", `{"path":"out.txt","content":"hi"}`).OnPrompt("write it"), mock.Say("Done.").Always()),
		func(cfg *config.Config) { cfg.Tools.Write = true }, nil)
	alice := issueSigner(t, c, "alice")
	ctrl := wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController)

	ms := alice.request(t, alice.msg(t, ctrl, alice.nc.NewRespInbox(), []byte("hello"), signed))
	sid := sessionOf(t, ms)
	if text(ms) != "Done." {
		t.Fatalf("signed prompt: %+v", ms)
	}
	if by := startedBy(t, c, sid); by != "alice" {
		t.Fatalf("turn.started by %q, want alice", by)
	}

	// Refused before anything is stored: the session has one turn still.
	for what, tc := range map[string]struct {
		header func(wire.AgentSender) string
		data   []byte
		status string
	}{
		"another payload": {signed, []byte("hello again"), "401"},
		"the string v":    {func(wire.AgentSender) string { return `{"v":"1","account":"x","user":"y"}` }, nil, "400"},
		"not JSON":        {func(wire.AgentSender) string { return `{` }, nil, "400"},
		"a forged key": {func(as wire.AgentSender) string {
			other, _ := nkeys.CreateUser()
			as.User, _ = other.PublicKey()
			return as.Header()
		}, nil, "401"},
	} {
		env, _ := json.Marshal(map[string]string{"prompt": "hello", "session": sid})
		m := alice.msg(t, ctrl, alice.nc.NewRespInbox(), env, tc.header)
		if tc.data != nil {
			m.Data = tc.data
		}
		ms := alice.request(t, m)
		if len(ms) != 2 || ms[0].status != tc.status || !ms[1].end {
			t.Errorf("%s: %+v, want %s and the end", what, ms, tc.status)
		}
	}
	// A replay of a signed prompt, byte for byte.
	env, _ := json.Marshal(map[string]string{"prompt": "hello", "session": sid})
	m := alice.msg(t, ctrl, alice.nc.NewRespInbox(), env, signed)
	if ms := alice.request(t, m); text(ms) != "Done." {
		t.Fatalf("signed continuation: %+v", ms)
	}
	m.Reply = alice.nc.NewRespInbox()
	if ms := alice.request(t, m); len(ms) != 2 || ms[0].status != "401" || !strings.Contains(ms[0].body, "nonce") {
		t.Fatalf("a replay: %+v", ms)
	}

	// Unsigned: served, and no caller is named.
	env, _ = json.Marshal(map[string]string{"prompt": "hello", "session": sid})
	if ms := alice.request(t, alice.msg(t, ctrl, alice.nc.NewRespInbox(), env, nil)); text(ms) != "Done." {
		t.Fatalf("unsigned prompt: %+v", ms)
	}
	if by := startedBy(t, c, sid); by != "" {
		t.Fatalf("unsigned prompt: turn.started by %q", by)
	}

	// A signed answer to a query names who approved.
	env, _ = json.Marshal(map[string]string{"prompt": "write it", "session": sid})
	sub, err := alice.nc.SubscribeSync(alice.nc.NewRespInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.nc.PublishMsg(alice.msg(t, ctrl, sub.Subject, env, signed)); err != nil {
		t.Fatal(err)
	}
	var q wire.Query
	for q.ReplySubject == "" {
		m, err := sub.NextMsg(60 * time.Second)
		if err != nil {
			t.Fatalf("no query: %v", err)
		}
		var ch struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Data, &ch) == nil && ch.Type == wire.ChunkQuery {
			if err := json.Unmarshal(ch.Data, &q); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := alice.nc.PublishMsg(alice.msg(t, q.ReplySubject, "", []byte("yes"), signed)); err != nil {
		t.Fatal(err)
	}
	if rest := readStream(t, sub); text(rest) != "Done." {
		t.Fatalf("after the signed answer: %+v", rest)
	}
	evs, err := c.Log(sid)
	if err != nil {
		t.Fatal(err)
	}
	approved := ""
	for _, ev := range evs {
		if ev.Type == event.ToolApproved {
			d, _ := event.DecodeAs[event.ToolApprovedData](ev)
			approved = d.By
		}
	}
	if approved != "alice" {
		t.Fatalf("tool.approved by %q, want alice", approved)
	}
}

// TestSignedSendersRequired: with agents.min_sender_trust "signed", the
// prompt endpoints declare it (§13.9) and an unsigned prompt gets 401; a
// signed one runs.
func TestSignedSendersRequired(t *testing.T) {
	c := oneWith(t, mock.Scripted(mock.Say("Done.").Always()), func(cfg *config.Config) { cfg.Agents.MinSenderTrust = wire.AgentSenderTrustSigned }, func(o *node.Options) {})
	alice := issueSigner(t, c, "alice")
	ctrl := wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController)
	info, err := alice.nc.Request("$SRV.INFO."+wire.AgentsService, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info.Data), `"min_sender_trust":"signed"`) {
		t.Fatalf("the prompt endpoint does not declare it: %s", info.Data)
	}
	if ms := alice.request(t, alice.msg(t, ctrl, alice.nc.NewRespInbox(), []byte("hello"), nil)); len(ms) != 2 || ms[0].status != "401" {
		t.Fatalf("unsigned: %+v", ms)
	}
	if ms := alice.request(t, alice.msg(t, ctrl, alice.nc.NewRespInbox(), []byte("hello"), signed)); text(ms) != "Done." {
		t.Fatalf("signed: %+v", ms)
	}
}
