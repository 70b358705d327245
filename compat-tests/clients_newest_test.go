package compattests

// Issue 25's "Done when": franz-go (kmsg 1.15), kcat, confluent-kafka-python,
// sarama and kafka-python all negotiate their newest versions against Fjord.
// Each client runs a produce, a consume in a group with a commit and a
// leave, and the admin calls it has, on one node, and keeps its connections
// open while the test reads the version of each API each connection last
// used off the node's console (/clients, docs/operations.md). For every key
// a client used, that version must be min(the client's newest, Fjord's
// max): the client's newest is read from its own source (the tables below,
// which cite it), Fjord's max from the node's own ApiVersions answer, and
// Fjord's max must not be below the client's newest (Fjord holding a client
// back fails). Where a client's code asks for less than it knows whatever
// the broker offers, the table says so and where (a client quirk, not
// something Fjord can change); any other version below the minimum fails.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"golang.org/x/net/html"
)

// keyMax is what a client's own source says of one API key.
type keyMax struct {
	// newest is the newest version of the key the client knows.
	newest int16
	// asks is the newest version the client asks for: newest, or lower
	// where its code caps the key whatever the broker offers (a client
	// quirk; src says where). It sends min(asks, the broker's max).
	asks int16
	// also lists older versions that another code path of the client
	// sends whatever the broker offers (quirks too).
	also []int16
	// src is where the numbers are read.
	src string
}

// known is a key the client asks for at the newest version it knows.
func known(v int16, src string) keyMax { return keyMax{newest: v, asks: v, src: src} }

// saramaModule is the sarama release saramaNewest was read from
// (compat-tests/go.mod); the test fails on another, whose source must be
// read again.
const saramaModule = "v1.61.1"

// saramaNewest: sarama configured with sarama.MaxVersion (V4_3_1_0). Each
// request's version comes from a constructor or call site that picks it
// from Config.Version (the highest branch for MaxVersion is cited, in
// github.com/IBM/sarama@v1.61.1), and broker.go sends min(that, the
// broker's max) (api_versions.go restrictApiVersion).
var saramaNewest = map[int16]keyMax{
	0:  known(10, "produce_set.go:215 buildRequest: 10 for >= V3_7_0_0 (produce_request.go isValidVersion: 0-10)"),
	1:  known(12, "consumer.go:1341 fetchNewMessages: 12 for >= V2_7_0_0"),
	2:  known(6, "offset_request.go:65 NewOffsetRequest: 6 for >= V2_8_0_0"),
	3:  known(11, "metadata_request.go:29 NewMetadataRequest: 11 for >= V2_8_0_0"),
	8:  known(8, "offset_manager.go:391 constructRequest: 8 for >= V2_4_0_0"),
	9:  known(8, "offset_fetch_request.go:47 NewOffsetFetchRequest: 8 for >= V3_0_0_0"),
	10: known(3, "client.go:1262 findCoordinator: 3 for >= V2_4_0_0"),
	11: known(8, "join_group_request.go:72 NewJoinGroupRequest: 8 for >= V3_2_0_0"),
	12: known(4, "consumer_group.go:735 heartbeatRequest: 4 for >= V2_4_0_0"),
	13: known(5, "consumer_group.go:797 leave: 5 for >= V3_2_0_0"),
	14: known(5, "consumer_group.go:672 syncGroupRequest: 5 for >= V2_5_0_0"),
	15: known(5, "admin.go:1253 DescribeConsumerGroups: 5 for >= V2_4_0_0"),
	16: known(5, "admin.go:1292 ListConsumerGroups: 5 for >= V3_8_0_0"),
	18: known(4, "broker.go:254 Open: ApiVersions 4 for >= V3_9_0_0"),
	19: known(7, "create_topics_request.go:37 NewCreateTopicsRequest: 7 for >= V2_8_0_0"),
	32: known(4, "admin.go:549 DescribeConfig: 4 for >= V2_8_0_0"),
	42: known(2, "admin.go:1464 DeleteConsumerGroup: 2 for >= V2_4_0_0"),
	60: known(2, "describe_cluster_request.go:23 NewDescribeClusterRequest: 2 for >= V4_0_0_0"),
}

// librdkafkaRelease is the librdkafka release librdkafkaNewest was read
// from: Debian's librdkafka1 2.0.2-1, under kcat 1.7.1 and
// confluent-kafka-python 1.7.0.
const librdkafkaRelease = "2.0.2"

