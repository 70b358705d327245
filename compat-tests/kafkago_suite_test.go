package compattests

// segmentio/kafka-go's own tests against fjord (issue 25): its TestConn
// (whole, nettest included), TestReader and
// TestOffsetFetchRequestWithNoTopic, on one node and on three at RF 3.
// Those tests dial localhost:9092 and expect the brokers they are told
// about to be localhost:909x, so the nodes run in a private network
// namespace (netns_linux_test.go) where those ports are theirs, and so
// does the kafka-go test binary; this process only builds it, starts the
// nodes and reads the results (go tool test2json).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	kafkagoModule = "github.com/segmentio/kafka-go"
	// kafkagoTests are the kafka-go tests run, with all their subtests.
	kafkagoTests = "^(TestConn|TestReader|TestOffsetFetchRequestWithNoTopic)$"
	// kafkagoKafkaVersion is KAFKA_VERSION for the kafka-go tests: the
	// newest Kafka its CI runs (.circleci/config.yml, kafka-370; the 4.0.0
	// job is commented out). Its tests use it only to skip what older
	// brokers lack; none of these three reads it past 0.11.
	kafkagoKafkaVersion = "3.7.0"
	// kafkagoTimeout bounds one run of the kafka-go test binary.
	kafkagoTimeout = 5 * time.Minute
)

// kafkagoNodeConfig is what kafka-go's CI gives its broker
// (.circleci/config.yml), the listener advertised as localhost:PORT.
var kafkagoNodeConfig = []string{
	"advertised.listeners=PLAINTEXT://localhost:{port}",
	"auto.create.topics.enable=true",
	"delete.topic.enable=true",
	"message.max.bytes=200000000",
}

// kafkagoExpectedThreeNodes are failures that three brokers make
// unavoidable, as they would with three Kafka brokers: the tests assume
// the single broker of kafka-go's CI, id 1 at localhost:9092. Each fails
// or passes depending on where the cluster put a leader, the controller
// or a group coordinator (test_list_brokers always fails), and is allowed
// to fail only with these assertion lines.
var kafkagoExpectedThreeNodes = map[string]*regexp.Regexp{
	// conn.Brokers() lists all three.
	"TestConn/test_list_brokers": regexp.MustCompile(
		`^conn_test\.go:\d+: (expected 1 broker in \[.*\]|expected ID 1 received [23])$`),
	// The Metadata controller id is the active controller: any of three.
	"TestConn/test_retrieve_controller": regexp.MustCompile(
		`^conn_test\.go:\d+: expected (9092 received 909[34]|1 received [23])$`),
	// DialLeader reaches the leader of partition 0 of a new topic: any
	// of three.
	"TestConn/the_connection_advertises_the_broker_that_it_is_connected_to": regexp.MustCompile(
		`^conn_test\.go:\d+: invalid broker (port: 909[34]|id: [23])$`),
	// createGroup finds the group's coordinator but then joins and syncs
	// on the connection it has, to the partition leader: unless that is
	// the coordinator, NOT_COORDINATOR ends the test.
	"TestConn/test_fetch_and_commit_offset":               notCoordinator,
	"TestConn/test_heartbeat_once_group_has_been_created": notCoordinator,
	"TestConn/test_list_groups":                           notCoordinator,
}

var notCoordinator = regexp.MustCompile(`^conn_test\.go:\d+: bad syncGroup: \[16\] Not Coordinator For Group: `)

