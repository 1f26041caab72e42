// Package nodecmd is the tah-node command: it reads the configuration
// (defaults, a JSON file, TAH_* variables, flags), starts a node (node.Start
// and its API), serves /metrics, /healthz and the web UI (package inspector,
// at /), writes the data directory's
// credentials and node.json for local clients, and stops cleanly on SIGINT or
// SIGTERM. cmd/node is its main; the end-to-end tests run it in-process.
//
//	err := nodecmd.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
//	os.Exit(nodecmd.ExitCode(err))
package nodecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/inspector"
	"github.com/tah-dev/tah/internal/buildinfo"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/store"
)

// Exit codes of tah-node.
const (
	ExitOK     = 0 // stopped by SIGINT or SIGTERM after a clean shutdown
	ExitFailed = 1 // could not start (a port in use, a locked data directory, ...) or failed while running
	ExitUsage  = 2 // bad flags or configuration
)

// Error is an error of tah-node with its exit code and a hint.
type Error struct {
	Code int
	Err  error
	// Try says what to do about it, for people.
	Try string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the process exit code for err (nil: 0).
func ExitCode(err error) int {
	var e *Error
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	}
	return ExitFailed
}

// Report writes err for people: "Error: ..." and "Try: ...".
func Report(w io.Writer, err error) {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	msg := err.Error()
	for _, noise := range []string{": invalid configuration", ": invalid LLM configuration", ": invalid bus configuration"} {
		msg = strings.ReplaceAll(msg, noise, "")
	}
	if strings.Contains(msg, "\n") {
		fmt.Fprintf(w, "Error: %s\n", strings.ReplaceAll(msg, "\n", "\n  "))
	} else {
		fmt.Fprintf(w, "Error: %s\n", msg)
	}
	var e *Error
	if errors.As(err, &e) && e.Try != "" {
		fmt.Fprintf(w, "Try: %s\n", e.Try)
	}
}

func usageErr(err error, try string) error { return &Error{Code: ExitUsage, Err: err, Try: try} }
func failed(err error, try string) error   { return &Error{Code: ExitFailed, Err: err, Try: try} }

const usageHead = `Usage: tah-node [flags]

Runs a TAH node: durable LLM agent sessions on NATS JetStream. With no
configuration at all it keeps its data in .tah, embeds a NATS server on
127.0.0.1:4222 (in NATS operator mode: its trust material and credentials
are generated into .tah at first start),
answers with the mock model in demo mode, and lets the agent read the files
under the working directory. Talk to it with tahctl.

Each source of settings overrides the one before: the defaults, a JSON file
(--config), TAH_* environment variables, then flags.

Flags:
`