// librdkafkaNewest: confluentinc/librdkafka at tag v2.0.2, each request's
// rd_kafka_broker_ApiVersion_supported(rkb, key, min, max) call, which
// returns min(max, the broker's max) (src/rdkafka_broker.c:245).
var librdkafkaNewest = map[int16]keyMax{
	0:  known(7, "src/rdkafka_msgset_writer.c:48 rd_kafka_ProduceRequest_max_version = 7"),
	1:  known(11, "src/rdkafka_fetcher.c:750 Fetch 0..11"),
	2:  known(2, "src/rdkafka_request.c:591 ListOffsets 0..2"),
	3:  known(4, "src/rdkafka_request.c:2032 Metadata 0..4"),
	8:  known(7, "src/rdkafka_request.c:1276 OffsetCommit 0..7"),
	9:  known(7, "src/rdkafka_request.c:976 OffsetFetch 0..7"),
	10: known(2, "src/rdkafka_request.c:394 FindCoordinator 0..2"),
	11: known(5, "src/rdkafka_request.c:1556 JoinGroup 0..5"),
	12: known(3, "src/rdkafka_request.c:1742 Heartbeat 0..3"),
	13: known(1, "src/rdkafka_request.c:1654 LeaveGroup 0..1"),
	14: known(3, "src/rdkafka_request.c:1498 SyncGroup 0..3"),
	// rd_kafka_list_groups, the only group listing confluent-kafka-python
	// 1.7 has (AdminClient.list_groups), asks v0 of both; the admin API's
	// ListConsumerGroups/DescribeConsumerGroups (rdkafka_admin.c:5716,
	// 6318) would ask up to 4, but that binding does not reach them.
	15: {newest: 4, asks: 0, src: "src/rdkafka_request.c:1858 DescribeGroups 0..4 by default; src/rdkafka.c:4756 rd_kafka_list_groups passes max 0"},
	16: {newest: 4, asks: 0, src: "src/rdkafka_request.c:1795 ListGroups 0..4 by default; src/rdkafka.c:4835 rd_kafka_list_groups passes max 0"},
	18: known(3, "src/rdkafka_request.c:2259 ApiVersionRequest: -1 means 3"),
	19: known(4, "src/rdkafka_request.c:3572 CreateTopics 0..4"),
	32: known(1, "src/rdkafka_request.c:4090 DescribeConfigs 0..1"),
}

// kafkaPythonRelease is the kafka-python release kafkaPythonNewest was read
// from: Debian's python3-kafka 2.0.2-3.
const kafkaPythonRelease = "2.0.2"

// kafkaPythonNewest: /usr/lib/python3/dist-packages/kafka. newest is the
// highest request class of each key in protocol/*.py. kafka-python does not
// pick versions per key from ApiVersions except in KafkaAdminClient
// (admin/client.py:232 _matching_api_version: min(highest class, broker's
// max)); the producer, consumer and coordinator pick by the broker release
// it inferred (conn.py:1167, (2, 5, 0) at most, which the test checks), so
// most keys stay below their highest class on every broker.
var kafkaPythonNewest = map[int16]keyMax{
	0: {newest: 8, asks: 7, src: "protocol/produce.py:213 ProduceRequest_v8; producer/sender.py:305 picks 7 for api_version >= (2, 1) and never 8"},
	1: {newest: 11, asks: 4, src: "protocol/fetch.py:344 FetchRequest_v11; consumer/fetcher.py:705 picks 4 for api_version >= (0, 11, 0)"},
	2: {newest: 5, asks: 1, src: "protocol/offset.py:177 OffsetRequest_v5; consumer/fetcher.py:573 sends OffsetRequest[1]"},
	3: {newest: 5, asks: 5, also: []int16{0, 1}, src: "protocol/metadata.py:180 MetadataRequest_v5; admin/client.py:268 asks min(5, broker's); " +
		"conn.py:1251 check_version probes with v0 (every new client, and the admin on the controller), client_async.py:835 refreshes with v1"},
	8: {newest: 3, asks: 2, src: "protocol/commit.py:97 OffsetCommitRequest_v3; coordinator/consumer.py:586 sends OffsetCommitRequest[2]"},
	9: {newest: 3, asks: 3, also: []int16{1}, src: "protocol/commit.py:195 OffsetFetchRequest_v3; admin/client.py:1180 asks min(3, broker's); " +
		"coordinator/consumer.py:735 sends OffsetFetchRequest[1]"},
	10: {newest: 1, asks: 0, src: "protocol/commit.py:244 GroupCoordinatorRequest_v1; coordinator/base.py:672 and admin/client.py:301 send v0"},
	11: known(2, "protocol/group.py:78 JoinGroupRequest_v2; coordinator/base.py:473 for api_version >= (0, 11, 0)"),
	12: known(1, "protocol/group.py:184 HeartbeatRequest_v1; coordinator/base.py:802 1 for api_version >= (0, 11, 0)"),
	13: known(1, "protocol/group.py:222 LeaveGroupRequest_v1; coordinator/base.py:774 1 for api_version >= (0, 11, 0)"),
	14: known(1, "protocol/group.py:135 SyncGroupRequest_v1; coordinator/base.py:565, 593 1 for api_version >= (0, 11, 0)"),
	15: known(3, "protocol/admin.py:389 DescribeGroupsRequest_v3; admin/client.py:983 min(3, broker's)"),
	// A bug of kafka-python 2.0.2: its ListGroupsRequest_v2 class says
	// API_VERSION = 1, so the admin's min(2, broker's) goes out as v1.
	16: {newest: 2, asks: 1, src: "protocol/admin.py:283 ListGroupsRequest_v2 has API_VERSION = 1 (admin.py:285); admin/client.py:1109 picks it for min(2, broker's)"},
	18: {newest: 2, asks: 0, src: "protocol/admin.py:52 ApiVersionRequest_v2; conn.py:1230 check_version sends ApiVersionRequest[0], its only ApiVersions"},
	19: known(3, "protocol/admin.py:151 CreateTopicsRequest_v3; admin/client.py:438 min(3, broker's)"),
	32: known(2, "protocol/admin.py:776 DescribeConfigsRequest_v2; admin/client.py:825 min(2, broker's)"),
}

