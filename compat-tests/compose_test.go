package compattests

// TestCompose runs real upstream compose files (testdata/compose/<name>,
// each with its provenance in its header) with only the image swapped for
// Fjord's, against real containers: users adopt Fjord by changing the
// `image:` line of the compose file they already have.
//
// For each fixture (a subtest; -run 'TestCompose/apache-single' picks one):
//
//  1. The fixture is copied to a temp dir and changed only as editCompose
//     says: the images (IMAGE=<fjord image> in the environment for the
//     Apache files' `image: ${IMAGE}`, the `image:` line otherwise), a
//     `command:` (none has one), and — only if one of the fixed host
//     ports it publishes (9092, 29092, 39092, 49092, 9101) is taken on
//     this machine — the host side of every published port. Changed lines
//     are marked "# compose_test.go:" in the copy.
//  2. docker-compose -p <unique project> up -d. A container of an earlier
//     aborted run holding one of the file's fixed container_names is
//     removed first (only if its compose project is one of ours).
//  3. The client image (cmd/composeclient, FROM scratch) runs on the
//     project's network with the in-network bootstrap the file advertises
//     (`roundtrip`: wait for the brokers, create a topic, produce acks=all
//     idempotent, read back exactly once in order, commit through a group
//     and check the commits). The test fails early if a Kafka container
//     stops meanwhile (a start-up error), with the last 60 lines of
//     docker-compose logs.
//     A file whose volumes are relative to its place in apache/kafka's
//     tree (apache-ssl, apache-sasl) is copied to that place under the
//     temp dir, with what its volume holds: generated JKS stores and
//     credentials (apache-ssl), the example's JAAS file (apache-sasl). The
//     clients then use TLS with a client certificate, or SASL with the
//     example's credentials (the JAAS file's user_alice).
//  4. For a SASL file, `authcheck` on the network: the example's user is
//     served, the same user with a wrong password gets
//     SASL_AUTHENTICATION_FAILED, a client without SASL is not served.
//  5. If the file's host ports were kept and it advertises a listener to
//     the host (localhost:9092, ...), the same roundtrip runs on the host.
//  6. `fjord health --brokers N`, the image's healthcheck command (see
//     docker/test.sh), runs in every broker container: these files carry
//     no healthcheck, but one users add must pass with their environment.
//  7. For the clusters (apache-combined, apache-isolated, bitnami-cluster):
//     a `workload` client (acks=all, idempotent, RF 3, bootstrapping from
//     every broker) runs while the leader of its partition 0 is killed
//     with `docker kill` ~3 s in, producing for 20 s; nothing acknowledged
//     may be lost, duplicated or reordered, and acks must continue after
//     the kill.
//
// Everything is removed in t.Cleanup (docker-compose down -v
// --remove-orphans, then a by-label sweep), the images when TestCompose
// ends; at its start, leftovers of runs whose process is gone are removed.
// Skipped without docker or docker-compose unless FJORD_REQUIRE_DOCKER is
// set. The subtests run one at a time: the files fix container names.
// TestComposeFileEdit (no Docker needed) checks the copies differ from
// the fixtures only in marked lines.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type composeFixture struct {
	name string
	// bootstrap is the in-network listener the file advertises (every
	// broker of a cluster).
	bootstrap string
	// hostBootstrap is the listener the file advertises to the host, ""
	// if none (Bitnami's PLAINTEXT://:9092 advertises the container's host
	// name, which the host cannot resolve).
	hostBootstrap string
	brokers       int // brokers in the metadata
	rf            int // replication factor of the roundtrip topic
	// nodes maps node.id to the service of every broker; with kill set, the
	// leader of the workload's partition 0 is killed.
	nodes map[int32]string
	kill  bool
	// layout, for a file whose volumes are relative to where it lives in
	// apache/kafka's tree, is that place: the test lays a temp directory
	// out the same way.
	layout string
	// tls: the file has TLS listeners; the test generates the stores its
	// volume holds (composeTLS) and runs the clients with a client
	// certificate.
	tls bool
	// files are fixture files beside the compose file, put at these paths
	// (relative to the root of layout) before the start.
	files map[string]string
	// saslUser, for a file with SASL listeners, is the user the clients
	// authenticate as with saslMechanism; the password is that user's
	// user_<name> option in the fixture file jaas, the JAAS file the
	// example gives its broker.
	saslUser, saslMechanism, jaas string
}

