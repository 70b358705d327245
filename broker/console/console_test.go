package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/protocol"
)

func TestShow(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Bytes
		kind string
		text string
	}{
		{"null", Bytes{Null: true}, "null", ""},
		{"empty", Clip([]byte{}, 10), "empty", ""},
		{"json object", Clip([]byte(`{"a":1,"b":[true,null]}`), 100), "json", "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    null\n  ]\n}"},
		{"json scalar is text", Clip([]byte(`12345`), 100), "text", "12345"},
		{"utf-8 text", Clip([]byte("héllo wörld\n"), 100), "text", "héllo wörld\n"},
		{"clipped json is text", Clip([]byte(`{"a":"bcdefgh"}`), 8), "text", `{"a":"bc`},
		{"clipped in a rune", Clip([]byte("aé"), 2), "text", "a"},
		{"binary", Clip([]byte{0, 1, 2, 'a'}, 100), "hex", "00000000  00 01 02 61                                       |...a|\n"},
		{"control characters", Clip([]byte("a\x1bb"), 100), "hex", "00000000  61 1b 62                                          |a.b|\n"},
		{"invalid utf-8", Clip([]byte{'a', 0xff}, 100), "hex", "00000000  61 ff                                             |a.|\n"},
		{"too deep to indent", Clip([]byte(strings.Repeat("[", 30)+strings.Repeat("]", 30)), 100), "text", strings.Repeat("[", 30) + strings.Repeat("]", 30)},
		{"braces in strings", Clip([]byte(`{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}`), 100), "json", "{\n  \"a\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n}"},
	} {
		s := Show(c.in)
		if s.Kind != c.kind || s.Text != c.text {
			t.Errorf("%s: got %s %q, want %s %q", c.name, s.Kind, s.Text, c.kind, c.text)
		}
	}
	if s := Show(Clip([]byte("abcdef"), 3)); !s.Clipped || s.Len != 6 {
		t.Errorf("clipped value: %+v", s)
	}
}

// fakeSource is a fixed node for rendering tests, with hostile strings
// where clients choose them.
type fakeSource struct {
	tails  []TailLimits
	limits []int // the limits Topics, Groups and Clients were called with
}

const evil = `<script>alert(1)</script>`

func (f *fakeSource) Identity() (string, int32) { return "cluster-x", 2 }

func (f *fakeSource) Cluster() Cluster {
	return Cluster{ClusterID: "cluster-x", NodeID: 2, Controller: 1, MetadataVersion: 42,
		Brokers:              []Broker{{ID: 1, Endpoints: []string{"PLAINTEXT 127.0.0.1:1"}}, {ID: 2}, {ID: 3, Fenced: true}},
		Voters:               []Voter{{1, "127.0.0.1:9"}, {2, "127.0.0.1:10"}},
		Topics:               1,
		Partitions:           2,
		UnderReplicated:      []PartitionRef{{Topic: "orders", Partition: 1, Leader: 1, Replicas: []int32{1, 3}, ISR: []int32{1}}},
		UnderReplicatedCount: 301,
		Remote: &RemoteHealth{Failing: "access_denied", FailingPartitions: 3, LastError: "put k: " + evil, Waiting: 3,
			PendingSegments: 7, PendingBytes: 7168, OldestPending: 4 * time.Minute},
	}
}

func (f *fakeSource) Topics(limit int, internal bool) ([]TopicSummary, int, int) {
	f.limits = append(f.limits, limit)
	out := []TopicSummary{{Name: "orders", Partitions: 2, RF: 2, UnderReplicated: 1, Local: 1, Bytes: 2048}}
	if internal {
		return append(out, TopicSummary{Name: "__consumer_offsets", Internal: true, Partitions: 50}), 2, 0
	}
	return out, 1, 1
}

