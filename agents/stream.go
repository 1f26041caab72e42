package agents

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// DefaultKeepAlive is how long a stream stays silent while its turn works
// before a "working" status chunk: well within the 60 s inactivity timeout
// the protocol recommends to callers.
const DefaultKeepAlive = 20 * time.Second

// Streams streams the turns whose caller waits for an agent protocol stream
// (turn.started caller, protocol wire.ReplyAgents) to their reply subjects,
// from the node that works on them (the node's session.Config.Watch opens
// a Stream for each). It
// publishes on the node's connection: the reply subject was checked to be
// under an inbox prefix before the turn started (wire.CheckReplySubject),
// and is checked again here.
type Streams struct {
	nc        *nats.Conn
	log       *slog.Logger
	keepAlive time.Duration

	// waiting are the streams of turns that wait here, by session, for
	// approval or for sub-agents: they hear "awaiting_approval" or
	// "awaiting_agents" every keepAlive, so that their callers' inactivity
	// timeouts do not end them while a person decides or the children work,
	// until the turn moves on (Watch), another node claims the session
	// (Claimed) or the wait's end.
	mu      sync.Mutex
	waiting map[string][]waitingStream
	stop    chan struct{}
	done    chan struct{}
}

type waitingStream struct {
	to     string
	until  time.Time
	epoch  uint64 // the session's claim when the wait began
	status string // what it hears: StatusAwaitingApproval or StatusAwaitingAgents
}

// maxWait bounds the keep-alives of a wait for approval without a deadline.
const maxWait = 24 * time.Hour

