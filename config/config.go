package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// ErrInvalid is wrapped by every error of Validate and Load.
var ErrInvalid = errors.New("invalid configuration")

// Duration is a time.Duration written as a string ("30s", "5m") in JSON.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string, or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("want a duration such as \"30s\" or a number of seconds")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Config is a node's whole configuration.
type Config struct {
	// DataDir holds the log (NATS JetStream), the read model and the credentials.
	DataDir string `json:"data_dir"`
	// NodeID names the node in session.claimed and in status; empty: the host
	// name and a short hash of the data directory (node.DefaultNodeID).
	NodeID string `json:"node_id,omitempty"`
	// ReadModel makes the node keep the SQLite read model (data.db), fed by
	// every shard of the log, and serve the API's reads from it (list, get,
	// steps, messages, artifacts). false makes a worker: it runs sessions and
	// serves everything else, with no work proportional to the whole
	// cluster's traffic; the reads go to the nodes that hold a read model.
	ReadModel bool  `json:"read_model"`
	NATS      NATS  `json:"nats"`
	LLM       LLM   `json:"llm"`
	Agent     Agent `json:"agent"`
	Tools     Tools `json:"tools"`
	// Agents serves the sessions as agents of the Synadia Agent Protocol.
	Agents Agents `json:"agents"`
	// Tracing exports OpenTelemetry traces of the turns (docs/operations.md,
	// Tracing); the standard OTEL_* variables apply too.
	Tracing Tracing `json:"tracing"`
	// HTTP is the address of /metrics, /healthz and the web UI; empty turns
	// them off. The UI asks for a login when it is not loopback.
	HTTP string `json:"http"`
	// LogLevel is debug, info, warn or error; LogFormat is text or json.
	LogLevel  string `json:"log_level"`
	LogFormat string `json:"log_format"`

	// ReadModelCache is how many sessions' folded states the read model
	// (read_model) keeps in memory, the most recently written: set it above
	// the sessions active at once in the whole cluster, or the read model
	// reloads and refolds them from its file. SQLite's page cache follows
	// it (8 KiB a session, 8 to 256 MiB). 0 means 2048.
	ReadModelCache int `json:"read_model_cache,omitempty"`
}

// NATS configures the embedded server or the connection to an external one.
type NATS struct {
	// URL of an external server or cluster; empty embeds a server.
	URL  string `json:"url,omitempty"`
	Host string `json:"host"`
	Port int    `json:"port"`
	// Sync is how often the embedded server fsyncs: "always" (the default: every
	// write before its acknowledgement) or a duration such as "2m".
	Sync string `json:"sync"`
	// Creds is the .creds file (a user JWT and its nkey seed) the node
	// presents to an external NATS (URL set). An embedded server ignores it:
	// it generates its trust material into DataDir at first start, and the
	// node connects as DataDir/node.creds.
	Creds string `json:"creds,omitempty"`
	// TLSCert and TLSKey are the embedded server's certificate and key (PEM):
	// with them its client port and its routes speak TLS only. With an
	// external NATS (URL set) they are the node's client certificate, for a
	// server that asks for mutual TLS.
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// TLSCA is a PEM file of the CA the deployment's certificates are signed
	// by: an embedded server's routes verify the other servers against it
	// (required for a cluster with TLS), and with an external NATS the node
	// verifies the server against it.
	TLSCA string `json:"tls_ca,omitempty"`
	// TLSVerifyClients makes the embedded server require of every client a
	// certificate signed by TLSCA (mutual TLS), beside its credential.
	TLSVerifyClients bool `json:"tls_verify_clients,omitempty"`
	// ServerName, ClusterName, ClusterPort and Routes join a cluster.
	ServerName  string   `json:"server_name,omitempty"`
	ClusterName string   `json:"cluster_name,omitempty"`
	ClusterHost string   `json:"cluster_host,omitempty"`
	ClusterPort int      `json:"cluster_port,omitempty"`
	Routes      []string `json:"routes,omitempty"`
	// Replicas of the streams and buckets: 1 or 3; 0 chooses, for an embedded
	// server, 3 once its routes name two or more other servers, 1 otherwise
	// (with an external NATS, 1: say 3 on a cluster).
	Replicas   int `json:"replicas"`
	Partitions int `json:"partitions"`
	// Shards is the number of shards of the event log, fixed when the log is
	// created: 0 takes the existing log's, or 8 for a new log.
	Shards int `json:"shards,omitempty"`
	// Conns is how many NATS connections carry the node's appends (with more
	// than one, the read model's feed gets one of its own too): 0 is
	// GOMAXPROCS within 2..8, 1 one connection for everything (bus.Config).
	Conns int `json:"conns,omitempty"`
	// InputAckWait is how long an input may go unconfirmed by its owner before
	// the server hands it to the next owner: the takeover time of a turn whose
	// node died. 0 means the bus's default (8s).
	InputAckWait Duration `json:"input_ack_wait,omitempty"`
	// NodeTTL is how long a node may go without a heartbeat before the others
	// take its partitions over (and how long a node cut off from NATS keeps its
	// sessions before stopping them). 0 means the bus's default (5s).
	NodeTTL Duration `json:"node_ttl,omitempty"`
}

