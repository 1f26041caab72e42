package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// listFixture applies 14 sessions with various states, labels and update
// times (some equal, to exercise the tie-break) and returns their folded states.
func listFixture(t *testing.T, s *Store) []projection.State {
	var logs [][]event.Event
	for i := 0; i < 14; i++ {
		labels := map[string]string{"team": "a"}
		if i%2 == 1 {
			labels["team"] = "b"
		}
		if i%3 == 0 {
			labels["env"] = "prod"
		}
		b := newSession(t, fmt.Sprintf("s_%02d", i), event.Config{SystemPrompt: "sys"}, labels)
		switch i % 4 {
		case 1:
			b.userTurn(fmt.Sprintf("question %d", i)).llm("answer").finish("answer")
		case 2:
			b.userTurn(fmt.Sprintf("question %d", i)) // still running
		case 3:
			b.userTurn("q").llm("a").finish("a").userTurn("q2").llm("a2").finish("a2")
		}
		// Sessions i and i+7 end at the same time.
		end := t0.Add(time.Duration(i%7) * time.Minute)
		for k := range b.events {
			b.events[k].Time = end.Add(time.Duration(k-len(b.events)+1) * time.Second)
		}
		logs = append(logs, b.events)
	}
	evs := merge(logs...)
	apply(t, s, evs, 10)
	var states []projection.State
	for _, l := range bySession(evs) {
		states = append(states, mustFold(t, l))
	}
	sort.Slice(states, func(i, j int) bool {
		a, b := states[i], states[j]
		if !a.UpdatedAt.Equal(b.UpdatedAt) {
			return a.UpdatedAt.After(b.UpdatedAt)
		}
		return a.ID > b.ID
	})
	return states
}

func idsOf[T any](rows []T, id func(T) string) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, id(r))
	}
	return out
}

func rowID(r wire.SessionSummary) string { return r.ID }
func stateID(s projection.State) string  { return s.ID }

