package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/wire"
)

// Placement of the streams over the servers of an embedded cluster.
//
// nats-server places a new stream on the servers with the most free storage,
// and the first node of a cluster creates every stream before the others have
// joined: at R1 all of them ended on one server, which then stored every
// node's records (issue 28). So each embedded server of a cluster carries the
// tag serverTagPrefix+its name, and the Bus whose server is the JetStream meta
// leader (one decider, whose view of the servers is the meta layer's own)
// spreads the streams that carry the load, the log's shards and TAH_IN:
//
//   - at R1, by moving streams from the server holding the most to the one
//     holding the fewest, until no server holds more than one stream over
//     another: a move is a placement naming the target's tag, which
//     JetStream carries out itself (it copies the stream, its consumers
//     included, and drops the old copy once the new one has caught up);
//   - at R3, where every server of three holds every stream, by balancing the
//     streams' leaders (which take the writes) with leader stepdowns naming a
//     preferred server.
//
// A node may also name a home for streams (SetStreamHomes): the server its
// sessions of a shard append from. At R1 a stream with a home goes there,
// so that a step's appends do not cross a route to another server (issue
// 28); at R3 its leader goes anywhere but there, so that the node's death
// does not take the leader its sessions need with it (see homed). The
// streams without one are spread around them as above.
//
// Streams on a server that is offline are left where they are (at R1 their
// data is there). Against an external NATS cluster TAH places nothing: its
// operator does (docs/operations.md).
const (
	// serverTagPrefix + a server's name is the tag of an embedded server of
	// a cluster.
	serverTagPrefix = "tah:server:"
	// placeEvery is how often the placer looks at the cluster. A look that
	// finds the same servers as the last balanced one reads nothing over
	// the network.
	placeEvery = 2 * time.Second
	// placeAttempt bounds one pass (its stream infos, updates, stepdowns).
	placeAttempt = 10 * time.Second
	// placeTries is how many passes that acted may follow each other before
	// the placer takes the servers as balanced as they can be (a leader that
	// will not move): it looks again when the servers or homes change, or
	// after placeRecheck.
	placeTries = 5
)

// placeRecheck is how long the placer trusts a balanced look of the same
// servers and homes: an R3 stream's leader can come back to its home by an
// election the placer did not ask for (a follower's timeout, a stepdown by
// hand), and nothing else would make it look. A variable for the tests,
// which set it before they start a Bus.
var placeRecheck = 30 * time.Second

// serverTags are the tags of the embedded server of cfg: its name's, in a
// cluster.
func serverTags(cfg Config) jwt.TagList {
	if cfg.Cluster.Name == "" || cfg.ServerName == "" {
		return nil
	}
	var tags jwt.TagList
	tags.Add(serverTagPrefix + cfg.ServerName) // Add lowercases, as the server matches
	return tags
}

// placesStreams reports whether this Bus places the streams: its embedded
// server is one of a cluster, tagged, and the Bus sets the streams up.
func (b *Bus) placesStreams() bool {
	return b.srv != nil && len(serverTags(b.cfg)) > 0 && !b.cfg.NoSetup
}