// printUsage prints the settings by section: flag, meaning, variable, value.
func printUsage(w io.Writer, cfg *config.Config) {
	fmt.Fprint(w, usageHead)
	fmt.Fprintf(w, "  %-26s %s\n", "--config FILE", "JSON configuration file, keys as --print-config shows them [TAH_CONFIG]")
	fmt.Fprintf(w, "  %-26s %s\n", "--print-config", "print the configuration in effect as JSON and exit")
	fmt.Fprintf(w, "  %-26s %s\n", "--init-trust", "generate the data directory's NATS trust material and credentials (as the first start does) and exit")
	fmt.Fprintf(w, "  %-26s %s\n", "--version", "print the version (module version, VCS revision and time) and exit")
	fmt.Fprintf(w, "  %-26s %s\n", "-h, --help", "this help")
	section := ""
	for _, s := range cfg.Settings() {
		sec := "General"
		if k, _, ok := strings.Cut(s.Key, "."); ok {
			sec = map[string]string{"nats": "NATS", "llm": "Model", "agent": "Agent", "tools": "Tools", "agents": "Agent protocol", "tracing": "Tracing"}[k]
		} else if s.Key == "http" || strings.HasPrefix(s.Key, "log_") {
			sec = "Observability"
		}
		if sec != section {
			section = sec
			fmt.Fprintf(w, "\n%s:\n", sec)
		}
		name := "--" + s.Flag + " " + argName(s)
		fmt.Fprintf(w, "  %-26s %s [%s]", name, s.Usage, s.Env)
		if s.Value != "" && s.Value != "0" && s.Value != "false" {
			fmt.Fprintf(w, " (default %s)", s.Value)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, usageTail)
}

// argName is the placeholder of a flag's value in the help.
func argName(s config.Setting) string {
	switch {
	case s.Value == "true" || s.Value == "false": // a boolean's value
		return "[=BOOL]"
	case strings.HasSuffix(s.Key, "port") || strings.HasSuffix(s.Key, "replicas") || strings.HasSuffix(s.Key, "partitions") || strings.HasSuffix(s.Key, "shards") ||
		strings.HasSuffix(s.Key, "max_steps") || strings.HasSuffix(s.Key, "chars") || strings.HasSuffix(s.Key, "retries") ||
		strings.HasSuffix(s.Key, "max_tokens") || strings.HasSuffix(s.Key, "max_concurrent") || strings.HasSuffix(s.Key, "bytes") || strings.HasSuffix(s.Key, "tokens"):
		return "N"
	case strings.HasSuffix(s.Key, "timeout") || strings.HasSuffix(s.Key, "pace") || strings.HasSuffix(s.Key, "wait") ||
		strings.HasSuffix(s.Key, "ttl") || strings.HasSuffix(s.Key, "every") || strings.HasSuffix(s.Key, "heartbeat") || strings.HasSuffix(s.Key, ".time"):
		return "DURATION"
	case s.Key == "tools.write" || s.Key == "tools.remote" || s.Key == "nats.tls_verify_clients":
		return "[=BOOL]"
	case s.Key == "data_dir" || s.Key == "tools.root":
		return "DIR"
	case s.Key == "tools.deny":
		return "GLOB,..."
	case strings.HasSuffix(s.Key, "script") || s.Key == "llm.prices" || s.Key == "nats.creds" || strings.HasPrefix(s.Key, "nats.tls_"):
		return "FILE"
	case strings.HasSuffix(s.Key, "url") || s.Key == "nats.routes":
		return "URL"
	case s.Key == "http":
		return "HOST:PORT"
	}
	return "TEXT"
}

const usageTail = `
Exit status: 0 after a clean stop (SIGINT or SIGTERM, within 15 s in every
state), 1 when the node cannot start, cannot go on (a read model it cannot
write, say) or did not stop cleanly, 2 for bad flags or configuration.

Files in the data directory: nats/ (the log), data.db (the read model),
trust/ (the NATS operator's and accounts' keys, mode 0700), node.creds (the
node's own NATS credential), admin.creds (the local admin's, for tahctl),
ui.creds (the web UI's, role client), ui.token (the web UI's login, when
--http is not loopback), node.json (where the running node listens, for
tahctl). docs/security.md
says who may do what.
`

// Run runs tah-node with args until ctx ends or SIGINT/SIGTERM arrives.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, extra, err := parse(args, stdout)
	if err != nil {
		return err
	}
	if extra.version {
		return printVersion(stdout)
	}
	if extra.printConfig {
		return printConfig(stdout, cfg)
	}
	if extra.initTrust {
		return initTrust(stdout, cfg)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, stop, cfg, stdout, stderr) }() // owned here: waited for below, or left to the process's exit
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Stopping, whatever the node was doing: it gets StopBound.
	bound := time.NewTimer(StopBound)
	defer bound.Stop()
	select {
	case err := <-served:
		return err
	case <-bound.C:
		return failed(fmt.Errorf("the node did not stop within %v of the signal", StopBound),
			"nothing acknowledged is lost: the next start resumes the running turns from the log, as after a kill -9; the log above says what it was waiting for")
	}
}

// StopBound is how long tah-node takes at most to exit after SIGINT or
// SIGTERM, in every state (starting, serving, with a full disk or a stalled
// read model): past it, Run returns with ExitFailed and what is still
// stopping is abandoned with the process. A clean stop takes well under a
// second; closeBound is what the node's own Close gets of it.
const StopBound = 15 * time.Second

