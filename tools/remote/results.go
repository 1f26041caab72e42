package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/wire"
)

// ErrNoResult: no call is stored under that key.
var ErrNoResult = errors.New("no stored result for this call")

// Results reads and writes stored calls in the KV bucket. It binds to the bucket
// lazily, so that it works before the bucket exists.
type Results struct {
	js     jetstream.JetStream
	bucket string
	create bool
	direct bool
	ttl    time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
}

// ResultsConfig says which bucket holds stored calls.
type ResultsConfig struct {
	// Bucket is the KV bucket; ResultsBucket when empty.
	Bucket string
	// Create makes a missing bucket, with TTL (DefaultResultTTL when zero).
	// Services set it; readers leave it off: a missing bucket means no result.
	Create bool
	TTL    time.Duration
	// Direct reads and writes without binding the bucket, whose stream's
	// info a tenant's tool credential may not read (it would list every
	// key: wire.TenantRolePermissions): a Put is a JetStream publish on the
	// key's subject, a Get a direct get of it, and Find is not served. The
	// bucket must exist (a node makes it); Create is ignored.
	Direct bool
}

// NewResults returns the stored calls of the bucket cfg names.
func NewResults(js jetstream.JetStream, cfg ResultsConfig) *Results {
	if cfg.Bucket == "" {
		cfg.Bucket = wire.ToolResultBucket
	}
	if cfg.TTL <= 0 {
		cfg.TTL = wire.ToolResultTTL
	}
	return &Results{js: js, bucket: cfg.Bucket, create: cfg.Create && !cfg.Direct, direct: cfg.Direct, ttl: cfg.TTL}
}

func (r *Results) bind(ctx context.Context) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	kv, err := r.js.KeyValue(ctx, r.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && r.create {
		kv, err = r.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      r.bucket,
			Description: "TAH tool calls by session and call id (see docs/protocol.md)",
			History:     1,
			TTL:         r.ttl,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = r.js.KeyValue(ctx, r.bucket)
		}
	}
	if err != nil {
		return nil, err
	}
	r.kv = kv
	return kv, nil
}

// Put stores s under wire.CallResultKey(s.Service, s.Tool, s.Session,
// s.CallID): a namespace's service stores its calls under the namespace.
func (r *Results) Put(ctx context.Context, s wire.StoredCall) error {
	if r.direct {
		return r.putDirect(ctx, s)
	}
	kv, err := r.bind(ctx)
	if err != nil {
		return fmt.Errorf("remote: results bucket %s: %w", r.bucket, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, wire.CallResultKey(s.Service, s.Tool, s.Session, s.CallID), b); err != nil {
		return fmt.Errorf("remote: store call %s: %w", s.CallID, err)
	}
	return nil
}

// Get returns the call of tool stored for (session, callID), or an error
// wrapping ErrNoResult when there is none (or no bucket yet).
func (r *Results) Get(ctx context.Context, tool, session, callID string) (wire.StoredCall, error) {
	return r.GetFor(ctx, "", tool, session, callID)
}

// GetFor is Get of a call that the service named service runs: the call of
// a namespace's tool is stored under the namespace (wire.CallResultKey).
func (r *Results) GetFor(ctx context.Context, service, tool, session, callID string) (wire.StoredCall, error) {
	if r.direct {
		return r.getDirect(ctx, wire.CallResultKey(service, tool, session, callID), callID)
	}
	kv, err := r.bindToRead(ctx, callID)
	if err != nil {
		return wire.StoredCall{}, err
	}
	return get(ctx, kv, wire.CallResultKey(service, tool, session, callID), callID)
}

// Find returns the call stored for (session, callID) whatever its tool (the
// key's first token, or a namespace's first two): for a node that takes
// over a session and knows the call, not which tool's service stored it.
// It returns an error wrapping ErrNoResult when there is none.
func (r *Results) Find(ctx context.Context, session, callID string) (wire.StoredCall, error) {
	if r.direct {
		return wire.StoredCall{}, errors.New("remote: a direct reader of the stored calls finds none by session (it lists no keys)")
	}
	kv, err := r.bindToRead(ctx, callID)
	if err != nil {
		return wire.StoredCall{}, err
	}
	keys, err := kv.ListKeysFiltered(ctx, wire.ResultKeyFilter(session, callID), wire.NamespaceResultKeyFilter(session, callID))
	if err != nil {
		return wire.StoredCall{}, fmt.Errorf("remote: find call %s: %w", callID, err)
	}
	defer keys.Stop()
	for key := range keys.Keys() {
		return get(ctx, kv, key, callID)
	}
	return wire.StoredCall{}, fmt.Errorf("call %s: %w", callID, ErrNoResult)
}

// bindToRead binds the bucket; a missing one wraps ErrNoResult.
func (r *Results) bindToRead(ctx context.Context, callID string) (jetstream.KeyValue, error) {
	kv, err := r.bind(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("call %s: %w (bucket %s does not exist)", callID, ErrNoResult, r.bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("remote: results bucket %s: %w", r.bucket, err)
	}
	return kv, nil
}

// get reads the stored call at key.
func get(ctx context.Context, kv jetstream.KeyValue, key, callID string) (wire.StoredCall, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return wire.StoredCall{}, fmt.Errorf("call %s: %w", callID, ErrNoResult)
	}
	if err != nil {
		return wire.StoredCall{}, fmt.Errorf("remote: read call %s: %w", callID, err)
	}
	return decodeStored(e.Value(), callID)
}

// putDirect stores s with a JetStream publish on its key's subject, the
// acknowledgement saying it is stored (Results.Direct).
func (r *Results) putDirect(ctx context.Context, s wire.StoredCall) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	subj := "$KV." + r.bucket + "." + wire.CallResultKey(s.Service, s.Tool, s.Session, s.CallID)
	if _, err := r.js.Publish(ctx, subj, b, jetstream.WithExpectStream("KV_"+r.bucket)); err != nil {
		return fmt.Errorf("remote: store call %s: %w", s.CallID, err)
	}
	return nil
}

// getDirect reads the stored call at key with a direct get of its subject's
// last message (Results.Direct): the one JetStream API request a tenant's
// tool credential may make, and only on its own keys.
func (r *Results) getDirect(ctx context.Context, key, callID string) (wire.StoredCall, error) {
	subj := "$JS.API.DIRECT.GET.KV_" + r.bucket + ".$KV." + r.bucket + "." + key
	m, err := r.js.Conn().RequestWithContext(ctx, subj, nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return wire.StoredCall{}, fmt.Errorf("remote: read call %s: the bucket %s does not exist (a TAH node makes it when it starts: start one against this NATS first): %w", callID, r.bucket, err)
	}
	if err != nil {
		return wire.StoredCall{}, fmt.Errorf("remote: read call %s: %w", callID, err)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return wire.StoredCall{}, fmt.Errorf("call %s: %w", callID, ErrNoResult)
	default:
		return wire.StoredCall{}, fmt.Errorf("remote: read call %s: status %s %s", callID, status, m.Header.Get("Description"))
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return wire.StoredCall{}, fmt.Errorf("call %s: %w", callID, ErrNoResult)
	}
	return decodeStored(m.Data, callID)
}

// decodeStored is the stored call of value data.
func decodeStored(data []byte, callID string) (wire.StoredCall, error) {
	var s wire.StoredCall
	if err := json.Unmarshal(data, &s); err != nil {
		return wire.StoredCall{}, fmt.Errorf("remote: call %s: malformed stored value: %w", callID, err)
	}
	return s, nil
}