func (f *fakeSource) Topic(name string) (Topic, bool) {
	if name != "orders" {
		return Topic{}, false
	}
	return Topic{Name: "orders", ID: "abcd", Partitions: []Partition{
		{Index: 0, Leader: 2, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Local: true, LocalLeads: true, LogStart: 9, HighWater: 17, LogEnd: 17, Bytes: 2048,
			Remote: true, RemoteStart: 0, RemoteEnd: 8, RemoteBytes: 3072},
		{Index: 1, Leader: 1, Replicas: []int32{1, 3}, ISR: []int32{1}},
	}, Configs: []Config{{Name: "retention.ms", Value: "1000"}, {Name: "secret", Value: "hunter2", Sensitive: true}}}, true
}

func (f *fakeSource) Tail(topic string, p int32, lim TailLimits) (Tail, error) {
	f.tails = append(f.tails, lim)
	return Tail{Topic: topic, Partition: p, Local: true, HighWater: 17, Leader: 2, Remote: true, RemoteEnd: 8, RemoteBytes: 3072, Records: []Record{
		{Offset: 15, Timestamp: time.UnixMilli(1000), Key: Clip([]byte("k1"), lim.ValueBytes), Value: Clip([]byte(`{"n":1}`), lim.ValueBytes)},
		{Offset: 16, Timestamp: time.UnixMilli(2000), Key: Bytes{Null: true}, Value: Clip([]byte(evil), lim.ValueBytes),
			Headers: []Header{{Key: evil, Value: Clip([]byte{0xff, 0}, lim.ValueBytes)}}},
	}}, nil
}

func (f *fakeSource) Groups(limit int) ([]GroupSummary, int) {
	f.limits = append(f.limits, limit)
	return []GroupSummary{{ID: evil, State: "Stable", ProtocolType: "consumer", Members: 1, Generation: 3, Lag: 7, LagKnown: true}}, 1500
}

func (f *fakeSource) Group(id string) (Group, bool) {
	if id != evil {
		return Group{}, false
	}
	return Group{ID: evil, State: "Stable", ProtocolType: "consumer", Protocol: "range", Generation: 3, Leader: "m-1",
		Members: []Member{{ID: "m-1", ClientID: evil, Host: "/127.0.0.1", Assigned: map[string][]int32{"orders": {0, 1}}}},
		Offsets: []GroupOffset{{Topic: "orders", Partition: 0, Committed: 10, HighWater: 17, Lag: 7, LagKnown: true, Member: "m-1"},
			{Topic: "orders", Partition: 1, Committed: -1, HighWater: 4, Lag: 4, LagKnown: true, Member: "m-1"}},
		Timeline: []group.Rebalance{
			{Cause: group.CauseMemberJoined, Member: "m-1", From: 0, Generation: 1, Start: 1000, JoinEnd: 1000, End: 1010, Members: 1, Outcome: group.OutcomeStable},
			{Cause: group.CauseSessionTimeout, Member: "m-2", From: 2, Generation: 3, Start: 5000, JoinEnd: 8000, End: 8100, Members: 1, Outcome: group.OutcomeStable},
		}}, true
}

func (f *fakeSource) Clients(limit int) ([]protocol.ClientInfo, int) {
	f.limits = append(f.limits, limit)
	return []protocol.ClientInfo{{Listener: "PLAINTEXT", Remote: "127.0.0.1:5000", ClientID: evil, Principal: "User:alice",
		SoftwareName: "franz-go", SoftwareVersion: "1.21.7", Requests: 9, Since: time.Now().Add(-time.Minute),
		Versions: []protocol.APIVersion{{Key: 0, Version: 11}, {Key: 18, Version: 4}},
		Errors:   []protocol.ClientError{{At: time.Now(), Key: 0, Version: 11, Code: 6, Where: "orders-0"}}}}, 1
}

