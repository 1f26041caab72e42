package deploy_test

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tah-dev/tah/deploy/image"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// composeFile is the compose file under test.
const composeFile = "compose/compose.yaml"

// The compose file's services, as the test knows them.
var (
	natsServices = []string{"nats-1", "nats-2", "nats-3"}
	nodeServices = []string{"tah-1", "tah-2", "tah-3"}
)

// loadCompose reads the compose file as docker compose does: the compose
// specification's schema, interpolation, merge keys, paths resolved.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.ResolvePaths = true })
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return p
}

// TestComposeFile checks what the end-to-end run cannot: the file is valid
// for docker compose, the NATS image is the nats-server TAH is tested with,
// the nodes wait for the trust step, and the inspector is published.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	v := natsVersion(t)
	for _, name := range natsServices {
		s := service(t, p, name)
		if want := "nats:" + strings.TrimPrefix(v, "v"); s.Image != want {
			t.Errorf("%s runs %s: want %s, the nats-server of go.mod that the end-to-end run uses", name, s.Image, want)
		}
	}
	for _, name := range nodeServices {
		s := service(t, p, name)
		if d, ok := s.DependsOn["trust"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s does not wait for the trust step to complete: %+v", name, s.DependsOn)
		}
		if len(s.Ports) != 1 || s.Ports[0].Target != image.HTTPPort || s.Ports[0].HostIP != "127.0.0.1" {
			t.Errorf("%s publishes %+v: want its inspector's port %d on 127.0.0.1", name, s.Ports, image.HTTPPort)
		}
	}
}

// natsVersion is the module version of the nats-server built for the tests.
func natsVersion(t *testing.T) string {
	t.Helper()
	bi, err := buildinfo.ReadFile(binary(t, "nats-server"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/nats-io/nats-server/v2" {
			return d.Version
		}
	}
	if bi.Main.Path == "github.com/nats-io/nats-server/v2" {
		return bi.Main.Version
	}
	t.Fatalf("no nats-server module in the build information of nats-server")
	return ""
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("%s has no service %s", composeFile, name)
	}
	return s
}

// TestComposeCluster runs the compose file's configuration as processes on
// this machine, without a container runtime: the trust step's command, three
// nats-server processes with the file's nats.conf and command lines, three
// tah-nodes with its tah.json, environment and command lines, each container's
// mounts made of symbolic links. Only the addresses differ (each container
// has its own in compose; here they share 127.0.0.1, each on ports of its
// own). Turns complete; a node is killed in the middle of a turn, which
// completes on another node, and its sessions take turns after it.
func TestComposeCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three NATS servers and three nodes")
	}
	builtTools(t) // before the hang bound below: a build on a busy machine may take minutes
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := loadCompose(t)
	c := newComposeRun(t, p)

	c.runOnce(ctx, "trust")
	for _, n := range natsServices {
		c.start(n)
	}
	for _, n := range nodeServices {
		c.start(n)
	}
	c.waitNodes(ctx, nodeServices)
	// As docs/operations.md has it: docker compose exec tah-1 tahctl --creds
	// /var/lib/tah/trust/admin.creds status (the node's data directory, from
	// the container's environment, says where NATS is).
	root := filepath.Join(c.dir, "containers", "tah-1")
	run(t, ctx, c.dir, []string{"TAH_DATA_DIR=" + filepath.Join(root, "var/lib/tah/tah-1")},
		c.tahctl, "--creds", filepath.Join(root, "var/lib/tah/trust/admin.creds"), "status")

	// Sessions spread over the nodes by partition: enough that each node
	// owns some.
	var sessions []string
	for i := range 6 {
		sid, _ := c.send(ctx, "", fmt.Sprintf("hello %d", i))
		sessions = append(sessions, sid)
	}
	owners := map[string]string{}
	for _, sid := range sessions {
		owners[sid] = c.owner(ctx, sid)
	}
	t.Logf("owners: %v", owners)

	// A turn in flight on a node that is killed (SIGKILL, as a crash): it
	// completes on another node.
	victimSession := sessions[0]
	victim := owners[victimSession]
	turn := c.startSend(ctx, victimSession, "a turn its node will not finish")
	turn.waitDelta(t)
	c.kill(victim)
	if err := turn.wait(); err != nil {
		t.Fatalf("the turn that was running on %s when it was killed: %v\n%s", victim, err, c.logs())
	}
	if got := c.owner(ctx, victimSession); got == victim {
		t.Fatalf("session %s is still owned by the killed %s", victimSession, victim)
	}
	// Every session goes on, the killed node's included.
	for _, sid := range sessions {
		c.send(ctx, sid, "and after the crash")
	}
	c.waitNodes(ctx, without(nodeServices, victim))
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

