package wire

import "github.com/tah-dev/tah/llm"

// Delta is the body of a token delta, a core NATS message on
// tah.sess.<sid>.delta with the headers Tah-Epoch and Tah-Delta-Seq: a piece
// of a streamed answer and the LLM step it belongs to, as a flat JSON object
// ({"step_id":"st_…","text":"Hel"}). Deltas are not stored: the final text is
// in llm.completed. A subscriber drops a delta whose epoch is lower than the
// highest it has seen for the session: it comes from an owner that lost it.
type Delta struct {
	// StepID is the LLM step (llm.started) the delta belongs to.
	StepID string `json:"step_id,omitempty"`
	llm.Delta
}