func TestListSessions(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	all := listFixture(t, s)
	want := idsOf(all, stateID)

	page, err := s.ListSessions(ctx, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(page.Sessions, rowID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
	if page.Next != "" {
		t.Fatalf("a complete page has a next cursor %q", page.Next)
	}
	r := page.Sessions[0]
	if r.Title == "" && r.Turn > 0 || r.Messages == 0 || r.UpdatedAt.IsZero() || r.CreatedAt.IsZero() {
		t.Fatalf("row lacks fields: %+v", r)
	}

	// Paging with the cursor visits every session once, in order.
	var walked []string
	opts := ListOptions{Limit: 4}
	for pages := 0; ; pages++ {
		p, err := s.ListSessions(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, idsOf(p.Sessions, rowID)...)
		if p.Next == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		opts.Before = p.Next
	}
	if fmt.Sprint(walked) != fmt.Sprint(want) {
		t.Fatalf("paged:\n got %v\nwant %v", walked, want)
	}

	// Offset.
	p, err := s.ListSessions(ctx, ListOptions{Limit: 3, Offset: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(p.Sessions, rowID); fmt.Sprint(got) != fmt.Sprint(want[5:8]) {
		t.Fatalf("offset: got %v want %v", got, want[5:8])
	}

	// Filters, alone and together.
	filter := func(keep func(projection.State) bool) []string {
		var out []projection.State
		for _, st := range all {
			if keep(st) {
				out = append(out, st)
			}
		}
		return idsOf(out, stateID)
	}
	for _, c := range []struct {
		opts ListOptions
		keep func(projection.State) bool
	}{
		{ListOptions{Status: projection.StatusRunning}, func(st projection.State) bool { return st.Status == projection.StatusRunning }},
		{ListOptions{Status: projection.StatusIdle}, func(st projection.State) bool { return st.Status == projection.StatusIdle }},
		{ListOptions{Labels: map[string]string{"team": "b"}}, func(st projection.State) bool { return st.Labels["team"] == "b" }},
		{ListOptions{Labels: map[string]string{"env": ""}}, func(st projection.State) bool { _, ok := st.Labels["env"]; return ok }},
		{ListOptions{Labels: map[string]string{"team": "a", "env": "prod"}, Status: projection.StatusIdle},
			func(st projection.State) bool {
				return st.Labels["team"] == "a" && st.Labels["env"] == "prod" && st.Status == projection.StatusIdle
			}},
		{ListOptions{Labels: map[string]string{"team": "nobody"}}, func(projection.State) bool { return false }},
	} {
		// Each plan of a listing by labels finds the same sessions, in the
		// same order, page after page.
		for _, plan := range []labelPlan{labelsWeighed, labelsScanned, labelsDriven} {
			p, err := s.listSessions(ctx, c.opts, plan)
			if err != nil {
				t.Fatal(err)
			}
			want := filter(c.keep)
			if got := idsOf(p.Sessions, rowID); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%+v, plan %d: got %v want %v", c.opts, plan, got, want)
			}
			var walked []string
			opts := c.opts
			opts.Limit = 2
			for pages := 0; ; pages++ {
				p, err := s.listSessions(ctx, opts, plan)
				if err != nil {
					t.Fatal(err)
				}
				walked = append(walked, idsOf(p.Sessions, rowID)...)
				if p.Next == "" || pages > 10 {
					break
				}
				opts.Before = p.Next
			}
			if fmt.Sprint(walked) != fmt.Sprint(want) {
				t.Errorf("%+v, plan %d, pages of 2: got %v want %v", c.opts, plan, walked, want)
			}
			opts = c.opts
			opts.Limit, opts.Offset = 2, 1
			if p, err = s.listSessions(ctx, opts, plan); err != nil {
				t.Fatal(err)
			}
			if got, want := idsOf(p.Sessions, rowID), want[min(1, len(want)):min(3, len(want))]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%+v, plan %d, offset 1: got %v want %v", c.opts, plan, got, want)
			}
		}
	}

	for _, bad := range []string{"x", "12", ".s_1", "abc.s_1"} {
		if _, err := s.ListSessions(ctx, ListOptions{Before: bad}); !errors.Is(err, ErrInvalidCursor) {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
}

// A read model filled by an older version, which took labels of any size:
// a session with 3 MiB of labels and one whose last answer alone is larger
// than a page. Pages cut by bytes list every session once, each page within
// its bound; the labels over the limits are left out (those within them
// kept), and the answer too large for a page is cut, and both rows say so.
func TestListOversizedRows(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	var logs [][]event.Event
	var want []string
	for i := range 10 {
		b := newSession(t, fmt.Sprintf("s_%02d", i), event.Config{}, map[string]string{"team": "a"})
		b.userTurn("q").llm("a").finish("a")
		logs = append(logs, b.events)
	}
	huge := newSession(t, "s_huge", event.Config{}, map[string]string{"team": "b", "blob": strings.Repeat("x", 3<<20)})
	logs = append(logs, huge.events)
	long := newSession(t, "s_long", event.Config{}, nil)
	long.userTurn("q").llm(strings.Repeat("é", 50<<10)).finish(strings.Repeat("é", 50<<10))
	logs = append(logs, long.events)
	apply(t, s, merge(logs...), 10)
	for _, l := range logs {
		want = append(want, l[0].Session)
	}
	sort.Strings(want)

	const maxBytes = 64 << 10
	var got []string
	opts := ListOptions{Limit: MaxListLimit, MaxBytes: maxBytes}
	for pages := 0; ; pages++ {
		p, err := s.ListSessions(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if body, _ := json.Marshal(wire.ListReply{Sessions: p.Sessions, Next: p.Next}); len(body) > maxBytes || len(p.Sessions) == 0 {
			t.Fatalf("page %d: %d sessions in %d bytes, over %d", pages, len(p.Sessions), len(body), maxBytes)
		}
		for _, r := range p.Sessions {
			got = append(got, r.ID)
			switch r.ID {
			case "s_huge":
				if !slices.Equal(r.Elided, []string{"labels"}) || !maps.Equal(r.Labels, map[string]string{"team": "b"}) {
					t.Fatalf("s_huge: labels %d, elided %v", len(r.Labels), r.Elided)
				}
			case "s_long":
				if !slices.Equal(r.Elided, []string{"last_output"}) || len(r.LastOutput) > listPreview+len("…") ||
					!utf8.ValidString(r.LastOutput) || !strings.HasSuffix(r.LastOutput, "…") {
					t.Fatalf("s_long: last output of %d bytes, elided %v", len(r.LastOutput), r.Elided)
				}
			default:
				if r.Elided != nil || r.Labels["team"] != "a" {
					t.Fatalf("%s: %+v", r.ID, r)
				}
			}
		}
		if p.Next == "" {
			break
		}
		if pages > len(want) {
			t.Fatal("paging does not end")
		}
		opts.Before = p.Next
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v\nwant %v", got, want)
	}

	// Without a bound in bytes, only the labels are fitted; get returns the
	// row whole.
	p, err := s.ListSessions(ctx, ListOptions{})
	if err != nil || len(p.Sessions) != len(want) {
		t.Fatalf("unbounded: %d sessions, %v", len(p.Sessions), err)
	}
	for _, r := range p.Sessions {
		if r.ID == "s_long" && (r.Elided != nil || len(r.LastOutput) != len(strings.Repeat("é", 50<<10))) {
			t.Fatalf("s_long cut without a bound: elided %v", r.Elided)
		}
	}
	if r, err := s.GetSession(ctx, "s_huge"); err != nil || len(r.Labels["blob"]) != 3<<20 || r.Elided != nil {
		t.Fatalf("get s_huge: %d bytes of blob, elided %v, %v", len(r.Labels["blob"]), r.Elided, err)
	}
}

// TestListTenant: a tenant's listing holds its sessions, none of a tenant
// whose name it begins or is begun by, nor the default tenant's.
func TestListTenant(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	var logs [][]event.Event
	for _, id := range []string{"acme.s_1", "acme.s_2", "acme-x.s_1", "acme0.s_1", "acm.s_1", "acme", "s_acme"} {
		logs = append(logs, newSession(t, id, event.Config{}, nil).events)
	}
	apply(t, s, merge(logs...), 10)
	page, err := s.ListSessions(ctx, ListOptions{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	got := idsOf(page.Sessions, rowID)
	slices.Sort(got)
	if fmt.Sprint(got) != "[acme.s_1 acme.s_2]" {
		t.Fatalf("tenant acme lists %v", got)
	}
	if n, err := s.CountTenantSessions(ctx, "acme"); err != nil || n != 2 {
		t.Fatalf("tenant acme counts %d sessions (%v), want 2", n, err)
	}
}
