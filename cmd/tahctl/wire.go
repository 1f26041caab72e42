package main

import (
	"encoding/json"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// The parts of the wire contract (docs/protocol.md) tahctl uses. They are
// spelled out here rather than imported from package bus, so that tahctl does
// not carry a NATS server in its binary.
const (
	eventStream   = "TAH_EVT"
	headerCommand = "Tah-Command"
	headerReplyTo = "Tah-Reply-To"
	headerMsgID   = "Nats-Msg-Id"
	headerEpoch   = "Tah-Epoch"
	apiPrefix     = "tah.api."
	apiService    = "tah"
	// errorCodeHeader and errorHeader are micro's error headers.
	errorCodeHeader = "Nats-Service-Error-Code"
	errorHeader     = "Nats-Service-Error"
)

func inputSubject(sid string) string { return "tah.sess." + sid + ".in" }
func deltaSubject(sid string) string { return "tah.sess." + sid + ".delta" }
func errorSubject(sid string) string { return "tah.sess." + sid + ".err" }
func eventsFilter(sid string) string { return "tah.sess." + sid + ".evt.>" }

// input is the body of a message on tah.sess.<sid>.in.
type input struct {
	ID      string        `json:"id,omitempty"`
	Text    string        `json:"input,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	Options *inputOptions `json:"options,omitempty"`
}

// inputOptions adjust the turn a run starts.
type inputOptions struct {
	MaxSteps int `json:"max_steps,omitempty"`
}

// outcome is what a node publishes on an input's Tah-Reply-To subject.
type outcome struct {
	Session     string    `json:"session"`
	Turn        int       `json:"turn"`
	Status      string    `json:"status"`
	Content     string    `json:"content,omitempty"`
	Error       string    `json:"error,omitempty"`
	Code        string    `json:"code,omitempty"`
	Steps       int       `json:"steps"`
	Usage       llm.Usage `json:"usage"`
	LastSeq     uint64    `json:"last_seq"`
	Compact     *compact  `json:"compact,omitempty"`
	Fenced      bool      `json:"fenced,omitempty"`
	Failure     string    `json:"failure,omitempty"`
	FailureCode string    `json:"failure_code,omitempty"`
}

type compact struct {
	Turns int `json:"turns"`
	Chars int `json:"chars"`
}

// inputError is the body of a message on tah.sess.<sid>.err.
type inputError struct {
	Session string `json:"session"`
	InputID string `json:"input_id,omitempty"`
	Command string `json:"command,omitempty"`
	Code    string `json:"code"`
	Error   string `json:"error"`
}

// delta is the body of a message on tah.sess.<sid>.delta.
type delta struct {
	StepID string `json:"step_id,omitempty"`
	llm.Delta
}

// sessionView is a session as tah.api.get and tah.api.list return it.
type sessionView struct {
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	Turn       int               `json:"turn"`
	Title      string            `json:"title"`
	Config     event.Config      `json:"config"`
	ForkedFrom string            `json:"forked_from,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Epoch      uint64            `json:"epoch"`
	Node       string            `json:"node,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	LastSeq    uint64            `json:"last_seq"`
	Events     int               `json:"events"`
	Messages   int               `json:"messages"`
	Steps      int               `json:"steps"`
	Usage      llm.Usage         `json:"usage"`
	LastOutput string            `json:"last_output,omitempty"`
	LastError  string            `json:"last_error,omitempty"`
	LastCode   string            `json:"last_code,omitempty"`
}

// active reports whether a turn is in progress in status.
func active(status string) bool { return status == "running" || status == "waiting_tool" }

// eventsReply is what tah.api.events returns.
type eventsReply struct {
	Session string        `json:"session"`
	Events  []event.Event `json:"events"`
	LastSeq uint64        `json:"last_seq"`
}

// commandReply is what tah.api.compact, resume and cancel return.
type commandReply struct {
	Session string `json:"session"`
	InputID string `json:"input_id"`
	Command string `json:"command"`
}

// raw is a JSON value kept as it came, for --json output.
type raw = json.RawMessage

// nodeStatus is the answering node's part of what tah.api.status returns.
type nodeStatus struct {
	Node            string    `json:"node"`
	NATS            string    `json:"nats"`
	Partitions      int       `json:"partitions"`
	ActiveSessions  int       `json:"active_sessions"`
	ReadModelAt     uint64    `json:"read_model_at"`
	ReadModelPath   string    `json:"read_model_path"`
	Provider        string    `json:"provider"`
	APIVersion      string    `json:"api_version"`
	ProblemsSkipped int64     `json:"problems_skipped"`
	Time            time.Time `json:"time,omitzero"`
}

// statusReply is what tah.api.status returns. Nodes is absent from the reply
// of a node older than the tah_nodes bucket's heartbeats.
type statusReply struct {
	nodeStatus
	Nodes      []nodeRecord `json:"nodes"`
	NodesError string       `json:"nodes_error,omitempty"`
}

// nodeRecord is a node's entry in the KV bucket tah_nodes (bus.NodeRecord).
type nodeRecord struct {
	Node           string    `json:"node"`
	Started        time.Time `json:"started"`
	Heartbeat      time.Time `json:"heartbeat"`
	Partitions     []int     `json:"partitions"`
	ActiveSessions int       `json:"active_sessions"`
	NATS           string    `json:"nats,omitempty"`
	Provider       string    `json:"provider,omitempty"`
	Fenced         bool      `json:"fenced,omitempty"`
}
