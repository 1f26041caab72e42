package node_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// Labels over the limits are refused at create with a 400 that says which
// limit, and nothing is written: the same id is free afterwards. Labels at
// the limits are taken whole.
func TestLabelsOverTheLimitsAreRefused(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	many := func(n, size int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%03d", i)] = strings.Repeat("v", size)
		}
		return m
	}
	for name, tc := range map[string]struct {
		labels map[string]string
		says   string
	}{
		"too many":            {many(wire.MaxLabels+1, 1), "65 labels, over 64"},
		"a key too long":      {map[string]string{strings.Repeat("k", 64): "v"}, "the key is 64 bytes, over 63"},
		"a value too long":    {map[string]string{"k": strings.Repeat("v", 257)}, "the value is 257 bytes, over 256"},
		"too large in all":    {many(wire.MaxLabels, 253), "16448 bytes in all, over 16384"},
		"3 MiB":               {map[string]string{"blob": strings.Repeat("x", 3<<20)}, "over 256"},
		"a control character": {map[string]string{"k": "\x1b]0;title\x07"}, "not printable"},
	} {
		_, err := h.cl.Create(ctxFor(t), wire.CreateRequest{Session: "s_labels", Labels: tc.labels})
		if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "invalid labels") {
			t.Fatalf("%s: %v; want %v saying %q", name, err, client.ErrBadRequest, tc.says)
		}
	}
	atLimits := many(wire.MaxLabels, 252) // 64 × (4 + 252) = 16384 bytes
	atLimits[strings.Repeat("k", wire.MaxLabelKeyBytes)] = ""
	delete(atLimits, "k063")
	if _, err := h.cl.Create(ctxFor(t), wire.CreateRequest{Session: "s_labels", Labels: atLimits}); err != nil {
		t.Fatalf("labels at the limits: %v", err)
	}
	row := getWhenFolded(t, h, "s_labels")
	if !maps.Equal(row.Labels, atLimits) || row.Elided != nil {
		t.Fatalf("labels at the limits read back: %d labels, elided %v", len(row.Labels), row.Elided)
	}
}

// A node of an older version took labels of any size: sessions whose log
// holds 3 MiB of labels each (three of them: more than a reply holds) do not
// stop tah.api.list. The default listing answers, its pages (followed by
// next) list every session once, and the oversized rows keep the labels
// within the limits and say that the others were left out.
func TestListSurvivesOversizedLabels(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	huge := []string{"s_huge1", "s_huge2", "s_huge3"}
	for _, sid := range huge {
		labels := map[string]string{"team": "big", "blob": strings.Repeat("x", 3<<20)}
		if _, err := session.Create(ctxFor(t), h.c.Node(0).Bus(), sid, session.Config{}, labels); err != nil {
			t.Fatal(err)
		}
	}
	small := []string{"s_a", "s_b", "s_c", "s_d", "s_e"}
	for _, sid := range small {
		if _, err := h.cl.Create(ctxFor(t), wire.CreateRequest{Session: sid, Labels: map[string]string{"team": "small"}}); err != nil {
			t.Fatal(err)
		}
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(huge), small...)))
	for _, sid := range all {
		getWhenFolded(t, h, sid)
	}

	var got []string
	req := wire.ListRequest{}
	for pages := 0; ; pages++ {
		r, err := h.cl.List(ctxFor(t), req)
		if err != nil {
			t.Fatalf("list page %d: %v", pages, err)
		}
		for _, s := range r.Sessions {
			got = append(got, s.ID)
			wantLabels, wantElided := map[string]string{"team": "small"}, []string(nil)
			if strings.HasPrefix(s.ID, "s_huge") {
				wantLabels, wantElided = map[string]string{"team": "big"}, []string{"labels"}
			}
			if !maps.Equal(s.Labels, wantLabels) || !slices.Equal(s.Elided, wantElided) {
				t.Fatalf("%s: labels %d, elided %v", s.ID, len(s.Labels), s.Elided)
			}
		}
		if r.Next == "" {
			break
		}
		if pages > len(all) {
			t.Fatal("paging does not end")
		}
		req.Before = r.Next
	}
	slices.Sort(got)
	if !slices.Equal(got, all) {
		t.Fatalf("listed %v, want %v", got, all)
	}
}

// getWhenFolded waits until the read model has session sid, and returns its
// row.
func getWhenFolded(t *testing.T, h *hostile, sid string) wire.SessionSummary {
	t.Helper()
	var row wire.SessionSummary
	// Two minutes only catch a hang: under the race detector on a loaded
	// machine, the read model took over 30 s to fold three 3 MiB records
	// (a get waits for it, each try within the client's 10 s).
	err := natstest.Poll(2*time.Minute, 20*time.Millisecond, func() error {
		var err error
		row, err = h.cl.Get(ctxFor(t), sid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return row
}
