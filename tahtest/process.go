package tahtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// process is a Process member: its command line, the same at every start,
// and its current run.
type process struct {
	name    string
	dataDir string
	logDir  string
	args    []string
	env     []string
	command func(args []string) *exec.Cmd

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run has exited
	exitErr error
	logs    []string // one log file per run
}

var _ natstest.Member = (*process)(nil)

// newProcess prepares member i: cfg as flags, and in a configuration file
// in logDir what has none (its trust material is in its data directory),
// and the command Options.Command builds, or the built tah-node bin.
func newProcess(o Options, i int, cfg config.Config, bin, logDir string) (*process, error) {
	args := flags(cfg)
	path, err := writeFileOnly(cfg, filepath.Join(logDir, cfg.NodeID+".config.json"))
	if err != nil {
		return nil, err
	}
	if path != "" {
		args = append([]string{"--config=" + path}, args...)
	}
	p := &process{name: cfg.NodeID, dataDir: cfg.DataDir, logDir: logDir, args: args,
		env: append(cleanEnv(), "NO_COLOR=1")}
	p.command = func(args []string) *exec.Cmd {
		if o.Command != nil {
			return o.Command(i, args)
		}
		return exec.Command(bin, args...)
	}
	return p, nil
}

// writeFileOnly writes the settings of cfg that no flag carries
// (agent.subagents) as a configuration file at path, the flags reading over
// it, and returns path; "" and no file when cfg has none.
func writeFileOnly(cfg config.Config, path string) (string, error) {
	if len(cfg.Agent.SubAgents) == 0 {
		return "", nil
	}
	var file struct {
		Agent struct {
			SubAgents []config.SubAgent `json:"subagents"`
		} `json:"agent"`
	}
	file.Agent.SubAgents = cfg.Agent.SubAgents
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("configuration file: %w", err)
	}
	return path, nil
}

// flags are the tah-node flags of the settings of cfg that differ from the
// defaults.
func flags(cfg config.Config) []string {
	defaults := config.Default()
	def := defaults.Settings()
	var out []string
	for i, s := range cfg.Settings() {
		if s.Flag != "" && s.Value != def[i].Value {
			out = append(out, "--"+s.Flag+"="+s.Value)
		}
	}
	return out
}

// cleanEnv is this process's environment without TAH_ variables, which would
// change the nodes' settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TAH_") {
			env = append(env, kv)
		}
	}
	return env
}

// Start runs a new process, its output into a new log, and waits until it
// wrote its node.json: its NATS server, the streams and the API are up.
func (p *process) Start(ctx context.Context) error {
	if p.Running() {
		return errors.New("it runs already")
	}
	cmd := p.command(p.args)
	p.mu.Lock()
	logPath := filepath.Join(p.logDir, fmt.Sprintf("%s.run%d.log", p.name, len(p.logs)+1))
	p.mu.Unlock()
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, p.env...)
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	if cmd.Stderr == nil {
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.exitErr = cmd, done, nil
	p.logs = append(p.logs, logPath)
	p.mu.Unlock()
	go func() { // owned by the process: ends when it exits
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return p.waitReady(ctx, cmd.Process.Pid, done)
}

func (p *process) waitReady(ctx context.Context, pid int, done <-chan struct{}) error {
	within := time.Minute
	if d, ok := ctx.Deadline(); ok {
		within = time.Until(d)
	}
	err := natstest.Poll(within, 100*time.Millisecond, func() error {
		select {
		case <-done:
			return natstest.Permanent(fmt.Errorf("exited: %v", p.exitError()))
		default:
		}
		info, err := localnode.ReadNodeInfo(p.dataDir)
		if err != nil {
			return err
		}
		if info.PID != pid {
			return fmt.Errorf("node.json names pid %d, not %d", info.PID, pid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("not ready (pid %d): %w\n%s", pid, err, p.logTail(60))
	}
	return nil
}

func (p *process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

func (p *process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

func (p *process) Running() bool {
	_, done := p.current()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *process) Kill() error {
	cmd, done := p.current()
	if !p.Running() {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-done
	return nil
}

// Stop sends SIGTERM and waits for the process to exit with status 0.
func (p *process) Stop(ctx context.Context) error {
	cmd, done := p.current()
	if !p.Running() {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-done:
		if err := p.exitError(); err != nil {
			return fmt.Errorf("exited after SIGTERM: %w\n%s", err, p.logTail(40))
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("did not exit after SIGTERM: %w\n%s", ctx.Err(), p.logTail(40))
	}
}

func (p *process) Server() *server.Server { return nil }
func (p *process) Close(context.Context)  { _ = p.Kill() }

// runLogs are the paths of every run's log, in order.
func (p *process) runLogs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}

// logTail is the end of the current run's log.
func (p *process) logTail(lines int) string {
	logs := p.runLogs()
	if len(logs) == 0 {
		return ""
	}
	b, _ := os.ReadFile(logs[len(logs)-1])
	return tailLines(string(b), lines)
}
