package natstest

import (
	"context"

	"github.com/nats-io/nats-server/v2/server"
)

// Member is one member of a Cluster, at its Slot of the layout: a NATS
// server alone (this package), or a TAH node with its server, in this process
// or in a process of its own (package tahtest). Its methods are called from
// one goroutine at a time.
type Member interface {
	// Start starts the member, or starts it again on the same ports and
	// directory, and returns once it serves clients.
	Start(ctx context.Context) error
	// Kill ends the member at once, as kill -9 would: its connections drop,
	// it says goodbye to nobody.
	Kill() error
	// Stop ends the member gracefully.
	Stop(ctx context.Context) error
	// Running reports whether it runs (started, and neither killed, stopped
	// nor exited).
	Running() bool
	// Server is its NATS server while it runs in this process; nil otherwise.
	Server() *server.Server
	// Close ends what is left of the member at the end of the test, whatever
	// its state.
	Close(ctx context.Context)
}
