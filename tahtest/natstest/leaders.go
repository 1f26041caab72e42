package natstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// apiWithin bounds one JetStream API call of the harness.
const apiWithin = 5 * time.Second

// Leaders is who leads what in the JetStream cluster, as member indexes (-1:
// no leader, or one that is not a member).
type Leaders struct {
	// Meta leads the meta group; -1 also when no member runs its server in
	// this process (only a server can tell).
	Meta int
	// Streams maps each stream's name to its leader.
	Streams map[string]int
	// Consumers maps "stream/consumer" to the consumer's leader.
	Consumers map[string]int
}

// Of lists what member i leads: "meta", then streams and consumers.
func (l Leaders) Of(i int) []string {
	var out []string
	if l.Meta == i {
		out = append(out, "meta")
	}
	for _, m := range []map[string]int{l.Streams, l.Consumers} {
		for name, at := range m {
			if at == i {
				out = append(out, name)
			}
		}
	}
	return out
}

// conn is the cluster's own connection, opened at first use.
func (c *Cluster) conn() *nats.Conn {
	c.mu.Lock()
	if len(c.conns) > 0 {
		nc := c.conns[0]
		c.mu.Unlock()
		return nc
	}
	c.mu.Unlock()
	return c.Connect()
}

// JetStream is a JetStream handle on the cluster's own connection.
func (c *Cluster) JetStream() jetstream.JetStream {
	c.tb.Helper()
	js, err := jetstream.New(c.conn())
	if err != nil {
		c.tb.Fatalf("natstest: JetStream: %v", err)
	}
	return js
}

// StreamLeader returns the index of the member that leads stream, or -1 when
// none does (or the stream cannot be read).
func (c *Cluster) StreamLeader(stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), apiWithin)
	defer cancel()
	st, err := c.JetStream().Stream(ctx, stream)
	if err != nil || st.CachedInfo().Cluster == nil {
		return -1
	}
	return c.Index(st.CachedInfo().Cluster.Leader)
}

// Leaders reads who leads the meta group, every stream and every consumer.
//
// One API call may go unanswered on a busy machine (a consumer list of a
// stream whose leader is busy writing, say): the harness asks again until
// readyWithin has passed, which catches a hang and judges no speed.
func (c *Cluster) Leaders() Leaders {
	c.tb.Helper()
	var l Leaders
	err := Poll(readyWithin, 100*time.Millisecond, func() error {
		var err error
		l, err = c.leaders()
		return err
	})
	if err != nil {
		c.tb.Fatalf("natstest: leaders: %v", err)
	}
	return l
}

func (c *Cluster) leaders() (Leaders, error) {
	l := Leaders{Meta: -1, Streams: map[string]int{}, Consumers: map[string]int{}}
	for _, m := range c.members {
		if srv := m.Server(); srv != nil {
			if jsz, err := srv.Jsz(nil); err == nil && jsz.Meta != nil {
				l.Meta = c.Index(jsz.Meta.Leader)
				break
			}
		}
	}
	streams, err := c.streams()
	if err != nil {
		return l, err
	}
	for _, si := range streams {
		l.Streams[si.Config.Name] = leaderOf(c, si.Cluster)
		if err := c.consumers(si.Config.Name, l.Consumers); err != nil {
			return l, err
		}
	}
	return l, nil
}

// streams lists every stream's info.
func (c *Cluster) streams() ([]*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiWithin)
	defer cancel()
	var out []*jetstream.StreamInfo
	list := c.JetStream().ListStreams(ctx)
	for si := range list.Info() {
		out = append(out, si)
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("streams: %w", err)
	}
	return out, nil
}

// consumers adds the leaders of stream's consumers to into.
func (c *Cluster) consumers(stream string, into map[string]int) error {
	ctx, cancel := context.WithTimeout(context.Background(), apiWithin)
	defer cancel()
	st, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	list := st.ListConsumers(ctx)
	for ci := range list.Info() {
		into[stream+"/"+ci.Name] = leaderOf(c, ci.Cluster)
	}
	if err := list.Err(); err != nil {
		return fmt.Errorf("consumers of %s: %w", stream, err)
	}
	return nil
}

func leaderOf(c *Cluster, ci *jetstream.ClusterInfo) int {
	if ci == nil {
		return -1
	}
	return c.Index(ci.Leader)
}

// WaitLeaders waits until every stream named (every stream when none is) has
// a leader: after a kill, until the survivors have elected theirs.
// Consumers are not waited for: an R1 consumer (an ordered one, say) lives
// and dies with its server, and a replicated one answers once its stream
// does.
func (c *Cluster) WaitLeaders(streams ...string) {
	c.tb.Helper()
	err := Poll(readyWithin, 50*time.Millisecond, func() error {
		infos, err := c.streams()
		if err != nil {
			return err
		}
		led := map[string]bool{}
		for _, si := range infos {
			led[si.Config.Name] = si.Cluster == nil || si.Cluster.Leader != ""
		}
		want := streams
		if len(want) == 0 {
			want = slices.Collect(maps.Keys(led))
		}
		var leaderless []string
		for _, name := range want {
			if !led[name] {
				leaderless = append(leaderless, name)
			}
		}
		if len(leaderless) > 0 {
			return fmt.Errorf("no leader (or no such stream): %v", leaderless)
		}
		return nil
	})
	if err != nil {
		c.tb.Fatalf("natstest: leaders: %v", err)
	}
}

// MoveLeader makes member i the leader of stream (asking the leader to step
// down in favour of it until it is), so that a test can kill the member that
// leads what it wants to see fail over.
func (c *Cluster) MoveLeader(stream string, i int) {
	c.tb.Helper()
	c.moveLeader(stream, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, i, func() int { return c.StreamLeader(stream) })
}

// MoveConsumerLeader makes member i the leader of stream's consumer, as
// MoveLeader does a stream's. (A Bus whose server leads the meta group may
// move it again at its next look at the placement: a test kills soon after.)
func (c *Cluster) MoveConsumerLeader(stream, consumer string, i int) {
	c.tb.Helper()
	c.moveLeader(stream+"/"+consumer, "$JS.API.CONSUMER.LEADER.STEPDOWN."+stream+"."+consumer, i, func() int {
		ctx, cancel := context.WithTimeout(context.Background(), apiWithin)
		defer cancel()
		cons, err := c.JetStream().Consumer(ctx, stream, consumer)
		if err != nil {
			return -1
		}
		return leaderOf(c, cons.CachedInfo().Cluster)
	})
}

// moveLeader asks, on subject, the leader of what to step down in favour of
// member i until leader says i leads it.
func (c *Cluster) moveLeader(what, subject string, i int, leader func() int) {
	c.tb.Helper()
	want := c.Name(i)
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
	err := Poll(readyWithin, 500*time.Millisecond, func() error {
		at := leader()
		if at == i {
			return nil
		}
		m, err := c.conn().Request(subject, body, apiWithin)
		if err != nil {
			return err
		}
		var reply struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if json.Unmarshal(m.Data, &reply) == nil && reply.Error != nil {
			return errors.New(reply.Error.Description)
		}
		return fmt.Errorf("led by member %d", at)
	})
	if err != nil {
		c.tb.Fatalf("natstest: leadership of %s to %s: %v", what, want, err)
	}
}