// LLM chooses the provider.
type LLM struct {
	Provider       string   `json:"provider"`
	Model          string   `json:"model,omitempty"`
	BaseURL        string   `json:"base_url,omitempty"`
	APIKeyEnv      string   `json:"api_key_env,omitempty"`
	RequestTimeout Duration `json:"request_timeout"`
	MaxRetries     int      `json:"max_retries"`
	MaxTokens      int      `json:"max_tokens,omitempty"`
	MockScript     string   `json:"mock_script,omitempty"`
	MockPace       Duration `json:"mock_pace"`
	// Prices is a price table file (package pricing's format) that gives
	// every LLM call its cost, recorded with its usage; empty: the default
	// prices alone (pricing.DefaultsAsOf). A model without a price costs
	// nothing made up: its calls show "no price".
	Prices string `json:"prices,omitempty"`
}

// Agent is the specification's agentPlugin settings.
type Agent struct {
	SystemPrompt string `json:"system_prompt"`
	// MaxSteps: 0 means 20; -1 means unlimited.
	MaxSteps     int      `json:"max_steps"`
	ContextChars int      `json:"context_chars"`
	IdleTimeout  Duration `json:"idle_timeout"`
	// MaxInputBytes bounds the user message of a run; 0 means the node's
	// default (node.DefaultMaxInputBytes, 256 KiB).
	MaxInputBytes int `json:"max_input_bytes,omitempty"`
	// Budget limits what every turn and every session may spend; a
	// session's own budget and a turn's (its input's) apply too, and the
	// tightest limit wins. Zero limits nothing.
	Budget Budget `json:"budget,omitzero"`
	// SubAgents are agents the model may call as tools (agent_<name>), each
	// working on its task in a child session of its own (config file only).
	SubAgents []SubAgent `json:"subagents,omitempty"`
}

// SubAgent is an agent the model may call as a tool: the child session's
// system prompt, its most LLM calls (0: the node's max_steps) and its
// model (empty: the node's).
type SubAgent struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	SystemPrompt string `json:"system_prompt"`
	MaxSteps     int    `json:"max_steps,omitempty"`
	Model        string `json:"model,omitempty"`
	// Tools, when set, are the only tools the child may call: names or
	// globs ("fs__*") of the node's tools and sub-agents (agent_<name>).
	Tools []string `json:"tools,omitempty"`
	// Budget limits each of the child's turns, as agent.budget.turn.
	Budget BudgetLimits `json:"budget,omitzero"`
}

// Budget is the node's limits per turn and per session (docs/operations.md,
// Budgets).
type Budget struct {
	Turn    BudgetLimits `json:"turn,omitzero"`
	Session BudgetLimits `json:"session,omitzero"`
}

// BudgetLimits are the limits of one scope; zero limits nothing.
type BudgetLimits struct {
	// Tokens is the most input plus output tokens of the LLM calls.
	Tokens int64 `json:"tokens,omitempty"`
	// CostUSD is the most the LLM calls may cost, in US dollars (by the
	// price table, llm.prices).
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Time is the most wall time the turns may run.
	Time Duration `json:"time,omitempty"`
}

// Agents configures the agent protocol gateway (docs/agent-protocol.md).
type Agents struct {
	// Enabled serves the controller and the active sessions as agents.
	Enabled bool `json:"enabled"`
	// Owner is the owner token of every instance: the deployment's name.
	Owner string `json:"owner"`
	// Heartbeat is the heartbeat interval of every instance.
	Heartbeat Duration `json:"heartbeat"`
	// MinSenderTrust is what a prompt requires of its caller: "any" (the
	// default) or "signed", a signed Agent-Sender header that verifies
	// (the protocol's §13; docs/agent-protocol.md).
	MinSenderTrust string `json:"min_sender_trust,omitempty"`
}

// Tracing configures the OpenTelemetry traces (telemetry/otlp). Off by
// default; OTEL_TRACES_EXPORTER=otlp turns it on too, and the exporter reads
// the OTEL_EXPORTER_OTLP_* variables.
type Tracing struct {
	// Enabled exports traces over OTLP.
	Enabled bool `json:"enabled"`
	// Protocol is "http/protobuf" or "grpc"; empty: OTEL_EXPORTER_OTLP_PROTOCOL,
	// else "http/protobuf".
	Protocol string `json:"protocol,omitempty"`
	// Endpoint is the collector (http://host:4318, host:4317 for gRPC); empty:
	// OTEL_EXPORTER_OTLP_ENDPOINT, else localhost.
	Endpoint string `json:"endpoint,omitempty"`
	// CaptureContent puts messages, answers, tool arguments and results on
	// the spans: off by default, they may hold anything.
	CaptureContent bool `json:"capture_content,omitempty"`
}

