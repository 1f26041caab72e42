package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// Name is the provider's name in errors and in llm.Config.Provider.
const Name = llm.ProviderMock

// CompactionMarker, in a system message of a request, marks it as a compaction
// request: the demo answers it with a summary, and a scripted reply can match it
// (Reply.Compaction). It is the marker projection begins its compaction prompt with.
const CompactionMarker = projection.CompactionMarker

// SummaryPrefix begins every summary the demo writes (specification 0.31).
const SummaryPrefix = projection.SummaryPrefix

// DefaultDemoPace is the pause between two streamed tokens in demo mode.
const DefaultDemoPace = 15 * time.Millisecond

// ErrUnexpectedCall is wrapped by the error of a call that no reply of the script
// matches.
var ErrUnexpectedCall = errors.New("no scripted reply matches the call")

// Provider is the mock model: scripted when it has a script, the demo otherwise.
// It is safe for concurrent use.
type Provider struct {
	script  *Script
	regexps []*regexp.Regexp
	pace    time.Duration
	model   string

	// forget: keep no copy of the requests (WithoutRecording).
	forget bool

	mu    sync.Mutex
	uses  []int
	n     int // calls so far: a reply's Call matches against it
	calls []llm.Request
}

var _ llm.Streamer = (*Provider)(nil)

// Option tunes a Provider.
type Option func(*Provider)

// WithPace sets the pause between two streamed tokens (default: DefaultDemoPace in
// demo mode, none when scripted). A script's or a reply's own pace wins.
func WithPace(d time.Duration) Option { return func(p *Provider) { p.pace = d } }

// WithModel sets the model name answers report when the request names none
// (default "mock").
func WithModel(name string) Option { return func(p *Provider) { p.model = name } }

// WithoutRecording keeps no copy of the requests (Calls returns none): for a
// node's mock and long runs, where the copies would hold every request ever
// sent (their size grows with the square of a turn's length).
func WithoutRecording() Option { return func(p *Provider) { p.forget = true } }

// New returns a mock that answers from script, or the demo when script is nil.
// The error says which reply of the script cannot work.
func New(script *Script, opts ...Option) (*Provider, error) {
	p := &Provider{script: script, model: "mock"}
	if script == nil {
		p.pace = DefaultDemoPace
	} else {
		if err := script.Validate(); err != nil {
			return nil, fmt.Errorf("mock: script: %w", err)
		}
		p.uses = make([]int, len(script.Replies))
		p.regexps = make([]*regexp.Regexp, len(script.Replies))
		for i, r := range script.Replies {
			if r.PromptRegexp != "" {
				p.regexps[i] = regexp.MustCompile(r.PromptRegexp)
			}
		}
	}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// Scripted returns a mock that answers with replies, in order (see Script). It
// panics if a reply cannot work, so that a test's script is checked as it is built.
func Scripted(replies ...Reply) *Provider {
	p, err := New(NewScript(replies...))
	if err != nil {
		panic(err)
	}
	return p
}

// Demo returns the mock in demo mode.
func Demo(opts ...Option) *Provider {
	p, _ := New(nil, opts...)
	return p
}

// Name returns "mock".
func (p *Provider) Name() string { return Name }

// Calls returns a deep copy of every request the mock was sent, in order, the
// refused ones included; none with WithoutRecording.
func (p *Provider) Calls() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]llm.Request, len(p.calls))
	for i, r := range p.calls {
		out[i] = cloneRequest(r)
	}
	return out
}

// Done reports the replies of the script that were used fewer times than they
// must be (replies without limit need not be used), or nil.
func (p *Provider) Done() error {
	if p.script == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var missing []string
	for i, r := range p.script.Replies {
		if n := r.limit(); n > 0 && p.uses[i] < n {
			missing = append(missing, fmt.Sprintf("reply %d (%s) used %d of %d times", i+1, describe(r), p.uses[i], n))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("mock: script not played to the end: %s", strings.Join(missing, "; "))
}

// Generate answers req at once, after any scripted delay.
func (p *Provider) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	return p.Stream(ctx, req, nil)
}

// Stream answers req, calling onDelta for each token, piece of reasoning and tool
// call, paced as configured.
//
// Errors, all *llm.ProviderError: a request whose tool calls and results are not
// paired (llm.ErrBadRequest and llm.ErrUnpaired, status 400, as real providers
// refuse it); a call no reply matches (ErrUnexpectedCall); a scripted error; a
// cancelled context (ctx.Err()), which ends any wait at once.
func (p *Provider) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	p.mu.Lock()
	if !p.forget {
		p.calls = append(p.calls, cloneRequest(req))
	}
	p.n++
	n := p.n
	p.mu.Unlock()

	if ctx.Err() != nil {
		return llm.Response{}, cancelled(ctx)
	}
	if err := llm.CheckPairing(req.Messages); err != nil {
		return llm.Response{}, &llm.ProviderError{Provider: Name, Status: 400, Message: err.Error(),
			Err: fmt.Errorf("%w: %w", llm.ErrBadRequest, err)}
	}
	var a answer
	if p.script == nil {
		a = demo(req)
		a.pace = p.pace
	} else {
		var err error
		if a, err = p.match(n, req); err != nil {
			return llm.Response{}, err
		}
	}
	return p.play(ctx, req, a, onDelta)
}