// closeBound bounds node.Close at a stop: its parts that wait on NATS
// (handing partitions over, draining the connection, the server's shutdown)
// give up when it ends.
const closeBound = 10 * time.Second

type extraFlags struct {
	configPath  string
	printConfig bool
	initTrust   bool
	version     bool
}

// parse reads the configuration: defaults, the file, the environment, flags.
// --help prints the usage on stdout; a bad flag is one error with a hint (the
// flag package's own message and usage are silenced: Report says it once).
func parse(args []string, stdout io.Writer) (config.Config, extraFlags, error) {
	var extra extraFlags
	cfg := config.Default()
	path, err := configPath(args)
	if err != nil {
		return cfg, extra, usageErr(err, "tah-node --config path/to/tah.json")
	}
	if path == "" {
		path = os.Getenv("TAH_CONFIG")
	}
	if err := cfg.Load(path, os.LookupEnv); err != nil {
		return cfg, extra, usageErr(err, "fix the setting named above (tah-node --help lists them)")
	}
	fs := flag.NewFlagSet("tah-node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&extra.configPath, "config", path, "JSON configuration file ($TAH_CONFIG); keys as in --print-config")
	fs.BoolVar(&extra.printConfig, "print-config", false, "print the configuration in effect as JSON and exit")
	fs.BoolVar(&extra.initTrust, "init-trust", false, "generate the data directory's NATS trust material and credentials and exit")
	fs.BoolVar(&extra.version, "version", false, "print the version and exit")
	cfg.RegisterFlags(fs)
	fs.Usage = func() {} // the flag package calls it on every error too
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, &cfg)
			return cfg, extra, err
		}
		return cfg, extra, usageErr(err, "`tah-node --help` lists the flags")
	}
	if extra.version {
		return cfg, extra, nil
	}
	if fs.NArg() > 0 {
		return cfg, extra, usageErr(fmt.Errorf("unexpected argument %q: tah-node takes flags only", fs.Arg(0)), "tah-node --help")
	}
	if err := node.Check(cfg); err != nil {
		return cfg, extra, usageErr(fmt.Errorf("the configuration cannot work:\n%w", err), "fix the settings named above (tah-node --help lists them)")
	}
	return cfg, extra, nil
}

// configPath finds --config before the flags are parsed, so that the flags can
// override the file.
func configPath(args []string) (string, error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasVal {
			return val, nil
		}
		if i+1 >= len(args) {
			return "", errors.New("flag needs an argument: --config")
		}
		return args[i+1], nil
	}
	return "", nil
}

// initTrust generates the data directory's trust material and credentials,
// as the first start of an embedded server does, so that it can be copied
// to the other nodes of a cluster before any starts.
func initTrust(w io.Writer, cfg config.Config) error {
	if cfg.NATS.URL != "" {
		return usageErr(errors.New("--init-trust is for an embedded server; with --nats-url the NATS operator issues the node's credential"),
			"docs/security.md, \"An external NATS cluster\", gives the nsc commands")
	}
	t, err := auth.Ensure(cfg.DataDir)
	if err != nil {
		return failed(fmt.Errorf("trust material: %w", err), "docs/security.md says how to restore the data directory's trust/")
	}
	fmt.Fprintf(w, "trust material  %s (operator %s, TAH account %s)\n", filepath.Join(cfg.DataDir, auth.TrustDir), t.OperatorKey(), t.Account())
	fmt.Fprintf(w, "credentials     %s (the node's), %s (the local admin's)\n", auth.NodeCredsPath(cfg.DataDir), auth.AdminCredsPath(cfg.DataDir))
	fmt.Fprintf(w, "Give another node of the cluster a copy of %s before its first start.\n", filepath.Join(cfg.DataDir, auth.TrustDir))
	return nil
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, buildinfo.Describe("tah-node"))
	return err
}

