package tahtest

import (
	"os/exec"
	"time"

	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// Mode is how a member runs.
type Mode int

const (
	// InProcess runs the member's node (node.Start, its embedded NATS server
	// joined to the others by routes, and the API, as tah-node serves it) in
	// this process: fast, and the test reaches the *node.Node. Kill shuts its server down at once (its routes
	// and clients drop as on kill -9) and never closes the node gracefully;
	// Stop closes it (node.Close).
	InProcess Mode = iota
	// Process runs the member as a tah-node process of its own: Kill is
	// SIGKILL, Stop is SIGTERM. Each run's output goes to a log of its own,
	// which the end of the test scans for data races and panics and prints
	// when the test failed.
	Process
)

func (m Mode) String() string {
	if m == Process {
		return "process"
	}
	return "in-process"
}

// Options say what cluster Start runs. The zero value is three in-process
// nodes with the mock model in demo mode, R3, the default timings.
type Options struct {
	// Nodes is the number of members; 0 means 3.
	Nodes int
	// Mode is how the members run; Modes names members that run otherwise
	// (say one Process among InProcess members, to SIGKILL it).
	Mode  Mode
	Modes map[int]Mode

	// Pace is the mock model's pause between streamed tokens (0 keeps its
	// default): how long a turn's answer takes to write. In demo mode every
	// turn calls list_files, then read_file on the tools root's README, then
	// answers.
	Pace time.Duration
	// NodeTTL and InputAckWait are the nodes' --nats-node-ttl and
	// --nats-input-ack-wait; 0 keeps the defaults.
	NodeTTL, InputAckWait time.Duration
	// Sync is how often the servers fsync (--nats-sync); 0 fsyncs every write.
	Sync time.Duration
	// Replicas of the streams; 0 means 3 with three or more members, else 1.
	Replicas int
	// ToolsRoot is the directory the agents' tools read; empty: a small
	// project the harness writes (a README and a few files).
	ToolsRoot string
	// Dir is where the cluster's directory (the members' data and logs) is
	// made; empty: the system's temporary directory.
	Dir string

	// EditNode, for InProcess members, changes member i's node options
	// before each of its starts: its model (Provider), its Logger, ...
	EditNode func(i int, o *node.Options)
	// Command, for Process members, builds member i's command from the
	// tah-node arguments the harness chose; nil runs the tah-node the
	// harness built (TestMain must call Main). The program must take those
	// arguments, run its embedded server with the trust material the
	// harness put in its data directory (package auth), and write node.json
	// there (internal/localnode) when it is ready, as tah-node does. What the
	// command does not send elsewhere (Stdout, Stderr left nil) goes to the
	// member's log.
	Command func(i int, args []string) *exec.Cmd
	// EditConfig changes member i's configuration, in either mode, before
	// it is checked: remote tools on, a mock script, ...
	EditConfig func(i int, cfg *config.Config)
	// SubAgents are every member's agent.subagents: the agents its sessions'
	// models may call as tools (agent_<name>), each in a child session. A
	// Process member gets them (and any EditConfig sets) in a configuration
	// file (--config), since they have no flag.
	SubAgents []config.SubAgent
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 1
		if o.Nodes >= 3 {
			o.Replicas = 3
		}
	}
	return o
}

// mode is member i's mode.
func (o Options) mode(i int) Mode {
	if m, ok := o.Modes[i]; ok {
		return m
	}
	return o.Mode
}

// config is member i's whole configuration, the same in either mode: a
// process gets it as flags, an in-process node as node.Options.
func (o Options) config(l natstest.Layout, i int, root string) config.Config {
	s := l.Slots[i]
	cfg := config.Default()
	cfg.DataDir = s.Dir
	cfg.NodeID = s.Name
	cfg.NATS.Port = s.ClientPort
	cfg.NATS.ServerName = s.Name
	if len(s.Routes) > 0 { // a single node is no cluster
		cfg.NATS.ClusterName = l.Name
		cfg.NATS.ClusterPort = s.RoutePort
		cfg.NATS.Routes = s.Routes
	}
	cfg.NATS.Replicas = o.Replicas
	cfg.NATS.NodeTTL = config.Duration(o.NodeTTL)
	cfg.NATS.InputAckWait = config.Duration(o.InputAckWait)
	if o.Sync > 0 {
		cfg.NATS.Sync = o.Sync.String()
	}
	cfg.HTTP = ""
	cfg.Tools.Root = root
	cfg.Tools.Remote = false
	if o.Pace > 0 {
		cfg.LLM.MockPace = config.Duration(o.Pace)
	}
	cfg.LogLevel = "debug"
	cfg.Agent.SubAgents = o.SubAgents
	if o.EditConfig != nil {
		o.EditConfig(i, &cfg)
	}
	return cfg
}
