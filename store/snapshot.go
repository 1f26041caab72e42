package store

import (
	"context"

	"github.com/tah-dev/tah/projection"
)

// snapshot is what the table snapshots holds of a session: its folded state
// as of the last batch that changed it, written by every such batch (so the
// tail after it is empty but for a batch in progress). The lists that have
// rows of their own (messages, steps, tool calls, artifacts, checkpoints)
// are left out and read back from those rows, which every batch writes in
// the same transaction: a snapshot is then a kilobyte or so, however long
// the session, where one that held the whole history again cost a quarter
// of the read model's work (written at a geometric cadence, about four times
// the session's size in all).
//
// Rows is nil in a snapshot written before this form: it holds its lists.
type snapshot struct {
	projection.State
	Rows *snapshotRows `json:"rows,omitempty"`
}

// snapshotRows says which lists are in their rows, and holds what of them
// the rows have no column for.
type snapshotRows struct {
	Messages    bool `json:"messages,omitempty"`
	Steps       bool `json:"steps,omitempty"`
	ToolCalls   bool `json:"tool_calls,omitempty"`
	Artifacts   bool `json:"artifacts,omitempty"`
	Checkpoints bool `json:"checkpoints,omitempty"`
	// Steers are the indexes of the messages that are steers (llm.Message.Steer).
	Steers []int `json:"steers,omitempty"`
	// Approvals are the tool calls' approvals, by index (ToolCallRecord.Approval).
	Approvals map[int]projection.Approval `json:"approvals,omitempty"`
}

// slimSnapshot is st as the table snapshots holds it: its non-empty lists
// left to their rows (an empty one stays, nil or not, as the fold has it).
// It shares st's memory.
func slimSnapshot(st *projection.State) snapshot {
	sn := snapshot{State: *st, Rows: &snapshotRows{}}
	r := sn.Rows
	if len(st.Messages) > 0 {
		sn.Messages, r.Messages = nil, true
		for i := range st.Messages {
			if st.Messages[i].Steer {
				r.Steers = append(r.Steers, i)
			}
		}
	}
	if len(st.Steps) > 0 {
		sn.Steps, r.Steps = nil, true
	}
	if len(st.ToolCalls) > 0 {
		sn.ToolCalls, r.ToolCalls = nil, true
		for i := range st.ToolCalls {
			if a := st.ToolCalls[i].Approval; a != "" {
				if r.Approvals == nil {
					r.Approvals = make(map[int]projection.Approval)
				}
				r.Approvals[i] = a
			}
		}
	}
	if len(st.Artifacts) > 0 {
		sn.Artifacts, r.Artifacts = nil, true
	}
	if len(st.Checkpoints) > 0 {
		sn.Checkpoints, r.Checkpoints = nil, true
	}
	return sn
}

// state is the snapshot's state, its lists read from their rows where they
// are there (q sees the rows of the snapshot's batch).
func (sn *snapshot) state(ctx context.Context, q querier, id string) (projection.State, error) {
	st, r := sn.State, sn.Rows
	if r == nil {
		return st, nil
	}
	var err error
	if r.Messages {
		if st.Messages, err = readMessages(ctx, q, id, nil); err != nil {
			return st, err
		}
		for _, i := range r.Steers {
			if i >= 0 && i < len(st.Messages) {
				st.Messages[i].Steer = true
			}
		}
	}
	if r.Steps {
		if st.Steps, err = readSteps(ctx, q, id, nil); err != nil {
			return st, err
		}
	}
	if r.ToolCalls {
		if st.ToolCalls, err = readToolCalls(ctx, q, id, nil); err != nil {
			return st, err
		}
		for i, a := range r.Approvals {
			if i >= 0 && i < len(st.ToolCalls) {
				st.ToolCalls[i].Approval = a
			}
		}
	}
	if r.Artifacts {
		if st.Artifacts, err = readArtifacts(ctx, q, id, nil); err != nil {
			return st, err
		}
	}
	if r.Checkpoints {
		if st.Checkpoints, err = readCheckpoints(ctx, q, id, nil); err != nil {
			return st, err
		}
	}
	return st, nil
}