// NewStreams returns the Streams of a node that publishes on nc. keepAlive
// 0 means DefaultKeepAlive. Close stops its keep-alives.
func NewStreams(nc *nats.Conn, keepAlive time.Duration, log *slog.Logger) *Streams {
	if keepAlive <= 0 {
		keepAlive = DefaultKeepAlive
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Streams{nc: nc, log: log, keepAlive: keepAlive, waiting: map[string][]waitingStream{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.keepWaiting()
	return s
}

// Close stops the keep-alives of the streams that wait for approval.
func (s *Streams) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Claimed stops the keep-alives of session sid's stream, if it waits here,
// when a claim of epoch is newer than the one it waits under: another node
// (or a later actor) works on the session, and streams from now on.
func (s *Streams) Claimed(sid string, epoch uint64) {
	s.mu.Lock()
	if ws := s.waiting[sid]; len(ws) > 0 && epoch > ws[0].epoch {
		delete(s.waiting, sid)
	}
	s.mu.Unlock()
}

func (s *Streams) forget(sid string) {
	s.mu.Lock()
	delete(s.waiting, sid)
	s.mu.Unlock()
}

func (s *Streams) wait(sid, to, status string, deadline time.Time, epoch uint64) {
	until := time.Now().Add(maxWait)
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	s.mu.Lock()
	s.waiting[sid] = append(s.waiting[sid], waitingStream{to: to, until: until, epoch: epoch, status: status})
	s.mu.Unlock()
}

// keepWaiting publishes the keep-alives of the waiting streams until Close.
func (s *Streams) keepWaiting() {
	defer close(s.done)
	t := time.NewTicker(s.keepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		s.mu.Lock()
		var to []waitingStream
		for sid, ws := range s.waiting {
			if now.After(ws[0].until) {
				delete(s.waiting, sid)
				continue
			}
			to = append(to, ws...)
		}
		s.mu.Unlock()
		for _, w := range to {
			_ = natsx.PublishChunk(s.nc, w.to, wire.ChunkStatus, w.status)
		}
	}
}

// Watch opens the stream of the turn of session sid to caller (a
// session.Watcher), or returns nil when the caller does not wait for an
// agent protocol stream. A restarted turn's stream says so first (status
// "restarted"), then sends the text of the turn's steps so far again: what
// follows is the whole answer.
func (s *Streams) Watch(sid string, caller *event.Caller, restarted bool, st *projection.State) *Stream {
	s.forget(sid)
	if caller.Protocol != wire.ReplyAgents || wire.CheckReplySubject(caller.ReplyTo) != nil {
		return nil
	}
	w := &Stream{s: s, sid: sid, to: caller.ReplyTo, sent: map[string]string{}, stop: make(chan struct{})}
	if restarted {
		w.chunk(wire.ChunkStatus, wire.StatusRestarted)
		if text := st.TurnText(); text != "" {
			w.chunk(wire.ChunkResponse, text)
		}
	}
	w.wg.Add(1)
	go w.keepAlive()
	return w
}

// Stream is the stream of one turn's work on this node, to its caller: a
// session.Watcher, whose methods the work goroutine calls.
type Stream struct {
	s   *Streams
	sid string
	to  string
	// sent is the text streamed of each LLM step, by step id, to send what
	// its deltas missed when the step completes.
	sent map[string]string

	mu     sync.Mutex
	last   time.Time // of the last chunk published
	stop   chan struct{}
	wg     sync.WaitGroup
	closed bool
}

func (w *Stream) chunk(typ string, data any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.last = time.Now()
	if err := natsx.PublishChunk(w.s.nc, w.to, typ, data); err != nil {
		w.s.log.Debug("agent stream chunk not published", "session", w.sid, "err", err)
	}
}

// keepAlive publishes a "working" status chunk whenever the stream has been
// silent for the keep-alive interval, until End.
func (w *Stream) keepAlive() {
	defer w.wg.Done()
	t := time.NewTicker(w.s.keepAlive / 2)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			quiet := time.Since(w.last) >= w.s.keepAlive
			w.mu.Unlock()
			if quiet {
				w.chunk(wire.ChunkStatus, wire.StatusWorking)
			}
		}
	}
}

func (w *Stream) Delta(stepID string, d llm.Delta) {
	if d.Text == "" {
		return
	}
	w.sent[stepID] += d.Text
	w.chunk(wire.ChunkResponse, d.Text)
}

func (w *Stream) Event(st *projection.State, ev event.Event) {
	switch ev.Type {
	case event.LLMCompleted:
		d, err := event.DecodeAs[event.LLMCompletedData](ev)
		if err != nil {
			return
		}
		// A provider that does not stream, or deltas lost: the rest of the
		// step's text, when what was sent is its beginning.
		if rest, ok := strings.CutPrefix(d.Response.Content, w.sent[d.StepID]); ok && rest != "" {
			w.chunk(wire.ChunkResponse, rest)
		}
		delete(w.sent, d.StepID)
	case event.TurnSteered:
		if d, err := event.DecodeAs[event.TurnSteeredData](ev); err == nil && d.Caller != nil && d.Caller.ReplyTo == w.to {
			w.chunk(wire.ChunkStatus, wire.StatusSteered)
		}
	case event.ToolStarted:
		if d, err := event.DecodeAs[event.ToolStartedData](ev); err == nil {
			w.chunk(wire.ChunkStatus, wire.StatusToolPrefix+d.Call.Name)
		}
	case event.ToolApprovalRequested:
		d, err := event.DecodeAs[event.ToolApprovalRequestedData](ev)
		if err != nil {
			return
		}
		for _, c := range d.Calls {
			w.chunk(wire.ChunkQuery, wire.Query{ID: c.ID, ReplySubject: wire.AnswerSubject(w.sid, c.ID), Prompt: queryPrompt(c)})
		}
	}
}

// queryPrompt is the question of a query chunk for call c.
func queryPrompt(c llm.ToolCall) string {
	args := string(c.Arguments)
	if args == "" {
		args = "{}"
	} else if compact, err := compactJSON(c.Arguments); err == nil {
		args = compact
	}
	const most = 1000
	if len(args) > most {
		args = args[:most] + "…"
	}
	return fmt.Sprintf("Allow the tool %s to run with %s? Answer yes to run it, no to deny it; any other answer denies it and is told to the model.", c.Name, args)
}

func compactJSON(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// End ends the stream as the turn's state says: the terminator after a turn
// that completed; "cancelled" and the terminator after a cancelled one; an
// error (500, the turn's code and error) and the terminator after a failed
// one; "awaiting_approval" after the query chunks of a turn that waits, and
// "awaiting_agents" after the tool chunks of a turn that waits for its
// sub-agents (the stream stays open: the node that works on the turn next
// streams the rest). Work that stopped without ending its turn (the node
// stops, another took the session over, the log is unavailable) publishes
// nothing more: the next node that works on the turn carries on.
func (w *Stream) End(st *projection.State, err error) {
	close(w.stop)
	w.wg.Wait()
	if err != nil {
		w.close()
		return
	}
	switch {
	case st.Status == projection.StatusCompleted:
		w.terminate(0, wire.AgentError{})
	case st.Status == projection.StatusCancelled:
		w.chunk(wire.ChunkStatus, wire.StatusCancelled)
		w.terminate(0, wire.AgentError{})
	case st.Status == projection.StatusFailed:
		code := st.LastCode
		if code == "" {
			code = wire.AgentErrTurnFailed
		}
		w.terminate(wire.AgentStatusInternal, wire.AgentError{Error: code, Message: "the turn failed: " + st.LastError, Session: w.sid})
	case st.AwaitingApproval:
		w.chunk(wire.ChunkStatus, wire.StatusAwaitingApproval)
		w.close()
		w.s.wait(w.sid, w.to, wire.StatusAwaitingApproval, st.ApprovalDeadline, st.Epoch)
	case len(st.WaitingChildren()) > 0:
		w.chunk(wire.ChunkStatus, wire.StatusAwaitingAgents)
		w.close()
		w.s.wait(w.sid, w.to, wire.StatusAwaitingAgents, time.Time{}, st.Epoch)
	default:
		w.close()
	}
}

// terminate publishes the error (status > 0) and the terminator, and
// nothing after.
func (w *Stream) terminate(status int, e wire.AgentError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	var err error
	if status > 0 {
		err = natsx.PublishAgentError(w.s.nc, w.to, status, e)
	} else {
		err = natsx.PublishTerminator(w.s.nc, w.to)
	}
	if err != nil {
		w.s.log.Debug("agent stream end not published", "session", w.sid, "err", err)
	}
}

func (w *Stream) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
