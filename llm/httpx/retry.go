package httpx

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxRetryAfter is the longest Retry-After that is waited for when a Policy
// does not set its own. A server that asks for a longer wait gets its error
// returned at once: holding a turn that long helps nobody.
const DefaultMaxRetryAfter = 2 * time.Minute

// Policy says when and how long to wait before trying again.
type Policy struct {
	// MaxRetries is how many times a failed attempt is tried again.
	MaxRetries int
	// BaseDelay is the first backoff; each further retry doubles it.
	BaseDelay time.Duration
	// MaxDelay caps one backoff. Zero: no cap.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After honoured. Zero: DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Sleep waits; nil: a timer that a cancelled context stops.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1); nil: math/rand/v2.
	Rand func() float64
}

// Backoff returns how long to wait before retry number attempt+1 (attempt counts
// from 0). A Retry-After (hasRetryAfter) is honoured as given; otherwise the wait
// is BaseDelay·2^attempt, capped at MaxDelay, with equal jitter: half of it fixed,
// half random. ok is false when the server asks for a wait longer than
// MaxRetryAfter.
func (p Policy) Backoff(attempt int, retryAfter time.Duration, hasRetryAfter bool) (wait time.Duration, ok bool) {
	if hasRetryAfter {
		limit := p.MaxRetryAfter
		if limit <= 0 {
			limit = DefaultMaxRetryAfter
		}
		if retryAfter > limit {
			return 0, false
		}
		return max(retryAfter, 0), true
	}
	d := p.BaseDelay
	for i := 0; i < attempt && d > 0; i++ {
		if p.MaxDelay > 0 && d >= p.MaxDelay {
			break
		}
		if d > time.Duration(1<<62)/2 {
			break
		}
		d *= 2
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if d <= 0 {
		return 0, true
	}
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	half := d / 2
	return half + time.Duration(r()*float64(d-half)), true
}

func (p Policy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		if err := p.Sleep(ctx, d); err != nil {
			return err
		}
		return ctx.Err()
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx is done, whichever comes first; it returns ctx.Err()
// in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
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

// RetryAfter reads how long the server asks to wait: the header retry-after-ms
// (milliseconds, sent by OpenAI), or Retry-After as seconds or as an HTTP date
// (RFC 9110 §10.2.3), relative to now. ok is false when neither is present or valid.
func RetryAfter(h http.Header, now time.Time) (wait time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > 1e9 {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
