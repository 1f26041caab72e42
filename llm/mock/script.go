package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/llm"
)

// Script is what a scripted mock answers. Each call is answered by the first reply,
// in script order, that still has uses left and whose conditions all match; a call
// that no reply matches is an error (ErrUnexpectedCall), never a wrap-around.
//
// In JSON (see the package doc for an example):
//
//	{"pace": "20ms", "replies": [{"turn": 1, "text": "Hello"}, ...]}
type Script struct {
	// Pace is the pause between two streamed tokens, for replies that set none.
	Pace Duration `json:"pace,omitempty"`
	// Replies, in the order they are tried.
	Replies []Reply `json:"replies"`
}

// Reply is one scripted answer and the calls it may answer.
//
// Conditions (all that are set must hold; none set: any call):
// Call is the call's number (1 for the provider's first call); Turn is the number
// of user messages in the request that start a turn (a steer, which joins
// one, is not counted); Prompt is a substring and PromptRegexp a
// regular expression of the last user message's content; Compaction, when set,
// says whether the request must be a compaction request (CompactionMarker in a
// system message); AfterTool, when set, whether its last message must be a
// tool result (the model asked again after its calls ran).
//
// Answer: Text (streamed as Tokens, or split into words), Reasoning, ToolCalls
// (an empty ID gets one made up), then Error, if set, which fails the call after
// the text was streamed (a mid-stream error) or at once when there is no text.
//
// Timing: Delay before the first piece, Pace between pieces when streaming, Hold
// after the last piece before the answer completes (so that a test can cancel a
// call mid-stream). A cancelled context ends each wait at once.
type Reply struct {
	Call         int    `json:"call,omitempty"`
	Turn         int    `json:"turn,omitempty"`
	Prompt       string `json:"prompt,omitempty"`
	PromptRegexp string `json:"prompt_regexp,omitempty"`
	Compaction   *bool  `json:"compaction,omitempty"`
	AfterTool    *bool  `json:"after_tool,omitempty"`
	// Times is how many calls the reply answers: 0 or 1 once, n n times, -1
	// without limit.
	Times int `json:"times,omitempty"`

	Text      string         `json:"text,omitempty"`
	Tokens    []string       `json:"tokens,omitempty"`
	Reasoning string         `json:"reasoning,omitempty"`
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
	Error     *Error         `json:"error,omitempty"`

	Delay Duration `json:"delay,omitempty"`
	Pace  Duration `json:"pace,omitempty"`
	Hold  Duration `json:"hold,omitempty"`

	// Usage replaces the estimate (a token per four bytes of input, one per
	// streamed token of output).
	Usage *llm.Usage `json:"usage,omitempty"`
	// FinishReason replaces the default: tool_calls when there are calls, else stop.
	FinishReason llm.FinishReason `json:"finish_reason,omitempty"`
	// Model is the answer's model name; default: the request's, or "mock".
	Model string `json:"model,omitempty"`
}

// Error is a scripted failure, returned as a *llm.ProviderError: Status 429 wraps
// llm.ErrRateLimited, 400..499 llm.ErrBadRequest, 0 and 5xx llm.ErrUnavailable.
type Error struct {
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

// Duration is a time.Duration that reads from JSON as "15ms", "1.5s" or a number
// of milliseconds, and writes as the string form.
type Duration time.Duration

// MarshalJSON writes d as "15ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "15ms" or 15 (milliseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want e.g. \"15ms\" or \"2s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string like \"15ms\" or a number of milliseconds", b)
	}
	*d = Duration(f * float64(time.Millisecond))
	return nil
}

// Load reads a script from a JSON file.
func Load(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mock: script: %w", err)
	}
	s, err := parseScript(b)
	if err != nil {
		return nil, fmt.Errorf("mock: script %s: %w", path, err)
	}
	return s, nil
}

// ParseScript reads a script from JSON; unknown fields are an error, so that a
// typo does not silently change what the script matches.
func ParseScript(data []byte) (*Script, error) {
	s, err := parseScript(data)
	if err != nil {
		return nil, fmt.Errorf("mock: script: %w", err)
	}
	return s, nil
}