// TestKafkaGoOwnSuite runs kafka-go's own tests against one node and
// against three combined nodes at RF 3 (min.insync.replicas=2). It needs
// root for the namespace (skipped otherwise, a failure with
// FJORD_REQUIRE_NETNS=1) and builds the tests from a copy of the kafka-go
// module, downloading its test dependencies if they are not cached.
func TestKafkaGoOwnSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("about 2 minutes: builds kafka-go's tests and runs them twice")
	}
	requireNetNS(t)
	start := time.Now()
	bin, dir := buildKafkaGoTests(t)
	t.Logf("kafka-go test binary built in %v", time.Since(start).Round(time.Millisecond))

	t.Run("one_node", func(t *testing.T) {
		start := time.Now()
		ns := newNetNS(t)
		b := startBrokerIn(t, ns, "9092", t.TempDir(), kafkagoNodeConfig...)
		t.Logf("node serving in namespace %s after %v", ns.Name(), time.Since(start).Round(time.Millisecond))
		res := runKafkaGoTests(t, ns, bin, dir)
		checkKafkaGoResults(t, res, nil)
		if b.exited() {
			t.Errorf("the node exited during the kafka-go tests:\n%s", b.tailLog(50))
		}
		t.Logf("one_node took %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("three_nodes_rf3", func(t *testing.T) {
		start := time.Now()
		ns := newNetNS(t)
		place := &clusterPlace{
			ns:          ns,
			clientPorts: []string{"9092", "9093", "9094"},
			ctlPorts:    []string{"19092", "19093", "19094"},
		}
		c := startClusterIn(t, place, 3, append(slices.Clone(kafkagoNodeConfig),
			"default.replication.factor=3",
			"min.insync.replicas=2",
			"offsets.topic.replication.factor=3",
		)...)
		t.Logf("cluster serving in namespace %s after %v", ns.Name(), time.Since(start).Round(time.Millisecond))
		res := runKafkaGoTests(t, ns, bin, dir)
		checkKafkaGoResults(t, res, kafkagoExpectedThreeNodes)
		for _, id := range c.IDs() {
			if c.Node(id).exited() {
				t.Errorf("node %d exited during the kafka-go tests:\n%s", id, c.Node(id).tailLog(50))
			}
		}
		t.Logf("three_nodes_rf3 took %v", time.Since(start).Round(time.Millisecond))
	})
}

// requireNetNS skips t when no network namespace can be made here (not
// root, no ip command, not Linux), or fails it if FJORD_REQUIRE_NETNS is
// set.
func requireNetNS(t testing.TB) {
	t.Helper()
	if err := netnsUsable(); err != nil {
		if os.Getenv("FJORD_REQUIRE_NETNS") != "" {
			t.Fatalf("FJORD_REQUIRE_NETNS is set but network namespaces are unavailable: %v", err)
		}
		t.Skipf("network namespaces unavailable (%v); set FJORD_REQUIRE_NETNS=1 to make this a failure", err)
	}
}

// buildKafkaGoTests copies the kafka-go module compat-tests requires out
// of the read-only module cache and builds its test binary there (its own
// go.mod, so its tests get the dependencies its CI uses); it returns the
// binary and the copy, the directory the tests expect to run in.
func buildKafkaGoTests(t *testing.T) (bin, dir string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", kafkagoModule).Output()
	modDir := strings.TrimSpace(string(out))
	if err != nil || modDir == "" {
		t.Fatalf("locating %s in the module cache (go mod download %s): %v %s", kafkagoModule, kafkagoModule, err, exitStderr(err))
	}
	root := t.TempDir()
	dir = filepath.Join(root, "kafka-go")
	// CopyFS makes the copy writable (0666/0777 before umask): go test
	// may rewrite go.mod and go.sum.
	if err := os.CopyFS(dir, os.DirFS(modDir)); err != nil {
		t.Fatalf("copying %s: %v", modDir, err)
	}
	bin = filepath.Join(root, "kafka-go.test")
	// -trimpath keeps the temporary directory out of the build cache's
	// keys, so a second run links in seconds instead of compiling for a
	// minute; static, as make build builds fjord, to share its cached
	// standard library.
	cmd := exec.Command("go", "test", "-c", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	// -mod=mod: v0.4.51's go.mod says "go 1.23", which newer go commands
	// want rewritten as "go 1.23.0" before they build.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kafka-go's tests in %s (its test dependencies are downloaded if not cached): %v\n%s", dir, err, out)
	}
	return bin, dir
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// kafkagoResult is one kafka-go test (or subtest) as test2json saw it.
type kafkagoResult struct {
	action string // pass, fail or skip; "" if it never ended
	output []string
}

// runKafkaGoTests runs the kafka-go tests inside ns and returns every
// test's result by name ("" holds the binary's own lines).
func runKafkaGoTests(t *testing.T, ns *netNS, bin, dir string) map[string]*kafkagoResult {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "kafka-go.out")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := ns.Command(bin, "-test.run", kafkagoTests, "-test.v=test2json", "-test.count=1",
		"-test.timeout="+kafkagoTimeout.String())
	cmd.Dir = dir
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		// TestConn whole: kafka-go's CI skips nettest with this set.
		return strings.HasPrefix(kv, "KAFKA_SKIP_NETTEST=") || strings.HasPrefix(kv, "KAFKA_VERSION=")
	}), "KAFKA_VERSION="+kafkagoKafkaVersion)
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kafka-go's tests: %v", err)
	}
	// -test.timeout makes the binary panic and exit; this is in case it
	// cannot.
	timer := time.AfterFunc(kafkagoTimeout+time.Minute, func() { _ = cmd.Process.Kill() })
	waitErr := cmd.Wait()
	timer.Stop()
	t.Logf("kafka-go tests ran for %v (exit: %v); raw output %s", time.Since(start).Round(time.Millisecond), waitErr, raw)

	conv := exec.Command("go", "tool", "test2json", "-p", kafkagoModule)
	conv.Stdin, err = os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	events, err := conv.Output()
	if err != nil {
		t.Fatalf("go tool test2json: %v %s", err, exitStderr(err))
	}
	res := map[string]*kafkagoResult{}
	sc := bufio.NewScanner(bytes.NewReader(events))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Action string
			Test   string
			Output string
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("test2json line %q: %v", sc.Text(), err)
		}
		r := res[ev.Test]
		if r == nil {
			r = &kafkagoResult{}
			res[ev.Test] = r
		}
		switch ev.Action {
		case "output":
			r.output = append(r.output, strings.TrimRight(ev.Output, "\n"))
		case "pass", "fail", "skip":
			r.action = ev.Action
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading test2json output: %v", err)
	}
	return res
}