// answer is what one call will produce.
type answer struct {
	reasoning []string
	tokens    []string
	calls     []llm.ToolCall
	err       *Error
	delay     time.Duration
	pace      time.Duration
	hold      time.Duration
	usage     *llm.Usage
	finish    llm.FinishReason
	model     string
}

func (p *Provider) match(n int, req llm.Request) (answer, error) {
	// What a reply may ask of the request, each read only when one asks it:
	// counting the turns and finding the last user message read the whole
	// history, at every call of a long turn (bench row 2's CPU).
	turn, last := -1, ""
	lastRead := false
	turnOf := func() int {
		if turn < 0 {
			turn = countUsers(req.Messages)
		}
		return turn
	}
	lastOf := func() string {
		if !lastRead {
			last, lastRead = lastUser(req.Messages), true
		}
		return last
	}
	afterTool := len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == llm.RoleTool
	p.mu.Lock()
	defer p.mu.Unlock()
	spent := -1
	for i, r := range p.script.Replies {
		if r.Call != 0 && r.Call != n ||
			r.Turn != 0 && r.Turn != turnOf() ||
			r.Prompt != "" && !strings.Contains(lastOf(), r.Prompt) ||
			p.regexps[i] != nil && !p.regexps[i].MatchString(lastOf()) ||
			r.Compaction != nil && *r.Compaction != isCompaction(req) ||
			r.AfterTool != nil && *r.AfterTool != afterTool {
			continue
		}
		if lim := r.limit(); lim >= 0 && p.uses[i] >= lim {
			if spent < 0 {
				spent = i
			}
			continue
		}
		p.uses[i]++
		return p.answerOf(r), nil
	}
	msg := fmt.Sprintf("call %d (turn %d, last user message %q) matches no reply of the script", n, turnOf(), clip(lastOf(), 200))
	if spent >= 0 {
		r := p.script.Replies[spent]
		msg += fmt.Sprintf("; reply %d (%s) would, but was used %d of %d times", spent+1, describe(r), p.uses[spent], r.limit())
	}
	return answer{}, &llm.ProviderError{Provider: Name, Message: msg, Err: ErrUnexpectedCall}
}

func (p *Provider) answerOf(r Reply) answer {
	a := answer{
		tokens: r.Tokens,
		calls:  llm.Assistant("", r.ToolCalls...).Clone().ToolCalls,
		err:    r.Error,
		delay:  time.Duration(r.Delay),
		hold:   time.Duration(r.Hold),
		usage:  r.Usage,
		finish: r.FinishReason,
		model:  r.Model,
		pace:   p.pace,
	}
	if a.tokens == nil && r.Text != "" {
		a.tokens = splitTokens(r.Text)
	}
	if r.Reasoning != "" {
		a.reasoning = splitTokens(r.Reasoning)
	}
	if p.script.Pace > 0 {
		a.pace = time.Duration(p.script.Pace)
	}
	if r.Pace > 0 {
		a.pace = time.Duration(r.Pace)
	}
	return a
}

// play streams a, honouring its timing and ctx, and returns the response.
func (p *Provider) play(ctx context.Context, req llm.Request, a answer, onDelta func(llm.Delta)) (llm.Response, error) {
	streaming := onDelta != nil
	if !streaming {
		onDelta = func(llm.Delta) {}
	}
	wait := func(d time.Duration) error {
		if d <= 0 {
			return ctx.Err()
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	pieces := 0
	step := func() error {
		pieces++
		if streaming && pieces > 1 {
			return wait(a.pace)
		}
		return ctx.Err()
	}
	if err := wait(a.delay); err != nil {
		return llm.Response{}, cancelled(ctx)
	}
	resp := llm.Response{Model: a.model}
	if resp.Model == "" {
		resp.Model = req.Model
	}
	if resp.Model == "" {
		resp.Model = p.model
	}
	var text, reasoning strings.Builder
	partial := func() llm.Response {
		resp.Content, resp.Reasoning = text.String(), reasoning.String()
		return resp
	}
	for _, r := range a.reasoning {
		if err := step(); err != nil {
			return partial(), cancelled(ctx)
		}
		reasoning.WriteString(r)
		onDelta(llm.Delta{Reasoning: r})
	}
	for _, t := range a.tokens {
		if err := step(); err != nil {
			return partial(), cancelled(ctx)
		}
		text.WriteString(t)
		onDelta(llm.Delta{Text: t})
	}
	turn, stepNo := countUsers(req.Messages), stepsSinceUser(req.Messages)+1
	for i := range a.calls {
		c := &a.calls[i]
		if c.ID == "" {
			c.ID = "call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(stepNo) + "_" + strconv.Itoa(i+1) // fmt.Sprintf was a fifth of play under bench row 3
		}
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage("{}")
		}
		if err := step(); err != nil {
			return partial(), cancelled(ctx)
		}
		onDelta(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, ArgumentsDelta: string(c.Arguments)}})
	}
	if err := wait(a.hold); err != nil {
		return partial(), cancelled(ctx)
	}
	resp = partial()
	resp.ToolCalls = a.calls
	if a.err != nil {
		return resp, scriptedError(a.err)
	}
	resp.FinishReason = a.finish
	if resp.FinishReason == "" {
		resp.FinishReason = llm.FinishStop
		if len(a.calls) > 0 {
			resp.FinishReason = llm.FinishToolCalls
		}
	}
	if a.usage != nil {
		resp.Usage = *a.usage
	} else {
		resp.Usage = estimateUsage(req, a)
	}
	return resp, nil
}