// Tools configures the built-in tools.
type Tools struct {
	// Builtin offers the built-in file tools (list_files, read_file, and
	// write_file with Write). Off: the node offers only remote tools, such as
	// an MCP filesystem server's in their place.
	Builtin bool `json:"builtin"`
	// Root is the directory list_files and read_file may read. The data
	// directory and credential files inside it are refused all the same.
	Root string `json:"root"`
	// Deny lists globs of more paths under Root that the tools refuse (see
	// builtin.Protect): "*.pem" matches a name anywhere, "config/prod" a path.
	Deny []string `json:"deny,omitempty"`
	// Write offers write_file too (off by default).
	Write bool `json:"write"`
	// Wakeup offers schedule_wakeup: the agent may schedule its own
	// session's next turn (off by default).
	Wakeup bool `json:"wakeup,omitempty"`
	// MaxConcurrent bounds tool calls running at once on the node.
	MaxConcurrent int `json:"max_concurrent"`
	// Timeout bounds one tool call.
	Timeout Duration `json:"timeout"`
	// Remote lists tools offered by tool services on NATS beside the built-ins.
	Remote bool `json:"remote"`
	// ServiceWait is the longest a call to a remote tool the model was
	// offered waits for its absent tool service (restarting, reconnecting)
	// before it fails with code tool_unavailable.
	ServiceWait Duration `json:"service_wait"`
	// RefreshEvery looks for new tool services on this period, beside the
	// events that drive discovery (a reconnect, a call that finds no
	// service, a missing service); 0 turns the period off.
	RefreshEvery Duration `json:"refresh_every"`
	// MCPConfig is an {"mcpServers": {...}} file: the node serves those MCP
	// servers' tools as tool services (package tools/mcp), named
	// <server>__<tool>. Empty: none.
	MCPConfig string `json:"mcp_config,omitempty"`
	// Approval maps tool names, or globs of names ("fs__*": every tool of
	// the MCP server fs), to "always" (a call waits for a person to approve
	// it: tahctl approve / deny) or "never"; an exact name wins over globs,
	// a longer glob over a shorter one. write_file is "always" by default; a
	// file's entries are added to the default ones.
	Approval map[string]string `json:"approval,omitempty"`
	// ApprovalTimeout, when positive, denies a call still undecided this
	// long after it was asked for; 0 waits for ever.
	ApprovalTimeout Duration `json:"approval_timeout,omitempty"`
}

// Default is a node that needs no configuration at all: data in .tah, the
// embedded server on 127.0.0.1:4222, the mock provider in demo mode, tools
// rooted at the working directory.
func Default() Config {
	l := llm.DefaultConfig()
	return Config{
		DataDir:   ".tah",
		ReadModel: true,
		NATS:      NATS{Host: "127.0.0.1", Port: 4222, Sync: "always", Partitions: 16},
		LLM: LLM{Provider: l.Provider, RequestTimeout: Duration(l.RequestTimeout), MaxRetries: l.MaxRetries,
			MockPace: Duration(l.MockPace)},
		// MaxSteps and write_file's "always" are session.DefaultMaxSteps and
		// session.ApprovalAlways, written out: config imports none of the
		// parts it configures (a test of package node checks they agree).
		Agent: Agent{MaxSteps: 20, IdleTimeout: Duration(5 * time.Minute)},
		Tools: Tools{Builtin: true, Root: ".", MaxConcurrent: 8, Timeout: Duration(2 * time.Minute), Remote: true,
			ServiceWait: Duration(30 * time.Second), RefreshEvery: Duration(30 * time.Second),
			Approval: map[string]string{"write_file": "always"}},
		Agents:    Agents{Enabled: true, Owner: "tah", Heartbeat: Duration(30 * time.Second)},
		HTTP:      "127.0.0.1:9464",
		LogLevel:  "info",
		LogFormat: "text",
	}
}

// Load reads the JSON file at path (none when path is empty) and then the
// environment through lookup (os.LookupEnv), over c.
func (c *Config) Load(path string, lookup func(string) (string, bool)) error {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c); err != nil {
			return fmt.Errorf("config file %s: %v: %w", path, err, ErrInvalid)
		}
	}
	return c.loadEnv(lookup)
}

