package session

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Sub-agents: an agent definition (Config.SubAgents) offered to the model
// as a tool, agent_<name>, whose call runs as a session of its own, a
// child: its id is made from the parent's and the call's (ChildID), so
// that a call carried out again (its parent resumed after a crash) finds
// the same child and never makes another; its first input's id is made
// from the call too, so that it is taken once. The call's tool.started
// names the child (runner "agent:<child>"); the parent's turn then waits,
// holding nothing (no goroutine: the actor may passivate), until every
// child it waits for has ended. A child that ends sends its parent a
// resume; the parent, resuming, reads each waiting child's log and records
// the call's result (tool.finished) from the child's end: its answer, or its
// failure as an error result the parent's model sees. A cancel of the
// parent answers its waiting calls (cancelled) and cancels the children.

// SubAgent is an agent a session's model may call as a tool.
type SubAgent struct {
	// Name identifies it; its tool is AgentToolPrefix + Name.
	Name string
	// Description tells the parent's model when to call it.
	Description string
	// SystemPrompt, MaxSteps (0: the node's) and Model (empty: the
	// node's) define the child's turn.
	SystemPrompt string
	MaxSteps     int
	Model        string
	// Tools, when set, are the tools the child may call: names or globs
	// (path.Match: "fs__*") of the node's tools and sub-agents
	// (agent_<name>); empty: all of them.
	Tools []string
	// Budget limits each of the child's turns (its session's own turn
	// budget); the node's applies too, the tightest winning. Zero: no
	// limit of its own.
	Budget event.Limits
}

// Sub-agent limits.
const (
	// AgentToolPrefix starts the tool name of every sub-agent.
	AgentToolPrefix = "agent_"
	// MaxAgentDepth is how deep sub-agents nest: a session at this depth
	// is offered none.
	MaxAgentDepth = 3
	// MaxAgentFanOut is the most sub-agents one model answer may call: the
	// calls beyond get an error result.
	MaxAgentFanOut = 8
	// publishTimeout bounds a publish the work makes on the side (a child's
	// news to its parent, a cancel to a child).
	publishTimeout = 10 * time.Second
)

// ErrBadSubAgent wraps why a sub-agent definition is refused.
var ErrBadSubAgent = errors.New("invalid sub-agent")

// ValidateSubAgents reports what is wrong with defs.
func ValidateSubAgents(defs []SubAgent) error {
	seen := map[string]bool{}
	for _, d := range defs {
		if err := tools.ValidName(AgentToolPrefix + d.Name); err != nil || d.Name == "" {
			return fmt.Errorf("sub-agent %q: its name must be 1 to 58 letters, digits, '_' or '-': %w", d.Name, ErrBadSubAgent)
		}
		if seen[d.Name] {
			return fmt.Errorf("sub-agent %q is defined twice: %w", d.Name, ErrBadSubAgent)
		}
		seen[d.Name] = true
		if strings.TrimSpace(d.Description) == "" {
			return fmt.Errorf("sub-agent %q has no description: the model reads it to know when to call it: %w", d.Name, ErrBadSubAgent)
		}
		for _, pat := range d.Tools {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				return fmt.Errorf("sub-agent %q: tool %q is neither a name nor a glob (path.Match): %w", d.Name, pat, ErrBadSubAgent)
			}
		}
		if err := (event.Budget{Turn: d.Budget}).Validate(); err != nil {
			return fmt.Errorf("sub-agent %q: budget: %v: %w", d.Name, err, ErrBadSubAgent)
		}
	}
	return nil
}

