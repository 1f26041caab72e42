package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// The reads below run on the read pool and see the batches committed when they
// start. Those that read several tables (State) do so in one read transaction,
// so they never mix two batches.

// querier is what loadState needs of a *sql.Tx or *sql.DB.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const sessionColumns = `id, status, turn, config, forked_from, labels, epoch, node, title, created_at, updated_at,
	last_seq, events, rejected, message_count, step_count, tokens_in, tokens_out, tokens_cache_read,
	summaries, trims, last_output, last_error, last_code, fault, awaiting_approval, cost_usd, cost_unpriced,
	budget_limits, budget_reached, turn_tokens, turn_cost_usd, turn_time_ms, time_ms, turn_running_since, parent`

type scanner interface{ Scan(dest ...any) error }

func scanSession(sc scanner) (wire.SessionSummary, error) {
	var r wire.SessionSummary
	var status, cfg, labels, fault, limits, reached, parent string
	var epoch, lastSeq, created, updated, runningSince int64
	var turnSpend event.Limits
	var timeMS int64
	err := sc.Scan(&r.ID, &status, &r.Turn, &cfg, &r.ForkedFrom, &labels, &epoch, &r.Node, &r.Title,
		&created, &updated, &lastSeq, &r.Events, &r.Rejected, &r.Messages, &r.Steps,
		&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CacheReadTokens, &r.Summaries, &r.Trims,
		&r.LastOutput, &r.LastError, &r.LastCode, &fault, &r.AwaitingApproval, &r.Cost.USD, &r.Cost.Unpriced,
		&limits, &reached, &turnSpend.Tokens, &turnSpend.CostUSD, &turnSpend.TimeMS, &timeMS, &runningSince, &parent)
	if err != nil {
		return r, err
	}
	if limits != "" || reached != "" {
		var inForce []event.BudgetReached
		var last *event.BudgetReached
		if limits != "" {
			if err := json.Unmarshal([]byte(limits), &inForce); err != nil {
				return r, fmt.Errorf("session %q budget limits: %w", r.ID, err)
			}
		}
		if reached != "" {
			if err := json.Unmarshal([]byte(reached), &last); err != nil {
				return r, fmt.Errorf("session %q budget reached: %w", r.ID, err)
			}
		}
		spend := event.Spend{Turn: turnSpend, Session: event.Limits{
			Tokens: int64(r.Usage.InputTokens + r.Usage.OutputTokens), CostUSD: r.Cost.USD, TimeMS: timeMS}}
		r.Budget = wire.NewSessionBudget(inForce, spend, last, fromUnixNano(runningSince))
	}
	if parent != "" {
		if err := json.Unmarshal([]byte(parent), &r.Parent); err != nil {
			return r, fmt.Errorf("session %q parent: %w", r.ID, err)
		}
	}
	if fault != "" {
		if err := json.Unmarshal([]byte(fault), &r.Fault); err != nil {
			return r, fmt.Errorf("session %q fault: %w", r.ID, err)
		}
	}
	r.Status = projection.Status(status)
	r.Epoch, r.LastSeq = uint64(epoch), uint64(lastSeq)
	r.CreatedAt, r.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
	if err := json.Unmarshal([]byte(cfg), &r.Config); err != nil {
		return r, fmt.Errorf("session %q config: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
		return r, fmt.Errorf("session %q labels: %w", r.ID, err)
	}
	return r, nil
}

// GetSession returns the session with id, or an error wrapping ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (wire.SessionSummary, error) {
	if err := s.checkOpen(); err != nil {
		return wire.SessionSummary{}, err
	}
	var defs string
	r, err := scanSession(withColumn{s.r.QueryRowContext(ctx, `SELECT `+sessionColumns+`, definitions FROM sessions WHERE id = ?`, id), &defs})
	if errors.Is(err, sql.ErrNoRows) {
		return wire.SessionSummary{}, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return wire.SessionSummary{}, fmt.Errorf("store: get %q: %w", id, err)
	}
	if defs != "" {
		if err := json.Unmarshal([]byte(defs), &r.Definitions); err != nil {
			return wire.SessionSummary{}, fmt.Errorf("store: get %q: definitions: %w", id, err)
		}
	}
	if err := s.family(ctx, &r); err != nil {
		return wire.SessionSummary{}, fmt.Errorf("store: get %q: %w", id, err)
	}
	return r, nil
}

// withColumn scans one more column than sessionColumns, into extra: a
// column that only tah.api.get returns.
type withColumn struct {
	sc    scanner
	extra any
}

func (w withColumn) Scan(dest ...any) error { return w.sc.Scan(append(dest, w.extra)...) }

// family adds to r its sub-agents' sessions (Children) and, when it has
// any, the totals of its whole tree (Tree): what its work cost, children
// and their children included.
func (s *Store) family(ctx context.Context, r *wire.SessionSummary) error {
	// "parent_session != ''" restates the condition of the partial index
	// sessions_parent, which SQLite uses only for a query that implies it
	// (a bound parameter could be ''): without it, every read of a session
	// scanned the whole table (TestReadsUseIndexes).
	rows, err := s.r.QueryContext(ctx, `SELECT id, status, parent FROM sessions
		WHERE parent_session = ? AND parent_session != '' ORDER BY created_at, id`, r.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c wire.ChildSummary
		var status, parent string
		if err := rows.Scan(&c.ID, &status, &parent); err != nil {
			return err
		}
		var link event.ParentLink
		if err := json.Unmarshal([]byte(parent), &link); err != nil {
			return fmt.Errorf("session %q parent: %w", c.ID, err)
		}
		c.Status, c.Agent, c.CallID = projection.Status(status), link.Agent, link.CallID
		r.Children = append(r.Children, c)
	}
	if err := rows.Err(); err != nil || len(r.Children) == 0 {
		return err
	}
	// UNION, not UNION ALL: a tree it is, and a cycle could not loop. The
	// partial index again (see above): without it, SQLite built an index of
	// the whole table for each read.
	var t wire.TreeTotals
	err = s.r.QueryRowContext(ctx, `WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT s.id FROM sessions s JOIN tree ON s.parent_session = tree.id AND s.parent_session != '')
		SELECT count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), coalesce(sum(tokens_cache_read), 0),
			total(cost_usd), coalesce(sum(cost_unpriced), 0)
		FROM sessions WHERE id IN tree`, r.ID).Scan(&t.Sessions, &t.Usage.InputTokens, &t.Usage.OutputTokens, &t.Usage.CacheReadTokens,
		&t.Cost.USD, &t.Cost.Unpriced)
	if err != nil {
		return err
	}
	t.Cost.USD = math.Round(t.Cost.USD*1e9) / 1e9 // a sum of REALs: back to the nano-dollar
	r.Tree = &t
	return nil
}

// CountTenantSessions counts the sessions of tenant (ids <tenant>.<id>): the
// column tenant (schema 11), through its index, as a tenant's listing reads
// them.
func (s *Store) CountTenantSessions(ctx context.Context, tenant string) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE tenant = ?`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count the sessions of tenant %s: %w", tenant, err)
	}
	return n, nil
}

