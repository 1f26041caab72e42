package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

// The files a node reads from its data directory on an external NATS, besides
// its node.creds (given by --nats-creds).
var nodeFiles = []string{"ui.creds", "agents.creds", "ui.token"}

// The credentials issued besides node.creds and admin.creds (auth.Ensure's):
// file, role, name.
var extraCreds = []struct {
	file string
	role wire.Role
	name string
}{
	{"ui.creds", wire.RoleClient, "ui"},
	{"agents.creds", wire.RoleAgents, "agents"},
}

// NATSAuthConf is the file name of the servers' side, in --dir.
const NATSAuthConf = "nats-auth.conf"

type options struct {
	dir       string
	nodeDirs  []string
	k8s       bool
	secret    string
	namespace string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	t, err := ensure(o.dir)
	if err != nil {
		return err
	}
	if err := writeNATSAuth(o.dir, t); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trust material and credentials in %s; the servers' side in %s\n", o.dir, filepath.Join(o.dir, NATSAuthConf))
	for _, d := range o.nodeDirs {
		if err := seedNodeDir(o.dir, d); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "node data directory %s: %s\n", d, strings.Join(nodeFiles, ", "))
	}
	if o.k8s {
		paths, err := writeK8s(o, t)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Kubernetes: %s (secret: apply it, never commit it) and %s (for the nats chart)\n", paths[0], paths[1])
	}
	return nil
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("tah-trust", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "tah-trust", "directory of the trust material and the credentials (made 0700)")
	fs.Func("node-dir", "a node's data directory to give ui.creds, agents.creds and ui.token (repeatable)", func(s string) error {
		o.nodeDirs = append(o.nodeDirs, s)
		return nil
	})
	fs.BoolVar(&o.k8s, "k8s", false, "also write k8s/tah-creds.yaml (a Secret) and k8s/nats-auth-values.yaml (values for the nats chart)")
	fs.StringVar(&o.secret, "secret", "tah-creds", "name of the Secret of --k8s (the chart's nats.credsSecret)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the Secret of --k8s (empty: kubectl's)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (tah-trust takes flags only: --help)", fs.Arg(0))
	}
	return o, nil
}

// ensure makes or reads the trust material of dir and writes the
// credentials that are missing.
func ensure(dir string) (*auth.Trust, error) {
	t, err := auth.Ensure(dir) // trust/, node.creds, admin.creds
	if err != nil {
		return nil, fmt.Errorf("trust material in %s: %w", dir, err)
	}
	for _, c := range extraCreds {
		if err := t.EnsureCreds(filepath.Join(dir, c.file), c.role, c.name); err != nil {
			return nil, err
		}
	}
	if err := ensureToken(filepath.Join(dir, "ui.token")); err != nil {
		return nil, err
	}
	return t, nil
}

// ensureToken writes a login token for the web UI when there is none: one
// for every node, so that a login holds whichever node a Service reaches.
func ensureToken(path string) error {
	err := localnode.WriteNew(path, []byte(rand.Text()+"\n"), 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("the web UI's token %s: %w", path, err)
	}
	return nil
}

// preloads are the accounts' JWTs by public key, in a stable order.
func preloads(t *auth.Trust) [][2]string {
	p := [][2]string{{t.SystemAccount(), t.SystemJWT()}, {t.Account(), t.AccountJWT()}}
	sort.Slice(p, func(i, j int) bool { return p[i][0] < p[j][0] })
	return p
}

// writeNATSAuth writes the servers' side of the trust: every server of the
// cluster includes it. JWTs are signed public statements; no seed is in it.
func writeNATSAuth(dir string, t *auth.Trust) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# The TAH operator, its system account and the accounts' JWTs, written by\n")
	fmt.Fprintf(&b, "# tah-trust from %s. No secret: include it in every server's configuration.\n", filepath.Join(dir, auth.TrustDir))
	fmt.Fprintf(&b, "operator: %q\n", t.OperatorJWT())
	fmt.Fprintf(&b, "system_account: %q\n", t.SystemAccount())
	fmt.Fprintf(&b, "resolver_preload: {\n")
	for _, p := range preloads(t) {
		fmt.Fprintf(&b, "  %s: %q\n", p[0], p[1])
	}
	fmt.Fprintf(&b, "}\n")
	return localnode.WriteAtomic(filepath.Join(dir, NATSAuthConf), []byte(b.String()), 0o644)
}

// seedNodeDir gives a node's data directory the files it reads there that
// are missing: a node keeps a file that is there (its own token, say).
func seedNodeDir(dir, nodeDir string) error {
	if err := localnode.MakeDir(nodeDir); err != nil {
		return fmt.Errorf("node data directory %s: %w", nodeDir, err)
	}
	for _, name := range nodeFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = localnode.WriteNew(filepath.Join(nodeDir, name), b, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("node data directory %s: %w", nodeDir, err)
		}
	}
	return nil
}

// writeK8s writes the Secret of the nodes' files and the nats chart's values
// of the trust, and returns their paths.
func writeK8s(o options, t *auth.Trust) ([2]string, error) {
	kdir := filepath.Join(o.dir, "k8s")
	if err := localnode.MakeDir(kdir); err != nil {
		return [2]string{}, err
	}
	secret, err := secretManifest(o)
	if err != nil {
		return [2]string{}, err
	}
	paths := [2]string{filepath.Join(kdir, "tah-creds.yaml"), filepath.Join(kdir, "nats-auth-values.yaml")}
	if err := localnode.WriteAtomic(paths[0], secret, 0o600); err != nil {
		return paths, err
	}
	return paths, localnode.WriteAtomic(paths[1], natsValues(t), 0o644)
}

// secretManifest is the Secret the chart mounts: node.creds for
// --nats-creds, and the files a node reads from its data directory.
func secretManifest(o options) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# The TAH nodes' credentials, written by tah-trust: a secret. kubectl apply -f it; never commit it.\n")
	b.WriteString("apiVersion: v1\nkind: Secret\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", o.secret)
	if o.namespace != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", o.namespace)
	}
	b.WriteString("  labels:\n    app.kubernetes.io/part-of: tah\ntype: Opaque\ndata:\n")
	for _, name := range append([]string{"node.creds"}, nodeFiles...) {
		v, err := os.ReadFile(filepath.Join(o.dir, name))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "  %s: %s\n", name, base64.StdEncoding.EncodeToString(v))
	}
	return []byte(b.String()), nil
}

// natsValues are values for the official nats chart: its config.merge puts
// the operator, the system account and the preloads into nats.conf (JSON
// strings are YAML too).
func natsValues(t *auth.Trust) []byte {
	var b strings.Builder
	b.WriteString("# Values for the official nats chart, written by tah-trust: the TAH operator, its\n")
	b.WriteString("# system account and the accounts' JWTs (no secret). Give them after deploy/helm/nats-values.yaml.\n")
	b.WriteString("config:\n  merge:\n")
	fmt.Fprintf(&b, "    operator: %q\n", t.OperatorJWT())
	fmt.Fprintf(&b, "    system_account: %q\n", t.SystemAccount())
	b.WriteString("    resolver_preload:\n")
	for _, p := range preloads(t) {
		fmt.Fprintf(&b, "      %s: %q\n", p[0], p[1])
	}
	return []byte(b.String())
}
