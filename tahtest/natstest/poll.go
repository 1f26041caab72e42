package natstest

import (
	"errors"
	"fmt"
	"time"
)

// errNotYet is what Poll reports when its condition gave no reason.
var errNotYet = errors.New("condition not met")

// Poll calls f every interval until it returns nil, or within has passed;
// then it returns f's last error, saying how long it waited. An error wrapped
// by Permanent ends the wait at once.
func Poll(within, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var perm *permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", within, err)
		}
		time.Sleep(interval)
	}
}

// Permanent marks an error of Poll's condition that no wait will cure: Poll
// returns it at once.
func Permanent(err error) error { return &permanent{err} }

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Until turns a condition into one for Poll: nil when cond holds.
func Until(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}