// franzNewest: franz-go's newest is kmsg's MaxVersion() of each request
// (kmsg v1.15.1). kgo sends min(that, the broker's max, its MaxVersions
// option); the option's default, kversion.Stable() (Kafka 4.2), is below
// kmsg for a few keys (ApiVersions 4 < 5, DeleteGroups 2 < 3, ...), so the
// test configures kgo with kmsg's newest, as it does sarama with its
// MaxVersion: franzMaxVersions.
func franzNewest() map[int16]keyMax {
	m := map[int16]keyMax{}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if r := kmsg.RequestForKey(k); r != nil {
			m[k] = known(r.MaxVersion(), "kmsg v1.15.1 "+kmsg.NameForKey(k)+"Request.MaxVersion()")
		}
	}
	return m
}

// franzMaxVersions is kgo's default MaxVersions (kversion.Stable) raised to
// kmsg's newest of every key: franz-go at its newest.
func franzMaxVersions() *kversion.Versions {
	v := kversion.Stable()
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if r := kmsg.RequestForKey(k); r != nil {
			v.SetMaxKeyVersion(k, r.MaxVersion())
		}
	}
	return v
}

func TestClientsNegotiateNewestVersions(t *testing.T) {
	b := startBroker(t, t.TempDir(), "fjord.console.listener=127.0.0.1:0", "group.initial.rebalance.delay.ms=0")
	n := &newestRun{addr: b.Addr, base: consoleBase(t, b), fjord: fjordMaxVersions(t, b.Addr)}
	t.Run("franz-go", n.franz)
	t.Run("sarama", n.sarama)
	t.Run("kcat", n.kcat)
	t.Run("confluent-kafka-python", n.confluentPython)
	t.Run("kafka-python", n.kafkaPython)
	n.mu.Lock()
	defer n.mu.Unlock()
	t.Logf("API versions used, per client (used: distinct versions its open connections last used; "+
		"want = min(asks, Fjord max)):\n%-22s %-16s %-8s %6s %4s %5s  %s\n%s",
		"client", "API", "used", "newest", "asks", "Fjord", "note", strings.Join(n.rows, "\n"))
}

// newestRun is one run of TestClientsNegotiateNewestVersions: the node and
// the table of what each client used.
type newestRun struct {
	addr, base string
	fjord      map[int16]int16 // API key -> Fjord's max, from its ApiVersions

	mu   sync.Mutex
	rows []string
}

// consoleBase is the base URL of the node's console, from its log.
func consoleBase(t *testing.T, b *Broker) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if m := consoleLine.FindStringSubmatch(b.readLog()); m != nil {
			return "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never logged its console address")
		}
	}
}

// fjordMaxVersions is the max version of each key the node advertises on
// its client listener.
func fjordMaxVersions(t *testing.T, addr string) map[int16]int16 {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, newClient(t, addr, kgo.ClientID("newest-probe")))
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	m := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		m[k.ApiKey] = k.MaxVersion
	}
	return m
}

// clientConn is one connection's row on the console's clients page.
type clientConn struct {
	software, clientID, remote string
	versions                   map[int16]int16 // API key -> the version it last used
	errors                     string          // the last errors returned to it, as shown
}

// keyByName maps the console's API names (kmsg.NameForKey) back to keys.
var keyByName = func() map[string]int16 {
	m := map[string]int16{}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		m[kmsg.NameForKey(k)] = k
	}
	return m
}()

