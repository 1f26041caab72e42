package bus

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tah-dev/tah/wire"
)

// Config says how a Bus reaches NATS and how it sets up TAH's streams.
//
// With URL empty, Open embeds a NATS server (JetStream on) that stores under
// DataDir and listens on Host:Port for other processes; the Bus itself talks to
// it over an in-process connection. With URL set, Open connects to that
// external server or cluster instead and the embedded-server fields are
// ignored.
//
// Start from Default(); Validate reports what is wrong.
type Config struct {
	// URL of an external NATS server or cluster, comma-separated
	// ("nats://10.0.0.1:4222,nats://10.0.0.2:4222"). Empty embeds a server.
	URL string `json:"url,omitempty"`

	// DataDir is where the embedded server stores its streams (under
	// DataDir/nats). Required when embedding.
	DataDir string `json:"data_dir,omitempty"`
	// Host and Port the embedded server listens on for other processes.
	// Port 0 picks a free port, as tah-node's --nats-port 0 does (-1 too,
	// the NATS server's own spelling); ClientURL says which.
	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`
	// ServerName names the embedded server; it must be unique in a cluster.
	// Empty lets the server generate one.
	ServerName string `json:"server_name,omitempty"`
	// SyncInterval is how often the embedded server fsyncs its store. 0 (the
	// default) fsyncs every write before acknowledging it (SyncAlways): an
	// acknowledged event survives a power loss. A positive interval is faster
	// and may lose the writes of the last interval on a crash of the machine.
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	// MaxPayload is the embedded server's largest message in bytes, headers
	// included. It bounds a record's size (see Bus.MaxRecordSize).
	MaxPayload int32 `json:"max_payload,omitempty"`
	// Cluster joins the embedded server to others by routes (for R3).
	Cluster ClusterConfig `json:"cluster,omitzero"`
	// TLS of the embedded server's client port and routes, or of the
	// connection to an external server (see TLSConfig).
	TLS TLSConfig `json:"tls,omitzero"`

	// CredsFile is the NATS .creds file (a user JWT and its nkey seed) the Bus
	// presents to an external server. An embedded server ignores it: it runs
	// in operator mode with the trust material of DataDir (package auth,
	// generated at first start), and the Bus connects as the node's own user
	// (DataDir/node.creds).
	CredsFile string `json:"creds,omitempty"`
	// Name is the connection's name, shown by the server's monitoring (the
	// pool's connections add " append <i>", " tail" and " presence" to it).
	Name string `json:"name,omitempty"`
	// Conns is how many connections carry the appends (pool.go): shard k's
	// appends, its group commits and its sessions' deltas go on connection
	// k mod Conns, and with more than one the tails (the read model's feed)
	// and the node's presence get a connection each of their own too, while the control traffic
	// (requests, KV, input consumers, subscriptions) stays on the main one.
	// One nats.Conn serialises everything sent on it, so with a single
	// connection a busy node's sessions queue on its lock. 0 (the default)
	// is DefaultConns(): GOMAXPROCS, within 2..8; 1 is a single connection
	// for everything. More than the log's shards open no more than one a
	// shard.
	Conns int `json:"conns,omitempty"`

	// Replicas of every stream and bucket: 1, or 3 on a cluster of three or more.
	Replicas int `json:"replicas,omitempty"`
	// Partitions is the number of input partitions of TAH_IN. Changing it is
	// possible only while no input is pending.
	Partitions int `json:"partitions,omitempty"`
	// Shards is the number of shards of the event log (streams TAH_EVT_0 to
	// TAH_EVT_<Shards-1>), fixed when Open creates the log: 0 takes the
	// existing log's count, or wire.DefaultShards for a new log. A count
	// that differs from the existing log's is refused.
	Shards int `json:"shards,omitempty"`
	// NoSetup makes Open check the streams and buckets instead of creating or
	// updating them: for clients whose credentials may not manage streams.
	NoSetup bool `json:"no_setup,omitempty"`

	// ReadyTimeout bounds the wait for the server and JetStream to be ready.
	ReadyTimeout time.Duration `json:"ready_timeout,omitempty"`
	// AppendTimeout bounds the wait for one append's acknowledgement; after it
	// the append is resolved by reading the log back.
	AppendTimeout time.Duration `json:"append_timeout,omitempty"`
	// InputAckWait is how long an input may go without Ack or InProgress before
	// the server redelivers it (to the next owner).
	InputAckWait time.Duration `json:"input_ack_wait,omitempty"`
	// InputPinnedTTL is how long a partition stays pinned to a node that stopped
	// pulling; then another node takes the partition over.
	InputPinnedTTL time.Duration `json:"input_pinned_ttl,omitempty"`
	// InputMaxAckPending bounds the inputs of one partition in flight at once.
	InputMaxAckPending int `json:"input_max_ack_pending,omitempty"`
	// NodeTTL is how long a node may go without rewriting its entry in tah_nodes
	// (it does so every NodeTTL/5) before the other nodes take it for dead and
	// share its partitions out; a node that cannot write its entry for that long
	// stops its sessions (it is about to be replaced).
	NodeTTL time.Duration `json:"node_ttl,omitempty"`
	// ToolResultTTL is how long a stored remote tool call lives in
	// tah_tool_results (the tool services' protocol says 24 hours).
	ToolResultTTL time.Duration `json:"tool_result_ttl,omitempty"`

	// Logger receives the embedded server's log. Nil discards it.
	Logger *slog.Logger `json:"-"`
}

// ClusterConfig joins an embedded server to a NATS cluster by routes.
type ClusterConfig struct {
	// Name of the cluster; the same on every server. Empty: no cluster.
	Name string `json:"name,omitempty"`
	// Host and Port to listen on for routes from the other servers.
	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`
	// Routes are the other servers' route URLs ("nats-route://10.0.0.2:6222").
	Routes []string `json:"routes,omitempty"`
}