// composeRun is the compose file's services as processes: a directory per
// named volume, a root per container whose mount points are links to the
// volumes and bind-mounted files, and ports of 127.0.0.1 for the addresses.
type composeRun struct {
	t       *testing.T
	p       *types.Project
	dir     string
	hosts   map[string]string // "nats-1:4222" (as the file says) -> "127.0.0.1:N"
	ports   map[string]map[string]int
	procs   map[string]*exec.Cmd
	exited  map[string]chan struct{}
	logDir  string
	tahctl  string
	adminCr string
	url     string
}

func newComposeRun(t *testing.T, p *types.Project) *composeRun {
	dir, err := os.MkdirTemp("", "tah-compose-")
	if err != nil {
		t.Fatal(err)
	}
	c := &composeRun{t: t, p: p, dir: dir, hosts: map[string]string{}, ports: map[string]map[string]int{},
		procs: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{}, logDir: filepath.Join(dir, "logs"),
		tahctl: binary(t, "tahctl")}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	// Each NATS server's client, cluster and monitoring ports, and each
	// node's HTTP port, as they are inside their container.
	for _, n := range natsServices {
		c.assign(n, "4222", "6222", "8222")
	}
	for _, n := range nodeServices {
		c.assign(n, fmt.Sprint(image.HTTPPort))
	}
	c.url = "nats://" + c.hosts["nats-1:4222"]
	return c
}

// assign gives the container's ports free ports of 127.0.0.1.
func (c *composeRun) assign(name string, ports ...string) {
	free, err := natstest.FreePorts(len(ports))
	if err != nil {
		c.t.Fatal(err)
	}
	c.ports[name] = map[string]int{}
	for i, p := range ports {
		c.ports[name][p] = free[i]
		c.hosts[name+":"+p] = fmt.Sprintf("127.0.0.1:%d", free[i])
	}
}