// env lists the settings that have an environment variable and a flag, with
// the key that names them in the JSON file and in errors.
func (c *Config) env() []setting {
	return []setting{
		{"TAH_DATA_DIR", "data-dir", "data_dir", "directory of the log, the read model and the credentials", strVar(&c.DataDir)},
		{"TAH_NODE_ID", "node-id", "node_id", "name of this node in the log and in status (default: the host name and a short hash of the data directory, such as myhost-1a2b3c: the same across restarts)", strVar(&c.NodeID)},
		{"TAH_READ_MODEL", "read-model", "read_model", "keep the SQLite read model and serve the API's reads (list, get, steps, messages, artifacts); false: a worker node that only runs sessions (docs/operations.md, Read model and workers)", boolVar(&c.ReadModel)},
		{"TAH_READ_MODEL_CACHE", "read-model-cache", "read_model_cache", "sessions whose folded state the read model keeps in memory: above the sessions active at once in the cluster (0: 2048)", intVar(&c.ReadModelCache)},
		{"TAH_NATS_URL", "nats-url", "nats.url", "URL of an external NATS server or cluster (empty: embed one)", strVar(&c.NATS.URL)},
		{"TAH_NATS_HOST", "nats-host", "nats.host", "host the embedded NATS server listens on", strVar(&c.NATS.Host)},
		{"TAH_NATS_PORT", "nats-port", "nats.port", "port the embedded NATS server listens on (0: a free port)", intVar(&c.NATS.Port)},
		{"TAH_NATS_SYNC", "nats-sync", "nats.sync", `fsync of the log: "always" or an interval such as "2m"`, strVar(&c.NATS.Sync)},
		{"TAH_NATS_CREDS", "nats-creds", "nats.creds", "the node's .creds file for an external NATS (an embedded server generates its own into the data directory)", strVar(&c.NATS.Creds)},
		{"TAH_NATS_TLS_CERT", "nats-tls-cert", "nats.tls_cert", "certificate (PEM) of the embedded server's TLS, clients and routes; with nats.url, the node's client certificate", strVar(&c.NATS.TLSCert)},
		{"TAH_NATS_TLS_KEY", "nats-tls-key", "nats.tls_key", "key (PEM) of nats.tls_cert", strVar(&c.NATS.TLSKey)},
		{"TAH_NATS_TLS_CA", "nats-tls-ca", "nats.tls_ca", "CA (PEM) the routes verify the other servers against; with nats.url, the CA of the server's certificate", strVar(&c.NATS.TLSCA)},
		{"TAH_NATS_TLS_VERIFY_CLIENTS", "nats-tls-verify-clients", "nats.tls_verify_clients", "require clients to present a certificate signed by nats.tls_ca (mutual TLS)", boolVar(&c.NATS.TLSVerifyClients)},
		{"TAH_NATS_SERVER_NAME", "nats-server-name", "nats.server_name", "name of the embedded server (unique in a cluster)", strVar(&c.NATS.ServerName)},
		{"TAH_NATS_CLUSTER", "nats-cluster", "nats.cluster_name", "cluster name, to join other nodes by routes", strVar(&c.NATS.ClusterName)},
		{"TAH_NATS_CLUSTER_PORT", "nats-cluster-port", "nats.cluster_port", "port for routes from other nodes", intVar(&c.NATS.ClusterPort)},
		{"TAH_NATS_ROUTES", "nats-routes", "nats.routes", "comma-separated route URLs of the other nodes", listVar(&c.NATS.Routes)},
		{"TAH_NATS_REPLICAS", "nats-replicas", "nats.replicas", "replicas of streams and buckets: 1, or 3 on a cluster (0: 3 when the embedded server has routes to two or more others)", intVar(&c.NATS.Replicas)},
		{"TAH_NATS_PARTITIONS", "nats-partitions", "nats.partitions", "input partitions", intVar(&c.NATS.Partitions)},
		{"TAH_NATS_SHARDS", "nats-shards", "nats.shards", "shards of the event log, fixed when the log is created (0: the log's, or 8 for a new one)", intVar(&c.NATS.Shards)},
		{"TAH_NATS_CONNS", "nats-conns", "nats.conns", "NATS connections the node's appends are spread over, by shard (0: GOMAXPROCS within 2..8; 1: one connection for everything)", intVar(&c.NATS.Conns)},
		{"TAH_NATS_INPUT_ACK_WAIT", "nats-input-ack-wait", "nats.input_ack_wait", "how long a dead node's running input waits before another node takes it (0: 8s)", durVar(&c.NATS.InputAckWait)},
		{"TAH_NATS_NODE_TTL", "nats-node-ttl", "nats.node_ttl", "how long a silent node keeps its partitions before the others take them (0: 5s)", durVar(&c.NATS.NodeTTL)},
		{"TAH_LLM_PROVIDER", "llm-provider", "llm.provider", "mock, openai or anthropic", strVar(&c.LLM.Provider)},
		{"TAH_LLM_MODEL", "llm-model", "llm.model", "model name", strVar(&c.LLM.Model)},
		{"TAH_LLM_BASE_URL", "llm-base-url", "llm.base_url", "API base URL (e.g. http://localhost:11434/v1 for Ollama)", strVar(&c.LLM.BaseURL)},
		{"TAH_LLM_API_KEY_ENV", "llm-api-key-env", "llm.api_key_env", "environment variable that holds the API key", strVar(&c.LLM.APIKeyEnv)},
		{"TAH_LLM_TIMEOUT", "llm-timeout", "llm.request_timeout", "timeout of one LLM request", durVar(&c.LLM.RequestTimeout)},
		{"TAH_LLM_MAX_RETRIES", "llm-max-retries", "llm.max_retries", "retries on 429, 5xx and broken connections", intVar(&c.LLM.MaxRetries)},
		{"TAH_LLM_MAX_TOKENS", "llm-max-tokens", "llm.max_tokens", "output token limit of a request (0: the provider's default)", intVar(&c.LLM.MaxTokens)},
		{"TAH_LLM_MOCK_SCRIPT", "llm-mock-script", "llm.mock_script", "script of the mock provider (JSON); empty: demo mode", strVar(&c.LLM.MockScript)},
		{"TAH_LLM_MOCK_PACE", "llm-mock-pace", "llm.mock_pace", "pause between the mock's streamed tokens", durVar(&c.LLM.MockPace)},
		{"TAH_LLM_PRICES", "llm-prices", "llm.prices", "price table file (JSON, docs/operations.md, Cost) the cost of each LLM call is recorded by (empty: the default prices alone)", strVar(&c.LLM.Prices)},
		{"TAH_SYSTEM_PROMPT", "system-prompt", "agent.system_prompt", "first system message of every session", strVar(&c.Agent.SystemPrompt)},
		{"TAH_MAX_STEPS", "max-steps", "agent.max_steps", "most LLM calls per turn (-1: unlimited)", intVar(&c.Agent.MaxSteps)},
		{"TAH_MAX_INPUT_BYTES", "max-input-bytes", "agent.max_input_bytes", "largest user message of a run, in bytes; a larger input is refused (0: 256 KiB)", intVar(&c.Agent.MaxInputBytes)},
		{"TAH_CONTEXT_CHARS", "context-chars", "agent.context_chars", "character budget of each LLM request (0: whole history)", intVar(&c.Agent.ContextChars)},
		{"TAH_IDLE_TIMEOUT", "idle-timeout", "agent.idle_timeout", "passivate a session idle this long", durVar(&c.Agent.IdleTimeout)},
		{"TAH_BUDGET_TURN_TOKENS", "budget-turn-tokens", "agent.budget.turn.tokens", "most input plus output tokens of one turn; the turn fails with budget_exceeded (0: no limit)", int64Var(&c.Agent.Budget.Turn.Tokens)},
		{"TAH_BUDGET_TURN_COST_USD", "budget-turn-cost-usd", "agent.budget.turn.cost_usd", "most one turn's LLM calls may cost, in US dollars (0: no limit)", floatVar(&c.Agent.Budget.Turn.CostUSD)},
		{"TAH_BUDGET_TURN_TIME", "budget-turn-time", "agent.budget.turn.time", "most wall time one turn may run (0: no limit)", durVar(&c.Agent.Budget.Turn.Time)},
		{"TAH_BUDGET_SESSION_TOKENS", "budget-session-tokens", "agent.budget.session.tokens", "most input plus output tokens of a session's turns together (0: no limit)", int64Var(&c.Agent.Budget.Session.Tokens)},
		{"TAH_BUDGET_SESSION_COST_USD", "budget-session-cost-usd", "agent.budget.session.cost_usd", "most a session's LLM calls may cost together, in US dollars (0: no limit)", floatVar(&c.Agent.Budget.Session.CostUSD)},
		{"TAH_BUDGET_SESSION_TIME", "budget-session-time", "agent.budget.session.time", "most wall time a session's turns may run together (0: no limit)", durVar(&c.Agent.Budget.Session.Time)},
		{"TAH_TOOLS_BUILTIN", "tools-builtin", "tools.builtin", "offer the built-in file tools list_files and read_file (false: only remote tools, such as an MCP server's)", boolVar(&c.Tools.Builtin)},
		{"TAH_TOOLS_ROOT", "tools-root", "tools.root", "directory the built-in tools may read", strVar(&c.Tools.Root)},
		{"TAH_TOOLS_DENY", "tools-deny", "tools.deny", "comma-separated globs of paths the tools refuse besides the data directory and credential files (*.pem, config/prod)", listVar(&c.Tools.Deny)},
		{"TAH_TOOLS_WRITE", "tools-write", "tools.write", "offer write_file too", boolVar(&c.Tools.Write)},
		{"TAH_TOOLS_WAKEUP", "tools-wakeup", "tools.wakeup", "offer schedule_wakeup: the agent may schedule its own session's next turn (JetStream sends it then)", boolVar(&c.Tools.Wakeup)},
		{"TAH_TOOLS_MAX_CONCURRENT", "tools-max-concurrent", "tools.max_concurrent", "tool calls running at once on the node", intVar(&c.Tools.MaxConcurrent)},
		{"TAH_TOOLS_TIMEOUT", "tools-timeout", "tools.timeout", "timeout of one tool call", durVar(&c.Tools.Timeout)},
		{"TAH_TOOLS_REMOTE", "tools-remote", "tools.remote", "offer tools of tool services on NATS", boolVar(&c.Tools.Remote)},
		{"TAH_TOOLS_SERVICE_WAIT", "tools-service-wait", "tools.service_wait", "how long a call waits for its absent tool service before tool_unavailable", durVar(&c.Tools.ServiceWait)},
		{"TAH_TOOLS_APPROVAL", "tools-approval", "tools.approval", "tool calls that wait for approval: NAME=always|never pairs, comma-separated; NAME may be a glob (fs__*=always); replaces the configured ones", mapVar(&c.Tools.Approval)},
		{"TAH_TOOLS_APPROVAL_TIMEOUT", "tools-approval-timeout", "tools.approval_timeout", "deny a call still waiting for approval after this long (0: wait for ever)", durVar(&c.Tools.ApprovalTimeout)},
		{"TAH_TOOLS_REFRESH_EVERY", "tools-refresh-every", "tools.refresh_every", "period of the tool services' discovery besides its events (0: events only)", durVar(&c.Tools.RefreshEvery)},
		{"TAH_MCP_CONFIG", "mcp-config", "tools.mcp_config", `file of MCP servers ({"mcpServers": ...}) whose tools the node serves as <server>__<tool>`, strVar(&c.Tools.MCPConfig)},
		{"TAH_AGENTS", "agents", "agents.enabled", "serve the sessions as agents of the Synadia Agent Protocol for NATS (docs/agent-protocol.md)", boolVar(&c.Agents.Enabled)},
		{"TAH_AGENTS_OWNER", "agents-owner", "agents.owner", "owner token of the agent instances (agents.prompt.tah.<owner>.<name>)", strVar(&c.Agents.Owner)},
		{"TAH_AGENTS_HEARTBEAT", "agents-heartbeat", "agents.heartbeat", "heartbeat interval of the agent instances", durVar(&c.Agents.Heartbeat)},
		{"TAH_AGENTS_MIN_SENDER_TRUST", "agents-min-sender-trust", "agents.min_sender_trust", "what a prompt requires of its caller: any, or signed (a verified Agent-Sender header)", strVar(&c.Agents.MinSenderTrust)},
		{"TAH_TRACING", "tracing", "tracing.enabled", "export OpenTelemetry traces of the turns over OTLP (the OTEL_* variables apply too)", boolVar(&c.Tracing.Enabled)},
		{"TAH_TRACING_ENDPOINT", "tracing-endpoint", "tracing.endpoint", "OTLP collector (http://host:4318; host:4317 for grpc; empty: OTEL_EXPORTER_OTLP_ENDPOINT)", strVar(&c.Tracing.Endpoint)},
		{"TAH_TRACING_PROTOCOL", "tracing-protocol", "tracing.protocol", "http/protobuf or grpc (empty: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)", strVar(&c.Tracing.Protocol)},
		{"TAH_TRACING_CAPTURE_CONTENT", "tracing-capture-content", "tracing.capture_content", "put messages, answers and tool arguments and results on the spans (off: they may hold anything)", boolVar(&c.Tracing.CaptureContent)},
		{"TAH_HTTP", "http", "http", "address of /metrics, /healthz and the web UI (empty: off; port 0: a free port; not loopback: the UI asks for a login)", strVar(&c.HTTP)},
		{"TAH_LOG_LEVEL", "log-level", "log_level", "debug, info, warn or error", strVar(&c.LogLevel)},
		{"TAH_LOG_FORMAT", "log-format", "log_format", "text or json", strVar(&c.LogFormat)},
	}
}