// Default returns the configuration of a single embedded node: 127.0.0.1:4222,
// data in .tah, fsync on every write, R1, 16 partitions, the log's shard count
// (wire.DefaultShards for a new log).
func Default() Config {
	return Config{
		DataDir:            ".tah",
		Host:               "127.0.0.1",
		Port:               4222,
		MaxPayload:         8 << 20,
		Name:               "tah",
		Replicas:           1,
		Partitions:         16,
		ReadyTimeout:       30 * time.Second,
		AppendTimeout:      5 * time.Second,
		InputAckWait:       8 * time.Second,
		InputPinnedTTL:     5 * time.Second,
		InputMaxAckPending: 1000,
		NodeTTL:            5 * time.Second,
		ToolResultTTL:      24 * time.Hour,
	}
}

// Embedded reports whether c embeds a server rather than connecting to one.
func (c Config) Embedded() bool { return c.URL == "" }

// Validate reports, wrapping ErrInvalidConfig, the first thing wrong with c.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("bus config: "+format+": %w", append(args, ErrInvalidConfig)...)
	}
	if c.Embedded() {
		if c.DataDir == "" {
			return bad("data_dir is empty (the embedded server needs a store directory)")
		}
		if c.Port < -1 || c.Port > 65535 {
			return bad("port %d is not -1 (random) or 0..65535", c.Port)
		}
		if c.SyncInterval < 0 {
			return bad("sync_interval %v is negative", c.SyncInterval)
		}
		if c.MaxPayload < 0 || c.MaxPayload > 64<<20 {
			return bad("max_payload %d is not within 0..64MiB", c.MaxPayload)
		}
		if c.Cluster.Name == "" && (len(c.Cluster.Routes) > 0 || c.Cluster.Port != 0) {
			return bad("cluster routes or port given without a cluster name")
		}
		if c.Replicas > 1 && c.Cluster.Name == "" {
			return bad("replicas %d needs a cluster: set cluster.name and cluster.routes, or use replicas 1", c.Replicas)
		}
	}
	if err := c.TLS.validate(c.Embedded(), c.Cluster.Name != ""); err != nil {
		return bad("%v", err)
	}
	if c.Replicas != 1 && c.Replicas != 3 {
		return bad("replicas %d: use 1, or 3 on a cluster of three or more servers", c.Replicas)
	}
	if c.Partitions < 1 || c.Partitions > 1024 {
		return bad("partitions %d is not within 1..1024", c.Partitions)
	}
	if c.Conns < 0 || c.Conns > maxConns {
		return bad("conns %d is not within 0 (GOMAXPROCS, within 2..8)..%d", c.Conns, maxConns)
	}
	if c.Shards < 0 || c.Shards > 1024 {
		return bad("shards %d is not within 0 (the existing log's, or %d for a new one)..1024", c.Shards, wire.DefaultShards)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"ready_timeout", c.ReadyTimeout}, {"append_timeout", c.AppendTimeout},
		{"input_ack_wait", c.InputAckWait}, {"input_pinned_ttl", c.InputPinnedTTL},
		{"node_ttl", c.NodeTTL}, {"tool_result_ttl", c.ToolResultTTL},
	} {
		if d.d <= 0 {
			return bad("%s must be positive, is %v", d.name, d.d)
		}
	}
	if c.InputPinnedTTL < 3*time.Second {
		return bad("input_pinned_ttl %v is below 3s (nodes re-pull every third of it, at least every second)", c.InputPinnedTTL)
	}
	if c.InputMaxAckPending < 1 {
		return bad("input_max_ack_pending must be at least 1")
	}
	return nil
}