var composeFixtures = []composeFixture{
	{name: "apache-single", bootstrap: "broker:19092", hostBootstrap: "localhost:9092",
		brokers: 1, rf: 1, nodes: map[int32]string{1: "broker"}},
	{name: "apache-combined", bootstrap: "kafka-1:19092,kafka-2:19092,kafka-3:19092",
		hostBootstrap: "localhost:29092,localhost:39092,localhost:49092",
		brokers:       3, rf: 3, nodes: map[int32]string{1: "kafka-1", 2: "kafka-2", 3: "kafka-3"}, kill: true},
	{name: "apache-isolated", bootstrap: "kafka-1:19092,kafka-2:19092,kafka-3:19092",
		hostBootstrap: "localhost:29092,localhost:39092,localhost:49092",
		brokers:       3, rf: 3, nodes: map[int32]string{4: "kafka-1", 5: "kafka-2", 6: "kafka-3"}, kill: true},
	{name: "apache-ssl", bootstrap: "broker:19093", hostBootstrap: "localhost:9093",
		brokers: 1, rf: 1, nodes: map[int32]string{1: "broker"}, layout: "docker/examples/docker-compose-files/single-node/ssl", tls: true},
	{name: "apache-sasl", bootstrap: "broker:19094", hostBootstrap: "localhost:9094",
		brokers: 1, rf: 1, nodes: map[int32]string{1: "broker"}, layout: "docker/examples/docker-compose-files/single-node/sasl_plaintext",
		files:    map[string]string{"broker_jaas.conf": "docker/examples/fixtures/sasl/broker_jaas.conf"},
		saslUser: "alice", saslMechanism: "PLAIN", jaas: "broker_jaas.conf"},
	{name: "confluent-kraft", bootstrap: "broker:29092", hostBootstrap: "localhost:9092",
		brokers: 1, rf: 1, nodes: map[int32]string{1: "broker"}},
	{name: "confluent-server", bootstrap: "broker:29092", hostBootstrap: "localhost:9092",
		brokers: 1, rf: 1, nodes: map[int32]string{1: "broker"}},
	{name: "bitnami", bootstrap: "kafka:9092", brokers: 1, rf: 1, nodes: map[int32]string{0: "kafka"}},
	{name: "bitnami-minimal", bootstrap: "kafka:9092", brokers: 1, rf: 1, nodes: map[int32]string{0: "kafka"}},
	{name: "bitnami-cluster", bootstrap: "kafka-0:9092,kafka-1:9092,kafka-2:9092",
		brokers: 3, rf: 3, nodes: map[int32]string{0: "kafka-0", 1: "kafka-1", 2: "kafka-2"}, kill: true},
}

func TestCompose(t *testing.T) {
	tool := requireDocker(t)
	start := time.Now()
	images := &composeImages{}
	t.Cleanup(func() {
		images.remove(t)
		t.Logf("TestCompose took %v", time.Since(start).Round(time.Second))
	})
	sweepDeadProjects(t)
	for _, fx := range composeFixtures {
		t.Run(fx.name, func(t *testing.T) {
			testComposeFixture(t, tool, images.get(t), fx)
		})
	}
}

// roundtripJSON is the part of composeclient's roundtrip result the test
// reads.
type roundtripJSON struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Brokers []struct {
		ID   int32  `json:"id"`
		Host string `json:"host"`
		Port int32  `json:"port"`
	} `json:"brokers"`
	Leaders    map[string]int32 `json:"leaders"`
	Acked      int              `json:"acked"`
	Consumed   int              `json:"consumed"`
	Committed  map[string]int64 `json:"committed"`
	ElapsedMs  int64            `json:"elapsed_ms"`
	StepsMs    map[string]int64 `json:"steps_ms"`
	Problems   []string         `json:"problems"`
	EndOffsets map[string]int64 `json:"end_offsets"`
}

func (r *roundtripJSON) brokerList() string {
	var s []string
	for _, b := range r.Brokers {
		s = append(s, fmt.Sprintf("%d@%s:%d", b.ID, b.Host, b.Port))
	}
	return strings.Join(s, ",")
}