// ListOptions select and page the sessions of ListSessions.
type ListOptions struct {
	// Status keeps only the sessions in that state; empty keeps all.
	Status projection.Status
	// Tenant keeps only that tenant's sessions (ids <tenant>.<id>); empty
	// keeps all.
	Tenant string
	// Labels keeps only the sessions that have every one of these labels with
	// that value; an empty value only requires the label.
	Labels map[string]string
	// Limit is the page size: default 50, at most 1000.
	Limit int
	// Offset skips that many sessions. Prefer Before for paging: it does not
	// shift when sessions are updated between pages.
	Offset int
	// Before continues a listing after the last session of a page: pass the
	// previous page's Next.
	Before string
	// MaxBytes, above 0, bounds the page's JSON encoding (as a
	// wire.ListReply): a page that would be larger holds fewer sessions, and
	// Next continues after the last one. A session that alone would not fit
	// has its last_output and last_error cut to a preview (wire.SessionSummary.Elided);
	// a page holds at least one session.
	MaxBytes int
}

// DefaultListLimit and MaxListLimit bound ListOptions.Limit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// Page is one page of ListSessions.
type Page struct {
	Sessions []wire.SessionSummary `json:"sessions"`
	// Next is the ListOptions.Before of the next page; empty on the last page.
	Next string `json:"next,omitempty"`
}