// readClients reads the node's clients page.
func readClients(t *testing.T, base string) []clientConn {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(get(t, base+"/clients")))
	if err != nil {
		t.Fatalf("clients page: %v", err)
	}
	tbl := find(doc, "table", "clients")
	if tbl == nil {
		t.Fatal("clients page: no table #clients")
	}
	var out []clientConn
	for tr := find(tbl, "tbody").FirstChild; tr != nil; tr = tr.NextSibling {
		if tr.Type != html.ElementNode || tr.Data != "tr" {
			continue
		}
		var cells []*html.Node
		for td := tr.FirstChild; td != nil; td = td.NextSibling {
			if td.Type == html.ElementNode && td.Data == "td" {
				cells = append(cells, td)
			}
		}
		if len(cells) < 9 { // "No client connected."
			continue
		}
		c := clientConn{software: text(cells[0]), clientID: text(cells[1]), remote: text(cells[2]), versions: map[int16]int16{}, errors: text(cells[8])}
		var items []*html.Node
		var walk func(*html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "li" {
				items = append(items, n)
			}
			for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
				walk(ch)
			}
		}
		walk(cells[7])
		for _, li := range items {
			name, v, _ := strings.Cut(text(li), " v")
			key, ok := keyByName[name]
			ver, err := strconv.ParseInt(v, 10, 16)
			if !ok || err != nil {
				t.Fatalf("clients page: API version %q of %s not understood", text(li), c.clientID)
			}
			c.versions[key] = int16(ver)
		}
		out = append(out, c)
	}
	return out
}

// usage is what the connections of one client id used, over every read
// of the clients page: a connection's row shows the version of each key it
// last used, and is gone once it closes, so the test reads the page while
// the client works and keeps every version it saw.
type usage struct {
	id       string
	conns    []string          // the connections' addresses
	software []string          // distinct software names and versions (KIP-511)
	versions map[int16][]int16 // API key -> the distinct versions seen, ascending
	errors   []string          // distinct error cells
}

func newUsage(id string) *usage { return &usage{id: id, versions: map[int16][]int16{}} }

func addOnce[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// add adds what the page shows of the client's open connections.
func (u *usage) add(conns []clientConn) {
	for _, c := range conns {
		if c.clientID != u.id {
			continue
		}
		u.conns = addOnce(u.conns, c.remote)
		u.software = addOnce(u.software, c.software)
		for k, v := range c.versions {
			u.versions[k] = addOnce(u.versions[k], v)
			slices.Sort(u.versions[k])
		}
		if c.errors != "none" {
			u.errors = addOnce(u.errors, c.errors)
		}
	}
}

// observe reads the clients page into u until the client has used every
// key of keys, for at most 30 s (check reports what is missing).
func (n *newestRun) observe(t *testing.T, u *usage, keys ...int16) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		u.add(readClients(t, n.base))
		var missing []string
		for _, k := range keys {
			if _, used := u.versions[k]; !used {
				missing = append(missing, kmsg.NameForKey(k))
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("%s: after 30 s, not seen on an open connection: %v", u.id, missing)
			return
		}
	}
}

