package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// A command name with spaces and parentheses; utime 1234, stime 567.
	line := "4242 (fjord (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 9 0 100 123456 789 18446744073709551615\n"
	got, err := parseStatTicks(line)
	if err != nil || got != 1234+567 {
		t.Fatalf("parseStatTicks = %d, %v; want 1801", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 u s 0"} {
		if _, err := parseStatTicks(bad); err == nil {
			t.Errorf("parseStatTicks(%q) took it", bad)
		}
	}
}

func TestCPUSecondsOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Burn a little CPU so the count is not zero at tick resolution;
	// no bound on the time it takes is asserted.
	end := time.Now().Add(30 * time.Millisecond)
	for x := 0; time.Now().Before(end); x++ {
		_ = strconv.Itoa(x)
	}
	s, err := cpuSeconds(os.Getpid())
	if err != nil || s <= 0 {
		t.Fatalf("cpuSeconds(self) = %g, %v", s, err)
	}
}

func TestAuxvValue(t *testing.T) {
	var b []byte
	put := func(k, v uint64) {
		b = binary.NativeEndian.AppendUint64(b, k)
		b = binary.NativeEndian.AppendUint64(b, v)
	}
	put(6, 4096) // AT_PAGESZ
	put(17, 250) // AT_CLKTCK
	put(0, 0)    // AT_NULL
	put(17, 999) // after the end: ignored
	if got := auxvValue(b, 17); got != 250 {
		t.Fatalf("AT_CLKTCK = %d, want 250", got)
	}
	if got := auxvValue(b, 33); got != 0 {
		t.Fatalf("absent key = %d, want 0", got)
	}
	if clockTicks() <= 0 {
		t.Fatal("clockTicks not positive")
	}
}

func TestParseCPUInfo(t *testing.T) {
	s := "processor\t: 0\nvendor_id\t: X\nmodel name\t: Test CPU @ 2.0GHz\n\nprocessor\t: 1\nmodel name\t: Test CPU @ 2.0GHz\n"
	model, n := parseCPUInfo(s)
	if model != "Test CPU @ 2.0GHz" || n != 2 {
		t.Fatalf("parseCPUInfo = %q, %d", model, n)
	}
}

func TestParseMemTotal(t *testing.T) {
	if got := parseMemTotalMiB("MemTotal:       24576000 kB\nMemFree: 1 kB\n"); got != 24000 {
		t.Fatalf("MemTotal = %g MiB, want 24000", got)
	}
	if got := parseMemTotalMiB("nothing"); got != 0 {
		t.Fatalf("no MemTotal = %g", got)
	}
}

