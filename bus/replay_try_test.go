package bus

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
)

// A direct get that no replica answers (one whose server stopped without
// closing its sockets: row 7's cut-off) is asked again after lastMsgTry,
// on a reply subject of its own, rather than waited on for the whole
// AppendTimeout: here the first request is swallowed and the second
// answered, and the read ends with that answer.
func TestDirectGetAsksAgainWhenNoReplicaAnswers(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	var mu sync.Mutex
	var replies []string
	sub, err := b.nc.Subscribe("$JS.API.DIRECT.GET.TAH_SILENT", func(m *nats.Msg) {
		mu.Lock()
		replies = append(replies, m.Reply)
		first := len(replies) == 1
		mu.Unlock()
		if first {
			return // a replica that never answers
		}
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Status", "404")
		r.Header.Set("Description", "Message Not Found")
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var prev string
	evs, end, more, err := b.directBatch(ctxT(t), "TAH_SILENT", "tah.evt.0.s_x", 1, 1, nil, &prev)
	if err != nil || len(evs) != 0 || end != 0 || more {
		t.Fatalf("direct get after a silent replica: %v events, end %d, more %v, err %v", len(evs), end, more, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(replies) != 2 || replies[0] == replies[1] {
		t.Fatalf("requests on reply subjects %v, want two, each its own", replies)
	}
}