type setting struct {
	env, flag, key, usage string
	v                     flag.Value
}

// Setting describes one setting for help texts.
type Setting struct {
	Key   string // as in the JSON file: "nats.port"
	Flag  string // without dashes: "nats-port"
	Env   string // "TAH_NATS_PORT"
	Usage string
	Value string // the current value, as a flag would print it
}

// Settings lists the settings that have an environment variable, in a stable
// order grouped by section, with c's values.
func (c *Config) Settings() []Setting {
	var out []Setting
	for _, s := range c.env() {
		out = append(out, Setting{Key: s.key, Flag: s.flag, Env: s.env, Usage: s.usage, Value: s.v.String()})
	}
	return out
}

// Describe names the setting key (as in the JSON file: "nats.port") with its
// flag and environment variable: "nats.port (--nats-port, TAH_NATS_PORT)".
// A key without either is returned as it is.
func Describe(key string) string {
	var c Config
	for _, s := range c.env() {
		if s.key != key {
			continue
		}
		return fmt.Sprintf("%s (--%s, %s)", key, s.flag, s.env)
	}
	return key
}

func (c *Config) loadEnv(lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	var errs []error
	for _, s := range c.env() {
		if v, ok := lookup(s.env); ok {
			if err := s.v.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v: %w", s.env, v, err, ErrInvalid))
			}
		}
	}
	return errors.Join(errs...)
}

