package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupCPURoot is where the cgroup v1 cpu controller is mounted on the
// machines the bench runs on (and in CI).
const cgroupCPURoot = "/sys/fs/cgroup/cpu"

// cgroupPrefix starts the names of the cgroups row 9 makes, followed by this
// process's pid: a later run removes those of a run that died (their pid
// gone) before it could.
const cgroupPrefix = "tah-bench-"

// cfsPeriod is the quotas' period: the kernel's default.
const cfsPeriod = 100 * time.Millisecond

// ErrNoCgroup: row 9 cannot confine its nodes to a CPU quota here (no cgroup
// v1 cpu controller, or not root); the row is then skipped with the reason.
var ErrNoCgroup = errors.New("no cgroup v1 cpu controller to confine the nodes")

// cpuCgroup is a cgroup v1 cpu cgroup with a CFS quota: the processes whose
// pid is written to its cgroup.procs share at most quota CPUs.
type cpuCgroup struct {
	dir string
}

// checkCgroups reports, wrapping ErrNoCgroup, why cgroups cannot be made
// here: the controller is not mounted as v1, or this process may not make
// one (not root).
func checkCgroups() error {
	if _, err := os.Stat(filepath.Join(cgroupCPURoot, "cpu.cfs_quota_us")); err != nil {
		return fmt.Errorf("%s/cpu.cfs_quota_us: %v (a cgroup v2-only or container host): %w", cgroupCPURoot, err, ErrNoCgroup)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("running as uid %d, not root: %w", os.Geteuid(), ErrNoCgroup)
	}
	return nil
}

// newCPUCgroup makes the cgroup name (under cgroupPrefix and this process's
// pid) with quota CPUs (0.5: half a core) per cfsPeriod.
func newCPUCgroup(name string, quota float64) (*cpuCgroup, error) {
	if err := checkCgroups(); err != nil {
		return nil, err
	}
	if quota <= 0 {
		return nil, fmt.Errorf("cgroup %s: quota %v CPUs is not above 0", name, quota)
	}
	g := &cpuCgroup{dir: filepath.Join(cgroupCPURoot, fmt.Sprintf("%s%d-%s", cgroupPrefix, os.Getpid(), name))}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w (%w)", g.dir, err, ErrNoCgroup)
	}
	// The period before the quota: the kernel refuses a quota that does not
	// fit the period in force.
	period := cfsPeriod.Microseconds()
	if err := g.write("cpu.cfs_period_us", strconv.FormatInt(period, 10)); err != nil {
		return nil, errors.Join(err, g.remove())
	}
	if err := g.write("cpu.cfs_quota_us", strconv.FormatInt(int64(quota*float64(period)), 10)); err != nil {
		return nil, errors.Join(err, g.remove())
	}
	return g, nil
}

func (g *cpuCgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

// procs is the file a process's pid is written to, to move it into the
// cgroup: a node's command writes its own before it execs the node.
func (g *cpuCgroup) procs() string { return filepath.Join(g.dir, "cgroup.procs") }

// throttled is how long the cgroup's processes have been held back by the
// quota so far (cpu.stat's throttled_time) and in how many periods.
func (g *cpuCgroup) throttled() (time.Duration, int64, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return 0, 0, err
	}
	var ns, periods int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "throttled_time":
			ns = n
		case "nr_throttled":
			periods = n
		}
	}
	return time.Duration(ns), periods, nil
}

// remove removes the cgroup once its processes are gone; a cgroup still
// holding one cannot be removed (EBUSY), so it waits a little for processes
// that are exiting. Removing one that is gone is not an error.
func (g *cpuCgroup) remove() error {
	var err error
	for range 50 {
		if err = syscall.Rmdir(g.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", g.dir, err)
}

// removeStaleCgroups removes the empty cgroups of earlier runs of this
// program whose process is gone (killed before it could clean up).
func removeStaleCgroups() {
	entries, err := os.ReadDir(cgroupCPURoot)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue // this run's, or a run that still lives
		}
		_ = syscall.Rmdir(filepath.Join(cgroupCPURoot, e.Name())) // fails, harmlessly, while a process is in it
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// processCPU is process pid's user + system CPU time so far, all its threads
// (/proc/<pid>/stat's utime and stime).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime from a /proc/<pid>/stat line: fields 14
// and 15, counted after the command name, which is in parentheses and may
// hold spaces.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}
