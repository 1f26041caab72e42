package client_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startNode starts a real node (an embedded NATS server on a free port in
// operator mode, data in t.TempDir(), the API served) that answers with p,
// stopped at the end of the test.
func startNode(t *testing.T, p llm.Provider, edit ...func(*bus.Config)) *node.Node {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	for _, e := range edit {
		e(&cfg)
	}
	n, err := node.Start(ctxT(t), node.Options{Bus: cfg, Provider: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return n
}

// connect connects a client to n with its data directory's admin
// credential, closed at the end of the test.
func connect(t *testing.T, n *node.Node) *client.Client {
	t.Helper()
	c, err := client.Connect(ctxT(t), client.Options{URL: n.Bus().ClientURL(), CredsFile: creds(n)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// gated is a model that answers "answer to <prompt>", holding the prompts
// listed in hold until release is closed (or its call is cancelled). Each
// call's prompt goes to started.
type gated struct {
	hold    map[string]bool
	release chan struct{}
	started chan string
	once    sync.Once
}

func newGated(hold ...string) *gated {
	g := &gated{hold: map[string]bool{}, release: make(chan struct{}), started: make(chan string, 16)}
	for _, h := range hold {
		g.hold[h] = true
	}
	return g
}

func (g *gated) Name() string { return "gated" }

func (g *gated) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	prompt := req.Messages[len(req.Messages)-1].Content
	g.started <- prompt
	if g.hold[prompt] {
		select {
		case <-g.release:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
	}
	return llm.Response{Content: "answer to " + prompt, FinishReason: llm.FinishStop}, nil
}

func (g *gated) open() { g.once.Do(func() { close(g.release) }) }

// waitStarted waits until the model was called with prompt.
func (g *gated) waitStarted(t *testing.T, prompt string) {
	t.Helper()
	for {
		select {
		case p := <-g.started:
			if p == prompt {
				return
			}
		case <-ctxT(t).Done():
			t.Fatalf("the model was never called with %q", prompt)
		}
	}
}

// newSession creates a session and returns its id.
func newSession(t *testing.T, c *client.Client) string {
	t.Helper()
	s, err := c.Create(ctxT(t), wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Session
}

// startTurn runs text in session sid, and closes the turn at the end of the
// test.
func startTurn(t *testing.T, c *client.Client, sid, text string, opts ...client.TurnOption) *client.Turn {
	t.Helper()
	turn, err := c.Run(ctxT(t), sid, wire.Input{Text: text}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(turn.Close)
	return turn
}

// run runs text in session sid to its outcome.
func run(t *testing.T, c *client.Client, sid, text string) wire.Outcome {
	t.Helper()
	turn := startTurn(t, c, sid, text)
	o, err := turn.Outcome(ctxT(t))
	if err != nil {
		t.Fatalf("run %q: %v", text, err)
	}
	turn.Close()
	return o
}

// creds is the admin credential of n's data directory.
func creds(n *node.Node) string { return localnode.AdminCredsPath(n.Bus().Config().DataDir) }
