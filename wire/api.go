package wire

import (
	"errors"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
)

// The endpoints of the API service (micro service APIService, queue group
// APIQueueGroup), each on APISubject(name). A request is its JSON object (an
// empty body is {}); a reply is its JSON object, or an error: the headers
// HeaderServiceErrorCode (an APIError* code) and HeaderServiceError (a
// sentence that says what to do) and an empty body.
const (
	EndpointCreate   = "create"
	EndpointGet      = "get"
	EndpointList     = "list"
	EndpointFork     = "fork"
	EndpointMessages = "messages"
	EndpointSteps    = "steps"
	EndpointEvents   = "events"
	EndpointRequest  = "request"
	EndpointCompact  = "compact"
	EndpointResume   = "resume"
	EndpointCancel   = "cancel"
	EndpointApprove  = "approve"
	EndpointDeny     = "deny"
	EndpointBudget   = "budget"
	EndpointTools    = "tools"
	EndpointStatus   = "status"
	// EndpointArtifacts lists a session's artifacts; EndpointArtifact reads
	// one's content, a piece at a time (artifacts.go).
	EndpointArtifacts = "artifacts"
	EndpointArtifact  = "artifact"
)

// The API's error codes, in HeaderServiceErrorCode.
const (
	APIErrBadRequest = "400" // the request is not valid: not JSON, a missing or invalid field
	APIErrNotFound   = "404" // no such session
	APIErrConflict   = "409" // the session exists already
	APIErrTooLarge   = "413" // the reply would not fit in one NATS message: ask for less
	APIErrInternal   = "500" // anything else; the description says what
	// APIErrQuota ("429", quota.go): over one of the tenant's quotas.
)

// List limits.
const (
	// ListDefault is the page size of list without a limit.
	ListDefault = 50
	// ListMax is the largest page list returns.
	ListMax = 1000
)

// CreateRequest asks tah.api.create for a new session.
type CreateRequest struct {
	// Session is the id to give it; a fresh one when empty. A session of that
	// id that exists already is APIErrConflict.
	Session string `json:"session,omitempty"`
	// Tenant is the tenant whose session it is (docs/tenancy.md): a fresh id
	// is then <tenant>.s_…, and a Session given must be one of its ids
	// (<tenant>.<id>), else APIErrBadRequest. Empty: the default tenant, or
	// Session's.
	Tenant string `json:"tenant,omitempty"`
	// Labels are the session's free-form tags, shown by list: at most 64
	// labels, keys of 1 to 63 bytes, values of at most 256 bytes, 16 KiB in
	// all, printable UTF-8 (CheckLabels, MaxLabels...). Labels over these
	// limits are APIErrBadRequest.
	Labels map[string]string `json:"labels,omitempty"`
	// Budget is the session's own budget (limits per turn and for the
	// session; the node's agent.budget, when tighter, wins). Negative
	// limits are APIErrBadRequest.
	Budget *event.Budget `json:"budget,omitempty"`
}

// CreateReply: session.created is in the log at Seq.
type CreateReply struct {
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
}

// SessionRequest names a session: the request of tah.api.get and
// tah.api.messages.
type SessionRequest struct {
	Session string `json:"session"`
}