// workloadJSON is composeclient's workload result.
type workloadJSON struct {
	OK               bool             `json:"ok"`
	Error            string           `json:"error"`
	LeadersAtStart   map[string]int32 `json:"leaders_at_start"`
	LeadersAtEnd     map[string]int32 `json:"leaders_at_end"`
	Sent             int64            `json:"sent"`
	Acked            int              `json:"acked"`
	Failed           int              `json:"failed"`
	Unresolved       int              `json:"unresolved"`
	FailureSample    map[string]int   `json:"failure_sample"`
	ReadBack         int              `json:"read_back"`
	ReadBackComplete bool             `json:"read_back_complete"`
	Lost             int              `json:"lost"`
	Duplicated       int              `json:"duplicated"`
	Reordered        int              `json:"reordered"`
	Misplaced        int              `json:"misplaced"`
	ProblemSample    []string         `json:"problem_sample"`
	StartUnixMs      int64            `json:"start_unix_ms"`
	FirstAckUnixMs   int64            `json:"first_ack_unix_ms"`
	LastAckUnixMs    int64            `json:"last_ack_unix_ms"`
	MaxAckGapMs      int64            `json:"max_ack_gap_ms"`
	MaxAckGapFromMs  int64            `json:"max_ack_gap_from_unix_ms"`
	AcksPerSecond    []int            `json:"acks_per_second"`
	StepsMs          map[string]int64 `json:"steps_ms"`
}