// rareLabel returns the key, among keys, of the label that the fewest
// sessions have, when they are few enough that reading them all and sorting
// them costs less than reading the sessions in the listing's order until
// want of them have it; else "". With m of n sessions holding the label,
// spread evenly in that order, the scan reads about want*n/m sessions and
// the label's index m: the label is read when m*m < want*n. n is the
// sessions table's largest rowid (a bound of its rows read at the end of its
// b-tree), and each count stops at the bound.
func (s *Store) rareLabel(ctx context.Context, keys []string, labels map[string]string, want int) (string, error) {
	if len(keys) == 0 {
		return "", nil
	}
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(rowid), 0) FROM sessions`).Scan(&n); err != nil {
		return "", err
	}
	best, fewest := "", int64(math.Sqrt(float64(want)*float64(n)))
	for _, k := range keys {
		q, args := `SELECT count(*) FROM (SELECT 1 FROM session_labels WHERE key = ?`, []any{k}
		if v := labels[k]; v != "" {
			q += ` AND value = ?`
			args = append(args, v)
		}
		var m int64
		if err := s.r.QueryRowContext(ctx, q+` LIMIT ?)`, append(args, fewest)...).Scan(&m); err != nil {
			return "", err
		}
		if m < fewest {
			best, fewest = k, m
		}
	}
	return best, nil
}

// ListSessions returns sessions, the most recently updated first (ties by id),
// filtered and paged by opts. A malformed opts.Before wraps ErrInvalidCursor.
func (s *Store) ListSessions(ctx context.Context, opts ListOptions) (Page, error) {
	return s.listSessions(ctx, opts, labelsWeighed)
}

// labelPlan is how a listing filtered by labels finds its sessions; the
// tests run both plans on the same filters.
type labelPlan int

const (
	// labelsWeighed reads from a label its few sessions, when one is rare
	// enough (rareLabel), else labelsScanned.
	labelsWeighed labelPlan = iota
	// labelsScanned reads the sessions in the listing's order, keeping
	// those with the labels, until the page is full.
	labelsScanned
	// labelsDriven reads the sessions of the first label and sorts them.
	labelsDriven
)

func (s *Store) listSessions(ctx context.Context, opts ListOptions, plan labelPlan) (Page, error) {
	if err := s.checkOpen(); err != nil {
		return Page{}, err
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var where []string
	var args []any
	if opts.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(opts.Status))
	}
	if opts.Tenant != "" {
		// The column, not a range of ids: the index sessions_tenant holds
		// the tenant's sessions in the listing's order, where the range had
		// them all sorted for each page.
		where = append(where, "tenant = ?")
		args = append(args, opts.Tenant)
	}
	keys := make([]string, 0, len(opts.Labels))
	for k := range opts.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	from, drive := "sessions", ""
	switch {
	case plan == labelsDriven && len(keys) > 0:
		drive = keys[0]
	case plan == labelsWeighed:
		var err error
		if drive, err = s.rareLabel(ctx, keys, opts.Labels, limit+1+max(opts.Offset, 0)); err != nil {
			return Page{}, fmt.Errorf("store: list: %w", err)
		}
	}
	if drive != "" {
		// Read from the label's few sessions and sort them, rather than read
		// every session in the listing's order until a page of them has it.
		from = "session_labels d CROSS JOIN sessions ON sessions.id = d.session_id"
		where = append(where, "d.key = ?")
		args = append(args, drive)
		if v := opts.Labels[drive]; v != "" {
			where = append(where, "d.value = ?")
			args = append(args, v)
		}
	}
	for _, k := range keys {
		if k == drive {
			continue
		}
		if v := opts.Labels[k]; v != "" {
			where = append(where, "EXISTS (SELECT 1 FROM session_labels l WHERE l.session_id = sessions.id AND l.key = ? AND l.value = ?)")
			args = append(args, k, v)
		} else {
			where = append(where, "EXISTS (SELECT 1 FROM session_labels l WHERE l.session_id = sessions.id AND l.key = ?)")
			args = append(args, k)
		}
	}
	if opts.Before != "" {
		at, id, err := parseCursor(opts.Before)
		if err != nil {
			return Page{}, err
		}
		where = append(where, "(updated_at < ? OR (updated_at = ? AND id < ?))")
		args = append(args, at, at, id)
	}
	q := `SELECT ` + sessionColumns + ` FROM ` + from
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?"
	args = append(args, limit+1, max(opts.Offset, 0))
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return Page{}, fmt.Errorf("store: list: %w", err)
	}
	defer rows.Close()
	var p Page
	for rows.Next() {
		r, err := scanSession(rows)
		if err != nil {
			return Page{}, fmt.Errorf("store: list: %w", err)
		}
		// A session created before labels were bounded may hold any amount
		// of them: a listing shows those within the limits.
		var cut bool
		if r.Labels, cut = wire.FitLabels(r.Labels); cut {
			r.Elided = append(r.Elided, "labels")
		}
		p.Sessions = append(p.Sessions, r)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("store: list: %w", err)
	}
	n := min(len(p.Sessions), limit)
	if opts.MaxBytes > 0 {
		if n, err = fitPage(p.Sessions[:n], opts.MaxBytes); err != nil {
			return Page{}, fmt.Errorf("store: list: %w", err)
		}
	}
	if len(p.Sessions) > n {
		p.Sessions = p.Sessions[:n]
		last := p.Sessions[n-1]
		p.Next = formatCursor(unixNano(last.UpdatedAt), last.ID)
	}
	return p, nil
}

// listPreview is how many bytes of last_output and last_error a session that
// alone would not fit in a page keeps.
const listPreview = 4 << 10

// pageOverhead bounds what a wire.ListReply's JSON holds besides its
// sessions: the object, the commas between sessions (counted with each
// session) and the longest Next.
const pageOverhead = len(`{"sessions":[],"next":""}`) + 20 + 1 + event.MaxSessionIDLen

// fitPage is how many of rows, from the first, fit in a page of maxBytes
// (at least one), cutting the first one's longest free-form fields when it
// alone does not fit.
func fitPage(rows []wire.SessionSummary, maxBytes int) (int, error) {
	size := pageOverhead
	for i := range rows {
		b, err := json.Marshal(rows[i])
		if err != nil {
			return 0, err
		}
		if i == 0 && size+len(b) > maxBytes {
			cutRow(&rows[0])
			if b, err = json.Marshal(rows[0]); err != nil {
				return 0, err
			}
		}
		if i > 0 && size+len(b)+1 > maxBytes {
			return i, nil
		}
		size += len(b) + 1
	}
	return len(rows), nil
}

// cutRow cuts r's last output and error to a preview, and says so in
// r.Elided.
func cutRow(r *wire.SessionSummary) {
	for name, f := range map[string]*string{"last_output": &r.LastOutput, "last_error": &r.LastError} {
		if len(*f) > listPreview {
			n := listPreview
			for n > 0 && !utf8.RuneStart((*f)[n]) {
				n--
			}
			*f = (*f)[:n] + "…"
			r.Elided = append(r.Elided, name)
		}
	}
	sort.Strings(r.Elided)
}

// A cursor is "<updated_at ns>.<id>": the first '.' ends the time (a tenant's
// session id holds one of its own).
func formatCursor(at int64, id string) string { return strconv.FormatInt(at, 10) + "." + id }

func parseCursor(c string) (int64, string, error) {
	ns, id, ok := strings.Cut(c, ".")
	at, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return 0, "", fmt.Errorf("cursor %q: %w", c, ErrInvalidCursor)
	}
	return at, id, nil
}

// exists checks, inside a read, that the session has a row, so that an empty
// history and an unknown session are told apart.
func exists(ctx context.Context, q querier, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return err
}

// readSession runs fn in a read transaction after checking the session exists.
func (s *Store) readSession(ctx context.Context, what, id string, fn func(querier) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: %s %q: %w", what, id, err)
	}
	defer tx.Rollback()
	q := s.r.observed(tx)
	if err := exists(ctx, q, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return fmt.Errorf("store: %s %q: %w", what, id, err)
	}
	if err := fn(q); err != nil {
		return fmt.Errorf("store: %s %q: %w", what, id, err)
	}
	return nil
}

// Messages returns the session's full history in order: every message,
// summaries included, never trimmed (what fork copies). ErrNotFound for an
// unknown session.
func (s *Store) Messages(ctx context.Context, id string) ([]llm.Message, error) {
	out := []llm.Message{}
	err := s.readSession(ctx, "messages", id, func(tx querier) (err error) {
		out, err = readMessages(ctx, tx, id, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readMessages appends the session's message rows to out, in order.
func readMessages(ctx context.Context, q querier, id string, out []llm.Message) ([]llm.Message, error) {
	rows, err := q.QueryContext(ctx, `SELECT role, content, tool_calls, tool_call_id, name, is_error
		FROM messages WHERE session_id = ? ORDER BY idx`, id)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var m llm.Message
		var role string
		var calls sql.NullString
		if err := rows.Scan(&role, &m.Content, &calls, &m.ToolCallID, &m.Name, &m.IsError); err != nil {
			return out, err
		}
		m.Role = llm.Role(role)
		if calls.Valid {
			if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
				return out, err
			}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Steps returns the session's steps in order. ErrNotFound for an unknown session.
func (s *Store) Steps(ctx context.Context, id string) ([]projection.Step, error) {
	out := []projection.Step{}
	err := s.readSession(ctx, "steps", id, func(tx querier) (err error) {
		out, err = readSteps(ctx, tx, id, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readSteps appends the session's steps rows to out, in order.
func readSteps(ctx context.Context, q querier, id string, out []projection.Step) ([]projection.Step, error) {
	rows, err := q.QueryContext(ctx, `SELECT step_id, type, turn, status, tool, call_id, input, output,
		idempotent, artifact, request_ref, response, trim, content, error, code, start_seq, end_seq,
		started_at, ended_at, duration_ms, compaction, cost_usd, cost_unpriced, child FROM steps WHERE session_id = ? ORDER BY idx`, id)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var st projection.Step
		var typ, status string
		var input, art, ref, resp, trim sql.NullString
		var startSeq, endSeq, started, ended int64
		var costUSD sql.NullFloat64
		var unpriced int
		if err := rows.Scan(&st.ID, &typ, &st.Turn, &status, &st.Tool, &st.CallID, &input, &st.Output,
			&st.Idempotent, &art, &ref, &resp, &trim, &st.Content, &st.Error, &st.Code, &startSeq, &endSeq,
			&started, &ended, &st.DurationMS, &st.Compaction, &costUSD, &unpriced, &st.Child); err != nil {
			return out, err
		}
		if costUSD.Valid {
			st.Cost = &pricing.Cost{USD: costUSD.Float64, Unpriced: unpriced}
		}
		st.Type, st.Status = projection.StepType(typ), projection.StepStatus(status)
		st.StartSeq, st.EndSeq = uint64(startSeq), uint64(endSeq)
		st.StartedAt, st.EndedAt = fromUnixNano(started), fromUnixNano(ended)
		if input.Valid {
			st.Input = json.RawMessage(input.String)
		}
		if err := unmarshalOpt(art, &st.Artifact); err != nil {
			return out, err
		}
		if err := unmarshalOpt(ref, &st.RequestRef); err != nil {
			return out, err
		}
		if err := unmarshalOpt(resp, &st.Response); err != nil {
			return out, err
		}
		if err := unmarshalOpt(trim, &st.Trim); err != nil {
			return out, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func unmarshalOpt[T any](ns sql.NullString, dst **T) error {
	if !ns.Valid {
		return nil
	}
	v := new(T)
	if err := json.Unmarshal([]byte(ns.String), v); err != nil {
		return err
	}
	*dst = v
	return nil
}

// ToolCalls returns the session's tool-call records in order. ErrNotFound for
// an unknown session.
func (s *Store) ToolCalls(ctx context.Context, id string) ([]projection.ToolCallRecord, error) {
	out := []projection.ToolCallRecord{}
	err := s.readSession(ctx, "tool calls", id, func(tx querier) (err error) {
		out, err = readToolCalls(ctx, tx, id, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readToolCalls appends the session's tool calls rows to out, in order.
func readToolCalls(ctx context.Context, q querier, id string, out []projection.ToolCallRecord) ([]projection.ToolCallRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT call_id, name, arguments, turn, step_id, status, is_error, code,
		has_result FROM tool_calls WHERE session_id = ? ORDER BY idx`, id)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var c projection.ToolCallRecord
		var args sql.NullString
		var status string
		if err := rows.Scan(&c.CallID, &c.Name, &args, &c.Turn, &c.StepID, &status, &c.IsError, &c.Code,
			&c.HasResult); err != nil {
			return out, err
		}
		c.Status = projection.StepStatus(status)
		if args.Valid {
			c.Arguments = json.RawMessage(args.String)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Artifacts returns the session's artifacts in order. ErrNotFound for an
// unknown session.
func (s *Store) Artifacts(ctx context.Context, id string) ([]projection.Artifact, error) {
	out := []projection.Artifact{}
	err := s.readSession(ctx, "artifacts", id, func(tx querier) (err error) {
		out, err = readArtifacts(ctx, tx, id, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readArtifacts appends the session's artifacts rows to out, in order.
func readArtifacts(ctx context.Context, q querier, id string, out []projection.Artifact) ([]projection.Artifact, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, name, step_id, call_id, content_type, bucket, object, size,
		sha256, seq FROM artifacts WHERE session_id = ? ORDER BY idx`, id)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var a projection.Artifact
		var seq int64
		if err := rows.Scan(&a.ID, &a.Name, &a.StepID, &a.CallID, &a.ContentType, &a.Ref.Bucket,
			&a.Ref.Object, &a.Ref.Size, &a.Ref.SHA256, &seq); err != nil {
			return out, err
		}
		a.Seq = uint64(seq)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Checkpoints returns the session's checkpoints in order. ErrNotFound for an
// unknown session.
func (s *Store) Checkpoints(ctx context.Context, id string) ([]projection.Checkpoint, error) {
	out := []projection.Checkpoint{}
	err := s.readSession(ctx, "checkpoints", id, func(tx querier) (err error) {
		out, err = readCheckpoints(ctx, tx, id, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readCheckpoints appends the session's checkpoints rows to out, in order.
func readCheckpoints(ctx context.Context, q querier, id string, out []projection.Checkpoint) ([]projection.Checkpoint, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, up_to_seq, bucket, key, events, seq
		FROM checkpoints WHERE session_id = ? ORDER BY idx`, id)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var c projection.Checkpoint
		var upTo, seq int64
		if err := rows.Scan(&c.ID, &upTo, &c.Bucket, &c.Key, &c.Events, &seq); err != nil {
			return out, err
		}
		c.UpToSeq, c.Seq = uint64(upTo), uint64(seq)
		out = append(out, c)
	}
	return out, rows.Err()
}

// scanEvent reads a row of the tail into e.
func scanEvent(sc scanner, e *event.Event) error {
	var seq, epoch int64
	var typ, tm string
	var data sql.NullString
	if err := sc.Scan(&seq, &e.Index, &e.Session, &typ, &tm, &epoch, &data); err != nil {
		return err
	}
	e.Seq, e.Epoch, e.Type, e.Time = uint64(seq), uint64(epoch), event.Type(typ), parseTime(tm)
	if data.Valid {
		e.Data = json.RawMessage(data.String)
	}
	return nil
}

// State returns the session's folded state as of the last committed batch:
// its snapshot and the events after it, folded in one read transaction. It is
// for show/get and fork (Messages and LastSeq agree). ErrNotFound for an
// unknown session.
func (s *Store) State(ctx context.Context, id string) (projection.State, error) {
	var st projection.State
	err := s.readSession(ctx, "state", id, func(tx querier) error {
		var err error
		st, _, _, err = s.loadState(ctx, tx, id)
		return err
	})
	return st, err
}

// loadState folds a session from its stored snapshot (if any) and its tail,
// the events applied after it. It returns the state, the session's count of
// rejected events, and how many events it folded.
func (s *Store) loadState(ctx context.Context, q querier, id string) (projection.State, int, int, error) {
	var st projection.State
	var rejected int
	err := q.QueryRowContext(ctx, `SELECT count FROM rejections WHERE session_id = ?`, id).Scan(&rejected)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, 0, 0, err
	}
	var snap string
	var sn snapshot
	err = q.QueryRowContext(ctx, `SELECT state FROM snapshots WHERE session_id = ?`, id).Scan(&snap)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return st, 0, 0, err
	case json.Unmarshal([]byte(snap), &sn) != nil:
		// A snapshot this build cannot read: the tail alone cannot rebuild the
		// session. Delete the read model to rebuild it from the log.
		return st, 0, 0, fmt.Errorf("the snapshot of session %q is not readable: delete the read model (%s) to rebuild it from the log", id, s.path)
	default:
		if st, err = sn.state(ctx, q, id); err != nil {
			return st, 0, 0, fmt.Errorf("the snapshot of session %q: its rows: %w", id, err)
		}
	}
	rows, err := q.QueryContext(ctx, `SELECT seq, idx, session_id, type, time, epoch, data FROM tail
		WHERE session_id = ? ORDER BY seq, idx`, id)
	if err != nil {
		return st, 0, 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var e event.Event
		if err := scanEvent(rows, &e); err != nil {
			return st, 0, 0, err
		}
		// These events were folded once already, from this very state: they
		// fold again the same way (projection.Apply is deterministic).
		if s.safeApply(&st, e, nil) == nil {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return st, 0, 0, err
	}
	return st, rejected, n, nil
}

// Positions returns, for each shard of the log (Options.Shards), the last
// stream sequence applied for consumer (0 for a shard it never applied
// anything of): a restarted projector resumes each shard after it.
func (s *Store) Positions(ctx context.Context, consumer string) ([]uint64, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	pos, err := s.positions(ctx, s.r, consumer)
	if err != nil {
		return nil, fmt.Errorf("store: positions of %q: %w", consumer, err)
	}
	return pos, nil
}

// LastSeq returns the stream sequence of session id's last record folded
// (0 when it has none, or no row: a session the read model never created).
// A projector restarting asks it of each session whose records it meets
// again (bus.FoldedFunc).
func (s *Store) LastSeq(ctx context.Context, id string) (uint64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	var seq int64
	err := s.r.QueryRowContext(ctx, `SELECT last_seq FROM sessions WHERE id = ?`, id).Scan(&seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: last sequence of %q: %w", id, err)
	}
	return uint64(seq), nil
}

// positions reads consumer's position in each shard.
func (s *Store) positions(ctx context.Context, q querier, consumer string) ([]uint64, error) {
	pos := make([]uint64, s.opts.Shards)
	rows, err := q.QueryContext(ctx, `SELECT shard, seq FROM positions WHERE consumer = ?`, consumer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k int
		var seq int64
		if err := rows.Scan(&k, &seq); err != nil {
			return nil, err
		}
		if k < 0 || k >= len(pos) {
			return nil, fmt.Errorf("a position in shard %d of a log of %d shards: %w", k, len(pos), ErrShardCount)
		}
		pos[k] = uint64(seq)
	}
	return pos, rows.Err()
}