func (c *composeRun) close() {
	for name, cmd := range c.procs {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGKILL)
			<-c.exited[name]
		}
	}
	if c.t.Failed() {
		c.t.Logf("kept for inspection: %s", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

// root makes the container's root: each mount point a link to its volume's
// directory or its bind mount's source.
func (c *composeRun) root(name string) string {
	s := service(c.t, c.p, name)
	root := filepath.Join(c.dir, "containers", name)
	for _, v := range s.Volumes {
		var src string
		switch v.Type {
		case types.VolumeTypeVolume:
			src = filepath.Join(c.dir, "volumes", v.Source)
			if err := os.MkdirAll(src, 0o755); err != nil {
				c.t.Fatal(err)
			}
		case types.VolumeTypeBind:
			src = v.Source
		default:
			c.t.Fatalf("%s: a mount of type %s", name, v.Type)
		}
		at := filepath.Join(root, v.Target)
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			c.t.Fatal(err)
		}
		if err := os.Symlink(src, at); err != nil && !os.IsExist(err) {
			c.t.Fatal(err)
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return root
}

// rewrite turns a value of the compose world into this machine's: a path
// inside the container into the same path under its root, a service's
// address into its port here, 0.0.0.0 (every interface of the container)
// into the container's own port here.
func (c *composeRun) rewrite(name, root, v string) string {
	for from, to := range c.hosts {
		v = strings.ReplaceAll(v, from, to)
	}
	for port, free := range c.ports[name] {
		v = strings.ReplaceAll(v, "0.0.0.0:"+port, fmt.Sprintf("127.0.0.1:%d", free))
	}
	if k, val, ok := strings.Cut(v, "="); ok && strings.HasPrefix(k, "-") {
		return k + "=" + c.rewrite(name, root, val)
	}
	if strings.HasPrefix(v, "/") {
		return filepath.Join(root, v)
	}
	return v
}

// rewriteConfig writes a copy of a tah-node --config file with every string
// rewritten, and returns its path.
func (c *composeRun) rewriteConfig(name, root, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		c.t.Fatalf("%s: %v", path, err)
	}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case string:
			return c.rewrite(name, root, x)
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return x
	}
	out, err := json.MarshalIndent(walk(v), "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	dst := filepath.Join(c.dir, name+"."+filepath.Base(path))
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		c.t.Fatal(err)
	}
	return dst
}

// command is the container's process: its image's entrypoint (the tah
// image's, from package image; the nats image's /nats-server) and the
// service's, with its arguments and environment rewritten.
func (c *composeRun) command(ctx context.Context, name string) *exec.Cmd {
	s := service(c.t, c.p, name)
	root := c.root(name)
	var entry, args []string
	var env []string
	workDir := s.WorkingDir
	switch {
	case strings.HasPrefix(s.Image, "nats:"):
		entry = []string{"/nats-server"}
	default:
		cfg := image.Config(image.Version{}, time.Time{})
		entry, args, env = cfg.Entrypoint, cfg.Cmd, cfg.Env
		if workDir == "" {
			workDir = cfg.WorkingDir
		}
	}
	if len(s.Entrypoint) > 0 {
		entry, args = s.Entrypoint, nil
	}
	if s.Command != nil {
		args = s.Command
	}
	for k, v := range s.Environment {
		if v != nil {
			env = append(env, k+"="+*v)
		}
	}
	var rewritten []string
	for i, a := range args {
		if i > 0 && args[i-1] == "--config" && !strings.HasPrefix(s.Image, "nats:") {
			rewritten = append(rewritten, c.rewriteConfig(name, root, c.rewrite(name, root, a)))
			continue
		}
		rewritten = append(rewritten, c.rewrite(name, root, a))
	}
	if strings.HasPrefix(s.Image, "nats:") {
		rewritten = append(rewritten, c.natsAddresses(name)...)
	}
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k != "PATH" {
			env[i] = k + "=" + c.rewrite(name, root, v)
		}
	}
	cmd := exec.CommandContext(ctx, binary(c.t, filepath.Base(entry[0])), append(entry[1:], rewritten...)...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Dir = filepath.Join(root, workDir)
	if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return cmd
}

// natsAddresses are the flags that put a server's listeners on its ports
// here (flags read over the configuration file): its client port, its
// cluster's listener and routes, its monitoring port.
func (c *composeRun) natsAddresses(name string) []string {
	var routes []string
	for _, n := range natsServices {
		routes = append(routes, "nats-route://"+c.hosts[n+":6222"])
	}
	return []string{
		"--addr", "127.0.0.1", "--port", fmt.Sprint(c.ports[name]["4222"]),
		"--http_port", fmt.Sprint(c.ports[name]["8222"]),
		"--cluster", "nats://" + c.hosts[name+":6222"],
		"--routes", strings.Join(routes, ","),
	}
}

// runOnce runs a one-shot service to its end.
func (c *composeRun) runOnce(ctx context.Context, name string) {
	cmd := c.command(ctx, name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// start starts a service's process, its output into its log.
func (c *composeRun) start(name string) {
	cmd := c.command(context.Background(), name)
	f, err := os.Create(filepath.Join(c.logDir, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	done := make(chan struct{})
	c.procs[name], c.exited[name] = cmd, done
	go func() { // owned by the process: ends when it exits
		cmd.Wait()
		f.Close()
		close(done)
	}()
}

func (c *composeRun) kill(name string) {
	c.t.Logf("kill -9 %s", name)
	c.procs[name].Process.Signal(syscall.SIGKILL)
	<-c.exited[name]
}

// logs are the last lines of every service's log.
func (c *composeRun) logs() string {
	var b strings.Builder
	names := make([]string, 0, len(c.procs))
	for n := range c.procs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		data, _ := os.ReadFile(filepath.Join(c.logDir, n+".log"))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", n, strings.Join(lines, "\n"))
	}
	return b.String()
}

// tahctlArgs are the global flags of tahctl on this machine: the first
// server, the admin's credential the trust step wrote.
func (c *composeRun) tahctlArgs(args ...string) []string {
	creds := filepath.Join(c.dir, "volumes", "tah", "trust", "admin.creds")
	return append([]string{"--server", c.url, "--creds", creds}, args...)
}

// waitNodes waits until tahctl status lists the nodes, and only them, with
// every partition owned, and each node's /healthz answers 200.
func (c *composeRun) waitNodes(ctx context.Context, nodes []string) {
	err := natstest.Poll(2*time.Minute, 500*time.Millisecond, func() error {
		for _, n := range nodes {
			if ch := c.exited[n]; ch != nil {
				select {
				case <-ch:
					return natstest.Permanent(fmt.Errorf("%s exited", n))
				default:
				}
			}
			resp, err := http.Get(fmt.Sprintf("http://%s/healthz", c.hosts[n+":9464"]))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: /healthz %s", n, resp.Status)
			}
		}
		out, err := runErr(ctx, c.dir, nil, c.tahctl, c.tahctlArgs("--json", "status")...)
		if err != nil {
			return err
		}
		var st struct {
			Nodes []struct {
				ID string `json:"node"`
			} `json:"nodes"`
			Unowned []int `json:"unowned_partitions"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return fmt.Errorf("status --json: %v: %s", err, out)
		}
		var ids []string
		for _, n := range st.Nodes {
			ids = append(ids, n.ID)
		}
		sort.Strings(ids)
		if strings.Join(ids, ",") != strings.Join(nodes, ",") || len(st.Unowned) > 0 {
			return fmt.Errorf("nodes %v (want %v), unowned partitions %v", ids, nodes, st.Unowned)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("the cluster: %v\n%s", err, c.logs())
	}
}

// send runs tahctl send to its end (a new session when sid is empty) and
// returns the session and the answer; a turn that does not complete fails
// the test.
func (c *composeRun) send(ctx context.Context, sid, text string) (string, string) {
	args := []string{"--json", "send"}
	if sid != "" {
		args = append(args, "-s", sid)
	}
	out, err := runErr(ctx, c.dir, nil, c.tahctl, c.tahctlArgs(append(args, text)...)...)
	if err != nil {
		c.t.Fatalf("send: %v\n%s", err, c.logs())
	}
	var answer string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct {
			Kind    string `json:"kind"`
			Session string `json:"session"`
			Status  string `json:"status"`
			Outcome struct {
				Status string `json:"status"`
			} `json:"outcome"`
		}
		json.Unmarshal([]byte(line), &m)
		if m.Kind == "session" {
			sid = m.Session
		}
		if m.Kind == "outcome" {
			answer = line
		}
	}
	if sid == "" || answer == "" {
		c.t.Fatalf("send printed no session or outcome:\n%s", out)
	}
	return sid, answer
}

// owner is the node of the session's last claim in its log.
func (c *composeRun) owner(ctx context.Context, sid string) string {
	out := run(c.t, ctx, c.dir, nil, c.tahctl, c.tahctlArgs("--json", "events", sid)...)
	owner := ""
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type string `json:"type"`
			Data struct {
				Node string `json:"node"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == "session.claimed" {
			owner = e.Data.Node
		}
	}
	if owner == "" {
		c.t.Fatalf("no session.claimed in the log of %s:\n%s", sid, out)
	}
	return owner
}

// runningSend is a tahctl send in the background.
type runningSend struct {
	cmd    *exec.Cmd
	deltas chan struct{}
	done   chan error
	out    strings.Builder
}

// startSend starts tahctl send on a session and follows its output.
func (c *composeRun) startSend(ctx context.Context, sid, text string) *runningSend {
	cmd := exec.CommandContext(ctx, c.tahctl, c.tahctlArgs("--json", "send", "-s", sid, text)...)
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	r := &runningSend{cmd: cmd, deltas: make(chan struct{}, 1), done: make(chan error, 1)}
	cmd.Stderr = &r.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { // ends with the command's output
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"kind":"delta"`) {
				select {
				case r.deltas <- struct{}{}:
				default:
				}
			}
		}
		r.done <- cmd.Wait()
	}()
	return r
}

// waitDelta waits for the answer's first streamed piece: the turn runs.
func (r *runningSend) waitDelta(t *testing.T) {
	t.Helper()
	select {
	case <-r.deltas:
	case err := <-r.done:
		t.Fatalf("the turn ended before it streamed: %v\n%s", err, r.out.String())
	case <-time.After(time.Minute):
		t.Fatalf("no answer streamed within a minute\n%s", r.out.String())
	}
}

// wait waits for send to end: nil when the turn completed (exit status 0).
func (r *runningSend) wait() error {
	if err := <-r.done; err != nil {
		return fmt.Errorf("%v\n%s", err, r.out.String())
	}
	return nil
}