// SpreadStreams asks the Bus to look at once at how the log's shards and
// TAH_IN are spread over the cluster's servers (the membership code calls it
// when the nodes change); the Bus also looks every few seconds by itself. It
// returns at once, and does nothing unless the Bus embeds a server of a
// cluster.
func (b *Bus) SpreadStreams() {
	if p := b.findPlacer(); p != nil {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// SetStreamHomes gives the placer the servers streams should be on: homes
// returns stream name -> server name, and is asked at every look of the
// meta leader's placer (a stream it leaves out, or names an offline server
// for, is placed by balance). A node sets it once, before the cluster
// changes; nil takes the homes away.
func (b *Bus) SetStreamHomes(homes func() map[string]string) {
	b.mu.Lock()
	b.homes = homes
	b.mu.Unlock()
}

// streamHomes are the homes the node gives now; nil without any.
func (b *Bus) streamHomes() map[string]string {
	b.mu.Lock()
	f := b.homes
	b.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// findPlacer returns the Bus's placer, nil when it has none (it is one of
// the things Close stops).
func (b *Bus) findPlacer() *placer {
	b.mu.Lock()
	defer b.mu.Unlock()
	for h := range b.handles {
		if p, ok := h.(*placer); ok {
			return p
		}
	}
	return nil
}

// startPlacer starts the placer of an embedded cluster's Bus, once; Close
// stops it.
func (b *Bus) startPlacer() {
	if !b.placesStreams() {
		return
	}
	if b.findPlacer() != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &placer{b: b, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	if err := b.track(p); err != nil {
		cancel() // closed already
		return
	}
	go p.run(ctx) // owned by the Bus: Close stops it (stop)
}

// placer keeps the streams spread (see serverTagPrefix).
type placer struct {
	b      *Bus
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// Owned by run.
	settled   string    // the servers and homes the streams were last left balanced over
	settledAt time.Time // when
	tries     int       // passes in a row that acted
	actedAt   time.Time // when a pass last asked for moves or stepdowns
}

func (p *placer) stop() {
	p.once.Do(p.cancel)
	<-p.done
}

func (p *placer) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(placeEvery)
	defer t.Stop()
	for {
		asked := false
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
			asked = true
		case <-t.C:
		}
		if p.b.nc.IsClosed() {
			return // an Open that failed after setup: nothing to place with
		}
		p.pass(ctx, asked)
	}
}

// pass balances the streams if this Bus's server is the meta leader and the
// servers or homes changed since they were last balanced, the last balanced
// look is older than placeRecheck, or asked (SpreadStreams) says to look
// at once.
func (p *placer) pass(ctx context.Context, asked bool) {
	srv := p.b.srv
	if !srv.JetStreamIsLeader() {
		// Another server's Bus decides; should this one lead later, it looks.
		p.settled, p.tries = "", 0
		return
	}
	if time.Since(p.actedAt) < placeEvery/2 {
		// The moves a pass asked for just now may not show yet: asking
		// again would step down the leaders they are making.
		return
	}
	servers := srv.JetStreamClusterPeers() // online, with JetStream
	slices.Sort(servers)
	homes := p.b.streamHomes()
	key := strings.Join(servers, ",") + " " + homesKey(homes)
	if !asked && key == p.settled && time.Since(p.settledAt) < placeRecheck {
		return
	}
	was := p.settled
	p.settled = "" // unless this pass finds them balanced
	pctx, cancel := context.WithTimeout(ctx, placeAttempt)
	acted, busy, err := p.b.spread(pctx, servers, homes)
	cancel()
	if acted {
		p.actedAt = time.Now()
	}
	log := p.b.cfg.Logger
	switch {
	case err != nil:
		p.tries++
		if log != nil {
			log.Warn("spreading the streams over the servers", "servers", servers, "err", err)
		}
	case acted:
		p.tries++
	case busy:
		// Moves or elections under way: look again.
	default:
		if log != nil && was != key {
			log.Debug("streams placed", "servers", servers)
		}
		p.settled, p.settledAt, p.tries = key, time.Now(), 0
		return
	}
	if p.tries >= placeTries {
		if log != nil {
			log.Warn("the streams stay as they are for now: balancing did not settle", "servers", servers, "passes", p.tries, "again_in", placeRecheck)
		}
		p.settled, p.settledAt, p.tries = key, time.Now(), 0
	}
}

// homesKey is homes in a canonical form, so that the placer sees when they
// change.
func homesKey(homes map[string]string) string {
	keys := slices.Sorted(maps.Keys(homes))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + homes[k] + ";")
	}
	return b.String()
}

// placedStreams are the streams whose placement matters for load: the log's
// shards and TAH_IN.
func (b *Bus) placedStreams() []string {
	names := make([]string, 0, len(b.shards)+1)
	for k := range b.shards {
		names = append(names, wire.EventShardStream(k))
	}
	return append(names, wire.InputStream)
}

