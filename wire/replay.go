package wire

import (
	"errors"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/replay"
)

// EndpointReplay replays a recorded session against the answering node's
// agent definition, with the request's changes to it (package replay): no
// model is asked, no tool runs, nothing is written.
const EndpointReplay = "replay"

// EndpointReplayLive replays a session as EndpointReplay does and, when the
// replay diverges, forks the session at the start of the diverging turn
// into a new session that runs under the replay's definition (its
// session.created pins it: event.SessionCreatedData.Definition), labelled
// LabelReplayOf. The reply's Live names it and carries the turn's user
// message, which the caller sends it as its first turn: the real model and
// tools answer it. It writes, so observers may not call it.
const EndpointReplayLive = "replay_live"

// LabelReplayOf labels a replay's live session with the session it
// replays, so that it is never taken for a real one (tahctl list marks it;
// tahctl replay --all skips it).
const LabelReplayOf = "replay-of"

// ReplayRequest asks tah.api.replay to replay a session. The definition
// compared with the recording is the answering node's for that session
// (a sub-agent's child's is its sub-agent's), with what the request
// changes of it.
type ReplayRequest struct {
	Session string `json:"session"`
	// Turn, when not 0, compares only that turn's LLM steps; a turn the
	// session does not have is APIErrBadRequest.
	Turn int `json:"turn,omitempty" jsonschema:"minimum=0"`
	// FromStep, when set, compares the LLM steps from that step on (a
	// step's id); a step the session does not have is APIErrNotFound.
	FromStep string `json:"from_step,omitempty"`
	// SystemPrompt, when set, replaces the system prompt ("" for none).
	SystemPrompt *string `json:"system_prompt,omitempty"`
	// Model, when set, replaces the model.
	Model string `json:"model,omitempty"`
	// ContextChars, when set, replaces the context budget (0: none).
	ContextChars *int `json:"context_chars,omitempty" jsonschema:"minimum=0"`
	// MaxSteps, when set, replaces the most LLM steps of a turn (0:
	// unlimited).
	MaxSteps *int `json:"max_steps,omitempty" jsonschema:"minimum=0"`
	// Tools, when set, replace the tools offered, in order ([] for none).
	Tools *[]llm.ToolSchema `json:"tools,omitempty"`
}

// Validate reports what is wrong with r's changes to the definition.
func (r ReplayRequest) Validate() error {
	switch {
	case r.Turn < 0:
		return errors.New("turn is negative: give a turn's number (from 1), or none for every turn")
	case r.ContextChars != nil && *r.ContextChars < 0:
		return errors.New("context_chars is negative: give a budget in characters, 0 for none")
	case r.MaxSteps != nil && *r.MaxSteps < 0:
		return errors.New("max_steps is negative: give the most LLM steps of a turn, 0 for unlimited")
	}
	if r.Tools != nil {
		seen := map[string]bool{}
		for _, t := range *r.Tools {
			if t.Name == "" || seen[t.Name] {
				return errors.New("tools: every tool needs a name of its own")
			}
			seen[t.Name] = true
		}
	}
	return nil
}

// ReplayReply is the replay's report: identical, or where and how the
// replay departs from the recording; from tah.api.replay_live, with the
// live session it made (Live).
type ReplayReply = replay.Report

// ReplayLiveRequest asks tah.api.replay_live for a replay, and a live
// session at its divergence. Tools may not be set: a live run calls the
// node's tools, and a changed schema would be offered for tools that run
// as they are.
type ReplayLiveRequest = ReplayRequest