// RegisterFlags defines a flag for every setting on fs, with the current values
// as defaults; parsing fs then overrides them.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, s := range c.env() {
		fs.Var(s.v, s.flag, s.usage+" ($"+s.env+")")
	}
}

// EnvHelp lists the environment variables, for --help.
func (c *Config) EnvHelp() string {
	var b strings.Builder
	for _, s := range c.env() {
		fmt.Fprintf(&b, "  %-24s --%s\n", s.env, s.flag)
	}
	return b.String()
}

// Validate reports every setting whose own form cannot work, each named,
// joined in one error wrapping ErrInvalid. What only the parts can check
// (the deny globs, the approval policy, the MCP servers' file, the bus) is
// node.Check's, which runs Validate first.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", Describe(name), fmt.Sprintf(format, args...), ErrInvalid))
	}
	if c.DataDir == "" {
		bad("data_dir", "empty (use a directory such as .tah)")
	}
	if c.NATS.URL == "" && (c.NATS.Port < -1 || c.NATS.Port > 65535) {
		bad("nats.port", "%d is not a port (use 1 to 65535, or 0 for a free one)", c.NATS.Port)
	}
	if c.NATS.URL == "" && c.NATS.Host == "" {
		bad("nats.host", "empty (use 127.0.0.1 to serve this machine only, or 0.0.0.0 for every interface)")
	}
	if c.ReadModelCache < 0 {
		bad("read_model_cache", "%d is negative (0 means 2048 sessions)", c.ReadModelCache)
	}
	if c.NATS.URL == "" && c.NATS.Creds != "" {
		bad("nats.creds", "set without nats.url: the embedded server generates its own credentials into the data directory (leave it empty)")
	}
	if (c.NATS.TLSCert == "") != (c.NATS.TLSKey == "") {
		bad("nats.tls_key", "give nats.tls_cert and nats.tls_key together (the certificate and its key)")
	}
	if c.NATS.URL == "" && c.NATS.TLSCert != "" && c.NATS.ClusterName != "" && c.NATS.TLSCA == "" {
		bad("nats.tls_ca", "empty on a cluster with TLS: the routes verify the other servers' certificates against it (give the CA that signed them)")
	}
	if c.HTTP != "" {
		if _, port, err := net.SplitHostPort(c.HTTP); err != nil {
			bad("http", "%q is not host:port (such as 127.0.0.1:9464; empty turns it off)", c.HTTP)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			bad("http", "%q: port %q is not 0 to 65535", c.HTTP, port)
		}
	}
	if c.Tools.Root == "" {
		bad("tools.root", "empty (use . for the working directory)")
	} else if fi, err := os.Stat(c.Tools.Root); err != nil {
		bad("tools.root", "%v", err)
	} else if !fi.IsDir() {
		bad("tools.root", "%s is not a directory", c.Tools.Root)
	}
	if c.Tools.Write && !c.Tools.Builtin {
		bad("tools.write", "needs tools.builtin: write_file is a built-in tool")
	}
	if c.Tools.MaxConcurrent < 1 {
		bad("tools.max_concurrent", "%d (use 1 or more)", c.Tools.MaxConcurrent)
	}
	if c.Tools.Timeout <= 0 {
		bad("tools.timeout", "must be positive, such as 2m")
	}
	if c.Tools.ServiceWait <= 0 {
		bad("tools.service_wait", "must be positive, such as 30s")
	}
	if c.Tools.RefreshEvery < 0 {
		bad("tools.refresh_every", "must be 0 (events only) or positive, such as 30s")
	}
	if _, err := c.NATS.SyncInterval(); err != nil {
		bad("nats.sync", "%v", err)
	}
	if c.Agent.MaxSteps < -1 {
		bad("agent.max_steps", "%d (use a positive number, 0 for the default 20, or -1 for unlimited)", c.Agent.MaxSteps)
	}
	if c.Agent.MaxInputBytes < 0 {
		bad("agent.max_input_bytes", "negative")
	}
	for scope, l := range map[string]BudgetLimits{"turn": c.Agent.Budget.Turn, "session": c.Agent.Budget.Session} {
		if l.Tokens < 0 {
			bad("agent.budget."+scope+".tokens", "%d is negative (0: no limit)", l.Tokens)
		}
		if l.CostUSD < 0 || math.IsNaN(l.CostUSD) || math.IsInf(l.CostUSD, 0) {
			bad("agent.budget."+scope+".cost_usd", "%v is not a positive number of US dollars (0: no limit)", l.CostUSD)
		}
		if l.Time < 0 {
			bad("agent.budget."+scope+".time", "%v is negative (0: no limit)", time.Duration(l.Time))
		}
	}
	if c.Agents.Enabled {
		if err := wire.ValidAgentOwner(c.Agents.Owner); err != nil {
			bad("agents.owner", "%q is not one subject token (use 1 to 64 letters, digits, '-' or '_'), or starts with %q, which a tenant's agents' owner does", c.Agents.Owner, wire.TenantAgentOwnerPrefix)
		}
		if m := c.Agents.MinSenderTrust; m != "" && m != wire.AgentSenderTrustAny && m != wire.AgentSenderTrustSigned {
			bad("agents.min_sender_trust", "%q: use %q or %q", m, wire.AgentSenderTrustAny, wire.AgentSenderTrustSigned)
		}
		if time.Duration(c.Agents.Heartbeat) < time.Second {
			bad("agents.heartbeat", "%s (use 1s or more: the protocol advises against faster heartbeats on shared infrastructure)", time.Duration(c.Agents.Heartbeat))
		}
	}
	if c.Agent.ContextChars < 0 {
		bad("agent.context_chars", "negative")
	}
	switch c.Tracing.Protocol {
	case "", "http/protobuf", "grpc":
	default:
		bad("tracing.protocol", "%q (use http/protobuf or grpc)", c.Tracing.Protocol)
	}
	for _, d := range []struct {
		key     string
		v       Duration
		example string
	}{
		{"agent.idle_timeout", c.Agent.IdleTimeout, "5m, or 0 for the default"},
		{"nats.input_ack_wait", c.NATS.InputAckWait, "8s, or 0 for the default"},
		{"nats.node_ttl", c.NATS.NodeTTL, "5s, or 0 for the default"},
		{"llm.mock_pace", c.LLM.MockPace, "20ms, or 0s for no pause"},
	} {
		if d.v < 0 {
			bad(d.key, "negative (use a duration such as %s)", d.example)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q (use debug, info, warn or error)", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("log_format", "%q (use text or json)", c.LogFormat)
	}
	if err := c.LLMConfig().Validate(); err != nil {
		errs = append(errs, describeAll(err)...)
	}
	return errors.Join(errs...)
}

