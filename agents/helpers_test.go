package agents_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// one starts a one-node cluster whose model is provider, with the agent
// gateway as tah-node runs it, and edit applied to its configuration.
func one(t *testing.T, provider llm.Provider, edit func(*config.Config)) *tahtest.Cluster {
	t.Helper()
	return oneWith(t, provider, edit, nil)
}

// oneWith is one with editNode applied to the node's options too.
func oneWith(t *testing.T, provider llm.Provider, edit func(*config.Config), editNode func(*node.Options)) *tahtest.Cluster {
	t.Helper()
	return tahtest.Start(t, tahtest.Options{Nodes: 1,
		EditConfig: func(_ int, cfg *config.Config) {
			cfg.Agents.Heartbeat = config.Duration(time.Second)
			if edit != nil {
				edit(cfg)
			}
		},
		EditNode: func(_ int, o *node.Options) {
			if provider != nil {
				o.Provider = provider
			}
			if editNode != nil {
				editNode(o)
			}
		}})
}

// caller connects to member i of c with a credential of role named name, as
// a caller of the protocol would (its inbox prefix is the credential's).
func caller(t *testing.T, c *tahtest.Cluster, i int, role wire.Role, name string) *nats.Conn {
	t.Helper()
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := trust.EnsureCreds(path, role, name); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.Node(i).Bus().ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(wire.CredentialInbox(name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// msg is a message of a response stream.
type msg struct {
	chunk  wire.Chunk
	status string // the error code header, if any
	body   string
	end    bool
}

// stream sends req to subj and reads the response stream until its
// terminator (or the inactivity timeout of 60 s, a failure).
func stream(t *testing.T, nc *nats.Conn, subj string, req []byte) []msg {
	t.Helper()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, req); err != nil {
		t.Fatal(err)
	}
	return readStream(t, sub)
}

func readStream(t *testing.T, sub *nats.Subscription) []msg {
	t.Helper()
	var out []msg
	for {
		m, err := sub.NextMsg(60 * time.Second)
		if err != nil {
			t.Fatalf("stream: %v after %d messages: %+v", err, len(out), out)
		}
		if len(m.Data) == 0 && len(m.Header) == 0 {
			return append(out, msg{end: true})
		}
		if code := m.Header.Get(wire.HeaderServiceErrorCode); code != "" {
			out = append(out, msg{status: code, body: string(m.Data)})
			continue
		}
		var ch wire.Chunk
		if err := json.Unmarshal(m.Data, &ch); err != nil {
			t.Fatalf("a chunk that is not JSON: %q", m.Data)
		}
		out = append(out, msg{chunk: ch})
	}
}

// text is the concatenated response text of a stream, since its last
// "restarted" status.
func text(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		switch {
		case m.chunk.Type == wire.ChunkStatus && m.chunk.Data == wire.StatusRestarted:
			b.Reset()
		case m.chunk.Type == wire.ChunkResponse:
			s, _ := m.chunk.Data.(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// statuses are the status tokens of a stream.
func statuses(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.chunk.Type == wire.ChunkStatus {
			s, _ := m.chunk.Data.(string)
			out = append(out, s)
		}
	}
	return out
}

// sessionOf is the session a controller's stream named.
func sessionOf(t *testing.T, ms []msg) string {
	t.Helper()
	for _, s := range statuses(ms) {
		if sid, ok := strings.CutPrefix(s, wire.StatusSessionPrefix); ok {
			return sid
		}
	}
	t.Fatalf("no session: status in %+v", ms)
	return ""
}
