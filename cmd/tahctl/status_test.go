package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

func TestRanges(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{nil, "-"},
		{[]int{3}, "3"},
		{[]int{0, 1, 2, 3, 4, 9}, "0-4,9"},
		{[]int{9, 1, 0, 2}, "0-2,9"},
		{[]int{1, 3, 5, 6}, "1,3,5-6"},
		{[]int{2, 2, 3}, "2-3"},
	} {
		if got := ranges(c.in); got != c.want {
			t.Errorf("ranges(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := firstURL("nats://a:1,nats://b:2,nats://c:3"); got != "nats://a:1 (+2)" {
		t.Errorf("firstURL = %q", got)
	}
}

func threeNodes(now time.Time) clusterStatus {
	return clusterStatus{
		URL:      "nats://127.0.0.1:4222",
		Answered: wire.StatusReply{Node: "a", Partitions: 16, Time: now},
		Nodes: []wire.NodeRecord{
			{Node: "a", Heartbeat: now.Add(-400 * time.Millisecond), Partitions: []int{0, 1, 2, 3, 4, 9}, ActiveSessions: 2, NATS: "nats://127.0.0.1:4222", Provider: "mock"},
			{Node: "b", Heartbeat: now.Add(-time.Second), Partitions: []int{5, 6, 7, 8, 10}, NATS: "nats://127.0.0.1:4223", Provider: "mock"},
			{Node: "c", Heartbeat: now, Partitions: []int{11, 12, 13, 14, 15}, NATS: "nats://127.0.0.1:4224", Provider: "mock"},
		},
		Sessions: 3, ByStatus: map[string]int{"completed": 2, "running": 1},
	}
}

func TestStatusShowsNodesAndPartitions(t *testing.T) {
	now := time.Now()
	cs := threeNodes(now)
	var b strings.Builder
	if err := cs.write(&b, style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"nodes      3\n",
		"  NODE  PARTITIONS  SESSIONS  HEARTBEAT  NATS                   MODEL\n",
		"  ● a   0-4,9       2         0.4s ago   nats://127.0.0.1:4222  mock\n",
		"  ● b   5-8,10 ",
		"partitions 16 (all owned;",
		"sessions   3 (1 running, 2 completed)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}

	// c is fenced and b lists 9 too (a handover): 11-15 are owned by no one.
	cs.Nodes[2].Fenced = true
	cs.Nodes[1].Partitions = append(cs.Nodes[1].Partitions, 9)
	b.Reset()
	if err := cs.write(&b, style{}); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	for _, want := range []string{
		"  ✗ c   fenced",
		"partitions 16 (5 owned by no node: 11-15;",
		"moving     9 listed by two nodes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}

	j, err := json.Marshal(cs.jsonView())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"nodes_from":"tah_nodes"`, `"unowned_partitions":[11,12,13,14,15]`, `"shared_partitions":[9]`,
		`"partition_list":"0-4,9"`, `"heartbeat_age_ms":400`, `"fenced":true`, `"partitions":16`,
	} {
		if !strings.Contains(string(j), want) {
			t.Errorf("missing %s in %s", want, j)
		}
	}
}

func TestStatusWithoutHeartbeatsFallsBackToDiscovery(t *testing.T) {
	cs := clusterStatus{URL: "nats://x", Answered: wire.StatusReply{Node: "a", Partitions: 16, Time: time.Now()},
		Discovered: []client.Instance{{Node: "a", Version: "1.0.0", Provider: "mock", NATS: "nats://x"}}, ByStatus: map[string]int{}}
	var b strings.Builder
	if err := cs.write(&b, style{}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "nodes      1 (API services found by discovery") || !strings.Contains(out, "partitions 16") {
		t.Errorf("got\n%s", out)
	}
	j, _ := json.Marshal(cs.jsonView())
	if !strings.Contains(string(j), `"nodes_from":"discovery"`) || !strings.Contains(string(j), `"nodes":[{"node":"a"`) {
		t.Errorf("json %s", j)
	}
}

func TestStatusShowsTheNodesWhenTheSessionsCannotBeListed(t *testing.T) {
	cs := threeNodes(time.Now())
	cs.Sessions, cs.ByStatus = 0, map[string]int{}
	cs.SessionsError = "the node did not answer tah.api.list within 3s"
	var b strings.Builder
	if err := cs.write(&b, style{}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "nodes      3\n") || !strings.Contains(out, "sessions   ? (not listed: the node did not answer") {
		t.Errorf("got\n%s", out)
	}
	j, _ := json.Marshal(cs.jsonView())
	if !strings.Contains(string(j), `"sessions_error":"the node did not answer`) {
		t.Errorf("json %s", j)
	}
}
