package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tah-dev/tah/tahtest/natstest"
)

// teardownWithin bounds a scenario's Teardown.
const teardownWithin = 2 * time.Minute

// failedLogLines is how much of a failed scenario's harness log is printed.
const failedLogLines = 200

// Run runs the scenarios of the rows c asks for, in order, each set up, run
// and torn down before the next, and returns their report. log gets the
// progress. The first scenario that fails ends the run with its error.
func Run(ctx context.Context, c Config, log io.Writer) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("this program's path, to run it as a sub-process: %w", err)
		}
		c.Executable = exe
	}
	if c.Tmp == "" {
		c.Tmp = os.TempDir()
	}
	if c.MemProfile != "" {
		runtime.MemProfileRate = 4096
	}
	hl, err := openHarnessLog(c.Log)
	if err != nil {
		return nil, err
	}
	defer hl.close()
	begin := time.Now()
	rep := newReport(c)
	runtime.GC()
	scenarios := Scenarios(c)
	for i, sc := range scenarios {
		fmt.Fprintf(log, "%s  %s\n", time.Since(begin).Round(time.Second), sc.Name())
		if err := runScenario(ctx, sc, rep, log, hl); err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name(), err)
		}
		// What a scenario kept (its models' records of every request) is not
		// the next one's memory (row 6 measures this process's).
		scenarios[i] = nil
	}
	rep.Took = time.Since(begin)
	rep.Machine.LoadAvgEnd = loadAvg()
	fmt.Fprintf(log, "%s  done\n", time.Since(begin).Round(time.Second))
	return rep, nil
}

// runScenario sets sc up, runs it and tears it down on a TB of its own
// (natstest.Run), so that what the harness started for it stops with it,
// even when the harness ended it with a Fatalf.
func runScenario(ctx context.Context, sc Scenario, rep *Report, log io.Writer, hl *harnessLog) error {
	var err error
	tbErr := natstest.Run(hl.begin(), sc.Name(), func(tb natstest.TB) {
		defer func() {
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownWithin)
			defer cancel()
			if terr := sc.Teardown(tctx); terr != nil {
				err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
			}
		}()
		if err = sc.Setup(ctx, Env{TB: tb, Log: log}); err != nil {
			err = fmt.Errorf("setup: %w", err)
			return
		}
		err = sc.Run(ctx, rep)
	})
	err = errors.Join(err, tbErr)
	if err != nil {
		hl.printTail(log, failedLogLines)
	}
	return err
}

// harnessLog is where the harness's TB logs go: the file of Config.Log, if
// any, and a buffer of the current scenario's, whose end is printed when it
// fails.
type harnessLog struct {
	file *os.File
	buf  lockedBuffer
}

// lockedBuffer is a buffer that a straggling logger may write to while it
// is read.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func openHarnessLog(path string) (*harnessLog, error) {
	hl := &harnessLog{}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("-log: %w", err)
		}
		hl.file = f
	}
	return hl, nil
}

// begin starts a scenario's log and returns the writer of its TB.
func (hl *harnessLog) begin() io.Writer {
	hl.buf.reset()
	if hl.file == nil {
		return &hl.buf
	}
	return io.MultiWriter(&hl.buf, hl.file)
}

// printTail writes the last lines of the scenario's log to w.
func (hl *harnessLog) printTail(w io.Writer, lines int) {
	all := strings.Split(strings.TrimRight(hl.buf.String(), "\n"), "\n")
	if len(all) == 1 && all[0] == "" {
		return
	}
	from := max(0, len(all)-lines)
	fmt.Fprintf(w, "----- the end of the harness's log (%d of %d lines) -----\n%s\n-----\n", len(all)-from, len(all), strings.Join(all[from:], "\n"))
}

func (hl *harnessLog) close() {
	if hl.file != nil {
		hl.file.Close()
	}
}
