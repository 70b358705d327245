package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1024", 1024},
		{"100B", 100},
		{"64MiB", 64 << 20},
		{"64mib", 64 << 20},
		{"1 GiB", 1 << 30},
		{"1.5GiB", 3 << 29},
		{"16M", 16 << 20},
		{"2k", 2048},
		{"5GB", 5e9},
		{"256KB", 256e3},
		{" 1TiB ", 1 << 40},
	} {
		got, err := parseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "MiB", "x", "1.5", "1..5GiB", "1e30GiB", "NaNGiB", "1 PiB"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", bad, got)
		}
	}
}

func TestFmtSize(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1024, "1 KiB"},
		{16 << 20, "16 MiB"},
		{3 << 29, "1.5 GiB"},
		{272629760, "260 MiB"},
	} {
		if got := fmtSize(c.in); got != c.want {
			t.Errorf("fmtSize(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}

// promText is /metrics as a fjord node serves it, trimmed: help and type
// lines, labelled series, a name that extends another, an escaped label.
const promText = `# HELP fjord_remote_log_size_bytes Bytes of a tiered partition's copied segments.
# TYPE fjord_remote_log_size_bytes gauge
fjord_remote_log_size_bytes{partition="0",topic="a"} 1.6777216e+07
fjord_remote_log_size_bytes{partition="1",topic="a"} 100
fjord_remote_log_size_bytes{partition="0",topic="b"} 7
fjord_remote_log_size_bytes{partition="0",topic="we\"ird,x"} 5
fjord_remote_log_size_bytes_total 99
fjord_remote_segments_copied_total 12
fjord_remote_upload_lag_segments 0
go_memstats_heap_inuse_bytes 4.2e+06
`

func TestPromSum(t *testing.T) {
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
		ok    bool
	}{
		{"fjord_remote_log_size_bytes", map[string]string{"topic": "a"}, 16777216 + 100, true},
		{"fjord_remote_log_size_bytes", map[string]string{"topic": "b"}, 7, true},
		{"fjord_remote_log_size_bytes", map[string]string{"topic": `we"ird,x`}, 5, true},
		{"fjord_remote_log_size_bytes", map[string]string{"topic": "a", "partition": "1"}, 100, true},
		{"fjord_remote_log_size_bytes", nil, 16777216 + 100 + 7 + 5, true},
		{"fjord_remote_log_size_bytes", map[string]string{"topic": "c"}, 0, false},
		{"fjord_remote_segments_copied_total", nil, 12, true},
		{"fjord_remote_upload_lag_segments", nil, 0, true},
		{"fjord_remote_segments", nil, 0, false},
		{"absent", nil, 0, false},
	} {
		got, ok := promSum(promText, c.name, c.match)
		if got != c.want || ok != c.ok {
			t.Errorf("promSum(%s, %v) = %g, %v; want %g, %v", c.name, c.match, got, ok, c.want, c.ok)
		}
	}
	// A damaged line is skipped, not misread.
	if got, ok := promSum("m{a=\"x\" 3\nm{a=\"y\"} 4\n", "m", nil); got != 4 || !ok {
		t.Errorf("promSum over a damaged line = %g, %v; want 4, true", got, ok)
	}
}

func TestNewestSegment(t *testing.T) {
	names := []string{"00000000000000000000.log", "00000000000000042120.index", "00000000000000038583.log",
		"00000000000000042120.log", "00000000000000043607.snapshot", "leader-epoch-checkpoint", "123.log", "0000000000000000000x.log"}
	if got, ok := newestSegment(names); got != 42120 || !ok {
		t.Errorf("newestSegment = %d, %v; want 42120, true", got, ok)
	}
	if got, ok := newestSegment([]string{"partition.metadata", "00000000000000043607.snapshot"}); ok {
		t.Errorf("newestSegment without a .log = %d, true; want false", got)
	}
}

func TestLocalPastAndPeak(t *testing.T) {
	if !localPast([]int64{10, 20}, []int64{10, 19}) {
		t.Error("local starts at or past the ends: want true")
	}
	if localPast([]int64{10, 18}, []int64{10, 19}) {
		t.Error("partition 1 still holds offset 18 locally: want false")
	}
	if localPast([]int64{10}, []int64{10, 19}) {
		t.Error("a partition missing: want false")
	}
	if m, ok := peakWithin([]int64{5, 9, 7}, 9); m != 9 || !ok {
		t.Errorf("peakWithin = %d, %v; want 9, true", m, ok)
	}
	if m, ok := peakWithin([]int64{5, 10, 7}, 9); m != 10 || ok {
		t.Errorf("peakWithin = %d, %v; want 10, false", m, ok)
	}
}

// TestDiskSampler checks du and the sampler's peaks on real files: a
// directory that grows and shrinks keeps its peak, one that never
// appears stays 0.
func TestDiskSampler(t *testing.T) {
	dir := t.TempDir()
	a, missing := filepath.Join(dir, "t-0"), filepath.Join(dir, "t-1")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "0.log"), bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := duBytes(a); got < 1<<20 {
		t.Fatalf("duBytes of 1 MiB written = %d", got)
	}
	s := startDiskSampler([]string{a, missing}, time.Hour) // samples at start and at stop only
	// stop samples once more: by then the file is gone, the peak stays.
	if err := os.Remove(filepath.Join(a, "0.log")); err != nil {
		t.Fatal(err)
	}
	peaks, n := s.stop()
	if peaks[0] < 1<<20 || peaks[1] != 0 || n < 1 {
		t.Errorf("peaks %v after %d samples: want at least 1 MiB for the first, 0 for the missing one", peaks, n)
	}
}

func TestParseTierFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-tier", "-fjord-bin", "f", "-weed-bin", "w", "-tier-read-bytes", "64MiB", "-tier-skip", "bound"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.tierReadBytes != 64<<20 || cfg.tierProduceBytes != 5<<30 || cfg.tierSegmentBytes != 16<<20 ||
		cfg.tierLocalRetention != 256<<20 || cfg.timeout != 30*time.Minute || !cfg.tierSkip["bound"] {
		t.Errorf("parsed %+v", cfg)
	}
	if got := strings.Join(tierStepList(cfg), ","); got != "produce,read" {
		t.Errorf("steps %q, want produce,read", got)
	}
	for _, args := range [][]string{
		{"-tier", "-fjord-bin", "f"},
		{"-tier", "-fjord-bin", "f", "-weed-bin", "w", "-tier-read-bytes", "lots"},
		{"-tier", "-fjord-bin", "f", "-weed-bin", "w", "-tier-segment-bytes", "100"},
		{"-tier", "-fjord-bin", "f", "-weed-bin", "w", "-tier-skip", "nap"},
		{"-tier", "-fjord-bin", "f", "-weed-bin", "w", "-kfake"},
		{"-fjord-bin", "f", "-tier-read-bytes", "1GiB"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}

func TestRedactArgs(t *testing.T) {
	got := redactArgs([]string{"fjord", "--override", "rsm.config.storage.aws.secret.access.key=s3cr3t", "--override", "rsm.config.storage.aws.access.key.id=id", "--override", "ssl.key.password=pw"})
	want := "fjord --override rsm.config.storage.aws.secret.access.key=[hidden] --override rsm.config.storage.aws.access.key.id=id --override ssl.key.password=[hidden]"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("redactArgs = %q, want %q", s, want)
	}
}