func get(t *testing.T, h http.Handler, url string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestPages(t *testing.T) {
	src := &fakeSource{}
	c := New(src, zerolog.Nop())
	for _, p := range []struct {
		url  string
		want []string
	}{
		{"/", []string{"Under-replicated", `id="under-replicated">301<`, "The first 1 of 301.", `href="/topic?name=orders"`, "fenced", "controller", "42", "127.0.0.1:10",
			`id="remote-store">access_denied<`, "failing: access_denied</span> in 3 partition(s)", "7 segment(s), 7168 bytes, in 3 partition(s); the oldest for 4m0s", "Local segments are kept until the store holds them"}},
		{"/topics", []string{`href="/topic?name=orders"`, "show 1 internal topic", "2.0 KiB"}},
		{"/topics?internal=1", []string{"__consumer_offsets"}},
		{"/topic?name=orders", []string{`href="/partition?topic=orders&amp;p=0"`, "retention.ms", "hidden", "under-replicated", "0–8 · 3.0 KiB"}},
		{"/partition?topic=orders&p=0", []string{"in the remote store 0–8 (3.0 KiB)", "&lt;script&gt;alert(1)&lt;/script&gt;", "{\n  &#34;n&#34;: 1\n}", "hex", "null"}},
		{"/groups", []string{`href="/group?id=%3cscript%3ealert%281%29%3c%2fscript%3e"`, ">7<", "The first 1 of 1500 groups."}},
		{"/group?id=" + strings.ReplaceAll(evil, "/", "%2F"), []string{"session timeout", "member joined", "2 → 3", "3.1 s", "orders-0", "m-1",
			// A partition never committed: no committed offset, its lag.
			"orders-1</a></td>\n  <td class=\"num\">—</td>\n  <td class=\"num\">4</td>\n  <td class=\"num lag\">4</td>"}},
		{"/clients", []string{"franz-go", "1.21.7", "User:alice", "NOT_LEADER_FOR_PARTITION", "Produce v11", "(orders-0)"}},
	} {
		code, body := get(t, c, p.url)
		if code != 200 {
			t.Errorf("%s: status %d: %s", p.url, code, body)
			continue
		}
		for _, w := range p.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q in the page", p.url, w)
			}
		}
		if strings.Contains(body, evil) {
			t.Errorf("%s: an unescaped client string reached the page", p.url)
		}
		for _, nav := range []string{`href="/topics"`, `href="/groups"`, `href="/clients"`} {
			if !strings.Contains(body, nav) {
				t.Errorf("%s: no link %s", p.url, nav)
			}
		}
	}
	if want := []int{MaxTopics, MaxTopics, MaxGroups, MaxClients}; !slices.Equal(src.limits, want) {
		t.Errorf("the lists were asked for %v, want %v", src.limits, want)
	}
	if code, _ := get(t, c, "/topic?name=nope"); code != 404 {
		t.Errorf("an unknown topic: status %d, want 404", code)
	}
	if code, _ := get(t, c, "/group?id=nope"); code != 404 {
		t.Errorf("an unknown group: status %d, want 404", code)
	}
	if code, _ := get(t, c, "/static/style.css"); code != 200 {
		t.Errorf("the stylesheet: status %d", code)
	}
}

// A visitor cannot ask for more than the bounds.
func TestTailBounds(t *testing.T) {
	src := &fakeSource{}
	c := New(src, zerolog.Nop())
	for _, url := range []string{
		"/partition?topic=orders&p=0&n=100000",
		"/partition?topic=orders&p=0&n=0",
		"/partition?topic=orders&p=0&bytes=100000000",
		"/partition?topic=orders&p=-1",
		"/partition?topic=orders&p=x",
	} {
		if code, _ := get(t, c, url); code != 400 {
			t.Errorf("%s: status %d, want 400", url, code)
		}
	}
	if len(src.tails) != 0 {
		t.Fatalf("out-of-bounds requests reached the source: %+v", src.tails)
	}
	get(t, c, "/partition?topic=orders&p=0")
	get(t, c, "/partition?topic=orders&p=0&n=200&bytes=16384")
	want := []TailLimits{{DefaultTailRecords, DefaultValueBytes, TailReadBytes}, {MaxTailRecords, MaxValueBytes, TailReadBytes}}
	if len(src.tails) != 2 || src.tails[0] != want[0] || src.tails[1] != want[1] {
		t.Fatalf("tail limits %+v, want %+v", src.tails, want)
	}
	if code, _ := get(t, c, "/topics"); code != 200 {
		t.Fatal(code)
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("POST", "/topics", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405 (the console only reads)", rec.Code)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("no CSP: %q", csp)
	}
}
