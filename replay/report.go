package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// The kinds of divergence.
const (
	// KindRequest: the replay's request differs from the recorded one.
	KindRequest = "request"
	// KindRebuild: this build does not rebuild the recorded request byte
	// for byte (the log's hash says so), and sends another.
	KindRebuild = "rebuild"
	// KindMaxSteps: one run ends a turn at maxSteps where the other asks
	// the model again.
	KindMaxSteps = "max_steps"
	// KindCompaction: one run compacts the context before a turn's first
	// LLM step where the other does not, or puts the summary elsewhere.
	KindCompaction = "compaction"
	// KindFold: the replayed history cannot take a recorded event.
	KindFold = "fold"
)

// Report is what a replay found.
type Report struct {
	Session string `json:"session"`
	// Identical is true when every compared step and decision is the
	// recording's; Divergence is the first that is not.
	Identical  bool        `json:"identical"`
	Divergence *Divergence `json:"divergence,omitempty"`
	// Turns counts the turns compared (up to the divergence), Steps the
	// LLM steps found identical, Events the events folded.
	Turns  int `json:"turns"`
	Steps  int `json:"steps"`
	Events int `json:"events"`
	// Definition is what the recording was compared with.
	Definition DefinitionInfo `json:"definition"`
	// DefinitionChanged, when set, says where Definition differs from the
	// definition the first compared turn recorded (absent: the same, or
	// none recorded).
	DefinitionChanged *DefinitionChanged `json:"definition_changed,omitempty"`
	// Live is the live session made at the divergence (tah.api.replay_live,
	// tahctl replay --live); Run leaves it nil.
	Live *Live `json:"live,omitempty"`
}

// Live is a replay's live session: a fork of the recorded session where
// the replay diverged, which runs on under the definition the replay
// compared with, with the real model and tools.
type Live struct {
	// Session is the live session; the report's Session the recorded one.
	Session string `json:"session"`
	// Turn is the recorded turn it runs again; Turns the recorded turns
	// before it, which it holds whole.
	Turn  int `json:"turn"`
	Turns int `json:"turns"`
	// AfterStep, when set, is the recorded step of Turn the live session's
	// copy ends after (the step before the diverging one): its turn is
	// open there, and the caller resumes it (a resume input). Empty (a
	// divergence at the turn's first step): the turn starts over, and the
	// caller sends Message.
	AfterStep string `json:"after_step,omitempty"`
	// Message is the user message that started the recorded turn.
	Message llm.Message `json:"message"`
}

// Divergence is where a replay departs from the recording, and how.
type Divergence struct {
	// Turn is the turn; Step the LLM step's number in it (1 for its
	// first); StepID the recorded LLM step, when the divergence is one's.
	Turn   int    `json:"turn"`
	Step   int    `json:"step"`
	StepID string `json:"step_id,omitempty"`
	// Seq is the stream sequence of the recorded event where the two part.
	Seq uint64 `json:"seq"`
	// Kind is one of the Kind* constants; Summary says it in a sentence.
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
	// RecordedSHA256 and ReplayedSHA256 are the hashes of the two requests
	// (event.RequestSHA256), for a divergence at an LLM step.
	RecordedSHA256 string `json:"recorded_sha256,omitempty"`
	ReplayedSHA256 string `json:"replayed_sha256,omitempty"`
	// Diffs are what differs.
	Diffs []Diff `json:"diffs,omitempty"`
}

// Diff is one difference between the recorded run and the replay.
type Diff struct {
	// What differs: "message" (Index, Role, Field), "messages" (their
	// number), "tool" (Name, Field: "description", "input_schema",
	// "added", "removed"), "tools" (their order), or a setting: "model",
	// "options", "context_chars", "max_steps", "compaction".
	What  string `json:"what"`
	Index *int   `json:"index,omitempty"`
	Role  string `json:"role,omitempty"`
	Name  string `json:"name,omitempty"`
	// Field is the part of a message ("role", "content", "tool_calls",
	// "tool_call_id", "name", "is_error") or tool that differs.
	Field string `json:"field,omitempty"`
	// Recorded and Replayed are the two values, cut around where they
	// part when long.
	Recorded string `json:"recorded,omitempty"`
	Replayed string `json:"replayed,omitempty"`
}

