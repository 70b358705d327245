package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine records what a run's figures depend on besides the code: the
// hardware, the kernel, the file system the brokers write to, the
// toolchain, the commit, and how busy the machine was. Fields the host
// cannot tell (another OS, no git) are left empty, never guessed.
type Machine struct {
	CPUModel    string  `json:"cpu_model"`
	CPUs        int     `json:"cpus"` // logical CPUs listed in /proc/cpuinfo (runtime.NumCPU if absent)
	MemTotalMiB float64 `json:"mem_total_mib"`
	Kernel      string  `json:"kernel"`
	DataDir     string  `json:"data_dir"`     // where the brokers' temp data dirs go
	DataFSType  string  `json:"data_fs_type"` // statfs of DataDir
	GoVersion   string  `json:"go_version"`   // toolchain of this tool
	Platform    string  `json:"platform"`
	Commit      string  `json:"commit,omitempty"`      // git rev-parse --short HEAD (+"-dirty")
	Label       string  `json:"label,omitempty"`       // -label, else Commit
	FjordBuild  string  `json:"fjord_build,omitempty"` // Go version and vcs revision embedded in -fjord-bin
	LoadStart   string  `json:"load_start"`            // /proc/loadavg at start: 1, 5, 15 min
	LoadEnd     string  `json:"load_end,omitempty"`
	// Busy: the 1-minute load average was above quietLoad when the run
	// began, after waiting for it to fall (-quiet-wait). Its figures are
	// not a quiet machine's.
	Busy bool `json:"busy,omitempty"`
	// Waited is how long -all waited for the load to fall before it
	// started, in seconds.
	Waited float64 `json:"waited_s,omitempty"`
	// Loads is /proc/loadavg as each step of each round began.
	Loads []StepLoad `json:"loads,omitempty"`
	// PageTouchUs is what faulting in one fresh anonymous page took, in
	// µs (median of pageTouchRuns maps of pageTouchSize). On a VM that
	// hands freed memory back to its host (free page reporting, a
	// balloon), every page a process or the page cache takes anew pays
	// the host's fault too, ten times or more the kernel's own. That
	// weighs on kfake, which keeps every record in its heap, more than on
	// fjord, and on every figure: two runs with different values were not
	// taken on the same kind of machine.
	PageTouchUs float64 `json:"page_touch_us,omitempty"`
}

// pageTouchSize and pageTouchRuns size the fresh-page probe: 64 MiB is
// 16,384 pages, a few tenths of a second where a fault costs 10 µs.
const (
	pageTouchSize = 64 << 20
	pageTouchRuns = 3
)

// pageTouch is the median per-page cost of faulting in fresh anonymous
// memory (false: not measured).
func pageTouch() (float64, bool) {
	var v []float64
	for range pageTouchRuns {
		d, err := touchFreshPages(pageTouchSize)
		if err != nil {
			return 0, false
		}
		v = append(v, float64(d)/float64(time.Microsecond))
	}
	return *median(v), true
}

// StepLoad is the load average as one step of -all began.
type StepLoad struct {
	Round   int     `json:"round"` // from 1
	Step    string  `json:"step"`
	Seconds float64 `json:"at_s"` // into the run
	Load    string  `json:"load"`
}

// quietLoad is the 1-minute load average above which a machine is busy:
// on the two cores this bench was written on, one is then taken by
// something other than the bench. A run keeps the load at 2-4 by itself,
// so only the figure before it starts says whether the machine was quiet.
const quietLoad = 1.0

// load1 is the 1-minute load average (false: unknown, as off Linux).
func load1() (float64, bool) {
	f := strings.Fields(loadAvg())
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// waitQuiet polls the 1-minute load average (load, load1 on a live
// machine) every poll until it is at most quietLoad, max has passed, or
// ctx ends, and returns how long it waited and whether the machine is
// quiet (an unknown load counts as quiet: nothing says otherwise).
func waitQuiet(ctx context.Context, max, poll time.Duration, load func() (float64, bool)) (time.Duration, bool) {
	start := time.Now()
	for {
		l, ok := load()
		if !ok || l <= quietLoad {
			return time.Since(start), true
		}
		if time.Since(start) >= max {
			return time.Since(start), false
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-time.After(poll):
		}
	}
}

func collectMachine(ctx context.Context, label, fjordBin string) *Machine {
	m := &Machine{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, DataDir: os.TempDir()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel, m.CPUs = parseCPUInfo(string(b))
	}
	if m.CPUs == 0 {
		m.CPUs = runtime.NumCPU()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotalMiB = parseMemTotalMiB(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.DataFSType = fsType(m.DataDir)
	m.Commit = gitCommit(ctx)
	m.Label = label
	if m.Label == "" {
		m.Label = m.Commit
	}
	if fjordBin != "" {
		if bi, err := buildinfo.ReadFile(fjordBin); err == nil {
			s := bi.GoVersion
			for _, kv := range bi.Settings {
				switch kv.Key {
				case "vcs.revision":
					s += " " + kv.Value[:min(len(kv.Value), 12)]
				case "vcs.modified":
					if kv.Value == "true" {
						s += " (modified)"
					}
				}
			}
			m.FjordBuild = s
		}
	}
	m.PageTouchUs, _ = pageTouch()
	m.LoadStart = loadAvg()
	return m
}

// parseCPUInfo returns the first "model name" of /proc/cpuinfo and the
// number of "processor" entries.
func parseCPUInfo(s string) (model string, n int) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			n++
		case "model name":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, n
}

// parseMemTotalMiB reads "MemTotal:  24576000 kB" from /proc/meminfo.
func parseMemTotalMiB(s string) float64 {
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// fsMagic names the statfs magic numbers of the file systems a broker is
// likely to run on.
var fsMagic = map[int64]string{
	0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
	0x794c7630: "overlayfs", 0x2fc12fc1: "zfs", 0x6969: "nfs", 0xF2F52010: "f2fs",
	0x65735546: "fuse", 0x5346544e: "ntfs",
}

func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	if name, ok := fsMagic[int64(st.Type)]; ok {
		return name
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// gitCommit is the short HEAD of the repository around the working
// directory, with "-dirty" if tracked files differ from it ("" without git).
func gitCommit(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}

// loadAvg returns the three load averages of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuSeconds returns the user plus system CPU time pid has used, from
// utime and stime in /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := parseStatTicks(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(ticks) / float64(clockTicks()), nil
}

// parseStatTicks returns utime+stime (fields 14 and 15, in clock ticks)
// of a /proc/PID/stat line. The command name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseStatTicks(s string) (uint64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in %q", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("only %d fields after the command name", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q, stime %q: not numbers", f[11], f[12])
	}
	return u + st, nil
}

// clockTicks is the kernel's USER_HZ, the unit of utime and stime: the
// AT_CLKTCK entry of this process's auxiliary vector, 100 if unreadable.
func clockTicks() int64 {
	if b, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if v := auxvValue(b, 17); v > 0 { // AT_CLKTCK
			return int64(v)
		}
	}
	return 100
}

// auxvValue finds key in an auxiliary vector of native-endian 64-bit
// (key, value) pairs.
func auxvValue(b []byte, key uint64) uint64 {
	for i := 0; i+16 <= len(b); i += 16 {
		k := binary.NativeEndian.Uint64(b[i:])
		if k == 0 {
			break
		}
		if k == key {
			return binary.NativeEndian.Uint64(b[i+8:])
		}
	}
	return 0
}