func testComposeFixture(t *testing.T, tool composeTool, images *composeImages, fx composeFixture) {
	begin := time.Now()
	dir := t.TempDir()
	var clientTLS []string // composeTLS's files, for a TLS file
	if fx.layout != "" {
		base := dir
		dir = filepath.Join(base, fx.layout)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for src, dst := range fx.files {
			placeFixtureFile(t, fx.name, src, filepath.Join(base, dst))
		}
		if fx.tls {
			clientTLS = composeTLS(t, base)
		}
	}
	clientSASL := composeSASLFlags(t, fx)

	ec := editCompose(t, fx.name, dir, images.fjord, false)
	p := &composeProject{t: t, tool: tool, name: composeProjectPrefix + strconv.Itoa(os.Getpid()) + strings.ReplaceAll(fx.name, "-", ""), file: ec}
	// Cleanups run last-registered first: logs on failure, then down.
	t.Cleanup(p.down)
	t.Cleanup(func() {
		if t.Failed() && p.started {
			t.Log(p.logs(60))
		}
	})
	// First a leftover of ours holding a fixed container name (and maybe a
	// fixed port), then keep the file's fixed host ports if every one is
	// free right now.
	p.clearNameConflicts()
	var busy []int
	for _, port := range ec.fixedHostPorts() {
		if !hostPortFree(port) {
			busy = append(busy, port)
		}
	}
	if len(busy) > 0 {
		ec = editCompose(t, fx.name, dir, images.fjord, true)
		p.file = ec
		t.Logf("host ports %v are taken on this machine: published ports rewritten, host-side check skipped", busy)
	}
	t.Logf("project %s, file %s; changes: %s", p.name, ec.path, strings.Join(ec.changes, "; "))

	p.started = true
	out, err := p.compose(3*time.Minute, "up", "-d")
	if err != nil && ec.keptPorts && len(ec.fixedHostPorts()) > 0 &&
		(strings.Contains(out, "port is already allocated") || strings.Contains(out, "address already in use")) {
		// A host port was taken between the check and the start: once more
		// on free ports.
		t.Logf("docker-compose up: a host port was taken meanwhile; retrying on rewritten ports:\n%s", lastLines(out, 5))
		p.down()
		p.file = editCompose(t, fx.name, dir, images.fjord, true)
		ec = p.file
		out, err = p.compose(3*time.Minute, "up", "-d")
	}
	if err != nil {
		t.Fatalf("docker-compose up: %v\n%s", err, lastLines(out, 30))
	}
	ids := p.containers()
	t.Logf("up in %v: %d containers", time.Since(begin).Round(100*time.Millisecond), len(ids))

	// The roundtrip on the project's network, failing early if a container
	// stops.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := p.watchExits(ids, nil, cancel)
	rctx, rcancel := context.WithTimeoutCause(ctx, 150*time.Second, fmt.Errorf("roundtrip did not finish in 150s"))
	defer rcancel()
	if clientTLS != nil {
		p.clientMounts = []string{clientTLS[len(clientTLS)-1] + ":/client-secrets:ro"}
	}
	c := p.startClient(images.client, "roundtrip", append([]string{"roundtrip", "--bootstrap", fx.bootstrap, "--topic", "compose-roundtrip",
		"--partitions", "3", "--rf", strconv.Itoa(fx.rf), "--records", "300", "--brokers", strconv.Itoa(fx.brokers), "--timeout", "120s"},
		slices.Concat(clientFlags(clientTLS, "/client-secrets"), clientSASL)...)...)
	werr := c.wait(rctx)
	stop()
	rt := &roundtripJSON{}
	jerr := json.Unmarshal(c.stdout.Bytes(), rt)
	if werr != nil || jerr != nil || !rt.OK {
		t.Fatalf("roundtrip on the compose network (bootstrap %s) failed: %v\nresult: %s\nclient stderr:\n%s",
			fx.bootstrap, firstErr(werr, jerr, rt.Error), strings.TrimSpace(c.stdout.String()), lastLines(c.stderrText(), 20))
	}
	t.Logf("roundtrip on the compose network via %s: ok in %dms (%v); brokers advertised %s; committed %v",
		fx.bootstrap, rt.ElapsedMs, rt.StepsMs, rt.brokerList(), rt.Committed)

	if fx.saslUser != "" {
		testComposeAuth(t, p, images, fx, clientSASL)
	}

	// The host-side check, through the listener the file advertises to the
	// host.
	switch {
	case fx.hostBootstrap == "":
		t.Logf("host-side check skipped: the file advertises no listener the host can reach")
	case !ec.keptPorts:
		t.Logf("host-side check skipped: the published host ports were rewritten, so %s (advertised by the file) is not where the brokers are", fx.hostBootstrap)
	default:
		hctx, hcancel := context.WithTimeout(context.Background(), 150*time.Second)
		hostArgs := append([]string{"roundtrip", "--bootstrap", fx.hostBootstrap, "--topic", "compose-host-roundtrip",
			"--partitions", "3", "--rf", strconv.Itoa(fx.rf), "--records", "300", "--brokers", strconv.Itoa(fx.brokers), "--timeout", "120s"}, slices.Concat(clientFlags(clientTLS, ""), clientSASL)...)
		cmd := exec.CommandContext(hctx, images.clientBin, hostArgs...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		hcancel()
		hrt := &roundtripJSON{}
		jerr := json.Unmarshal(out, hrt)
		if err != nil || jerr != nil || !hrt.OK {
			t.Errorf("roundtrip from the host via %s failed: %v\nresult: %s\nclient stderr:\n%s",
				fx.hostBootstrap, firstErr(err, jerr, hrt.Error), strings.TrimSpace(string(out)), lastLines(stderr.String(), 20))
		} else {
			t.Logf("roundtrip from the host via %s: ok in %dms; brokers advertised %s", fx.hostBootstrap, hrt.ElapsedMs, hrt.brokerList())
		}
	}

	// The image's healthcheck command in every broker container.
	for _, svc := range sortedServices(fx.nodes) {
		id, ok := ids[svc]
		if !ok {
			t.Errorf("no container for service %s", svc)
			continue
		}
		out, err := run(30*time.Second, nil, "docker", "exec", id, "/fjord", "health", "--brokers", strconv.Itoa(fx.brokers), "--timeout", "10s")
		if err != nil {
			t.Errorf("fjord health --brokers %d in %s: %v: %s", fx.brokers, svc, err, strings.TrimSpace(out))
		} else {
			t.Logf("%s: %s", svc, strings.TrimSpace(out))
		}
	}

	if fx.kill && !t.Failed() {
		testComposeKill(t, p, images, fx, ids)
	}
	t.Logf("%s took %v (before cleanup)", fx.name, time.Since(begin).Round(100*time.Millisecond))
}

// testComposeKill runs the workload and kills the leader of its partition
// 0 a few seconds in.
func testComposeKill(t *testing.T, p *composeProject, images *composeImages, fx composeFixture, ids map[string]string) {
	const (
		beforeKill = 3 * time.Second
		// Of producing, from the first record: the kill comes ~3.5 s in, and
		// acks have been seen to pause 7-11 s after it (acks=all waits for
		// the dead follower until it is fenced, broker.session.timeout.ms
		// 9 s, and leaves the ISR; longer if it was the active controller),
		// so 20 s leaves several seconds of acks after the pause.
		duration = 20 * time.Second
		ackAfter = 3 * time.Second // some ack must come later than kill + this
	)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var killed atomic.Value // the service killed on purpose
	killed.Store("")
	stop := p.watchExits(ids, func(svc string) bool { return svc == killed.Load().(string) }, cancel)
	defer stop()
	c := p.startClient(images.client, "workload", "workload", "--bootstrap", fx.bootstrap, "--topic", "compose-workload",
		"--partitions", "3", "--rf", "3", "--duration", duration.String(), "--out", "/dev/stdout")

	// Wait for the topic's leaders and the first ack.
	var leaders map[string]int32
	timeout := time.After(120 * time.Second)
wait:
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				break wait
			}
			if j, found := strings.CutPrefix(l, "TOPIC "); found {
				_ = json.Unmarshal([]byte(j), &leaders)
			}
			if l == "FIRST_ACK" {
				break wait
			}
		case <-timeout:
			t.Fatalf("workload: no acknowledged record within 120s\nclient stderr:\n%s", lastLines(c.stderrText(), 20))
		case <-ctx.Done():
			t.Fatalf("workload: %v\nclient stderr:\n%s", context.Cause(ctx), lastLines(c.stderrText(), 20))
		}
	}
	select {
	case <-c.done:
		t.Fatalf("workload exited before producing: %v\nresult: %s\nclient stderr:\n%s", c.err, c.stdout.String(), lastLines(c.stderrText(), 20))
	default:
	}
	time.Sleep(beforeKill)

	victim := fx.nodes[leaders["0"]]
	if victim == "" { // unknown leader: the first broker
		victim = sortedServices(fx.nodes)[0]
		t.Logf("leader %d of partition 0 is not a known node; killing %s", leaders["0"], victim)
	}
	killed.Store(victim) // before the kill: the watcher must not report it
	if out, err := run(time.Minute, nil, "docker", "kill", ids[victim]); err != nil {
		t.Fatalf("docker kill %s: %v: %s", victim, err, out)
	}
	killAt := time.Now()
	t.Logf("killed %s (leader of partition 0; leaders %v) at %s", victim, leaders, killAt.UTC().Format("15:04:05.000"))

	wctx, wcancel := context.WithTimeoutCause(ctx, duration+150*time.Second, fmt.Errorf("workload did not finish"))
	defer wcancel()
	werr := c.wait(wctx)
	w := &workloadJSON{}
	if err := json.Unmarshal(c.stdout.Bytes(), w); err != nil {
		t.Fatalf("workload: %v; no result (%v)\nstdout: %s\nclient stderr:\n%s", werr, err, c.stdout.String(), lastLines(c.stderrText(), 30))
	}
	killMs := killAt.UnixMilli()
	after := 0 // acks in the whole seconds starting at least ackAfter after the kill
	for i, n := range w.AcksPerSecond {
		if w.StartUnixMs+int64(i)*1000 >= killMs+ackAfter.Milliseconds() {
			after += n
		}
	}
	t.Logf("workload: sent %d, acked %d, failed %d, unresolved %d; read back %d (complete %v); lost %d, duplicated %d, reordered %d, misplaced %d",
		w.Sent, w.Acked, w.Failed, w.Unresolved, w.ReadBack, w.ReadBackComplete, w.Lost, w.Duplicated, w.Reordered, w.Misplaced)
	t.Logf("workload: kill at +%.1fs of producing; last ack %.1fs after the kill; %d acks from kill+%v on; longest ack gap %dms from +%.1fs; acks per second %v; leaders %v -> %v",
		float64(killMs-w.StartUnixMs)/1000, float64(w.LastAckUnixMs-killMs)/1000, after, ackAfter, w.MaxAckGapMs,
		float64(w.MaxAckGapFromMs-w.StartUnixMs)/1000, w.AcksPerSecond, w.LeadersAtStart, w.LeadersAtEnd)
	if len(w.FailureSample) > 0 {
		t.Logf("workload: produce failures: %v", w.FailureSample)
	}
	if len(w.ProblemSample) > 0 {
		t.Logf("workload: problems: %s", strings.Join(w.ProblemSample, "\n"))
	}
	if !w.ReadBackComplete {
		t.Errorf("workload: could not read the topic back to its end: %s", w.Error)
	}
	if w.Acked == 0 {
		t.Errorf("workload: nothing acknowledged")
	}
	if w.Lost != 0 || w.Duplicated != 0 || w.Reordered != 0 || w.Misplaced != 0 {
		t.Errorf("workload: lost %d, duplicated %d, reordered %d, misplaced %d acknowledged records; want 0",
			w.Lost, w.Duplicated, w.Reordered, w.Misplaced)
	}
	if w.LastAckUnixMs <= killMs+ackAfter.Milliseconds() {
		t.Errorf("workload: acks stopped with the kill of %s: the last ack came %.1fs after it, want one later than %v",
			victim, float64(w.LastAckUnixMs-killMs)/1000, ackAfter)
	}
	if t.Failed() {
		t.Logf("workload client stderr:\n%s", lastLines(c.stderrText(), 30))
	} else if werr != nil {
		t.Errorf("workload client: %v (%s)", werr, w.Error)
	}
}