// describeAll splits a joined error and names the flag and variable of each
// part that starts with a setting key ("llm.model: ...").
func describeAll(err error) []error {
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	} else {
		parts = []error{err}
	}
	out := make([]error, 0, len(parts))
	for _, e := range parts {
		msg := e.Error()
		if key, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(key, " ") {
			if d := Describe(key); d != key {
				out = append(out, &described{msg: d + ": " + rest, err: e})
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// described is an error whose message names the setting's flag and variable.
type described struct {
	msg string
	err error
}

func (d *described) Error() string { return d.msg }
func (d *described) Unwrap() error { return d.err }

// SyncInterval is the embedded server's fsync interval that nats.sync says:
// 0 for "always" (or empty), a positive duration otherwise.
func (n NATS) SyncInterval() (time.Duration, error) {
	if n.Sync == "" || n.Sync == "always" {
		return 0, nil
	}
	d, err := time.ParseDuration(n.Sync)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q (use \"always\" or a duration such as \"2m\")", n.Sync)
	}
	return d, nil
}

// LLMConfig is the provider configuration.
func (c Config) LLMConfig() llm.Config {
	l := llm.DefaultConfig()
	l.Provider, l.Model, l.BaseURL, l.APIKeyEnv = c.LLM.Provider, c.LLM.Model, c.LLM.BaseURL, c.LLM.APIKeyEnv
	l.RequestTimeout, l.MaxRetries, l.MaxTokens = time.Duration(c.LLM.RequestTimeout), c.LLM.MaxRetries, c.LLM.MaxTokens
	l.MockScript, l.MockPace = c.LLM.MockScript, time.Duration(c.LLM.MockPace)
	return l
}

// flag.Value adapters

type strV struct{ p *string }

func strVar(p *string) flag.Value { return strV{p} }
func (v strV) String() string     { return deref(v.p) }
func (v strV) Set(s string) error { *v.p = s; return nil }
func deref[T any](p *T) (zero string) {
	if p == nil {
		return
	}
	return fmt.Sprint(*p)
}

type intV struct{ p *int }

func intVar(p *int) flag.Value { return intV{p} }
func (v intV) String() string  { return deref(v.p) }
func (v intV) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	*v.p = n
	return nil
}

type int64V struct{ p *int64 }

func int64Var(p *int64) flag.Value { return int64V{p} }
func (v int64V) String() string    { return deref(v.p) }
func (v int64V) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	*v.p = n
	return nil
}

