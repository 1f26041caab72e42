package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// legacyCredentials is credentials.json of the user-and-password era: the
// user and password every client of the embedded servers presented.
type legacyCredentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// readLegacyCredentials reads a credentials.json of the user-and-password
// era.
func readLegacyCredentials(path string) (legacyCredentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return legacyCredentials{}, fmt.Errorf("the old cluster's credentials: %w", err)
	}
	var c legacyCredentials
	if err := json.Unmarshal(b, &c); err != nil {
		return legacyCredentials{}, fmt.Errorf("%s is not a credentials.json of the user-and-password era: %w", path, err)
	}
	if c.User == "" || c.Password == "" {
		return legacyCredentials{}, fmt.Errorf("%s: %w", path, ErrNoLegacyUser)
	}
	return c, nil
}

// ConnectLegacy connects to a cluster of the user-and-password era at url
// with the user and password of its credentials.json (credsPath).
func ConnectLegacy(ctx context.Context, url, credsPath string) (*nats.Conn, error) {
	c, err := readLegacyCredentials(credsPath)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, nats.UserInfo(c.User, c.Password), nats.Name("tahctl upgrade-cluster (old cluster)"))
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, fmt.Errorf("the old cluster at %s refused the user %q of %s: %w", url, c.User, credsPath, err)
	}
	if err != nil {
		return nil, fmt.Errorf("the old cluster at %s: %w", url, err)
	}
	return nc, nil
}
