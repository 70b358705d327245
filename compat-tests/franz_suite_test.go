package compattests

// franz-go's own integration tests of the next-generation group
// protocols against fjord (issue 26): its KIP-848 tests (a regex
// subscription the broker resolves, ETL chains through 848 groups with
// range, sticky and static members) and its five KIP-932 share-group
// tests. They skip themselves unless the broker advertises
// ConsumerGroupHeartbeat v1 and ShareFetch/ShareAcknowledge v2; here a
// skip is a failure, since fjord advertises both. The tests are built
// from a copy of the franz-go module this module requires and told the
// broker through KGO_SEEDS, as franz-go's CI does.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	franzModule = "github.com/twmb/franz-go"
	// franzNextGenTests are franz-go's tests of KIP-848 and KIP-932.
	franzNextGenTests = "^(Test848RegexBrokerResolves|TestConsumeRegex|TestGroupETL|TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin|TestConsumeRegexShareSkipsInternal)$"
	// franzNextGenMustRun are the tests that must not skip.
	franzNextGenMustRun = "Test848RegexBrokerResolves TestShareGroup TestShareGroupETL TestShareGroupAckOnClose TestShareGroupOffsetsAdmin TestConsumeRegexShareSkipsInternal"
)

func TestFranzGoOwnNextGenSuite(t *testing.T) {
	bin, dir := buildFranzTests(t)
	b := startBroker(t, t.TempDir(), "group.consumer.heartbeat.interval.ms=500", "group.initial.rebalance.delay.ms=0")
	cmd := exec.Command(bin, "-test.run", franzNextGenTests, "-test.v", "-test.count=1", "-test.timeout=8m")
	cmd.Dir = filepath.Join(dir, "pkg", "kgo")
	// 20,000 records per ETL chain instead of franz-go's 500,000: the
	// same paths, in CI's time.
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+b.Addr, "KGO_TEST_RF=1", "KGO_TEST_RECORDS=20000")
	out, err := cmd.CombinedOutput()
	// "--- PASS: TestX/sub (1.2s)" lines give each test's outcome.
	status := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		for _, st := range []string{"PASS", "FAIL", "SKIP"} {
			if rest, ok := strings.CutPrefix(line, "--- "+st+": "); ok {
				if name, _, ok := strings.Cut(rest, " "); ok {
					status[name] = strings.ToLower(st)
				}
			}
		}
	}
	logf := func(name string) {
		t.Logf("%s: output of the run (last 60 lines):\n%s", name, lastLines(string(out), 60))
	}
	var failed []string
	for name, st := range status {
		if st == "fail" {
			failed = append(failed, name)
		}
	}
	for _, name := range strings.Fields(franzNextGenMustRun) {
		if status[name] != "pass" {
			failed = append(failed, fmt.Sprintf("%s (%s)", name, orNone(status[name])))
		}
	}
	if len(failed) > 0 {
		logf(strings.Join(failed, ", "))
	}
	passed := 0
	for _, st := range status {
		if st == "pass" {
			passed++
		}
	}
	t.Logf("franz-go's own next-generation group tests: %d passed (subtests included)", passed)
	if len(failed) > 0 || (err != nil && passed == 0) {
		t.Fatalf("franz-go's tests did not pass: %v (run: %v)", failed, err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "did not run"
	}
	return s
}

// buildFranzTests copies the franz-go module this module requires out of
// the module cache and builds its kgo package's tests; it returns the
// binary and the copy.
func buildFranzTests(t *testing.T) (bin, dir string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", franzModule).Output()
	modDir := strings.TrimSpace(string(out))
	if err != nil || modDir == "" {
		t.Fatalf("locating %s in the module cache (go mod download %s): %v %s", franzModule, franzModule, err, exitStderr(err))
	}
	root := t.TempDir()
	dir = filepath.Join(root, "franz-go")
	if err := os.CopyFS(dir, os.DirFS(modDir)); err != nil {
		t.Fatalf("copying %s: %v", modDir, err)
	}
	bin = filepath.Join(root, "kgo.test")
	start := time.Now()
	cmd := exec.Command("go", "test", "-c", "-trimpath", "-o", bin, "./pkg/kgo")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building franz-go's tests in %s: %v\n%s", dir, err, out)
	}
	t.Logf("built franz-go's kgo tests in %v", time.Since(start).Round(time.Millisecond))
	return bin, dir
}