// ChildID is the session id of the child that call callID of session
// parent makes: the same for the same call, whatever node makes it, in the
// parent's tenant.
func ChildID(parent, callID string) string {
	sum := sha256.Sum256([]byte(parent + "\x00" + callID))
	enc := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
	var b strings.Builder
	b.WriteString("s_")
	for _, c := range enc {
		if b.Len() == 22 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return event.InTenant(event.TenantOf(parent), b.String())
}

// childInputID is the id of the run input that starts a child's turn.
func childInputID(child string) string { return "in_spawn_" + strings.TrimPrefix(child, "s_") }

// doneInputID is the id of the resume a child sends its parent when it ends.
func doneInputID(child string, turn int) string {
	return fmt.Sprintf("in_done_%s_%d", strings.TrimPrefix(child, "s_"), turn)
}

// subAgent is the definition whose tool is name, or nil.
func (a *AgentContext) subAgent(name string) *SubAgent {
	agent, ok := strings.CutPrefix(name, AgentToolPrefix)
	if !ok {
		return nil
	}
	for i := range a.Config.SubAgents {
		if a.Config.SubAgents[i].Name == agent {
			return &a.Config.SubAgents[i]
		}
	}
	return nil
}

// depth is how deep a's session is among sub-agents (0: not a child).
func (a *AgentContext) depth() int {
	if p := a.state.Parent; p != nil {
		return p.Depth
	}
	return 0
}

var agentSchema = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"what the agent is to do, with everything it needs to know: it sees nothing else of this conversation"}},"required":["task"],"additionalProperties":false}`)

// offeredTools are the tools the model is offered: the catalog's, and the
// sub-agents' while the session is not nested too deep.
func (a *AgentContext) offeredTools() []llm.ToolSchema {
	return offeredOf(a.Config, a.Tools.Schemas(), a.depth())
}

// offeredOf are the tools a session of configuration c, depth deep among
// sub-agents, is offered from catalog: those c allows, and its sub-agents'.
func offeredOf(c Config, catalog []llm.ToolSchema, depth int) []llm.ToolSchema {
	var out []llm.ToolSchema
	for _, t := range catalog {
		if c.allows(t.Name) {
			out = append(out, t)
		}
	}
	if depth >= MaxAgentDepth {
		return out
	}
	for _, d := range c.SubAgents {
		if name := AgentToolPrefix + d.Name; c.allows(name) {
			out = append(out, llm.ToolSchema{Name: name,
				Description: d.Description + " (a sub-agent: it works on the task in a session of its own and answers with its result)",
				InputSchema: agentSchema})
		}
	}
	return out
}

// refuseDisallowed answers, with an error result, each call of calls to a
// tool its session may not call (Config.Tools: a sub-agent's child that
// asks for a tool its definition leaves out), and reports whether it
// answered any.
func refuseDisallowed(a *AgentContext, calls []llm.ToolCall) (bool, error) {
	refused := false
	for _, c := range calls {
		if a.Config.allows(c.Name) {
			continue
		}
		why := fmt.Sprintf("Error: this agent may not call %s: it may call only %s.", c.Name, strings.Join(a.Config.Tools, ", "))
		if err := a.Stage(event.ToolFinished, toolFinished("", settled(c, event.CodeUnknownTool, why))); err != nil {
			return false, err
		}
		refused = true
	}
	return refused, nil
}

// splitAgentCalls parts calls into those of sub-agents and the others.
func splitAgentCalls(a *AgentContext, calls []llm.ToolCall) (agents, others []llm.ToolCall) {
	for _, c := range calls {
		if a.subAgent(c.Name) != nil {
			agents = append(agents, c)
		} else {
			others = append(others, c)
		}
	}
	return agents, others
}

// childConfig is the configuration a child of definition d runs with.
func childConfig(node Config, d *SubAgent) Config {
	c := node
	c.SystemPrompt, c.MaxSteps, c.Tools = d.SystemPrompt, node.MaxSteps, d.Tools
	if d.MaxSteps != 0 {
		c.MaxSteps = d.MaxSteps
	}
	if d.Model != "" {
		c.Model = d.Model
	}
	return c
}

// configOf is the configuration a's session runs with: a child's
// definition's, else the node's; the definition the session was created
// with (a replay's live session: replay.go), when it has one, over either.
func (m *Manager) configOf(st *projection.State) Config {
	return withDefinition(configFor(m.cfg, st.Parent), st.Definition)
}

// configFor is the configuration a session whose parent link is parent
// (nil: none) runs with on a node of configuration node.
func configFor(node Config, parent *event.ParentLink) Config {
	if parent != nil {
		for i := range node.SubAgents {
			if node.SubAgents[i].Name == parent.Agent {
				return childConfig(node, &node.SubAgents[i])
			}
		}
	}
	return node
}

// Definition is what the LLM requests of a session whose parent link is
// parent (nil: none) are made of, on a node of configuration node whose
// tools are catalog: the configuration its claims record (a sub-agent's
// child's is its definition's) and the tools each step offers, in order.
// Replay (package replay) compares a recorded session's requests with
// those this definition makes.
func Definition(node Config, catalog []llm.ToolSchema, parent *event.ParentLink) (event.Config, []llm.ToolSchema) {
	c := configFor(node, parent)
	depth := 0
	if parent != nil {
		depth = parent.Depth
	}
	return c.eventConfig(), offeredOf(c, catalog, depth)
}

// spawnAgents carries out the sub-agent calls of the model's answer: each
// refused call (past the fan-out, too deep, no task) gets an error result;
// the others a tool.started naming their child, written before any child
// is made, then their children (spawn).
func spawnAgents(ctx context.Context, a *AgentContext, calls []llm.ToolCall) error {
	type spawnable struct {
		call llm.ToolCall
		task string
	}
	var ok []spawnable
	for i, c := range calls {
		var in struct {
			Task string `json:"task"`
		}
		_ = json.Unmarshal(c.Arguments, &in)
		var why string
		switch {
		case i >= MaxAgentFanOut:
			why = fmt.Sprintf("Error: at most %d sub-agents run for one answer; call %s again once these have answered.", MaxAgentFanOut, c.Name)
		case a.depth() >= MaxAgentDepth:
			why = fmt.Sprintf("Error: sub-agents nest %d deep at most; do the task yourself.", MaxAgentDepth)
		case strings.TrimSpace(in.Task) == "":
			why = fmt.Sprintf(`Error: %s needs {"task": "..."}: say what it is to do.`, c.Name)
		}
		if why != "" {
			if err := a.Stage(event.ToolFinished, toolFinished("", settled(c, event.CodeInvalidInput, why))); err != nil {
				return err
			}
			continue
		}
		ok = append(ok, spawnable{c, in.Task})
	}
	ids := make([]string, len(ok))
	spawned := make([]llm.ToolCall, len(ok))
	for i, s := range ok {
		ids[i], spawned[i] = a.NewStepID("agent"), s.call
		started := event.ToolStartedData{StepID: ids[i], Call: s.call, Runner: event.AgentRunnerPrefix + ChildID(a.Session, s.call.ID)}
		var err error
		if i < len(ok)-1 {
			err = a.Stage(event.ToolStarted, started)
		} else {
			err = a.Append(ctx, event.ToolStarted, started)
		}
		if err != nil {
			return err
		}
	}
	// Each call's execute_tool span parents the child's turn (the task
	// input carries it): the child's work is in the parent's trace. The
	// span ends once the task is sent; the wait holds no span open.
	spans := toolSpans(ctx, a, ids, spawned)
	for i, s := range ok {
		sctx := ctx
		if spans != nil {
			sctx = trace.ContextWithSpan(ctx, spans[i])
		}
		err := spawn(sctx, a, s.call, s.task)
		if spans != nil {
			spans[i].End()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// spawn makes the child of call (if it is not there yet) and sends it the
// task, as an input of an id of its own (taken once).
func spawn(ctx context.Context, a *AgentContext, call llm.ToolCall, task string) error {
	d := a.subAgent(call.Name)
	child := ChildID(a.Session, call.ID)
	link := &event.ParentLink{Session: a.Session, CallID: call.ID, Agent: d.Name, Depth: a.depth() + 1}
	created := event.SessionCreatedData{Config: childConfig(a.Config, d).eventConfig(), Parent: link}
	if !d.Budget.IsZero() {
		created.Budget = &event.Budget{Turn: d.Budget}
	}
	_, err := create(ctx, a.bus, child, created)
	if err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("session %s: sub-agent %s: create child %s: %w", a.Session, d.Name, child, err)
	}
	if _, err := a.bus.PublishInput(ctx, child, wire.Input{ID: childInputID(child), Command: wire.CommandRun, Text: task}); err != nil {
		return fmt.Errorf("session %s: sub-agent %s: send the task to %s: %w", a.Session, d.Name, child, err)
	}
	return nil
}

// collectAgents records the result of every waiting sub-agent call whose
// child has ended (its log read), and sends again the task of those whose
// child has not begun it (a node that died before it made the child or sent
// the task: it finds the same child, and the input is taken once); a child
// that works on its task is left to it, its end resumes the parent. What a
// resume of the parent does.
func collectAgents(ctx context.Context, a *AgentContext) error {
	for _, s := range a.State().WaitingChildren() {
		call := stepCall(s)
		child := s.Child
		st, err := childState(ctx, a.bus, child)
		if err != nil {
			return err
		}
		if st != nil && st.Turn > 0 && st.Status.Active() {
			continue // at work: its end sends the parent a resume
		}
		if st == nil || st.Turn == 0 {
			var in struct {
				Task string `json:"task"`
			}
			_ = json.Unmarshal(s.Input, &in)
			if err := spawn(ctx, a, call, in.Task); err != nil {
				return err
			}
			continue
		}
		finished, err := a.fitResult(ctx, toolFinished(s.ID, toolrunner.CallResult{Call: call, Result: childResult(call.Name, child, st)}))
		if err != nil {
			return err
		}
		if err := a.Stage(event.ToolFinished, finished); err != nil {
			return err
		}
	}
	return nil
}

// childState is child's state folded from its log; nil when it has none.
func childState(ctx context.Context, b *bus.Bus, child string) (*projection.State, error) {
	evs, _, err := b.Replay(ctx, child, 1)
	if err != nil && !errors.As(err, new(*projection.Fault)) {
		return nil, fmt.Errorf("read sub-agent session %s: %w", child, err)
	}
	if len(evs) == 0 {
		return nil, nil
	}
	var st projection.State
	projection.FoldLog(&st, evs)
	return &st, nil
}

// childResult is the result of a sub-agent call whose child ended as st
// says.
func childResult(name, child string, st *projection.State) tools.Result {
	switch st.Status {
	case projection.StatusCompleted:
		return tools.Text(st.LastOutput)
	case projection.StatusCancelled:
		return tools.Failed(event.CodeCancelled, fmt.Sprintf("Error: the sub-agent %s (session %s) was cancelled: %s", name, child, st.LastError))
	}
	return tools.Failed(event.CodeToolError, fmt.Sprintf("Error: the sub-agent %s (session %s) failed: %s [%s]", name, child, st.LastError, st.LastCode))
}

// answerAgents gives every waiting sub-agent call a result (code
// cancelled), when a cancel or the budget ends the turn, and cancels the
// children (their own turns answer their calls).
func answerAgents(ctx context.Context, a *AgentContext) error {
	for _, s := range a.State().WaitingChildren() {
		child := s.Child
		r := settled(stepCall(s), event.CodeCancelled, fmt.Sprintf("Error: the sub-agent call %s was cancelled with its turn; its session %s was cancelled too.", s.Tool, child))
		if err := a.Stage(event.ToolFinished, toolFinished(s.ID, r)); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		_, err := a.bus.PublishInput(cctx, child, wire.Input{ID: "in_cancel_" + strings.TrimPrefix(child, "s_"), Command: wire.CommandCancel,
			Reason: fmt.Sprintf("its parent %s was cancelled", a.Session)})
		cancel()
		if err != nil {
			a.log.Warn("sub-agent not cancelled with its parent: it ends its turn by itself", "session", a.Session, "child", child, "err", err)
		}
	}
	return nil
}

// tellParent sends a child's parent a resume once the child's turn ended,
// so that the parent records the call's result: again after a crash, and
// when the child's input comes again (its id makes it one input).
func (m *Manager) tellParent(ctx context.Context, a *AgentContext) {
	st := a.state
	if st.Parent == nil || st.Turn == 0 || st.Status.Active() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if _, err := m.bus.PublishInput(ctx, st.Parent.Session, wire.Input{ID: doneInputID(a.Session, st.Turn), Command: wire.CommandResume}); err != nil {
		m.cfg.logger().Warn("the parent of a sub-agent not told it ended: it learns it when it resumes", "session", a.Session, "parent", st.Parent.Session, "err", err)
	}
}

// isChildNews reports whether cmd is the resume a child sends its parent
// when it ends (doneInputID).
func isChildNews(cmd *Command) bool {
	return cmd.Kind == wire.CommandResume && strings.HasPrefix(cmd.InputID, "in_done_")
}
