package sharecoord

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/fjordlog/fjord/group/sharepart"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// FuzzReplay replays arbitrary bytes as state records, then runs every
// operation on every key they left: nothing may panic, and the table's
// invariants hold throughout. The input is a sequence of records, each
// an int16-length key and an int16-length value (-1: a tombstone).
func FuzzReplay(f *testing.F) {
	k := key("g", 1, 0)
	seed := func(recs ...sharepart.Record) []byte {
		var b []byte
		for _, r := range recs {
			b = binary.BigEndian.AppendUint16(b, uint16(len(r.Key)))
			b = append(b, r.Key...)
			if r.Value == nil {
				b = binary.BigEndian.AppendUint16(b, 0xffff)
				continue
			}
			b = binary.BigEndian.AppendUint16(b, uint16(len(r.Value)))
			b = append(b, r.Value...)
		}
		return b
	}
	snap := sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{StartOffset: 5, DeliveryCompleteCount: 2,
		StateBatches: []sharepart.StateBatch{{FirstOffset: 5, LastOffset: 9, DeliveryState: sharepart.Archived, DeliveryCount: 2}}})
	upd := sharepart.EncodeUpdate(k, &sharepart.UpdateValue{LeaderEpoch: 3, StartOffset: 7, DeliveryCompleteCount: -1,
		StateBatches: []sharepart.StateBatch{{FirstOffset: 6, LastOffset: 12, DeliveryState: sharepart.Available, DeliveryCount: 1}}})
	f.Add(seed(snap, upd, upd, sharepart.Tombstone(k), upd))
	f.Add(seed(upd, snap))
	f.Add([]byte{0, 2, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		tbl := newTable(2)
		var off int64
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				break
			}
			r := sharepart.Record{Key: data[:n]}
			data = data[n:]
			if len(data) < 2 {
				break
			}
			if vn := binary.BigEndian.Uint16(data); vn != 0xffff {
				data = data[2:]
				if int(vn) > len(data) {
					break
				}
				r.Value, data = data[:vn], data[vn:]
			} else {
				data = data[2:]
			}
			tbl.replay(off, r)
			off++
			if err := tbl.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		tbl.commit(off)
		now := int64(100)
		for _, k := range tbl.sortedKeys() {
			st, rec, err := tbl.read(k, math.MaxInt32, now)
			if err != nil {
				t.Fatalf("read of %s: %v", k, err)
			}
			if rec != nil {
				if err := tbl.replay(off, *rec); err != nil {
					t.Fatalf("replaying its own read record: %v", err)
				}
				off++
			}
			w := WriteState{LeaderEpoch: -1, StateEpoch: st.StateEpoch, StartOffset: st.StartOffset, DeliveryCompleteCount: -1, Batches: st.Batches}
			if r, err := tbl.write(k, w, false, now); err == nil {
				if err := tbl.replay(off, r); err != nil {
					t.Fatalf("replaying its own write record: %v", err)
				}
				off++
			}
			if r, err := tbl.initialize(k, -1, st.StartOffset, now); err == nil {
				if err := tbl.replay(off, r); err != nil {
					t.Fatalf("replaying its own initialize record: %v", err)
				}
				off++
			}
		}
		for _, r := range tbl.coldSnapshots(now+10, 1) {
			if err := tbl.replay(off, r); err != nil {
				t.Fatalf("replaying its own cold snapshot: %v", err)
			}
			off++
		}
		if b := tbl.pruneBound(off); b < 0 || b > off {
			t.Fatalf("prune bound %d outside [0, %d]", b, off)
		}
		if err := tbl.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzLoad reads arbitrary bytes as a state partition's log: a load
// reports a bad batch, it never panics. (Arbitrary bytes can number their
// batches in any order, which no log does, so only the absence of panics
// is checked here; FuzzReplay checks the table.)
func FuzzLoad(f *testing.F) {
	k := key("g", 1, 0)
	good := recordbatch.Build([]recordbatch.KV{
		{Key: sharepart.EncodeKey(sharepart.SnapshotRecord, k), Value: sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{StartOffset: 1}).Value},
		{Key: sharepart.EncodeKey(sharepart.SnapshotRecord, k)},
	}, 1)
	f.Add(good)
	f.Add(good[:30])
	f.Fuzz(func(t *testing.T, data []byte) {
		tbl := newTable(2)
		applyBatches(data, tbl.replay)
	})
}
