package compattests

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var consoleLine = regexp.MustCompile(`"addr":"([^"]+)"[^\n]*serving the web console`)

// kgoVersion is the software version franz-go reports (KIP-511): its
// module version in the binary's build information, "unknown" where
// there is none (test binaries may have none).
func kgoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// consoleRetention is console-orders' retention.ms, which its topic page
// shows.
const consoleRetention = "86400000"

// setUpConsole starts a node serving its console and gives it what the
// pages must show: console-orders (3 partitions of JSON records with a
// header, 5 records of lag on partition 0) and console-events (a binary
// and a markup value); console-group, whose console-c1 was joined and
// left again by console-c2; an admin client's TOPIC_ALREADY_EXISTS; and,
// when kcat is at hand, a librdkafka consumer. It returns the console's
// base URL and whether kcat runs.
func setUpConsole(t *testing.T) (base string, withKcat bool) {
	ctx := testCtx(t, 60*time.Second)
	b := startBroker(t, t.TempDir(), "fjord.console.listener=127.0.0.1:0", "group.initial.rebalance.delay.ms=0")
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if m := consoleLine.FindStringSubmatch(b.readLog()); m != nil {
			base = "http://" + m[1]
		} else if time.Now().After(deadline) {
			t.Fatal("the node never logged its console address")
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	adm := newAdmin(t, b.Addr)
	retention := consoleRetention
	createTopic(t, adm, "console-orders", 3, map[string]*string{"retention.ms": &retention})
	createTopic(t, adm, "console-events", 1, nil)
	// An error the clients page must show: the topic exists.
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "console-orders"); err == nil && resp.Err == nil {
		t.Fatal("creating an existing topic succeeded")
	}

	// Ten records per partition of console-orders, JSON with a header.
	prod := newClient(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ClientID("console-producer"))
	produce := func(p int32, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: "console-orders", Partition: p, Key: fmt.Appendf(nil, "order-%d-%d", p, i),
				Value:   fmt.Appendf(nil, `{"order":%d,"partition":%d,"item":"widget"}`, i, p),
				Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("compat-test")}}})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for p := range int32(3) {
		produce(p, 10)
	}
	if err := prod.ProduceSync(ctx,
		&kgo.Record{Topic: "console-events", Value: []byte{0xde, 0xad, 0xbe, 0xef, 0x00}},
		&kgo.Record{Topic: "console-events", Key: []byte("markup"), Value: []byte("<b>bold</b> & plain text")},
	).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// kcat, a librdkafka client, waiting on console-events: the clients
	// page shows another client software beside franz-go.
	kcat := ""
	if _, err := exec.LookPath("kcat"); err == nil || os.Getenv("FJORD_REQUIRE_KCAT") != "" {
		kcat = kcatPath(t)
	}
	if kcat != "" {
		cmd := exec.CommandContext(ctx, kcat, "-C", "-b", b.Addr, "-t", "console-events", "-o", "end", "-q", "-X", "client.id=console-kcat")
		if err := cmd.Start(); err != nil {
			t.Fatalf("kcat: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}

	// A group member that reads everything and commits; a second member
	// joins, then leaves. The eager range balancer makes each of these
	// one generation change (cooperative balancing adds a second one
	// whose timing the test could not tell from the leave's).
	member := func(id string) *kgo.Client {
		return newClient(t, b.Addr, kgo.ClientID(id), kgo.ConsumerGroup("console-group"), kgo.ConsumeTopics("console-orders"),
			kgo.Balancers(kgo.RangeBalancer()),
			kgo.DisableAutoCommit(), kgo.HeartbeatInterval(200*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))
	}
	c1 := member("console-c1")
	for got := 0; got < 30; {
		fs := c1.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 30 records: %v", got, err)
		}
		got += fs.NumRecords()
	}
	if err := c1.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	awaitGroup := func(members int) {
		t.Helper()
		for {
			gs, err := adm.DescribeGroups(ctx, "console-group")
			if err == nil {
				g := gs["console-group"]
				if g.Err == nil && g.State == "Stable" && len(g.Members) == members {
					return
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("group never Stable with %d members: %v %+v", members, err, gs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	awaitGroup(1)
	c2 := member("console-c2")
	awaitGroup(2)
	c2.Close()
	awaitGroup(1)
	// Lag: five records more on partition 0 than the group committed.
	produce(0, 5)
	return base, kcat != ""
}

// The web console (fjord.console.listener) of a real node, loaded in
// headless Chromium from Debian's chromium package: the test sets up
// topics, records, a consumer group that rebalances (a second member
// joins, then leaves) and a client error, then follows the pages' links
// from the cluster page and checks each shows the figures it set up.
// FJORD_CONSOLE_SCREENSHOTS=dir also saves a 1280x900 screenshot of each
// page there (docs/console/ holds the ones in the README).
func TestConsoleInChromium(t *testing.T) {
	bin := chromiumPath(t)
	base, withKcat := setUpConsole(t)
	ctx := testCtx(t, 60*time.Second)
	shots := os.Getenv("FJORD_CONSOLE_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	br := &browser{t: t, bin: bin, profile: t.TempDir(), shots: shots}

	// Cluster: this node, the controller, no partition short of replicas.
	doc := br.load(base+"/", "cluster")
	if r := row(t, doc, "brokers", "1 this node controller"); r[1] != "live" {
		t.Errorf("cluster: broker row %q", r)
	}
	if got := text(find(doc, "span", "under-replicated")); got != "0" {
		t.Errorf("cluster: %s under-replicated partitions, want 0", got)
	}

	// Topics, followed by their links.
	doc = br.load(link(t, base, doc, "Topics"), "topics")
	if r := row(t, doc, "topics", "console-orders"); r[1] != "3" {
		t.Errorf("topics: console-orders row %q, want 3 partitions", r)
	}
	if r := row(t, doc, "topics", "console-events"); r[1] != "1" {
		t.Errorf("topics: console-events row %q, want 1 partition", r)
	}
	topicsDoc := doc
	doc = br.load(link(t, base, doc, "console-orders"), "topic")
	for p, hw := range []string{"15", "10", "10"} {
		r := row(t, doc, "partitions", fmt.Sprint(p))
		// The role is the last column (a remote-store column, "—" here,
		// came before it with tiered storage).
		if r[1] != "1" || r[6] != hw || r[len(r)-1] != "leader" {
			t.Errorf("topic: partition %d row %q, want leader 1 and high watermark %s", p, r, hw)
		}
	}
	if r := row(t, doc, "configs", "retention.ms"); r[1] != consoleRetention {
		t.Errorf("topic: config row %q, want retention.ms %s", r, consoleRetention)
	}
	doc = br.load(link(t, base, doc, "0"), "partition")
	recs := rows(t, doc, "records")
	if len(recs) != 15 {
		t.Fatalf("partition: %d records shown, want 15", len(recs))
	}
	if r := recs[0]; r[0] != "14" || !strings.Contains(r[2], "order-0-4") || !strings.Contains(r[3], `"item": "widget"`) ||
		!strings.Contains(r[3], "json") || !strings.Contains(r[4], "source : compat-test") {
		t.Errorf("partition: newest record %q, want offset 14, its key, its JSON indented and its header", r)
	}

	// The events partition: binary as hex, markup as text only.
	doc = br.load(link(t, base, topicsDoc, "console-events"), "")
	doc = br.load(link(t, base, doc, "0"), "")
	recs = rows(t, doc, "records")
	if len(recs) != 2 || !strings.Contains(recs[0][3], "<b>bold</b> & plain text") || !strings.Contains(recs[1][3], "de ad be ef 00") {
		t.Errorf("events: records %q, want the text shown as text and the bytes in hex", recs)
	}
	if find(find(doc, "table", "records"), "b") != nil {
		t.Error("events: a record's markup became an element")
	}

	// Groups: lag, members, and the rebalance timeline.
	doc = br.load(link(t, base, doc, "Consumer groups"), "groups")
	if r := row(t, doc, "groups", "console-group"); r[1] != "Stable" || r[4] != "1" || r[5] != "5" {
		t.Errorf("groups: row %q, want Stable, 1 member, lag 5", r)
	}
	doc = br.load(link(t, base, doc, "console-group"), "group")
	if r := row(t, doc, "offsets", "console-orders-0"); r[1] != "10" || r[2] != "15" || r[3] != "5" || !strings.HasPrefix(r[4], "console-c1") {
		t.Errorf("group: offsets row %q, want committed 10, high watermark 15, lag 5, owned by console-c1", r)
	}
	if ms := rows(t, doc, "members"); len(ms) != 1 || !strings.HasPrefix(ms[0][0], "console-c1") || ms[0][1] != "console-c1" {
		t.Errorf("group: members %q, want console-c1 alone", ms)
	}
	timeline := rows(t, doc, "timeline")
	if len(timeline) < 3 {
		t.Fatalf("group: timeline %q, want the first join, the second member's join and its leaving", timeline)
	}
	// Newest first: the latest generation change is console-c2 leaving.
	if r := timeline[0]; r[1] != "member left" || !strings.HasPrefix(r[2], "console-c2") || r[7] != "Stable" {
		t.Errorf("group: latest rebalance %q, want console-c2's leaving, Stable", r)
	}
	joined := false
	for _, r := range timeline {
		joined = joined || (r[1] == "member joined" && strings.HasPrefix(r[2], "console-c2"))
	}
	if !joined {
		t.Errorf("group: no rebalance caused by console-c2 joining in %q", timeline)
	}
	if last := timeline[len(timeline)-1]; last[0] != "0 → 1" || last[1] != "member joined" || !strings.HasPrefix(last[2], "console-c1") {
		t.Errorf("group: first rebalance %q, want generation 0 → 1 as console-c1 joined", last)
	}

	// Clients: franz-go's software name and version, its error.
	if withKcat {
		for !strings.Contains(get(t, base+"/clients"), "librdkafka") {
			if ctx.Err() != nil {
				t.Fatal("kcat never appeared on the clients page")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	doc = br.load(link(t, base, doc, "Clients"), "clients")
	want := "kgo " + kgoVersion()
	var c1Row, adminErr, kcatRow bool
	for _, r := range rows(t, doc, "clients") {
		kcatRow = kcatRow || (strings.HasPrefix(r[0], "librdkafka ") && r[1] == "console-kcat")
		if r[0] == want && r[1] == "console-c1" && r[4] == "User:ANONYMOUS" {
			c1Row = true
		}
		adminErr = adminErr || strings.Contains(r[8], "TOPIC_ALREADY_EXISTS (console-orders)")
	}
	if !c1Row {
		t.Errorf("clients: no row for console-c1 as %q: %q", want, rows(t, doc, "clients"))
	}
	if withKcat && !kcatRow {
		t.Errorf("clients: no librdkafka row for kcat: %q", rows(t, doc, "clients"))
	}
	if !adminErr {
		t.Errorf("clients: the admin client's TOPIC_ALREADY_EXISTS is not shown: %q", rows(t, doc, "clients"))
	}
	// And back: every page links to the others.
	for _, nav := range []string{"Cluster", "Topics", "Consumer groups", "Clients"} {
		link(t, base, doc, nav)
	}
}