// check compares what client used with its table: every required key used,
// each key at min(the client's asks, Fjord's max) with Fjord's max not the
// lower, older versions only where a path of the client sends them
// whatever the broker offers; a
// client that sent ApiVersions v3+ named itself (KIP-511); no
// UNSUPPORTED_VERSION returned to it.
func (n *newestRun) check(t *testing.T, client string, u *usage, table map[int16]keyMax, required []int16) {
	t.Helper()
	t.Logf("%s: %d connections seen, software %q", client, len(u.conns), u.software)
	if len(u.conns) == 0 {
		t.Fatalf("%s: no open connection on the clients page", client)
	}
	for _, k := range required {
		if _, ok := u.versions[k]; !ok {
			t.Errorf("%s never used %s (key %d) on a connection still open", client, kmsg.NameForKey(k), k)
		}
	}
	keys := make([]int16, 0, len(u.versions))
	for k := range u.versions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var rows []string
	for _, k := range keys {
		vs, name := u.versions[k], kmsg.NameForKey(k)
		km, ok := table[k]
		if !ok {
			t.Errorf("%s used %s %s, which its table does not cover: read its newest version from the client's source", client, name, fmtVersions(vs))
			continue
		}
		fmax, ok := n.fjord[k]
		if !ok {
			t.Errorf("%s used %s %s, which Fjord does not advertise", client, name, fmtVersions(vs))
			continue
		}
		want := min(km.asks, fmax)
		if top := vs[len(vs)-1]; top != want {
			t.Errorf("%s: %s at v%d, want v%d = min(the client's v%d, Fjord's v%d) (%s)", client, name, top, want, km.asks, fmax, km.src)
		}
		for _, v := range vs {
			if v != want && !slices.Contains(km.also, v) {
				t.Errorf("%s: %s also at v%d, which no path of the client sends whatever the broker offers (%s)", client, name, v, km.src)
			}
		}
		var notes []string
		if km.asks < km.newest {
			notes = append(notes, fmt.Sprintf("client quirk: asks v%d of its v%d", km.asks, km.newest))
		}
		if len(km.also) > 0 {
			notes = append(notes, fmt.Sprintf("client quirk: other paths send %s", fmtVersions(km.also)))
		}
		if fmax < km.asks {
			t.Errorf("%s: Fjord's %s max v%d is below the client's v%d: Fjord holds it back", client, name, fmax, km.asks)
		}
		rows = append(rows, fmt.Sprintf("%-22s %-16s %-8s %6d %4d %5d  %s", client, name, fmtVersions(vs), km.newest, km.asks, fmax, strings.Join(notes, "; ")))
	}
	for _, sw := range u.software {
		named := sw != "" && !strings.HasPrefix(sw, "not sent")
		if sent := u.versions[18]; len(sent) > 0 && sent[len(sent)-1] >= 3 != named {
			t.Errorf("%s: ApiVersions %s but software %q: KIP-511 names the client from v3 on", client, fmtVersions(sent), sw)
		}
	}
	for _, e := range u.errors {
		if strings.Contains(e, "UNSUPPORTED_VERSION") {
			t.Errorf("%s was answered UNSUPPORTED_VERSION: %s", client, e)
		} else {
			t.Logf("%s: errors returned to it: %s", client, e)
		}
	}
	n.mu.Lock()
	n.rows = append(n.rows, rows...)
	n.mu.Unlock()
}

func fmtVersions(vs []int16) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = "v" + strconv.Itoa(int(v))
	}
	return strings.Join(s, ",")
}

// The keys every client's produce and group consume use; each client adds
// those of its admin calls and of leaving.
var (
	keysProduce = []int16{18, 3, 0}          // ApiVersions, Metadata, Produce
	keysGroup   = []int16{10, 11, 14, 12, 9} // FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch
	keysConsume = []int16{2, 1, 8}           // ListOffsets, Fetch, OffsetCommit
)

func concatKeys(sets ...[]int16) []int16 { return slices.Concat(sets...) }

// franz runs franz-go at kmsg's newest: kadm creates the topic and reads
// its configs, an idempotent producer writes 30 records, a group consumer
// reads them from the start, commits and leaves (LeaveGroup, the client
// still open), then kadm lists, describes, fetches the offsets of and
// deletes the group.
func (n *newestRun) franz(t *testing.T) {
	const id, topic, group = "newest-franz", "newest-franz", "newest-franz-group"
	ctx := testCtx(t, 90*time.Second)
	u := newUsage(id)
	opts := []kgo.Opt{kgo.ClientID(id), kgo.MaxVersions(franzMaxVersions())}
	adm := kadm.NewClient(newClient(t, n.addr, opts...))
	if resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, resp.Err)
	}
	if rcs, err := adm.DescribeTopicConfigs(ctx, topic); err != nil || rcs[0].Err != nil {
		t.Fatalf("DescribeTopicConfigs: %v %+v", err, rcs)
	}
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := newClient(t, n.addr, opts...).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	n.observe(t, u)
	cons := newClient(t, n.addr, append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))...)
	for got := 0; got < 30; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 30: %v", got, err)
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Heartbeat and the consuming keys, before leaving stops the
	// heartbeats and kgo closes the fetch connection to cancel its long
	// poll.
	n.observe(t, u, concatKeys([]int16{12}, keysConsume)...)
	if err := cons.LeaveGroupContext(ctx); err != nil {
		t.Fatalf("LeaveGroup: %v", err)
	}
	if _, err := adm.ListGroups(ctx); err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if gs, err := adm.DescribeGroups(ctx, group); err != nil || gs.Error() != nil {
		t.Fatalf("DescribeGroups: %v %v", err, gs.Error())
	}
	if offs, err := adm.FetchOffsets(ctx, group); err != nil || offs.Error() != nil {
		t.Fatalf("FetchOffsets: %v %v", err, offs.Error())
	} else if sum := sumOffsets(offs); sum != 30 {
		t.Fatalf("committed offsets sum to %d, want 30", sum)
	}
	if rs, err := adm.DeleteGroups(ctx, group); err != nil || rs.Error() != nil {
		t.Fatalf("DeleteGroups: %v %v", err, rs.Error())
	}
	required := concatKeys(keysProduce, keysGroup, keysConsume, []int16{19, 32, 22, 13, 16, 15, 42})
	n.observe(t, u, required...)
	n.check(t, "franz-go", u, franzNewest(), required)
	if want := "kgo " + kgoVersion(); !slices.Equal(u.software, []string{want}) {
		t.Errorf("franz-go: software %q, want %q", u.software, want)
	}
}