func TestParseFlagsAll(t *testing.T) {
	cfg, err := parseFlags([]string{"-all", "-fjord-bin", "x", "-all-skip", "manyparts,rf3", "-linger", "default"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.timeout != 20*time.Minute || cfg.manyPartitions != 10000 || cfg.repeat != 1 || !cfg.lingerDefault || cfg.quietWait != 3*time.Minute {
		t.Fatalf("defaults under -all: timeout %s, N %d, repeat %d, lingerDefault %v, quietWait %s", cfg.timeout, cfg.manyPartitions, cfg.repeat, cfg.lingerDefault, cfg.quietWait)
	}
	if !cfg.allSkip["manyparts"] || !cfg.allSkip["rf3"] || cfg.allSkip["single"] {
		t.Fatalf("allSkip = %v", cfg.allSkip)
	}
	cfg, err = parseFlags([]string{"-all", "-fjord-bin", "x", "-timeout", "3m", "-many-partitions", "2000", "-repeat", "3"})
	if err != nil || cfg.timeout != 3*time.Minute || cfg.manyPartitions != 2000 || cfg.repeat != 3 {
		t.Fatalf("explicit flags under -all: %+v, %v", cfg, err)
	}
	cfg, err = parseFlags([]string{"-kfake", "-linger", "5ms"})
	if err != nil || cfg.linger != 5*time.Millisecond || cfg.lingerDefault || cfg.timeout != 5*time.Minute {
		t.Fatalf("-linger 5ms: %+v, %v", cfg, err)
	}
	cfg, err = parseFlags([]string{"-compare", "a.json,b.json"})
	if err != nil || len(cfg.compare) != 2 || cfg.compare[1] != "b.json" {
		t.Fatalf("-compare: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"-all"},                              // no -fjord-bin
		{"-all", "-fjord-bin", "x", "-kfake"}, // -all has its own targets
		{"-all", "-fjord-bin", "x", "-all-skip", "nope"},
		{"-all", "-fjord-bin", "x", "-repeat", "0"},
		{"-kfake", "-repeat", "2"}, // -repeat without -all
		{"-kfake", "-quiet-wait", "1m"},
		{"-all", "-fjord-bin", "x", "-quiet-wait", "-1s"},
		{"-kfake", "-linger", "soon"},
		{"-compare", "a.json"},
		{"-cluster", "-fjord-bin", "x", "-json-out", "r.json"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) took it", bad)
		}
	}
}

// waitQuiet waits while the load is above quietLoad, up to its bound, and
// says whether the machine became quiet; an unknown load is quiet.
func TestWaitQuiet(t *testing.T) {
	seq := func(loads ...float64) func() (float64, bool) {
		return func() (float64, bool) {
			l := loads[0]
			if len(loads) > 1 {
				loads = loads[1:]
			}
			return l, true
		}
	}
	ctx := t.Context()
	if _, quiet := waitQuiet(ctx, time.Second, time.Millisecond, seq(3.5, 2.1, 1.0, 4)); !quiet {
		t.Error("a load falling to 1.0 within the bound: not quiet")
	}
	if waited, quiet := waitQuiet(ctx, 20*time.Millisecond, time.Millisecond, seq(2.5)); quiet || waited < 20*time.Millisecond {
		t.Errorf("a load staying at 2.5: quiet %v after %s, want busy after the 20ms bound", quiet, waited)
	}
	if _, quiet := waitQuiet(ctx, 0, time.Millisecond, seq(1.01)); quiet {
		t.Error("no wait allowed and a load of 1.01: quiet")
	}
	if _, quiet := waitQuiet(ctx, time.Second, time.Millisecond, func() (float64, bool) { return 0, false }); !quiet {
		t.Error("an unknown load: busy")
	}
}

// A busy run says so in its header, with the load and the wait.
func TestPrintMachineBusy(t *testing.T) {
	var quiet, busy bytes.Buffer
	printMachine(&quiet, &Machine{LoadStart: "0.40 0.30 0.20"})
	printMachine(&busy, &Machine{LoadStart: "1.70 1.20 0.90", Busy: true, Waited: 180, PageTouchUs: 11.52})
	if strings.Contains(quiet.String(), "BUSY") || strings.Contains(quiet.String(), "waited") || strings.Contains(quiet.String(), "memory:") {
		t.Errorf("a quiet run's header:\n%s", quiet.String())
	}
	for _, want := range []string{"(waited 180 s for it to fall)", "BUSY:", "above 1.0 at the start (1.70 1.20 0.90)", "memory:   a fresh page takes 11.52 µs to fault in"} {
		if !strings.Contains(busy.String(), want) {
			t.Errorf("a busy run's header lacks %q:\n%s", want, busy.String())
		}
	}
}

func TestPageTouch(t *testing.T) {
	us, ok := pageTouch()
	if runtime.GOOS != "linux" {
		if ok {
			t.Errorf("measured %g µs off Linux", us)
		}
		return
	}
	if !ok || us <= 0 {
		t.Fatalf("pageTouch() = %g, %v: want a positive cost", us, ok)
	}
	t.Logf("a fresh page: %.2f µs", us)
}