// goTestLogLine starts a line a Go test logged (t.Log, t.Error and kin).
var goTestLogLine = regexp.MustCompile(`^[\w.-]+\.go:\d+: `)

// assertions are a test's own lines, what it logged (t.Error, t.Log ...),
// without the framework's === and --- lines or anything else printed.
func (r *kafkagoResult) assertions() []string {
	var out []string
	for _, l := range r.output {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if goTestLogLine.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// checkKafkaGoResults fails t for every kafka-go test that did not pass,
// except those in expected whose assertion lines all match its pattern;
// it logs a summary either way. It also fails t if the tests it should
// have run did not run: a build or a filter running nothing passes no one.
func checkKafkaGoResults(t *testing.T, res map[string]*kafkagoResult, expected map[string]*regexp.Regexp) {
	t.Helper()
	for _, name := range []string{"TestConn", "TestConn/nettest", "TestReader", "TestOffsetFetchRequestWithNoTopic"} {
		r, ok := res[name]
		switch {
		case !ok:
			t.Errorf("kafka-go's %s did not run", name)
		case r.action == "skip":
			t.Errorf("kafka-go's %s was skipped:\n%s", name, strings.Join(r.output, "\n"))
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range res {
			if name != "" && !yield(name) {
				return
			}
		}
	})
	// A test fails when one of its subtests does; it is reported for
	// itself only when it has assertions of its own or ended without
	// a result (a panic or the timeout).
	hasFailedChild := func(name string) bool {
		for _, other := range names {
			if strings.HasPrefix(other, name+"/") && res[other].action != "pass" {
				return true
			}
		}
		return false
	}
	var passed, skipped int
	var failures, allowed []string
	unexplained := false // a failure with no assertion: a panic or the timeout?
	for _, name := range names {
		r := res[name]
		switch r.action {
		case "pass":
			passed++
			continue
		case "skip":
			skipped++
			continue
		}
		lines := r.assertions()
		if r.action == "fail" && len(lines) == 0 && hasFailedChild(name) {
			continue
		}
		what := "failed"
		if r.action == "" {
			what = "did not finish"
		}
		if re := expected[name]; re != nil && r.action == "fail" && len(lines) > 0 &&
			!slices.ContainsFunc(lines, func(l string) bool { return !re.MatchString(l) }) {
			allowed = append(allowed, fmt.Sprintf("%s: %s", name, strings.Join(lines, "; ")))
			continue
		}
		body := lines
		if len(body) == 0 {
			unexplained = true
			body = r.output // no assertion: show everything it printed
			if len(body) > 60 {
				body = body[len(body)-60:]
			}
		}
		failures = append(failures, fmt.Sprintf("%s %s:\n\t%s", name, what, strings.Join(body, "\n\t")))
	}
	if top := res[""]; top != nil && unexplained {
		// Panics and timeouts print here, outside any test.
		tail := top.output
		if len(tail) > 40 {
			tail = tail[len(tail)-40:]
		}
		t.Logf("kafka-go binary's own output (last %d lines):\n%s", len(tail), strings.Join(tail, "\n"))
	}
	t.Logf("kafka-go: %d passed, %d skipped, %d failed as three brokers make them, %d failed", passed, skipped, len(allowed), len(failures))
	for _, a := range allowed {
		t.Logf("expected with three brokers: %s", a)
	}
	for _, f := range failures {
		t.Errorf("kafka-go %s", f)
	}
}