func sortedServices(nodes map[int32]string) []string {
	var s []string
	for _, svc := range nodes {
		s = append(s, svc)
	}
	sort.Strings(s)
	return s
}

func firstErr(errs ...any) string {
	for _, e := range errs {
		switch v := e.(type) {
		case error:
			if v != nil {
				return v.Error()
			}
		case string:
			if v != "" {
				return v
			}
		}
	}
	return "not ok"
}

// TestComposeFileEdit checks editCompose without Docker: every fixture's
// copy (with its ports rewritten, the most it ever changes) is the fixture
// line for line except the lines marked "# compose_test.go:" below its
// header; every service ends up on the fjord image; and, if docker-compose
// is installed, the copy is a valid compose file.
func TestComposeFileEdit(t *testing.T) {
	const image = "fjord-composetest:edit-check"
	for _, fx := range composeFixtures {
		t.Run(fx.name, func(t *testing.T) {
			ec := editCompose(t, fx.name, t.TempDir(), image, true)
			orig, err := os.ReadFile("testdata/compose/" + fx.name + "/docker-compose.yml")
			if err != nil {
				t.Fatal(err)
			}
			copied, err := os.ReadFile(ec.path)
			if err != nil {
				t.Fatal(err)
			}
			ol := strings.Split(string(orig), "\n")
			cl := strings.Split(string(copied), "\n")
			header := 0
			for header < len(cl) && strings.HasPrefix(cl[header], "# compose_test.go:") {
				header++
			}
			if header < 2 || len(cl)-header != len(ol) {
				t.Fatalf("copy has %d header lines and %d lines after them, fixture %d lines", header, len(cl)-header, len(ol))
			}
			for i, l := range ol {
				c := cl[header+i]
				if c == l {
					continue
				}
				if !strings.Contains(c, "# compose_test.go:") {
					t.Errorf("line %d changed without a mark: %q -> %q", i+1, l, c)
					continue
				}
				t.Logf("line %d: %s\n       -> %s", i+1, strings.TrimSpace(l), strings.TrimSpace(c))
			}
			if len(ec.services) == 0 {
				t.Fatalf("no services found")
			}
			images := 0
			for _, l := range cl[header:] {
				if s := strings.TrimSpace(l); strings.HasPrefix(s, "image:") {
					images++
					if v := strings.TrimSpace(strings.TrimPrefix(stripComment(s), "image:")); v != image && !(v == "${IMAGE}" && len(ec.env) == 1) {
						t.Errorf("a service keeps its image: %q", s)
					}
				}
			}
			if images != len(ec.services) {
				t.Errorf("%d image lines for %d services %v", images, len(ec.services), ec.services)
			}
			if p, err := exec.LookPath("docker-compose"); err == nil {
				if out, err := run(30*time.Second, ec.env, p, "-f", ec.path, "config", "-q"); err != nil {
					t.Errorf("docker-compose config: %v\n%s", err, out)
				}
			}
		})
	}
}
