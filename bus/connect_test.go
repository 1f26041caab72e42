package bus

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"testing"

	"github.com/nats-io/nats.go"
)

// Only the server's refusal is tried again; a credential file that cannot
// be read is not.
func TestRefusedAtConnect(t *testing.T) {
	for err, want := range map[error]bool{
		io.ErrClosedPipe:                              true,
		nats.ErrAuthorization:                         true,
		fmt.Errorf("nats: %w", nats.ErrAuthorization): true,
		fs.ErrNotExist:                                false,
		errors.New("no route"):                        false,
	} {
		if got := refusedAtConnect(err); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}