// spread moves streams (R1) or their leaders (R3) to their homes, and the
// others so that no server of servers holds more than one over another.
// acted says it asked for moves or stepdowns, busy that streams are moving
// or electing a leader (it then leaves them alone until they settle), or
// that a leader on its home has no follower caught up to take over yet.
func (b *Bus) spread(ctx context.Context, servers []string, homes map[string]string) (acted, busy bool, err error) {
	if len(servers) < 2 {
		return false, false, nil
	}
	var spots []spot
	configs := map[string]jetstream.StreamConfig{}
	for _, name := range b.placedStreams() {
		s, err := b.js.Stream(ctx, name)
		if err != nil {
			return false, false, fmt.Errorf("stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		ci := info.Cluster
		if ci == nil {
			return false, false, nil // not clustered
		}
		configs[name] = info.Config
		if ci.Desired != nil || ci.Leader == "" {
			busy = true // moving, scaling or electing
			continue
		}
		if want := taggedServer(info.Config.Placement); info.Config.Replicas <= 1 && want != "" && !strings.EqualFold(want, ci.Leader) {
			busy = true // a move asked for and not begun yet
			continue
		}
		sp := spot{stream: name, at: ci.Leader}
		if info.Config.Replicas > 1 {
			sp.peers = []string{ci.Leader}
			for _, r := range ci.Replicas {
				if r.Current && !r.Offline {
					sp.peers = append(sp.peers, r.Name)
				}
			}
		}
		spots = append(spots, sp)
	}
	if busy {
		return false, true, nil
	}
	spots = homed(servers, spots, homes, configs)
	moves := plan(servers, spots)
	// A leader on the server it must keep away from that plan could not
	// move (no follower caught up to hand over to yet: a stream just made
	// or scaled) is looked at again rather than taken as placed.
	for _, sp := range spots {
		if sp.away != "" && sp.at == sp.away && !slices.ContainsFunc(moves, func(m move) bool { return m.stream == sp.stream }) {
			busy = true
		}
	}
	var errs []error
	if configs[wire.InputStream].Replicas > 1 {
		// The partitions' consumers keep their leaders off their pullers'
		// servers too (leadAway); a consumer it cannot look at now holds
		// back none of the streams' moves.
		stepped, err := b.leadAway(ctx, servers, homes)
		acted = stepped
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range moves {
		cfg := configs[m.stream]
		if cfg.Replicas > 1 {
			err = b.stepDown(ctx, m.stream, m.to)
		} else {
			err = b.moveStream(ctx, cfg, m.to)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s from %s to %s: %w", m.stream, m.from, m.to, err))
		} else if b.cfg.Logger != nil {
			what := "stream moved"
			if cfg.Replicas > 1 {
				what = "stream leader moved"
			}
			b.cfg.Logger.Info(what, "stream", m.stream, "from", m.from, "to", m.to)
		}
	}
	return acted || len(moves) > 0, busy, errors.Join(errs...)
}

// ConsumerHome is the key of SetStreamHomes' map for the consumer of input
// partition p: its value is the server of the node that pulls the
// partition.
func ConsumerHome(p int) string { return wire.InputStream + "/" + wire.PartitionConsumer(p) }

// leadAway steps down the leader of each input partition's consumer (R3)
// that is on its home, the server of the node that pulls the partition, to
// the server leading the fewest of them: the node's death then does not
// take the consumer's leader with it, and the node that takes the partition
// over pulls at once instead of after the consumer's Raft election (4 to 9
// s). It reports whether it asked for a stepdown.
func (b *Bus) leadAway(ctx context.Context, servers []string, homes map[string]string) (bool, error) {
	type lead struct{ name, at, home string }
	var leads []lead
	count := map[string]int{}
	for p := range b.cfg.Partitions {
		name := wire.PartitionConsumer(p)
		c, err := b.in.Consumer(ctx, name)
		if err != nil {
			return false, fmt.Errorf("consumer %s: %w", name, err)
		}
		ci := c.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			continue // electing: looked at again on the next pass
		}
		count[ci.Leader]++
		if home := homes[ConsumerHome(p)]; home == ci.Leader {
			leads = append(leads, lead{name: name, at: ci.Leader, home: home})
		}
	}
	var errs []error
	for _, l := range leads {
		to := ""
		for _, s := range servers {
			if s != l.home && (to == "" || count[s] < count[to]) {
				to = s
			}
		}
		if to == "" {
			continue
		}
		count[l.at]--
		count[to]++
		if err := b.stepDownConsumer(ctx, l.name, to); err != nil {
			errs = append(errs, fmt.Errorf("consumer %s from %s to %s: %w", l.name, l.at, to, err))
		} else if b.cfg.Logger != nil {
			b.cfg.Logger.Info("consumer leader moved off its puller's server", "consumer", l.name, "from", l.at, "to", to)
		}
	}
	return len(leads) > 0, errors.Join(errs...)
}

// stepDownConsumer asks the leader of TAH_IN's consumer name to hand its
// leadership to the server to.
func (b *Bus) stepDownConsumer(ctx context.Context, name, to string) error {
	return b.askStepDown(ctx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+wire.InputStream+"."+name, to)
}

// moveStream asks JetStream to move the stream of cfg (its present
// configuration) to the server to: a placement naming to's tag.
func (b *Bus) moveStream(ctx context.Context, cfg jetstream.StreamConfig, to string) error {
	cfg.Placement = &jetstream.Placement{Cluster: b.cfg.Cluster.Name, Tags: []string{serverTagPrefix + to}}
	_, err := b.js.UpdateStream(ctx, cfg)
	return err
}

// taggedServer is the server a placement names by its tag, or "".
func taggedServer(p *jetstream.Placement) string {
	if p == nil {
		return ""
	}
	for _, t := range p.Tags {
		if name, ok := strings.CutPrefix(t, serverTagPrefix); ok {
			return name
		}
	}
	return ""
}

// stepDown asks the leader of stream to hand its leadership to the server to
// ($JS.API.STREAM.LEADER.STEPDOWN with a preferred placement).
func (b *Bus) stepDown(ctx context.Context, stream, to string) error {
	return b.askStepDown(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, to)
}

// askStepDown sends a leader stepdown request to subject, naming the
// server to as the preferred leader, and returns the API's error.
func (b *Bus) askStepDown(ctx context.Context, subject, to string) error {
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": to}})
	msg, err := b.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return err
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("stepdown answer: %w", err)
	}
	if resp.Error != nil {
		return errors.New(resp.Error.Description)
	}
	return nil
}

// spot is where a stream is (R1) or who leads it (R3), and the servers it
// may go to (nil: any).
type spot struct {
	stream string
	at     string
	peers  []string
	home   bool   // peers[0] is its home: it goes there whatever the balance
	away   string // a server it must not be on (R3: its home)
}

type move struct{ stream, from, to string }

// homed pins the spots of one replica that have a home among servers to
// it: plan then moves each that is elsewhere there, and spreads the others
// around them. A stream of several replicas keeps its leader away from its
// home instead: led from the server of the node whose sessions append to
// it, it would die with that node, and the sessions would wait for the
// stream's Raft election (4 to 9 s in nats-server) on top of the node's
// death before they could resume elsewhere; led from another server, they
// resume as soon as the node is known dead.
func homed(servers []string, spots []spot, homes map[string]string, configs map[string]jetstream.StreamConfig) []spot {
	out := slices.Clone(spots)
	for i, sp := range out {
		home, ok := homes[sp.stream]
		if !ok || !slices.Contains(servers, home) {
			continue
		}
		if configs[sp.stream].Replicas > 1 {
			out[i].away = home
			continue
		}
		out[i].peers, out[i].home = []string{home}, true
	}
	return out
}

// plan moves each spot with a home there and each spot on the server it
// must keep away from off it, then chooses the moves that leave
// no server of servers holding more than one spot over another (as far as
// the spots without a home can: those with one stay), moving a spot only to
// a server among its peers: each from a server holding the most to one
// holding the fewest, as few as that takes. Spots on servers not in servers
// (offline) stay and count for none. It is deterministic: ties go by name.
func plan(servers []string, spots []spot) []move {
	held := map[string][]int{}
	for _, s := range servers {
		held[s] = nil
	}
	var moves []move
	moved := map[int]bool{} // a stream moves once: a second move would meet the first under way
	for i, sp := range spots {
		at := sp.at
		if sp.home {
			moved[i] = true // pinned
			if home := sp.peers[0]; home != at {
				moves = append(moves, move{stream: sp.stream, from: at, to: home})
				at = home
			}
		}
		if _, ok := held[at]; ok {
			held[at] = append(held[at], i)
		}
	}
	// A spot on the server it must keep away from goes to the allowed
	// server holding the fewest.
	for i, sp := range spots {
		if sp.away == "" || sp.at != sp.away || moved[i] {
			continue
		}
		to := ""
		for _, s := range servers {
			if s != sp.away && (sp.peers == nil || slices.Contains(sp.peers, s)) && (to == "" || len(held[s]) < len(held[to])) {
				to = s
			}
		}
		if to == "" {
			continue
		}
		held[sp.at] = slices.DeleteFunc(held[sp.at], func(j int) bool { return j == i })
		held[to] = append(held[to], i)
		moves = append(moves, move{stream: sp.stream, from: sp.at, to: to})
		moved[i] = true
	}
	for range spots {
		order := slices.Clone(servers)
		slices.SortStableFunc(order, func(a, c string) int { return cmp.Compare(len(held[a]), len(held[c])) })
		done := false
		for fi := len(order) - 1; fi > 0 && !done; fi-- {
			from := order[fi]
			for _, to := range order[:fi] {
				if len(held[from])-len(held[to]) <= 1 {
					break
				}
				for j, i := range held[from] {
					if sp := spots[i]; !moved[i] && sp.away != to && (sp.peers == nil || slices.Contains(sp.peers, to)) {
						held[from] = slices.Delete(held[from], j, j+1)
						held[to] = append(held[to], i)
						moves = append(moves, move{stream: sp.stream, from: from, to: to})
						moved[i], done = true, true
						break
					}
				}
				if done {
					break
				}
			}
		}
		if !done {
			break
		}
	}
	return moves
}