func sumOffsets(offs kadm.OffsetResponses) (sum int64) {
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// saramaHandler marks every message and commits once it has seen want.
type saramaNewestHandler struct {
	mu   sync.Mutex
	seen map[string]bool
	want int
	done chan struct{}
	once sync.Once
}

func (h *saramaNewestHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaNewestHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaNewestHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		sess.MarkMessage(msg, "")
		h.mu.Lock()
		h.seen[string(msg.Value)] = true
		all := len(h.seen) >= h.want
		h.mu.Unlock()
		if all {
			h.once.Do(func() { sess.Commit(); close(h.done) })
		}
	}
	return nil
}

// sarama runs sarama at sarama.MaxVersion, one client for everything:
// ClusterAdmin creates the topic, reads its configs and describes the
// cluster, a SyncProducer writes 30 records, a ConsumerGroup reads them
// from the oldest offset, commits and leaves (Close on a group made from
// the client keeps the client open), then the admin lists, describes,
// fetches the offsets of and deletes the group.
func (n *newestRun) sarama(t *testing.T) {
	const id, topic, group = "newest-sarama", "newest-sarama", "newest-sarama-group"
	if v := moduleVersion(t, "github.com/IBM/sarama"); v != saramaModule {
		t.Fatalf("sarama %s is linked, saramaNewest was read from %s: read its version selection again", v, saramaModule)
	}
	cfg := sarama.NewConfig()
	cfg.ClientID = id
	cfg.Version = sarama.MaxVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	u := newUsage(id)
	cl, err := sarama.NewClient([]string{n.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewClient: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	adm, err := sarama.NewClusterAdminFromClient(cl) // not closed: that would close cl
	if err != nil {
		t.Fatalf("NewClusterAdminFromClient: %v", err)
	}
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic}); err != nil {
		t.Fatalf("DescribeConfig: %v", err)
	}
	if _, _, err := adm.DescribeCluster(); err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatalf("NewSyncProducerFromClient: %v", err)
	}
	var msgs []*sarama.ProducerMessage
	for i := range 30 {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))})
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatalf("SendMessages: %v", err)
	}
	n.observe(t, u)
	grp, err := sarama.NewConsumerGroupFromClient(group, cl)
	if err != nil {
		t.Fatalf("NewConsumerGroupFromClient: %v", err)
	}
	h := &saramaNewestHandler{seen: map[string]bool{}, want: 30, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := grp.Consume(ctx, []string{topic}, h); err != nil {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	select {
	case <-h.done:
	case err := <-consumed:
		cancel()
		t.Fatalf("Consume: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("consumed %d of 30 in 60 s", len(h.seen))
	}
	n.observe(t, u, concatKeys([]int16{12}, keysConsume)...)
	cancel()
	if err := <-consumed; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if err := grp.Close(); err != nil {
		t.Fatalf("ConsumerGroup.Close: %v", err)
	}
	if _, err := adm.ListConsumerGroups(); err != nil {
		t.Fatalf("ListConsumerGroups: %v", err)
	}
	if _, err := adm.DescribeConsumerGroups([]string{group}); err != nil {
		t.Fatalf("DescribeConsumerGroups: %v", err)
	}
	resp, err := adm.ListConsumerGroupOffsets(group, nil)
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets: %v", err)
	}
	var sum int64
	for _, ps := range resp.Blocks {
		for _, b := range ps {
			sum += b.Offset
		}
	}
	if sum != 30 {
		t.Fatalf("committed offsets sum to %d, want 30", sum)
	}
	if err := adm.DeleteConsumerGroup(group); err != nil {
		t.Fatalf("DeleteConsumerGroup: %v", err)
	}
	required := concatKeys(keysProduce, keysGroup, keysConsume, []int16{19, 32, 60, 13, 16, 15, 42})
	n.observe(t, u, required...)
	n.check(t, "sarama", u, saramaNewest, required)
	for _, sw := range u.software {
		if !strings.HasPrefix(sw, "sarama ") {
			t.Errorf("sarama: software %q, want sarama's", sw)
		}
	}
}

// moduleVersion is the version of module path that go.mod requires (the
// test binary's build information lists no dependencies).
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	t.Fatalf("go.mod requires no %s", path)
	return ""
}

