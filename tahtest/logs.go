package tahtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// badLines are what a process's log must never say.
var badLines = []string{"WARNING: DATA RACE", "panic:", "fatal error:"}

// checkLogs, at the end of the test, fails it for every data race, panic or
// fatal error in a process member's log, and prints the logs when the test
// failed.
func (c *Cluster) checkLogs() {
	for i, m := range c.members {
		p, ok := m.(*process)
		if !ok {
			continue
		}
		for run, path := range p.runLogs() {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			s := string(b)
			for _, bad := range badLines {
				if at := strings.Index(s, bad); at >= 0 {
					// The report itself, for a harness that does not print the
					// log below (and removes it with its temporary directory).
					c.tb.Errorf("tahtest: %s (run %d): %q in its log %s:\n%s", c.ID(i), run+1, bad, path, headLines(s[at:], 80))
				}
			}
			if c.tb.Failed() {
				c.tb.Logf("===== log of %s, run %d (%s), without the NATS server's debug lines =====\n%s", c.ID(i), run+1, path, tailLines(quiet(s), 300))
			}
		}
	}
}

// LogTail is the end of member i's current log: its last lines, for a
// failure message. Empty for an InProcess member, whose log is the test's.
func (c *Cluster) LogTail(i, lines int) string {
	if p, ok := c.members[i].(*process); ok {
		return p.logTail(lines)
	}
	return ""
}

// Trace is every line of every Process member's logs (every run) that
// contains sub, a session id say, for failure messages.
func (c *Cluster) Trace(sub string) string {
	var lines []string
	for i, m := range c.members {
		p, ok := m.(*process)
		if !ok {
			continue
		}
		for run, path := range p.runLogs() {
			lines = append(lines, grep(path, sub, fmt.Sprintf("%s run %d: ", c.ID(i), run+1))...)
		}
	}
	if len(lines) == 0 {
		return "  (no process logged " + sub + ")\n"
	}
	return "  " + strings.Join(lines, "\n  ") + "\n"
}

// grep returns the lines of the file at path that contain sub, each after
// prefix.
func grep(path, sub, prefix string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, prefix+sc.Text())
		}
	}
	return out
}

// quiet drops the embedded server's debug lines and its route connection
// retries from a node's log.
func quiet(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "component=nats") &&
			(strings.Contains(line, "level=DEBUG") || strings.Contains(line, "Error trying to connect to route")) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[... %d lines before]\n", len(lines)-n) + strings.Join(lines[len(lines)-n:], "\n")
}

// headLines is the first n lines of s.
func headLines(s string, n int) string {
	lines := strings.SplitAfterN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}
