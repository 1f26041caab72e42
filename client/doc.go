// Package client is the Go client of TAH over NATS: it connects (with
// credentials, and reconnects by itself), calls every endpoint of the API
// (tah.api.*), publishes inputs, follows a turn from its input to its outcome
// (a Turn: the outcome, the turn's own events and token deltas, cancel) and
// reads and follows a session's log. tahctl and the module's Go API (package
// tah) are built on it; it speaks only the contract of package wire, so it
// works the same against an embedded node and a remote cluster.
//
// The smallest use:
//
//	c, err := client.Connect(ctx, client.Options{URL: "nats://127.0.0.1:4222", CredsFile: ".tah/admin.creds"})
//	if err != nil { ... }               // errors.Is(err, client.ErrNoServer), client.ErrAuth, client.ErrTLS
//	defer c.Close()
//	s, err := c.Create(ctx, wire.CreateRequest{})
//	turn, err := c.Run(ctx, s.Session, wire.Input{Text: "hello"}, client.WithDeltas())
//	defer turn.Close()
//	for d := range turn.Deltas() {
//		fmt.Print(d.Text)
//	}
//	out, err := turn.Outcome(ctx)       // out.Status: completed, failed or cancelled
//
// A node that serves TLS (a tls:// URL) is verified against the CA of its
// certificate: Options.TLSCAFile (docs/security.md, "TLS").
//
// With an admin credential it also issues, lists and revokes credentials
// (IssueCreds, ListCreds, RevokeCreds: the key pair is made here, and the
// seed never leaves the process).
//
// # One rule for temporary unavailability
//
// NATS is unavailable for a moment when a server dies: a stream elects a new
// leader, a dead node stays in the API's queue group for a while. The client
// tries again when an error says so (internal/natsx.Temporary: timeouts, no
// responders on a stream, JetStream not ready): an input is published again
// in short tries for up to 15 seconds (its id makes every try the same
// message, stored once), and an API call that only reads is tried up to three
// times within Options.RequestTimeout. A create, fork or command through the
// API is tried once: it may have been carried out. Nobody serving the API is
// not temporary: ErrNoNode.
//
// # What a Turn costs
//
// A Turn asked only for its outcome (Run without options: what the Go API's
// Session.Run does) subscribes to its reply inbox and the session's
// refusals and publishes: no request to the event stream, no consumer on the
// log. WithEvents
// and WithDeltas make it follow the session's shard of the log (its count
// read once from the log and kept) with an ordered consumer of its own,
// since telling its turn's events and deltas from another's takes the log;
// so does a connection that comes back before the outcome did.
//
// # A turn's own events
//
// A session runs one turn at a time, but a client that starts a turn while
// another runs (or while a dead node's turn waits to be finished) must not
// show the other's tail as its own. A run's events are those from the
// turn.started that records its input id; a resume's, those of the turn
// open when it was published (a resume published while a turn runs, or
// while its node resumes it after a crash, has that turn's outcome). A delta
// belongs to the turn of its LLM step. Outcomes may come twice after a
// failover: the first counts. Client.Attach takes a Turn over on another
// connection (tahctl does when the node came back at another address).
//
// # Refusals
//
// An input a node refuses gets one answer, the same on its reply subject
// and the session's error subject: an outcome of status refused
// (wire.Refusal); Outcome returns it in a *CommandError.
package client