func printConfig(w io.Writer, cfg config.Config) error {
	b, err := jsonIndent(cfg)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve starts the node and waits for ctx; stop restores the default signal
// behaviour, so that a second Ctrl-C during shutdown ends the process at once.
func serve(ctx context.Context, stop func(), cfg config.Config, stdout, stderr io.Writer) (err error) {
	log := newLogger(cfg, stderr)
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return usageErr(fmt.Errorf("%s: %w", config.Describe("data_dir"), err), "")
	}
	cfg.DataDir = dataDir
	if cfg.NodeID == "" {
		cfg.NodeID = node.DefaultNodeID(dataDir)
	}
	if err := localnode.MakeDir(dataDir); err != nil {
		return failed(fmt.Errorf("data directory %s: %w", dataDir, err), "choose another with --data-dir (TAH_DATA_DIR)")
	}
	unlock, err := localnode.Lock(dataDir)
	var inUse *localnode.InUseError
	switch {
	case errors.As(err, &inUse):
		return failed(err, "stop it, or give this node its own directory with --data-dir (TAH_DATA_DIR)")
	case err != nil:
		return failed(err, "")
	}
	defer unlock()

	embedded := cfg.NATS.URL == ""
	credsNote := ""
	if embedded {
		credsNote = auth.AdminCredsPath(dataDir)
	} else if err := checkNodeCreds(cfg); err != nil {
		return err
	}
	if embedded && cfg.NATS.Port > 0 {
		if err := probePort(cfg.NATS.Host, cfg.NATS.Port); err != nil {
			return failed(fmt.Errorf("NATS cannot listen on %s: %w", net.JoinHostPort(cfg.NATS.Host, strconv.Itoa(cfg.NATS.Port)), err),
				"stop the process that uses the port (another tah-node?), or choose another with --nats-port (TAH_NATS_PORT), e.g. --nats-port 4223, or --nats-port 0 for a free one")
		}
	}
	var httpLn net.Listener
	if cfg.HTTP != "" {
		if httpLn, err = net.Listen("tcp", cfg.HTTP); err != nil {
			return failed(fmt.Errorf("/metrics and /healthz cannot listen on %s: %w", cfg.HTTP, err),
				"choose another address with --http (TAH_HTTP), e.g. --http 127.0.0.1:0 for a free port, or --http '' to turn it off")
		}
		defer httpLn.Close()
	}

	root, err := filepath.Abs(cfg.Tools.Root)
	if err != nil {
		return usageErr(fmt.Errorf("%s: %w", config.Describe("tools.root"), err), "")
	}
	cfg.Tools.Root = root
	opts, err := node.Configure(cfg)
	if err != nil {
		return usageErr(err, "fix the llm settings (tah-node --help lists them)")
	}
	opts.Logger = log
	opts.Bus.Name = "tah-node " + cfg.NodeID
	// The embedded server's notices (its banner, each start step) are debug
	// records here; its warnings and errors stay what they are.
	opts.Bus.Logger = slog.New(demoted{log.Handler()})
	n, err := node.Start(ctx, opts)
	if err != nil {
		return failed(fmt.Errorf("the node did not start: %w", err), startHint(err))
	}
	provider := opts.Provider
	if embedded {
		for _, f := range []string{auth.NodeCredsPath(dataDir), auth.AdminCredsPath(dataDir), filepath.Join(dataDir, auth.TrustDir)} {
			checkMode(log, f)
		}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), closeBound)
		defer cancel()
		if cerr := n.Close(sctx); cerr != nil {
			log.Error("shutdown", "err", cerr)
			if err == nil {
				err = failed(fmt.Errorf("shutdown: %w", cerr), "")
			}
		}
	}()
	testHookStarted(n)

	var srv *http.Server
	var web *ui
	httpAddr := ""
	if httpLn != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", n.Metrics.Handler())
		mux.Handle("/healthz", n.HealthHandler())
		web = startUI(ctx, cfg, localURL(n.Bus().ClientURL()), log)
		defer web.close()
		if h, ok := web.handler.(*inspector.Handler); ok {
			n.Metrics.Registry().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tah_ui_live_streams",
				Help: "The web UI's pages following a session live: each holds an HTTP connection."}, func() float64 { return float64(h.LiveStreams()) }))
		}
		mux.Handle("/", web.handler)
		// The UI's live streams end with uiCtx, before the server's shutdown
		// waits for its connections.
		uiCtx, stopUI := context.WithCancel(ctx)
		defer stopUI()
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return uiCtx }}
		httpAddr = httpLn.Addr().String()
		served := make(chan struct{})
		go func() { // owned here: ends when srv is shut down below
			defer close(served)
			if err := srv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stopUI()
			_ = srv.Shutdown(sctx)
			<-served
		}()
	}

	info := localnode.NodeInfo{Node: cfg.NodeID, PID: os.Getpid(), URL: localURL(n.Bus().ClientURL()), HTTP: localURL(httpAddr),
		TLSCA: absPath(cfg.NATS.TLSCA), Started: time.Now().UTC()}
	if err := localnode.WriteNodeInfo(dataDir, info); err != nil {
		return failed(fmt.Errorf("node.json: %w", err), "")
	}
	defer localnode.RemoveNodeInfo(dataDir, info.PID)

	log.Info("ready", "node", cfg.NodeID, "nats", info.URL, "http", httpAddr, "data_dir", dataDir,
		"provider", provider.Name(), "tools_root", root)
	banner(stdout, cfg, info, provider, n, root, credsNote, web, agentsLine(cfg, n))

	select {
	case <-ctx.Done():
	case ferr := <-n.Failed():
		// The node logged why; it stops so that a supervisor starts it again.
		return failed(fmt.Errorf("the node cannot go on: %w", ferr), failHint(ferr))
	}
	stop() // a second signal now ends the process at once
	log.Info("stopping: running turns stop without acknowledging their input and resume at the next start", "node", cfg.NodeID)
	return nil
}

