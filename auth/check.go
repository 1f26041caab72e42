package auth

import (
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/tah-dev/tah/wire"
)

// MissingForNode lists what the user of the .creds file at path may not do
// and a node must ("publish tah.evt.0.s_…"), from its JWT's permissions:
// for a node on an external cluster, whose user the cluster's operator made.
// Empty: nothing is missing.
func MissingForNode(path, node string) ([]string, error) {
	pub, sub := wire.NodeNeeds(node)
	missing, err := Denied(path, pub, sub)
	if err != nil {
		return nil, fmt.Errorf("the node's credential: %w", err)
	}
	return missing, nil
}

// Denied lists, of the subjects pub and sub, those the user of the .creds
// file at path may not publish or subscribe to ("publish X", "subscribe Y"),
// from its JWT's permissions. Empty: all are allowed.
func Denied(path string, pub, sub []string) ([]string, error) {
	uc, err := readUser(path)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, s := range pub {
		if !permits(uc.Pub, s) {
			missing = append(missing, "publish "+s)
		}
	}
	for _, s := range sub {
		if !permits(uc.Sub, s) {
			missing = append(missing, "subscribe "+s)
		}
	}
	return missing, nil
}

// CredsRole is the role of the .creds file at path, as its JWT's tags say
// (RoleTag); "" for a user that TAH did not issue (nsc's).
func CredsRole(path string) (wire.Role, error) {
	uc, err := readUser(path)
	if err != nil {
		return "", err
	}
	for _, tag := range uc.Tags {
		if role, ok := strings.CutPrefix(tag, RoleTag); ok {
			return wire.Role(role), nil
		}
	}
	return "", nil
}

// readUser reads the user JWT of the .creds file at path.
func readUser(path string) (*jwt.UserClaims, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return nil, fmt.Errorf("%s is not a .creds file: %w", path, err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return uc, nil
}

// permits reports whether p lets subject through: allowed (by an empty
// allow list, or a pattern of it) and not denied.
func permits(p jwt.Permission, subject string) bool {
	allowed := len(p.Allow) == 0
	for _, a := range p.Allow {
		allowed = allowed || matches(a, subject)
	}
	for _, d := range p.Deny {
		if matches(d, subject) {
			return false
		}
	}
	return allowed
}

// matches reports whether the NATS subject pattern (with * for a token, >
// for the rest) matches subject. A subject of the needs may be a pattern
// itself: a pattern matches it when it matches every subject it matches.
func matches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return i < len(st)
		case i >= len(st):
			return false
		case p == "*" && st[i] != ">":
		case p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}