func parseScript(data []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate reports the first reply that cannot work.
func (s *Script) Validate() error {
	if s.Pace < 0 {
		return errors.New("pace is negative")
	}
	for i, r := range s.Replies {
		if err := r.validate(); err != nil {
			return fmt.Errorf("reply %d: %w", i+1, err)
		}
	}
	return nil
}

func (r Reply) validate() error {
	switch {
	case r.Call < 0:
		return errors.New("call is negative")
	case r.Turn < 0:
		return errors.New("turn is negative")
	case r.Times < -1:
		return errors.New("times must be -1 (no limit), 0, or more")
	case r.Text != "" && len(r.Tokens) > 0:
		return errors.New("set text or tokens, not both")
	case r.Delay < 0 || r.Pace < 0 || r.Hold < 0:
		return errors.New("a duration is negative")
	}
	if r.PromptRegexp != "" {
		if _, err := regexp.Compile(r.PromptRegexp); err != nil {
			return fmt.Errorf("prompt_regexp: %w", err)
		}
	}
	for j, c := range r.ToolCalls {
		if strings.TrimSpace(c.Name) == "" {
			return fmt.Errorf("tool call %d has no name", j+1)
		}
		if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
			return fmt.Errorf("tool call %d (%s): arguments are not valid JSON", j+1, c.Name)
		}
	}
	if e := r.Error; e != nil {
		if e.Status != 0 && (e.Status < 400 || e.Status > 599) {
			return fmt.Errorf("error status %d: want 0 or 400..599", e.Status)
		}
		if e.Message == "" {
			return errors.New("error has no message")
		}
	}
	return nil
}

// NewScript returns a script of replies, tried in this order.
func NewScript(replies ...Reply) *Script { return &Script{Replies: replies} }

// Add appends replies to s and returns s.
func (s *Script) Add(replies ...Reply) *Script {
	s.Replies = append(s.Replies, replies...)
	return s
}

// Say returns a reply with text, streamed word by word.
func Say(text string) Reply { return Reply{Text: text} }

// Stream returns a reply whose text is streamed as exactly these tokens.
func Stream(tokens ...string) Reply { return Reply{Tokens: tokens} }

// CallTool returns a reply that calls one tool; arguments is a JSON object.
func CallTool(name, arguments string) Reply {
	return Reply{}.AndCall(name, arguments)
}

// CallTools returns a reply that calls several tools at once.
func CallTools(calls ...llm.ToolCall) Reply {
	return Reply{ToolCalls: llm.Assistant("", calls...).Clone().ToolCalls}
}

// Fail returns a reply that fails with an HTTP-like status and a message.
func Fail(status int, message string) Reply {
	return Reply{Error: &Error{Status: status, Message: message}}
}

// AndCall adds a tool call to r; arguments is a JSON object ("" for {}).
func (r Reply) AndCall(name, arguments string) Reply {
	c := llm.ToolCall{Name: name}
	if arguments != "" {
		c.Arguments = json.RawMessage(arguments)
	}
	r.ToolCalls = append(append([]llm.ToolCall(nil), r.ToolCalls...), c)
	return r
}

// ThenFail makes r fail after its text was streamed: a mid-stream error.
func (r Reply) ThenFail(status int, message string) Reply {
	r.Error = &Error{Status: status, Message: message}
	return r
}

// OnCall makes r answer only call number n (counted from 1).
func (r Reply) OnCall(n int) Reply { r.Call = n; return r }

// OnTurn makes r answer only requests with n user messages.
func (r Reply) OnTurn(n int) Reply { r.Turn = n; return r }

// OnPrompt makes r answer only when the last user message contains sub.
func (r Reply) OnPrompt(sub string) Reply { r.Prompt = sub; return r }

// OnPromptMatch makes r answer only when the last user message matches the
// regular expression expr. It panics if expr does not compile, as
// regexp.MustCompile does.
func (r Reply) OnPromptMatch(expr string) Reply {
	regexp.MustCompile(expr)
	r.PromptRegexp = expr
	return r
}

// OnCompaction makes r answer only compaction requests (yes) or only other
// requests (!yes).
func (r Reply) OnCompaction(yes bool) Reply { r.Compaction = &yes; return r }

// Repeat lets r answer n calls (-1: any number).
func (r Reply) Repeat(n int) Reply { r.Times = n; return r }

// Always lets r answer any number of calls.
func (r Reply) Always() Reply { r.Times = -1; return r }

// After delays r's first piece by d.
func (r Reply) After(d time.Duration) Reply { r.Delay = Duration(d); return r }

// Paced streams r's pieces d apart.
func (r Reply) Paced(d time.Duration) Reply { r.Pace = Duration(d); return r }

// Holding keeps the call open for d after r's last piece.
func (r Reply) Holding(d time.Duration) Reply { r.Hold = Duration(d); return r }

// WithReasoning adds visible thinking, streamed before the text.
func (r Reply) WithReasoning(s string) Reply { r.Reasoning = s; return r }

// WithUsage sets the usage r reports.
func (r Reply) WithUsage(u llm.Usage) Reply { r.Usage = &u; return r }

// WithFinish sets the finish reason r reports.
func (r Reply) WithFinish(f llm.FinishReason) Reply { r.FinishReason = f; return r }

// WithModel sets the model name r reports.
func (r Reply) WithModel(name string) Reply { r.Model = name; return r }

// limit is how many calls r may answer (-1: no limit).
func (r Reply) limit() int {
	switch {
	case r.Times < 0:
		return -1
	case r.Times == 0:
		return 1
	default:
		return r.Times
	}
}