// kcat runs kcat (librdkafka) as a producer on stdin and a balanced
// consumer (-G) reading from the earliest offset with auto commits, both
// kept running while the page is read; kcat has no admin calls but -L,
// which exits before the page could be read and sends the Metadata version
// the others show.
func (n *newestRun) kcat(t *testing.T) {
	kcat := kcatPath(t)
	const id, topic, group = "newest-kcat", "newest-kcat", "newest-kcat-group"
	if v := runKcat(t, kcat, "", "-V"); !strings.Contains(v, "librdkafka "+librdkafkaRelease+" ") {
		t.Fatalf("librdkafkaNewest was read from librdkafka %s; kcat -V says:\n%s", librdkafkaRelease, v)
	}
	ctx := testCtx(t, 90*time.Second)
	prod := startLive(t, ctx, kcat, "-P", "-b", n.addr, "-t", topic, "-X", "client.id="+id)
	// kcat -P reads its input 128 bytes at a time with fread, which waits
	// for all 128 (kcat's input.c inbuf_read_to_delimeter), and keeps a few
	// lines read but not produced until more input or EOF comes: 30 filler
	// lines of 128 bytes after the 30 records push them out with stdin
	// still open.
	var lines strings.Builder
	for i := range 30 {
		fmt.Fprintf(&lines, "v%02d-%s\n", i, strings.Repeat("x", 123))
	}
	for i := range 30 {
		fmt.Fprintf(&lines, "f%02d-%s\n", i, strings.Repeat("x", 123))
	}
	prod.write(t, lines.String())
	// The producer's Metadata auto-creates the topic; -L, kcat's one
	// admin-ish call, waits for it (a consumer subscribing earlier exits).
	for list := ""; !strings.Contains(list, `topic "`+topic+`" with 1 partitions`); time.Sleep(100 * time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatalf("kcat -L never listed %s:\n%s", topic, list)
		}
		list = runKcat(t, kcat, "", "-L", "-b", n.addr, "-t", topic, "-X", "client.id="+id+"-list")
	}
	u := newUsage(id)
	n.observe(t, u)
	cons := startLive(t, ctx, kcat, "-b", n.addr, "-G", group, "-q", "-u", "-f", `%s\n`, "-X", "client.id="+id,
		"-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=100", topic)
	seen := map[string]bool{}
	for len(seen) < 30 {
		if l := cons.line(t, 60*time.Second); strings.HasPrefix(l, "v") {
			seen[l] = true
		}
	}
	required := concatKeys(keysProduce, keysGroup, keysConsume)
	n.observe(t, u, required...)
	n.check(t, "kcat", u, librdkafkaNewest, required)
	for _, sw := range u.software {
		if sw != "librdkafka "+librdkafkaRelease {
			t.Errorf("kcat: software %q, want librdkafka %s", sw, librdkafkaRelease)
		}
	}
	prod.closeStdin(t)
	cons.interrupt()
}

// confluentPython runs testdata/newest_confluent.py: AdminClient creates the
// topic, a Producer writes 30 records, a Consumer reads them in a group,
// commits and leaves (unsubscribe), then AdminClient describes the
// topic's configs, lists the groups and the topic.
func (n *newestRun) confluentPython(t *testing.T) {
	py := confluentPython(t)
	const id, topic, group = "newest-confluent", "newest-confluent", "newest-confluent-group"
	ctx := testCtx(t, 120*time.Second)
	u := newUsage(id)
	p := startLive(t, ctx, py, testdataPath(t, "newest_confluent.py"), n.addr, topic, group, id)
	var first struct {
		Phase, Version, Libversion string
		Acked, Consumed            int
	}
	p.next(t, 90*time.Second, &first)
	if first.Libversion != librdkafkaRelease {
		t.Fatalf("librdkafkaNewest was read from librdkafka %s; confluent-kafka-python %s runs on %s", librdkafkaRelease, first.Version, first.Libversion)
	}
	if first.Acked != 30 || first.Consumed != 30 {
		t.Fatalf("acked %d, consumed %d, want 30 each", first.Acked, first.Consumed)
	}
	n.observe(t, u, concatKeys([]int16{12}, keysConsume)...)
	p.write(t, "leave\n")
	var ready struct{ Errors []string }
	p.next(t, 60*time.Second, &ready)
	if len(ready.Errors) > 0 {
		t.Errorf("admin calls failed:\n%s", strings.Join(ready.Errors, "\n"))
	}
	required := concatKeys(keysProduce, keysGroup, keysConsume, []int16{19, 32, 13, 16, 15})
	n.observe(t, u, required...)
	n.check(t, "confluent-kafka-python", u, librdkafkaNewest, required)
	p.closeStdin(t)
}