// DefinitionInfo describes a Definition: its settings, the size and hash
// of its system prompt, its tools and their digest.
type DefinitionInfo struct {
	Model              string   `json:"model,omitempty"`
	SystemPromptChars  int      `json:"system_prompt_chars"`
	SystemPromptSHA256 string   `json:"system_prompt_sha256,omitempty"`
	ContextChars       int      `json:"context_chars,omitempty"`
	MaxSteps           int      `json:"max_steps"`
	Tools              []string `json:"tools,omitempty"`
	ToolsDigest        string   `json:"tools_digest,omitempty"`
}

func describe(def Definition) DefinitionInfo {
	c := def.Config
	info := DefinitionInfo{Model: c.Model, SystemPromptChars: len([]rune(c.SystemPrompt)), ContextChars: c.ContextChars, MaxSteps: c.MaxSteps}
	if c.SystemPrompt != "" {
		sum := sha256.Sum256([]byte(c.SystemPrompt))
		info.SystemPromptSHA256 = hex.EncodeToString(sum[:])
	}
	for _, t := range def.Tools {
		info.Tools = append(info.Tools, t.Name)
	}
	info.ToolsDigest, _ = event.ToolsDigest(def.Tools)
	return info
}

// Summary says in one line what the replay found: "identical over 2
// turns, 5 LLM steps", or where it diverged.
func (r Report) Summary() string {
	if r.Divergence == nil {
		return fmt.Sprintf("identical over %s, %s", plural(r.Turns, "turn"), plural(r.Steps, "LLM step"))
	}
	return r.Divergence.Headline()
}

// Headline says where d is and what it is, in one line.
func (d Divergence) Headline() string {
	where := fmt.Sprintf("diverged at turn %d, LLM step %d", d.Turn, d.Step)
	switch {
	case d.StepID != "":
		where += fmt.Sprintf(" (%s, seq %d)", d.StepID, d.Seq)
	case d.Seq != 0:
		where += fmt.Sprintf(" (seq %d)", d.Seq)
	}
	return where + ": " + d.Summary
}

// Text is d for a person: its headline, each difference, and the hashes
// of the two requests.
func (d Divergence) Text() string {
	var b strings.Builder
	b.WriteString(d.Headline())
	b.WriteByte('\n')
	for _, x := range d.Diffs {
		b.WriteString(x.Text())
	}
	if d.RecordedSHA256 != "" || d.ReplayedSHA256 != "" {
		fmt.Fprintf(&b, "  request sha256: recorded %s\n                  replay   %s\n", d.RecordedSHA256, d.ReplayedSHA256)
	}
	return b.String()
}

// Text is x for a person, indented, one or three lines.
func (x Diff) Text() string {
	var head string
	switch x.What {
	case "message":
		head = fmt.Sprintf("message %d (%s), %s", deref(x.Index), x.Role, x.Field)
	case "tool":
		switch x.Field {
		case "added":
			return fmt.Sprintf("  tool %s: offered by the replay only\n", x.Name)
		case "removed":
			return fmt.Sprintf("  tool %s: offered by the recording only\n", x.Name)
		}
		head = fmt.Sprintf("tool %s, %s", x.Name, x.Field)
	default:
		head = x.What
		if x.Field != "" {
			head += " " + x.Field
		}
		if len(x.Recorded)+len(x.Replayed) < 60 {
			return fmt.Sprintf("  %s: recorded %s, replay %s\n", head, quote(x.Recorded), quote(x.Replayed))
		}
	}
	return fmt.Sprintf("  %s:\n    recorded: %s\n    replay:   %s\n", head, quote(x.Recorded), quote(x.Replayed))
}

// quote is s as a Go string literal, "(none)" for nothing, or s itself
// when it is a number or a word of the report's own ("unlimited").
func quote(s string) string {
	if s == "" {
		return "(none)"
	}
	if _, err := strconv.Atoi(s); err == nil || s == "unlimited" {
		return s
	}
	return strconv.Quote(s)
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
