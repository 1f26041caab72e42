// Package localnode is the contract between a node and the local clients in
// its data directory: the names of the credentials a node writes there (the
// local admin's admin.creds, which tahctl uses; package auth writes them) and
// where the running node listens (node.json). tah-node and the Go API write
// them; tahctl reads them, so that it finds the local node by itself. It
// imports nothing of NATS, so that clients stay small.
//
//	info, err := localnode.ReadNodeInfo(".tah") // a client
//	creds := localnode.AdminCredsPath(".tah")
package localnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The files a node keeps in its data directory for itself and local clients
// (tahctl finds the node and its credential through them).
const (
	// NodeCredsFile is the node's own NATS credential (a .creds file, 0600):
	// it never leaves the data directory.
	NodeCredsFile = "node.creds"
	// AdminCredsFile is the local admin's NATS credential (a .creds file,
	// 0600): what tahctl on the node's machine uses.
	AdminCredsFile = "admin.creds"
	// NodeInfoFile says where a running node listens (JSON NodeInfo); the node
	// writes it when it is ready and removes it when it stops.
	NodeInfoFile = "node.json"
)

// NodeCredsPath is <dir>/node.creds.
func NodeCredsPath(dir string) string { return filepath.Join(dir, NodeCredsFile) }

// AdminCredsPath is <dir>/admin.creds.
func AdminCredsPath(dir string) string { return filepath.Join(dir, AdminCredsFile) }

// NodeInfo is <data dir>/node.json: how local clients reach a running node.
type NodeInfo struct {
	Node string `json:"node"`
	PID  int    `json:"pid"`
	// URL is the NATS client URL: tls://... when the node serves TLS.
	URL string `json:"url"`
	// TLSCA is the node's CA file (nats.tls_ca), the one a client verifies a
	// tls:// URL against when it is given no other; empty when the node has
	// none.
	TLSCA string `json:"tls_ca,omitempty"`
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
	return WriteAtomic(filepath.Join(dir, NodeInfoFile), append(b, '\n'), 0o644)
}

// WriteAtomic replaces path with b, mode perm, through a temporary file in
// its directory renamed into place: a reader never sees half of it.
func WriteAtomic(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteNew writes b to a new file at path, mode perm, and fails (wrapping
// fs.ErrExist) when there is one already: two processes writing the same
// secret at once keep the first's. A failed write leaves no file.
func WriteNew(path string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
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
// that holds a node.json or an admin.creds, and returns it, or "" when there
// is none.
func Find(dir, name string) string {
	for {
		cand := filepath.Join(dir, name)
		for _, f := range []string{NodeInfoFile, AdminCredsFile} {
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