// testHookStarted sees the node once it runs (a test of the assembly).
var testHookStarted = func(*node.Node) {}

// failHint says what to do about an error the node could not get over.
func failHint(err error) string {
	switch {
	case store.IsReadOnly(err):
		return "make the read model and its directory writable by the node's user (or delete it: it is rebuilt from the log), then start the node again"
	case errors.Is(err, bus.ErrStoreNotWritable):
		return "free space on the data directory's disk (or fix what fails its writes), then start the node again; nothing acknowledged was lost"
	}
	return "start the node again (a supervisor does: systemd Restart=on-failure); run with --log-level debug for details"
}

// banner tells a person at the terminal what runs and what to do next.
func banner(w io.Writer, cfg config.Config, info localnode.NodeInfo, p llm.Provider, n *node.Node, root, creds string, web *ui, agents string) {
	model := p.Name()
	if cfg.LLM.Provider == llm.ProviderMock {
		if cfg.LLM.MockScript == "" {
			model = "mock (demo mode: lists and reads files, then summarises; no API key needed)"
		} else {
			model = "mock (script " + cfg.LLM.MockScript + ")"
		}
	} else if cfg.LLM.Model != "" {
		model += " " + cfg.LLM.Model
	}
	var names []string
	for _, s := range n.ToolSchemas() {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "TAH node %s is ready.\n", cfg.NodeID)
	fmt.Fprintf(w, "  NATS     %s", info.URL)
	if creds != "" {
		fmt.Fprintf(w, " (admin credential %s)", creds)
	}
	fmt.Fprintln(w)
	if info.HTTP != "" {
		fmt.Fprintf(w, "  metrics  http://%s/metrics   health http://%s/healthz\n", info.HTTP, info.HTTP)
		switch {
		case web.off != "":
			fmt.Fprintf(w, "  UI       off: %s\n", web.off)
		case web.login != "":
			fmt.Fprintf(w, "  UI       http://%s/   (log in with the token in %s)\n", info.HTTP, web.login)
		default:
			fmt.Fprintf(w, "  UI       http://%s/\n", info.HTTP)
		}
	}
	fmt.Fprintf(w, "  model    %s\n", model)
	if cfg.Tools.Builtin {
		fmt.Fprintf(w, "  tools    %s (root %s)\n", strings.Join(names, ", "), root)
	} else {
		fmt.Fprintf(w, "  tools    none built in (--tools-builtin=false): the tool services' on NATS only\n")
	}
	fmt.Fprintf(w, "  agents   %s\n", agents)
	mcpBanner(w, n.MCPServers(), n.MCPErr())
	fmt.Fprintf(w, "  data     %s\n", cfg.DataDir)
	fmt.Fprintf(w, "Try: tahctl send \"Analyse this project's directory structure\"   (Ctrl-C here stops the node)\n")
}

