package natstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs n JetStream servers in this process, joined by routes on
// 127.0.0.1, each storing in its own directory: the servers-only cluster, for
// tests of replicated streams without TAH nodes (package bus's). Kill and
// Stop both shut a server down at once.
func Start(tb TB, n int) *Cluster {
	tb.Helper()
	return StartWith(tb, n, nil)
}

// StartWith is Start with each server's options changed by edit (when not
// nil): users of the global account, for instance, as a cluster of the
// user-and-password era had.
func StartWith(tb TB, n int, edit func(*server.Options)) *Cluster {
	tb.Helper()
	l := NewLayout(tb, "", n)
	members := make([]Member, n)
	for i, s := range l.Slots {
		m := &serverMember{opts: server.Options{
			ServerName: s.Name,
			Host:       "127.0.0.1",
			Port:       s.ClientPort,
			JetStream:  true,
			StoreDir:   s.Dir,
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: l.Name, Host: "127.0.0.1", Port: s.RoutePort},
			Routes:     server.RoutesFromStr(strings.Join(s.Routes, ",")),
		}}
		if edit != nil {
			edit(&m.opts)
		}
		members[i] = m
	}
	return New(tb, l, members)
}

// serverMember is a NATS server alone.
type serverMember struct {
	opts server.Options

	mu  sync.Mutex
	srv *server.Server
}

func (m *serverMember) Start(ctx context.Context) error {
	if m.Running() {
		return errors.New("it runs already")
	}
	o := m.opts // the server keeps and changes its options
	srv, err := server.NewServer(&o)
	if err != nil {
		return err
	}
	srv.Start()
	wait := startWithin
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		return fmt.Errorf("not accepting connections within %v", wait)
	}
	m.mu.Lock()
	m.srv = srv
	m.mu.Unlock()
	return nil
}

func (m *serverMember) Kill() error {
	m.mu.Lock()
	srv := m.srv
	m.srv = nil
	m.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	return nil
}

func (m *serverMember) Stop(context.Context) error { return m.Kill() }
func (m *serverMember) Close(context.Context)      { _ = m.Kill() }
func (m *serverMember) Running() bool              { return m.Server() != nil }

func (m *serverMember) Server() *server.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv
}
