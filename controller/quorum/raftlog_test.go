package quorum

import (
	"path/filepath"
	"strconv"
	"testing"
	"testing/cryptotest"

	"github.com/fjordlog/fjord/controller/raftlog"
)

var (
	_ Log = (*MemoryLog)(nil)
	_ Log = (*raftlog.Storage)(nil)
)

// TestPebbleRestart runs a cluster over raftlog's pebble storage, with
// snapshots and compaction, then restarts every member from disk.
func TestPebbleRestart(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 9)
	dir := t.TempDir()
	var open []*raftlog.Storage
	t.Cleanup(func() {
		for _, s := range open {
			_ = s.Close()
		}
	})
	openLog := func(id uint64) Log {
		s, err := raftlog.Open(filepath.Join(dir, strconv.FormatUint(id, 10)))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, s)
		return s
	}
	n := newNetworkLogs(t, 9, []uint64{1, 2, 3}, []uint64{4}, 1, openLog)
	n.snapEvery = 5
	next := richBodies()
	for b := next(n.members[1].Image()); b != nil; b = next(n.members[1].Image()) {
		n.commit(enc(b))
	}
	n.checkConverged()
	before := n.members[1].Image().Version()

	for _, id := range n.ids {
		if err := n.logs[id].(*raftlog.Storage).Close(); err != nil {
			t.Fatal(err)
		}
		n.logs[id] = openLog(id)
		first, _ := n.logs[id].FirstIndex()
		if first <= 2 {
			t.Fatalf("member %d: log not compacted (first index %d)", id, first)
		}
		n.start(id, nil, nil)
		if n.members[id].Applied() < 2 {
			t.Fatalf("member %d restarted without its snapshot", id)
		}
	}
	n.commit(reg(77))
	n.checkConverged()
	n.checkAgree()
	if n.members[4].Image().Version() <= before {
		t.Fatal("no progress after restart")
	}
}