// localURL is node.LocalURL: where a local client connects.
func localURL(url string) string { return node.LocalURL(url) }

// absPath is path made absolute, for a client that runs elsewhere; empty
// stays empty.
func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// probePort fails when host:port is taken, so that the error names the flag at
// once rather than after the embedded server's start timeout.
func probePort(host string, port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return errors.New("the address is already in use")
		}
		return err
	}
	return ln.Close()
}

func startHint(err error) string {
	msg := err.Error()
	switch {
	case store.IsReadOnly(err):
		return "make the read model and its directory writable by the node's user (ls -l; as root, lsattr and chattr -i; a read-only mount), or delete it: it is rebuilt from the log"
	case strings.Contains(msg, "address already in use"):
		return "choose another port with --nats-port (TAH_NATS_PORT), or --nats-port 0 for a free one"
	case strings.Contains(msg, "incompatible"):
		return "see the message above; docs/protocol.md, \"Setup and versions\", says how to migrate"
	case strings.Contains(msg, "authorization"), strings.Contains(msg, "trust material"):
		return "check --nats-creds (TAH_NATS_CREDS) against the NATS server's accounts; for an embedded server, docs/security.md says how to restore the data directory's trust/"
	case strings.Contains(msg, "tls"), strings.Contains(msg, "x509"), strings.Contains(msg, "certificate"):
		return "check --nats-tls-cert and --nats-tls-key (TAH_NATS_TLS_CERT, TAH_NATS_TLS_KEY: PEM files the node can read) and --nats-tls-ca (TAH_NATS_TLS_CA: the CA that signed the servers' certificates); docs/security.md, \"TLS\""
	case strings.Contains(msg, "connect"):
		return "check --nats-url (TAH_NATS_URL), or leave it empty to embed a server"
	}
	return "run with --log-level debug for details"
}

// demoted lowers info records to debug, and the NATS server's benign
// warnings of a stale index after a crash (staleIndex) too.
type demoted struct{ slog.Handler }

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	switch l {
	case slog.LevelInfo:
		return d.Handler.Enabled(ctx, slog.LevelDebug)
	case slog.LevelWarn:
		return true // Handle, which sees the message, decides
	}
	return d.Handler.Enabled(ctx, l)
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && staleIndex(r.Message) {
		r.Level = slog.LevelInfo // benign after a crash (natslog.go): demoted below
	}
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	if !d.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.Handler.WithAttrs(as)} }
func (d demoted) WithGroup(name string) slog.Handler    { return demoted{d.Handler.WithGroup(name)} }

// checkNodeCreds checks, for a node on an external NATS, that its
// credential lets it do everything a node does, and says what is missing.
func checkNodeCreds(cfg config.Config) error {
	if cfg.NATS.Creds == "" {
		return nil // a server without authentication, or one that authenticates otherwise
	}
	missing, err := auth.MissingForNode(cfg.NATS.Creds, cfg.NodeID)
	if err != nil {
		return usageErr(fmt.Errorf("%s: %w", config.Describe("nats.creds"), err), "give the .creds file of the node's NATS user (docs/security.md, \"An external NATS cluster\")")
	}
	if len(missing) > 0 {
		return failed(fmt.Errorf("the node's credential %s does not let it:\n%s", cfg.NATS.Creds, strings.Join(missing, "\n")),
			"give the node's NATS user every permission (nsc edit user node, docs/security.md: \"An external NATS cluster\"), or another credential")
	}
	return nil
}

// checkMode warns when a secret of the data directory is open to others.
func checkMode(log *slog.Logger, path string) {
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("a secret of the data directory is readable by others: chmod go-rwx it", "file", path, "mode", fi.Mode().Perm().String())
	}
}