// kafkaPython runs testdata/newest_kafka_python.py: KafkaAdminClient
// creates the topic, a KafkaProducer writes 30 records, a KafkaConsumer
// reads them in a group, commits, lists the end offsets and leaves
// (unsubscribe), then the admin describes the topic's configs, lists and
// describes the groups and fetches the group's offsets.
func (n *newestRun) kafkaPython(t *testing.T) {
	const py = "/usr/bin/python3"
	out, err := exec.Command(py, "-c", "import kafka; print(kafka.__version__)").CombinedOutput()
	if err != nil {
		if os.Getenv("FJORD_REQUIRE_KAFKA_PYTHON") != "" {
			t.Fatalf("python3-kafka missing and FJORD_REQUIRE_KAFKA_PYTHON is set: %v\n%s", err, out)
		}
		t.Skipf("python3-kafka not installed (%v)", err)
	}
	if v := strings.TrimSpace(string(out)); v != kafkaPythonRelease {
		t.Fatalf("kafkaPythonNewest was read from kafka-python %s; %s is installed", kafkaPythonRelease, v)
	}
	const id, topic, group = "newest-kafka-python", "newest-kafka-python", "newest-kafka-python-group"
	ctx := testCtx(t, 120*time.Second)
	u := newUsage(id)
	p := startLive(t, ctx, py, testdataPath(t, "newest_kafka_python.py"), n.addr, topic, group, id)
	var first struct {
		Acked, Consumed int
		End             int64
		APIVersion      []int `json:"api_version"`
	}
	p.next(t, 90*time.Second, &first)
	if first.Acked != 30 || first.Consumed != 30 || first.End != 30 {
		t.Fatalf("acked %d, consumed %d, end offsets sum %d, want 30 each", first.Acked, first.Consumed, first.End)
	}
	// The newest broker release kafka-python 2.0.2 can infer (conn.py:1172);
	// a lower one would lower every version it picks by release.
	if !slices.Equal(first.APIVersion, []int{2, 5, 0}) {
		t.Errorf("kafka-python inferred broker version %v, want [2 5 0]", first.APIVersion)
	}
	n.observe(t, u, concatKeys([]int16{12}, keysConsume)...)
	p.write(t, "leave\n")
	var ready struct{ Errors []string }
	p.next(t, 60*time.Second, &ready)
	if len(ready.Errors) > 0 {
		t.Errorf("admin calls failed:\n%s", strings.Join(ready.Errors, "\n"))
	}
	required := concatKeys(keysProduce, keysGroup, keysConsume, []int16{19, 32, 13, 16, 15})
	n.observe(t, u, required...)
	n.check(t, "kafka-python", u, kafkaPythonNewest, required)
	p.closeStdin(t)
}

func testdataPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// liveProc is a client process the test talks to while it runs: lines on
// its stdout, a pipe to its stdin. It is killed at cleanup if still
// running.
type liveProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *rdkBuffer
	exited chan struct{}
}

func startLive(t *testing.T, ctx context.Context, bin string, args ...string) *liveProc {
	t.Helper()
	p := &liveProc{name: filepath.Base(bin) + " " + strings.Join(args, " "), cmd: exec.CommandContext(ctx, bin, args...),
		lines: make(chan string, 1024), stderr: &rdkBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// line is the next line the process prints, failing the test if it exits
// or prints nothing for timeout.
func (p *liveProc) line(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("%s exited: %v\nstderr:\n%s", p.name, p.cmd.ProcessState, tail(p.stderr.String()))
		}
		return l
	case <-time.After(timeout):
		t.Fatalf("%s printed nothing for %v\nstderr:\n%s", p.name, timeout, tail(p.stderr.String()))
	}
	return ""
}

// next decodes the next line the process prints as JSON into out.
func (p *liveProc) next(t *testing.T, timeout time.Duration, out any) {
	t.Helper()
	l := p.line(t, timeout)
	if err := json.Unmarshal([]byte(l), out); err != nil {
		t.Fatalf("%s printed %q: %v\nstderr:\n%s", p.name, l, err, tail(p.stderr.String()))
	}
}

func (p *liveProc) write(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, s); err != nil {
		t.Fatalf("%s: writing its stdin: %v\nstderr:\n%s", p.name, err, tail(p.stderr.String()))
	}
}

// closeStdin ends the process's input, which ends it, and waits up to 30 s.
func (p *liveProc) closeStdin(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("%s still running 30 s after its stdin closed\nstderr:\n%s", p.name, tail(p.stderr.String()))
	}
}

// interrupt stops the process with SIGINT (kcat -G leaves its group and
// exits); cleanup kills it if that is not enough.
func (p *liveProc) interrupt() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
}
