package sharecoord

import (
	"testing"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/group/sharepart"
)

func TestCoordinatorKey(t *testing.T) {
	k := key("orders", 1, 3)
	// Kafka's Uuid.toString: base64url, unpadded.
	if got, want := CoordinatorKey(k), "orders:AAAAAAAAAAAAAAAAAAAAAQ:3"; got != want {
		t.Fatalf("CoordinatorKey = %q, want %q", got, want)
	}
	if got, want := PartitionOf(k, 50), coordinator.PartitionOf("orders:AAAAAAAAAAAAAAAAAAAAAQ:3", 50); got != want {
		t.Fatalf("PartitionOf = %d, want %d", got, want)
	}
	if PartitionOf(k, 0) != 0 {
		t.Fatal("PartitionOf with no partitions")
	}
	back, err := ParseKey(CoordinatorKey(k))
	if err != nil || back != k {
		t.Fatalf("ParseKey(CoordinatorKey(k)) = %v, %v", back, err)
	}
}

func TestParseKey(t *testing.T) {
	const id = "AAAAAAAAAAAAAAAAAAAAAQ"
	for _, c := range []struct {
		in   string
		want sharepart.Key
		ok   bool
	}{
		{"g:" + id + ":3", key("g", 1, 3), true},
		{"a:b:" + id + ":0", key("a:b", 1, 0), true},        // the group may hold colons
		{":g:" + id + ":2", key(":g", 1, 2), true},          // even lead with one
		{"g::" + id + ":4", key("g:", 1, 4), true},          // or end with one
		{"g:" + id + "==:1", key("g", 1, 1), true},          // padding is accepted
		{"g:" + id + ":1:", key("g", 1, 1), true},           // Java's split drops trailing empties
		{"g:" + id + ":-1", key("g", 1, -1), true},          // Integer.parseInt takes a sign
		{"g:" + id + ":+2", key("g", 1, 2), true},           //
		{"", sharepart.Key{}, false},                        // empty
		{"onlytwo:parts", sharepart.Key{}, false},           // too few pieces
		{"g:" + id + ":", sharepart.Key{}, false},           // the same, after the split
		{":" + id + ":0", sharepart.Key{}, false},           // empty group
		{" \t:" + id + ":0", sharepart.Key{}, false},        // blank group
		{"g:notatopicid:0", sharepart.Key{}, false},         // not base64 of 16 bytes
		{"g:" + id + "=:0", sharepart.Key{}, false},         // bad padding
		{"g:" + id[:21] + ":0", sharepart.Key{}, false},     // 15 bytes
		{"g:" + id + ":x", sharepart.Key{}, false},          // not a number
		{"g:" + id + ":2147483648", sharepart.Key{}, false}, // not an int32
	} {
		got, err := ParseKey(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseKey(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.StatePartitions, bad.SnapshotUpdateRecordsPerSnapshot, bad.PruneIntervalMs = 0, 501, 0
	if err := bad.Validate(); err == nil {
		t.Fatal("a bad config validated")
	}
	tc := TopicConfigs(DefaultConfig())
	for k, v := range map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "104857600", "min.insync.replicas": "2"} {
		if tc[k] != v {
			t.Errorf("topic config %s = %q, want %q", k, tc[k], v)
		}
	}
}