// SessionSummary is a session as tah.api.get and tah.api.list return it: the
// read model's row, the folded state without its histories.
type SessionSummary struct {
	ID         string            `json:"id"`
	Status     projection.Status `json:"status"`
	Turn       int               `json:"turn"`
	Config     event.Config      `json:"config"`
	ForkedFrom string            `json:"forked_from,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Epoch      uint64            `json:"epoch"`
	Node       string            `json:"node,omitempty"`
	// Title is the first user message, on one line, cut at 80 characters.
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at,omitzero"` // UTC; absent when unknown
	UpdatedAt time.Time `json:"updated_at,omitzero"` // UTC: the time of the session's last event
	// LastSeq is the stream sequence of the last event folded.
	LastSeq uint64 `json:"last_seq"`
	// Events counts the events folded; Rejected those stored but not folded.
	Events   int       `json:"events"`
	Rejected int       `json:"rejected,omitempty"`
	Messages int       `json:"messages"` // length of the full history, summaries included
	Steps    int       `json:"steps"`
	Usage    llm.Usage `json:"usage"`
	// Cost is what the session's LLM calls cost, in US dollars, as their
	// events recorded it (projection.State.Cost): unpriced counts the calls
	// of a model without a price.
	Cost pricing.Cost `json:"cost"`
	// Budget is the session's limits in force with what each has spent, and
	// the limit its last turn reached (SessionBudget); absent when it has
	// neither.
	Budget *SessionBudget `json:"budget,omitempty"`
	// Summaries counts summaries added, Trims agent.context.trimmed events.
	Summaries  int    `json:"summaries,omitempty"`
	Trims      int    `json:"trims,omitempty"`
	LastOutput string `json:"last_output,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	LastCode   string `json:"last_code,omitempty"`
	// Fault, when set, is where the session's log stopped being foldable: a
	// corrupt log (code corrupt_log, status failed) or a record of a newer
	// schema (code needs_newer_node, status needs_newer_node). See
	// docs/operations.md for the repair.
	Fault *projection.Fault `json:"fault,omitempty"`
	// AwaitingApproval: the turn (status waiting_tool) waits for a person to
	// approve or deny tool calls (tahctl approve / deny), not for a tool.
	AwaitingApproval bool `json:"awaiting_approval,omitempty"`
	// Parent, on a sub-agent's session, is the session and the tool call
	// that made it (docs/protocol.md, "Sub-agents").
	Parent *event.ParentLink `json:"parent,omitempty"`
	// Children are the sessions of the sub-agents this session's calls
	// made, oldest first; Tree, when it has any, what the whole tree (the
	// session, its children, theirs) used and cost. Only tah.api.get fills
	// them, not tah.api.list.
	Children []ChildSummary `json:"children,omitempty"`
	Tree     *TreeTotals    `json:"tree,omitempty"`
	// Definitions are the definitions of the agent the session's turns ran
	// under, one per change, each from the turn it took effect
	// (turn.started's definition; none for turns that recorded none). Only
	// tah.api.get fills them.
	Definitions []projection.TurnDefinition `json:"definitions,omitempty"`
	// Elided names the fields tah.api.list left out of this row or cut:
	// "labels" when the session's labels break the limits of CheckLabels (a
	// session created before they were checked: the labels within them are
	// kept, FitLabels), "last_output" and "last_error" when the row alone
	// would not fit in a reply (they are then cut to a preview).
	// tah.api.get returns the row whole, and the log every label.
	Elided []string `json:"elided,omitempty"`
}

// ChildSummary is a sub-agent's session, as its parent's row lists it.
type ChildSummary struct {
	ID     string            `json:"id"`
	Agent  string            `json:"agent"`
	CallID string            `json:"call_id"`
	Status projection.Status `json:"status"`
}

// TreeTotals are what a session and its sub-agents' sessions, at every
// depth, used and cost: usage rolls up to the parent.
type TreeTotals struct {
	// Sessions counts them, the session itself included.
	Sessions int          `json:"sessions"`
	Usage    llm.Usage    `json:"usage"`
	Cost     pricing.Cost `json:"cost"`
}

// ListRequest asks tah.api.list for a page of sessions, newest first.
type ListRequest struct {
	// Status keeps only the sessions in that state.
	Status projection.Status `json:"status,omitempty"`
	// Tenant keeps only that tenant's sessions (ids <tenant>.<id>). A
	// tenant's own API (TenantAPISubject) lists its tenant's whatever it
	// says.
	Tenant string `json:"tenant,omitempty"`
	// Limit is the page size: ListDefault when 0, at most ListMax.
	Limit  int `json:"limit,omitempty" jsonschema:"minimum=0"`
	Offset int `json:"offset,omitempty" jsonschema:"minimum=0"`
	// Before is the Next of the previous page.
	Before string `json:"before,omitempty"`
	// Known answers from the records the node has heard of (its tail's
	// and its own writes) without asking each shard's stream for its last
	// record first. A node taking over a dead node's partitions asks this
	// way for their open turns: right after the death, the shards whose
	// stream leader died answer nothing until their election, and the
	// dead node's records reached the read model's tail as they were
	// stored. A client that wants its own turn in the page leaves it unset.
	Known bool `json:"known,omitempty"`
}

// ListReply is a page of sessions, newest first, and the Before of the next
// page (empty on the last one). A page holds fewer sessions than the limit
// when they would not fit in one reply (NATS's max payload): Next is then set
// to the rest.
type ListReply struct {
	Sessions []SessionSummary `json:"sessions"`
	Next     string           `json:"next,omitempty"`
}

// ForkRequest asks tah.api.fork for a new session with the messages of
// Session's first Turns turns (0: only the system message; absent: all),
// or, with AtStep, its history up to that step; Edit replaces one message
// of the copy.
type ForkRequest struct {
	Session string `json:"session"`
	Turns   *int   `json:"turns,omitempty" jsonschema:"minimum=0"`
	// AtStep, when set (a step's id; not with Turns), ends the copy right
	// after that step: after a model call its answer (the calls it asked
	// for pending), after a tool step its result. When the turn goes on
	// there, the fork's turn is open: a resume runs it on (ForkReply's
	// OpenTurn). A step the session does not have is APIErrNotFound.
	AtStep string `json:"at_step,omitempty"`
	// Edit, when set, replaces the content of one message of the copy,
	// recorded as session.edited.
	Edit *ForkEdit `json:"edit,omitempty"`
}

// ForkEdit names one message of a fork's copy, by exactly one of
// ToolResult, Step, Turn and Message, and the content that replaces its
// own. An edit of a message the copy does not hold is APIErrBadRequest.
type ForkEdit struct {
	// ToolResult names the result of that tool call (its call id).
	ToolResult string `json:"tool_result,omitempty"`
	// Step names a step of the source (its id): a tool step's result, or
	// a model call's answer (its text).
	Step string `json:"step,omitempty"`
	// Turn names that turn's user message (from 1).
	Turn int `json:"turn,omitempty" jsonschema:"minimum=0"`
	// Message is the index of the message in the copy, as tah.api.messages
	// lists the new session's history (the system message 0).
	Message *int `json:"message,omitempty" jsonschema:"minimum=0"`
	// Content replaces the message's content.
	Content string `json:"content"`
	// IsError, on a tool result, says whether it is an error; absent: as
	// it was.
	IsError *bool `json:"is_error,omitempty"`
	// By says who edits, as the client says (tahctl: its credential's
	// name); recorded as given, not authenticated.
	By string `json:"by,omitempty"`
}

// Validate reports what is wrong with e: it names one message.
func (e ForkEdit) Validate() error {
	named := 0
	for _, set := range []bool{e.ToolResult != "", e.Step != "", e.Turn != 0, e.Message != nil} {
		if set {
			named++
		}
	}
	switch {
	case named != 1:
		return errors.New(`an edit names exactly one message: "tool_result" (a call id), "step" (a step), "turn" (its user message) or "message" (an index)`)
	case e.Turn < 0 || e.Message != nil && *e.Message < 0:
		return errors.New("an edit's turn or message is negative")
	}
	return nil
}

// ForkReply: the new session, whose session.forked is at Seq.
type ForkReply struct {
	Session    string `json:"session"`
	ForkedFrom string `json:"forked_from"`
	Seq        uint64 `json:"seq"`
	// AtStep is the request's: the step the copy ends after.
	AtStep string `json:"at_step,omitempty"`
	// OpenTurn, when not 0, is the turn the copy ends inside: the session
	// is running, and a resume (or the next input, which runs it on first)
	// continues it.
	OpenTurn int `json:"open_turn,omitempty"`
	// Edit is the edit made (session.edited), when the request asked one.
	Edit *event.SessionEditedData `json:"edit,omitempty"`
}

// MessagesReply is a session's full history, summaries included.
type MessagesReply struct {
	Session  string        `json:"session"`
	Messages []llm.Message `json:"messages"`
}

// StepsRequest asks tah.api.steps for a session's steps.
type StepsRequest struct {
	Session string `json:"session"`
	// Brief cuts tool outputs to a preview.
	Brief bool `json:"brief,omitempty"`
}

// StepsReply is a session's steps, in order.
type StepsReply struct {
	Session string            `json:"session"`
	Steps   []projection.Step `json:"steps"`
}

// EventsRequest asks tah.api.events for a session's log.
type EventsRequest struct {
	Session string `json:"session"`
	// FromSeq is the first stream sequence wanted (0: from the start).
	FromSeq uint64 `json:"from_seq,omitempty"`
	// Limit is the most events returned (0: all that fit), rounded up to
	// whole records: the events of one record are never split between
	// replies.
	Limit int `json:"limit,omitempty" jsonschema:"minimum=0"`
}

// EventsReply is a session's events and the session's last sequence.
type EventsReply struct {
	Session string        `json:"session"`
	Events  []event.Event `json:"events"`
	LastSeq uint64        `json:"last_seq"`
}

// StepRef names one step of a session: the request of tah.api.request.
type StepRef struct {
	Session string `json:"session"`
	StepID  string `json:"step_id"`
}

// RequestReply is the request an LLM step sent, rebuilt from the session's
// log (projection.RebuildRequest).
type RequestReply struct {
	Session string      `json:"session"`
	StepID  string      `json:"step_id"`
	Request llm.Request `json:"request"`
	// SHA256 is the hash of the request as sent, recorded in its llm.started
	// (event.RequestSHA256).
	SHA256 string `json:"sha256"`
	// Verified reports whether the rebuilt request hashes to SHA256: it is,
	// byte for byte, the request the step sent. False means the log and this
	// node's rules of preparation disagree: the request may differ from what
	// was sent.
	Verified bool `json:"verified"`
	// Recorded is true when the log holds the whole request (an llm.started
	// written before requests were recorded by reference): it was read, not
	// rebuilt, and SHA256 is computed from it.
	Recorded bool `json:"recorded,omitempty"`
}

// CommandRequest asks tah.api.compact, tah.api.resume or tah.api.cancel to
// publish that command to the session's input.
type CommandRequest struct {
	Session string `json:"session"`
	// ReplyTo is where the command's Outcome is published when it ends: a
	// subject under the client's inbox (CheckReplySubject), or the request is
	// refused.
	ReplyTo string `json:"reply_to,omitempty"`
	// Reason says why, for cancel.
	Reason string `json:"reason,omitempty"`
	// Budget is the change of a budget command.
	Budget *BudgetChange `json:"budget,omitempty"`
	// Decision is what an approve or a deny decides (and, for a budget, by:
	// who changed it).
	*Decision
}

// CommandReply answers at once with the id of the input published.
type CommandReply struct {
	Session string  `json:"session"`
	InputID string  `json:"input_id"`
	Command Command `json:"command"`
}

// EmptyRequest is the request of an endpoint that takes nothing:
// tah.api.status, the credentials API's lists.
type EmptyRequest struct{}

// ToolsRequest is the request of tah.api.tools.
type ToolsRequest struct {
	// Tenant, when set, lists the tools a session of that tenant is
	// offered: every tenant's and the tenant's own (docs/protocol.md, "A
	// tenant's tools"). A tenant's API sets it to the caller's tenant.
	Tenant string `json:"tenant,omitempty"`
}

// ToolsReply lists the tools the answering node offers to the model.
type ToolsReply struct {
	Tools []llm.ToolSchema `json:"tools"`
	// Approval names the tools among Tools whose calls wait for a person's
	// approval before they run, under the answering node's policy
	// (tools.approval); absent when none does.
	Approval []string `json:"approval,omitempty"`
	// MCPServers are the answering node's MCP servers (tools.mcp_config)
	// and where each stands, sorted by name; absent without any. A server
	// "connecting" has not been served since the node started (its tools are
	// not in Tools yet: a turn that begins meanwhile waits for it, within
	// tools.service_wait of the node's start).
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
}

// MCPServer is one MCP server of a node (ToolsReply.MCPServers).
type MCPServer struct {
	Name string `json:"name"`
	// State is "connecting" (not served since the node started: its first
	// start, or the retries of one that failed), "serving" or "restarting"
	// (it stopped after it was served; its tools are withdrawn meanwhile).
	State string `json:"state"`
	// Tools are the tools served now.
	Tools []string `json:"tools,omitempty"`
	// Failures counts the failed attempts to start it in a row, and Error
	// is the last one's error.
	Failures int    `json:"failures,omitempty"`
	Error    string `json:"error,omitempty"`
}

// StatusReply is the answering node and every live node of the cluster.
type StatusReply struct {
	Node string `json:"node"`
	NATS string `json:"nats"`
	// Partitions is the number of input partitions.
	Partitions int `json:"partitions"`
	// ActiveSessions counts the answering node's session actors.
	ActiveSessions int `json:"active_sessions"`
	// LogShards is the number of shards of the event log (TAH_EVT_0 to
	// TAH_EVT_<log_shards-1>): a session's records are in shard
	// Shard(sid, log_shards).
	LogShards int `json:"log_shards"`
	// ReadModelAt is, for each shard of the log in order, the last stream
	// sequence the node's read model applied; empty, as ReadModelPath, on
	// a worker (Worker).
	ReadModelAt   []uint64 `json:"read_model_at"`
	ReadModelPath string   `json:"read_model_path"`
	// Worker is set when the answering node holds no read model
	// (read_model=false): it runs sessions and serves every endpoint but
	// ReadModelEndpoints, which go to the nodes that hold one. Absent from
	// a node that holds one, and from a node that predates the field (every
	// such node holds one).
	Worker     bool   `json:"worker,omitempty"`
	Provider   string `json:"provider"`
	APIVersion string `json:"api_version"`
	// MaxInputBytes is the largest user message of a run the answering node
	// takes (agent.max_input_bytes, a setting every node shares): a larger
	// one is refused with input_too_large, so a client can refuse it before
	// it sends it. 0 from a node that predates the field.
	MaxInputBytes int `json:"max_input_bytes,omitempty"`
	// ProblemsSkipped counts the events the read model could not fold.
	ProblemsSkipped int64 `json:"problems_skipped"`
	// Time is the answering node's clock when it read Nodes: a client
	// measures the heartbeats' ages against it rather than its own clock.
	Time time.Time `json:"time"`
	// Nodes are the entries of tah_nodes written within the node TTL, sorted
	// by node id. Empty (never null) when they could not be read; NodesError
	// then says why: a status is most wanted when something is wrong.
	Nodes      []NodeRecord `json:"nodes"`
	NodesError string       `json:"nodes_error,omitempty"`
}

// Endpoint describes one endpoint of the API: its name and the types of its
// request and reply.
type Endpoint struct {
	Name    string
	Request any
	Reply   any
}

// Endpoints lists the API, in the order of docs/protocol.md.
func Endpoints() []Endpoint {
	return []Endpoint{
		{EndpointCreate, CreateRequest{}, CreateReply{}},
		{EndpointGet, SessionRequest{}, SessionSummary{}},
		{EndpointList, ListRequest{}, ListReply{}},
		{EndpointFork, ForkRequest{}, ForkReply{}},
		{EndpointMessages, SessionRequest{}, MessagesReply{}},
		{EndpointSteps, StepsRequest{}, StepsReply{}},
		{EndpointEvents, EventsRequest{}, EventsReply{}},
		{EndpointRequest, StepRef{}, RequestReply{}},
		{EndpointCompact, CommandRequest{}, CommandReply{}},
		{EndpointResume, CommandRequest{}, CommandReply{}},
		{EndpointCancel, CommandRequest{}, CommandReply{}},
		{EndpointApprove, CommandRequest{}, CommandReply{}},
		{EndpointDeny, CommandRequest{}, CommandReply{}},
		{EndpointBudget, CommandRequest{}, CommandReply{}},
		{EndpointTools, ToolsRequest{}, ToolsReply{}},
		{EndpointStatus, EmptyRequest{}, StatusReply{}},
		{EndpointArtifacts, SessionRequest{}, ArtifactsReply{}},
		{EndpointArtifact, ArtifactRequest{}, ArtifactReply{}},
		{EndpointSchedule, ScheduleRequest{}, Schedule{}},
		{EndpointSchedules, SessionRequest{}, SchedulesReply{}},
		{EndpointUnschedule, UnscheduleRequest{}, UnscheduleReply{}},
		{EndpointReplay, ReplayRequest{}, ReplayReply{}},
		{EndpointReplayLive, ReplayLiveRequest{}, ReplayReply{}},
	}
}

// ReadModelEndpoints are the endpoints that answer from a node's read model:
// only the nodes that hold one (read_model, the default) serve them, and a
// request to one of them that no node answers means that no node holds a
// read model (ErrNoReadModel), not that no node runs. The others the log,
// the buckets or the node itself answer, on every node.
func ReadModelEndpoints() []string {
	return []string{EndpointGet, EndpointList, EndpointMessages, EndpointSteps, EndpointArtifacts, EndpointArtifact}
}

// CredsAPIPrefix starts the subjects of the endpoints that issue, list and
// revoke credentials (tah.api.creds.<op>): two tokens after tah.api., so
// that the client role's tah.api.* does not reach them; only the admin role
// may call them.
const CredsAPIPrefix = APIPrefix + "creds."
