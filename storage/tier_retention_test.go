package storage

import (
	"math"
	"testing"
)

// A tiered log (Config.Tier) deletes only what the store holds, by the
// local retention settings; -2 follows retention.ms/bytes, and
// retention.bytes alone no longer deletes locally.
func TestTieredRetention(t *testing.T) {
	segTS := [][]int64{{1000}, {2000}, {3000}, {4000}, {5000}}
	t.Run("untiered retention until the copied end is given (a node without a store)", func(t *testing.T) {
		cfg := testConfig()
		cfg.RetentionBytes = 0
		cfg.Tier = TierRetention{Enabled: true, LocalRetentionMs: -1, LocalRetentionBytes: -1}
		l := timedLog(t, cfg, segTS)
		if n, err := l.DeleteOldSegments(1 << 40); err != nil || n != 4 {
			t.Fatalf("deleted %d, %v; want 4", n, err)
		}
	})
	t.Run("only copied segments go", func(t *testing.T) {
		copied := int64(-1)
		cfg := testConfig()
		cfg.RetentionMs, cfg.RetentionBytes = -1, -1
		cfg.Tier = TierRetention{Enabled: true, LocalRetentionMs: -2, LocalRetentionBytes: 0}
		l := timedLog(t, cfg, segTS)
		l.SetRemoteCopiedEnd(func() int64 { return copied })
		before := segmentsOf(t, l.dir)
		for _, step := range []struct {
			copied  int64
			deleted int
		}{
			{-1, 0},                 // nothing in the store: local.retention.bytes=0 deletes nothing
			{before[1].base - 1, 1}, // the first segment's last offset
			{before[2].base, 1},     // the second, and the third's first offset
			{before[3].base - 2, 0}, // the third not yet whole
			{before[3].base - 1, 1}, // the third
			{math.MaxInt64, 1},      // the fourth; the active one stays
		} {
			copied = step.copied
			n, err := l.DeleteOldSegments(1 << 40)
			if err != nil || n != step.deleted {
				t.Fatalf("copied end %d: deleted %d, %v; want %d", copied, n, err, step.deleted)
			}
		}
		checkDeleted(t, l, before, 4)
	})
	t.Run("local retention follows retention.ms at -2", func(t *testing.T) {
		cfg := testConfig()
		cfg.RetentionMs, cfg.RetentionBytes = 10_000, -1
		cfg.Tier = TierRetention{Enabled: true, LocalRetentionMs: -2, LocalRetentionBytes: -1}
		l := timedLog(t, cfg, segTS)
		l.SetRemoteCopiedEnd(func() int64 { return math.MaxInt64 })
		before := segmentsOf(t, l.dir)
		// Max timestamps 1001, 2001, ...: at 12_500 the first two are older
		// than 10 s.
		if n, err := l.DeleteOldSegments(12_500); err != nil || n != 2 {
			t.Fatalf("deleted %d, %v; want 2", n, err)
		}
		checkDeleted(t, l, before, 2)
	})
	t.Run("retention.bytes bounds the remote copy, not the local log", func(t *testing.T) {
		cfg := testConfig()
		cfg.RetentionMs, cfg.RetentionBytes = -1, 0
		cfg.Tier = TierRetention{Enabled: true, LocalRetentionMs: -1, LocalRetentionBytes: -1}
		l := timedLog(t, cfg, segTS)
		l.SetRemoteCopiedEnd(func() int64 { return math.MaxInt64 })
		if n, err := l.DeleteOldSegments(1 << 40); err != nil || n != 0 {
			t.Fatalf("deleted %d, %v; want none", n, err)
		}
		cfg.Tier = TierRetention{} // the same log untiered: retention.bytes=0 deletes every inactive segment
		l.SetConfig(cfg)
		if n, err := l.DeleteOldSegments(1 << 40); err != nil || n != 4 {
			t.Fatalf("untiered: deleted %d, %v; want 4", n, err)
		}
	})
}

// A tiered log keeps the producer snapshot at each segment's end until the
// store holds the segment (the copy uploads it); an untiered one keeps two.
func TestTieredKeepsSnapshots(t *testing.T) {
	segTS := [][]int64{{1000}, {2000}, {3000}, {4000}, {5000}}
	for _, tiered := range []bool{false, true} {
		cfg := testConfig()
		cfg.Tier.Enabled = tiered
		cfg.SegmentMs = 1000
		l := openLog(t, t.TempDir(), cfg)
		l.SetRemoteCopiedEnd(func() int64 { return -1 })
		now := int64(1_000_000)
		for _, tss := range segTS {
			appendOpts(t, l, batchOpts{N: 2, BaseTS: tss[0], ValueSize: 50}, now)
			now += 1000
		}
		snaps, err := listSnapshots(l.fs, l.dir)
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if tiered {
			want = len(segTS) - 1 // one per roll
		}
		if len(snaps) != want {
			t.Fatalf("tiered=%t: snapshots at %v, want %d", tiered, snaps, want)
		}
	}
}

// IndexPosition reads a copied .index: the batch position to scan from.
func TestIndexPosition(t *testing.T) {
	idx := []byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 19, 0, 0, 1, 244} // rel 9 at 0, rel 19 at 500
	for _, tc := range []struct{ offset, want int64 }{{100, 0}, {109, 0}, {115, 0}, {120, 500}, {500, 500}} {
		if got, err := IndexPosition(idx, 100, tc.offset); err != nil || got != tc.want {
			t.Fatalf("offset %d: %d, %v; want %d", tc.offset, got, err, tc.want)
		}
	}
	if _, err := IndexPosition(idx[:5], 100, 100); err == nil {
		t.Fatal("a torn index accepted")
	}
	if _, err := IndexPosition(idx, 100, 99); err == nil {
		t.Fatal("an offset below the base accepted")
	}
}