type floatV struct{ p *float64 }

func floatVar(p *float64) flag.Value { return floatV{p} }
func (v floatV) String() string      { return deref(v.p) }
func (v floatV) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number such as 2.50")
	}
	*v.p = f
	return nil
}

type boolV struct{ p *bool }

func boolVar(p *bool) flag.Value { return boolV{p} }
func (v boolV) String() string   { return deref(v.p) }
func (v boolV) IsBoolFlag() bool { return true }
func (v boolV) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("not true or false")
	}
	*v.p = b
	return nil
}

type durV struct{ p *Duration }

func durVar(p *Duration) flag.Value { return durV{p} }
func (v durV) String() string {
	if v.p == nil {
		return ""
	}
	return time.Duration(*v.p).String()
}
func (v durV) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration such as 30s or 5m")
	}
	*v.p = Duration(d)
	return nil
}

type listV struct{ p *[]string }

func listVar(p *[]string) flag.Value { return listV{p} }

// mapV reads NAME=VALUE pairs, comma-separated.
type mapV struct{ p *map[string]string }

func mapVar(p *map[string]string) flag.Value { return mapV{p} }
func (v mapV) String() string {
	if v.p == nil {
		return ""
	}
	var pairs []string
	for k, val := range *v.p {
		pairs = append(pairs, k+"="+val)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}
func (v mapV) Set(s string) error {
	m := map[string]string{}
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		k, val, ok := strings.Cut(r, "=")
		if !ok {
			return fmt.Errorf("%q is not NAME=VALUE (such as write_file=always)", r)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	*v.p = m
	return nil
}
func (v listV) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}
func (v listV) Set(s string) error {
	*v.p = nil
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			*v.p = append(*v.p, r)
		}
	}
	return nil
}