func scriptedError(e *Error) error {
	var sentinel error
	switch {
	case e.Status == 429:
		sentinel = llm.ErrRateLimited
	case e.Status >= 400 && e.Status < 500:
		sentinel = llm.ErrBadRequest
	default:
		sentinel = llm.ErrUnavailable
	}
	return &llm.ProviderError{Provider: Name, Status: e.Status, Message: e.Message, Err: sentinel}
}

func cancelled(ctx context.Context) error {
	return &llm.ProviderError{Provider: Name, Message: "request cancelled: " + ctx.Err().Error(), Err: ctx.Err()}
}

// estimateUsage counts a token per four bytes of input, and one per streamed
// token (and per four bytes of tool call) of output. Bytes, not characters:
// the whole history is counted on every call, and counting its runes made
// the mock a tenth of a long turn's CPU in make bench's row 2 (a real
// provider's counting is not in TAH's process).
func estimateUsage(req llm.Request, a answer) llm.Usage {
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	out := len(a.tokens) + len(a.reasoning)
	for _, c := range a.calls {
		out += (len(c.Name) + len(c.Arguments) + 3) / 4
	}
	return llm.Usage{InputTokens: (in + 3) / 4, OutputTokens: out}
}

func cloneRequest(r llm.Request) llm.Request {
	r.Messages = llm.CloneMessages(r.Messages)
	if r.Tools != nil {
		tools := make([]llm.ToolSchema, len(r.Tools))
		for i, t := range r.Tools {
			if t.InputSchema != nil {
				t.InputSchema = append(json.RawMessage(nil), t.InputSchema...)
			}
			tools[i] = t
		}
		r.Tools = tools
	}
	if r.Options.Temperature != nil {
		v := *r.Options.Temperature
		r.Options.Temperature = &v
	}
	if r.Options.TopP != nil {
		v := *r.Options.TopP
		r.Options.TopP = &v
	}
	if r.Options.Stop != nil {
		r.Options.Stop = append([]string(nil), r.Options.Stop...)
	}
	return r
}

// describe names a reply by its conditions and answer, for error messages.
func describe(r Reply) string {
	var parts []string
	if r.Call != 0 {
		parts = append(parts, fmt.Sprintf("call %d", r.Call))
	}
	if r.Turn != 0 {
		parts = append(parts, fmt.Sprintf("turn %d", r.Turn))
	}
	if r.Prompt != "" {
		parts = append(parts, fmt.Sprintf("prompt %q", clip(r.Prompt, 40)))
	}
	if r.PromptRegexp != "" {
		parts = append(parts, fmt.Sprintf("prompt_regexp %q", clip(r.PromptRegexp, 40)))
	}
	if r.Compaction != nil {
		parts = append(parts, fmt.Sprintf("compaction %v", *r.Compaction))
	}
	switch {
	case len(r.ToolCalls) > 0:
		parts = append(parts, "calls "+r.ToolCalls[0].Name)
	case r.Error != nil && r.Text == "" && len(r.Tokens) == 0:
		parts = append(parts, fmt.Sprintf("fails %d", r.Error.Status))
	case r.Text != "":
		parts = append(parts, fmt.Sprintf("says %q", clip(r.Text, 40)))
	case len(r.Tokens) > 0:
		parts = append(parts, fmt.Sprintf("says %q", clip(strings.Join(r.Tokens, ""), 40)))
	}
	return strings.Join(parts, ", ")
}

// countUsers counts the turns of msgs: the user messages that start one (a
// steer joins the turn it came in).
func countUsers(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		if m.StartsTurn() {
			n++
		}
	}
	return n
}

func lastUserIndex(msgs []llm.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	return -1
}

func lastUser(msgs []llm.Message) string {
	if i := lastUserIndex(msgs); i >= 0 {
		return msgs[i].Content
	}
	return ""
}

// stepsSinceUser counts the assistant messages after the last user message.
func stepsSinceUser(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs[lastUserIndex(msgs)+1:] {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	return n
}

func isCompaction(req llm.Request) bool {
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem && strings.Contains(m.Content, CompactionMarker) {
			return true
		}
	}
	return false
}

// clip cuts s to n characters.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
