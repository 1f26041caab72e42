// Package localnode is the contract between a node and the local clients in
// its data directory: the credentials the embedded NATS server requires
// (credentials.json, mode 0600) and where the running node listens (node.json).
// tah-node writes them; tahctl reads them, so that it finds the local node by
// itself. It imports nothing of NATS, so that clients stay small.
//
//	creds, _, err := localnode.EnsureCredentials(".tah") // the node, at start
//	info, err := localnode.ReadNodeInfo(".tah")          // a client
package localnode

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The files a node keeps in its data directory for local clients (tahctl finds
// the node and its credentials through them).
const (
	// CredentialsFile holds the NATS user and password that the embedded
	// server requires (JSON: {"user": ..., "password": ...}, mode 0600).
	CredentialsFile = "credentials.json"
	// NodeInfoFile says where a running node listens (JSON NodeInfo); the node
	// writes it when it is ready and removes it when it stops.
	NodeInfoFile = "node.json"
)

// ErrNoCredentials: the data directory has no credentials file.
var ErrNoCredentials = errors.New("no credentials in the data directory")

// Credentials are the user and password every NATS client of an embedded
// server must present.
type Credentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// ReadCredentials reads <dir>/credentials.json; a missing file wraps
// ErrNoCredentials.
func ReadCredentials(dir string) (Credentials, error) {
	path := filepath.Join(dir, CredentialsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, fmt.Errorf("%s: %w", path, ErrNoCredentials)
	}
	if err != nil {
		return Credentials{}, err
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return Credentials{}, fmt.Errorf("%s: not a credentials file (%v): delete it to have new credentials generated", path, err)
	}
	if c.User == "" || c.Password == "" {
		return Credentials{}, fmt.Errorf("%s: user or password is empty: delete it to have new credentials generated", path)
	}
	return c, nil
}

// EnsureCredentials returns the credentials of <dir>/credentials.json,
// generating them (a random 24-byte password) at first start, with the file's
// mode 0600 and the directory's 0700. created says whether they are new.
func EnsureCredentials(dir string) (c Credentials, created bool, err error) {
	c, err = ReadCredentials(dir)
	if err == nil || !errors.Is(err, ErrNoCredentials) {
		return c, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c, false, fmt.Errorf("data directory: %w", err)
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return c, false, err
	}
	c = Credentials{User: "tah", Password: base64.RawURLEncoding.EncodeToString(secret)}
	b, _ := json.MarshalIndent(c, "", "  ")
	path := filepath.Join(dir, CredentialsFile)
	// O_EXCL: two nodes starting at once on one directory must not each write
	// their own; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		c, err = ReadCredentials(dir)
		return c, false, err
	}
	if err != nil {
		return c, false, fmt.Errorf("credentials: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		os.Remove(path)
		return c, false, fmt.Errorf("credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return c, false, fmt.Errorf("credentials: %w", err)
	}
	return c, true, nil
}

// NodeInfo is <data dir>/node.json: how local clients reach a running node.
type NodeInfo struct {
	Node string `json:"node"`
	PID  int    `json:"pid"`
	// URL is the NATS client URL.
	URL string `json:"url"`
	// HTTP is the address of /metrics and /healthz, when on.
	HTTP    string    `json:"http,omitempty"`
	Started time.Time `json:"started"`
}

// WriteNodeInfo writes <dir>/node.json atomically (a reader never sees half
// of it).
func WriteNodeInfo(dir string, info NodeInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".node-*.json")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, NodeInfoFile))
}

// ReadNodeInfo reads <dir>/node.json.
func ReadNodeInfo(dir string) (NodeInfo, error) {
	var info NodeInfo
	b, err := os.ReadFile(filepath.Join(dir, NodeInfoFile))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", filepath.Join(dir, NodeInfoFile), err)
	}
	return info, nil
}

// RemoveNodeInfo removes <dir>/node.json if process pid wrote it.
func RemoveNodeInfo(dir string, pid int) {
	if info, err := ReadNodeInfo(dir); err == nil && info.PID == pid {
		os.Remove(filepath.Join(dir, NodeInfoFile))
	}
}

// Find looks for a data directory named name (".tah") in dir and its parents
// that holds a node.json or a credentials.json, and returns it, or "" when
// there is none.
func Find(dir, name string) string {
	for {
		cand := filepath.Join(dir, name)
		for _, f := range []string{NodeInfoFile, CredentialsFile} {
			if _, err := os.Stat(filepath.Join(cand, f)); err == nil {
				return cand
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
