package sharepart

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fjordlog/fjord/group"
)

var goldenKey = Key{Group: "g", TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partition: 3}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEncodeGolden pins the byte layout to the schemas in Kafka's
// share-coordinator/src/main/resources/common/message, written out by hand.
func TestEncodeGolden(t *testing.T) {
	batches := []StateBatch{{10, 12, Available, 1}, {13, 13, Archived, 2}}
	snap := EncodeSnapshot(goldenKey, &SnapshotValue{
		SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10,
		CreateTimestamp: 100, WriteTimestamp: 200, DeliveryCompleteCount: 5,
		StateBatches: batches,
	})
	upd := EncodeUpdate(goldenKey, &UpdateValue{
		SnapshotEpoch: 1, LeaderEpoch: 3, StartOffset: 10, DeliveryCompleteCount: -1,
		StateBatches: batches,
	})
	const keyTail = "0001 67 0102030405060708090a0b0c0d0e0f10 00000003"
	const batchesHex = `03
		000000000000000a 000000000000000c 00 0001 00
		000000000000000d 000000000000000d 04 0002 00`
	for _, c := range []struct {
		name     string
		got      Record
		key, val string
	}{
		{"snapshot", snap, "0000" + keyTail, `0000 00000001 00000002 00000003 000000000000000a
			0000000000000064 00000000000000c8` + batchesHex + "01 00 04 00000005"},
		{"update", upd, "0001" + keyTail, `0000 00000001 00000003 000000000000000a` + batchesHex + "00"},
		{"tombstone", Tombstone(goldenKey), "0000" + keyTail, ""},
	} {
		if want := unhex(t, c.key); string(c.got.Key) != string(want) {
			t.Errorf("%s key:\n got %x\nwant %x", c.name, c.got.Key, want)
		}
		want := unhex(t, c.val)
		if c.val == "" {
			want = nil
		}
		if string(c.got.Value) != string(want) || (want == nil) != (c.got.Value == nil) {
			t.Errorf("%s value:\n got %x\nwant %x", c.name, c.got.Value, want)
		}
	}

	d, err := DecodeRecord(snap)
	if err != nil || d.Type != SnapshotRecord || d.Key != goldenKey || d.Snapshot == nil ||
		fmt.Sprint(*d.Snapshot) != fmt.Sprint(SnapshotValue{1, 2, 3, 10, 100, 200, 5, batches}) {
		t.Errorf("snapshot round trip: %+v %v", d, err)
	}
	d, err = DecodeRecord(upd)
	if err != nil || d.Type != UpdateRecord || d.Update == nil ||
		fmt.Sprint(*d.Update) != fmt.Sprint(UpdateValue{1, 3, 10, -1, batches}) {
		t.Errorf("update round trip: %+v %v", d, err)
	}
	d, err = DecodeRecord(Tombstone(goldenKey))
	if err != nil || d.Snapshot != nil || d.Update != nil || d.Key != goldenKey {
		t.Errorf("tombstone round trip: %+v %v", d, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := EncodeUpdate(goldenKey, &UpdateValue{StartOffset: 1, DeliveryCompleteCount: 7, StateBatches: []StateBatch{{1, 2, Archived, 1}}})
	cases := map[string]Record{
		"short key":          {Key: good.Key[:5], Value: good.Value},
		"unknown type":       {Key: append([]byte{0, 9}, good.Key[2:]...), Value: good.Value},
		"key trailing bytes": {Key: append(append([]byte{}, good.Key...), 0), Value: good.Value},
		"null group":         {Key: append([]byte{0, 1, 0xff, 0xff}, good.Key[5:]...), Value: good.Value},
		"value version":      {Key: good.Key, Value: append([]byte{0, 1}, good.Value[2:]...)},
		"short value":        {Key: good.Key, Value: good.Value[:len(good.Value)-3]},
		"value trailing":     {Key: good.Key, Value: append(append([]byte{}, good.Value...), 0)},
		"null batches":       {Key: good.Key, Value: append(append([]byte{}, good.Value[:18]...), 0, 0)},
		"too many batches":   {Key: good.Key, Value: append(append([]byte{}, good.Value[:18]...), 0x7f, 0)},
	}
	for name, r := range cases {
		if _, err := DecodeRecord(r); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	// Unknown tags are skipped; tag 0 is read.
	v := append(append([]byte{}, good.Value[:len(good.Value)-7]...), 2, 0, 4, 0, 0, 0, 9, 5, 2, 0xaa, 0xbb)
	d, err := DecodeRecord(Record{Key: good.Key, Value: v})
	if err != nil || d.Update.DeliveryCompleteCount != 9 {
		t.Errorf("tagged fields: %+v %v", d.Update, err)
	}
}

func TestRestoreKafkaState(t *testing.T) {
	cfg := DefaultConfig()
	snap := func(start int64, le int32, bs ...StateBatch) Record {
		return EncodeSnapshot(testKey, &SnapshotValue{SnapshotEpoch: 4, StateEpoch: 2, LeaderEpoch: le, StartOffset: start, DeliveryCompleteCount: -1, StateBatches: bs})
	}
	upd := func(start int64, bs ...StateBatch) Record {
		return EncodeUpdate(testKey, &UpdateValue{SnapshotEpoch: 4, LeaderEpoch: -1, StartOffset: start, DeliveryCompleteCount: -1, StateBatches: bs})
	}
	for _, c := range []struct {
		name string
		recs []Record
		want string // status, or the error
	}{{
		// Kafka leaves never-delivered records out: 10-14 and 18-19 are
		// unknown, available, to be fetched again.
		name: "gaps between batches",
		recs: []Record{snap(10, 1, StateBatch{15, 17, Acknowledged, 1}, StateBatch{20, 21, Available, 2})},
		want: "> spso=10 speo=22 next=10 deadline=-1 [10-14 AVL x0] [15-17 ACK x1] [18-19 AVL x0] [20-21 AVL x2]",
	}, {
		// Overlaps: the higher delivery count wins, then the higher state;
		// the update's start offset drops what is below it, and SPSO then
		// moves past the acknowledged 2.
		name: "updates merged",
		recs: []Record{
			snap(0, 1, StateBatch{0, 9, Available, 1}),
			upd(-1, StateBatch{2, 4, Acknowledged, 1}),
			upd(-1, StateBatch{3, 6, Available, 2}),
			upd(1, StateBatch{0, 1, Archived, 1}),
			upd(-1, StateBatch{8, 8, Archived, 1}, StateBatch{9, 9, Acquired, 3}),
		},
		want: "> spso=3 speo=10 next=3 deadline=-1 [3-6 AVL x2] [7 AVL x1] [8 ARC x1] [9 AVL x3]",
	}, {
		name: "done head moves SPSO",
		recs: []Record{snap(5, 1, StateBatch{5, 7, Archived, 1}, StateBatch{8, 8, Acknowledged, 2})},
		want: "> spso=9 speo=9 next=9 deadline=-1",
	}, {
		name: "update without snapshot",
		recs: []Record{upd(3, StateBatch{3, 4, Available, 1})},
		want: "> spso=3 speo=5 next=3 deadline=-1 [3-4 AVL x1]",
	}, {
		name: "tombstone then snapshot",
		recs: []Record{snap(0, 1, StateBatch{0, 4, Available, 1}), Tombstone(testKey), snap(7, 1)},
		want: "> spso=7 speo=7 next=7 deadline=-1",
	}, {
		name: "tombstone",
		recs: []Record{snap(0, 1), Tombstone(testKey)},
		want: "sharepart: no share-partition state: " + testKey.String(),
	}, {
		name: "uninitialized",
		recs: []Record{snap(-1, 1)},
		want: "sharepart: no share-partition state: " + testKey.String(),
	}, {
		name: "nothing",
		want: "sharepart: no share-partition state: " + testKey.String(),
	}, {
		name: "newer leader",
		recs: []Record{snap(0, 9)},
		want: "sharepart: " + testKey.String() + ": state written under leader epoch 9, newer than 5: group: not leader or follower",
	}, {
		name: "other key",
		recs: []Record{EncodeSnapshot(goldenKey, &SnapshotValue{})},
		want: "sharepart: corrupt share state record: record for " + goldenKey.String() + " (restoring " + testKey.String() + ", record 0)",
	}, {
		name: "bad batch",
		recs: []Record{snap(0, 1, StateBatch{5, 4, Available, 1})},
		want: "sharepart: corrupt share state record: state batch [5, 4] (restoring " + testKey.String() + ", record 0)",
	}, {
		name: "bad state",
		recs: []Record{snap(0, 1, StateBatch{5, 5, 3, 1})},
		want: "sharepart: corrupt share state record: state batch [5, 5]: delivery state 3 (restoring " + testKey.String() + ", record 0)",
	}} {
		p, out, err := Restore(testKey, cfg, 5, 1000, c.recs)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = status(p)
			if err := p.checkInvariants(); err != nil {
				t.Errorf("%s: invariants: %v", c.name, err)
			}
			if err := restoresTo(p, append(c.recs, out...)); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			if d, _ := DecodeRecord(out[0]); d.Snapshot == nil || d.Snapshot.LeaderEpoch != 5 || d.Snapshot.SnapshotEpoch != 5 ||
				d.Snapshot.StateEpoch != p.StateEpoch() {
				t.Errorf("%s: restore wrote %s", c.name, describeRecord(out[0]))
			}
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	// The wrapped errors classify.
	_, _, err := Restore(testKey, cfg, 5, 0, []Record{snap(0, 9)})
	if !errors.Is(err, group.ErrNotLeaderOrFollower) || group.ErrorCode(err) != 6 {
		t.Errorf("fenced: %v", err)
	}
	if _, _, err := Restore(testKey, cfg, 5, 0, nil); !errors.Is(err, ErrNoState) {
		t.Errorf("no state: %v", err)
	}
}

// TestRestoreAfterLowerLimits: a state written under larger limits is still
// served within the new ones.
func TestRestoreAfterLowerLimits(t *testing.T) {
	rec := EncodeSnapshot(testKey, &SnapshotValue{LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1,
		StateBatches: []StateBatch{{0, 99, Available, 1}, {100, 100, Available, 3}}})
	cfg := Config{PartitionMaxRecordLocks: 10, DeliveryCountLimit: 3}
	p, _, err := Restore(testKey, cfg, 1, 0, []Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := p.Acquire(0, "a", Fetch{From: 0, End: 200, Records: []Range{{0, 199}}, MaxRecords: 500})
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 9 || p.CanAcquire() {
		t.Fatalf("acquired %v, can acquire %v", got, p.CanAcquire())
	}
	// 100 has reached the lower delivery limit: archived when reached.
	p.ReleaseMember(0, "a")
	got, _ = p.Acquire(0, "a", Fetch{From: 100, End: 101, Records: []Range{{100, 100}}, MaxRecords: 500})
	if len(got) != 0 || p.runs[p.find(100)].state != Archived {
		t.Fatalf("acquired %v; %s", got, status(p))
	}
	if err := p.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestParseAutoOffsetReset(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "latest",
		"latest":                   "latest",
		"EARLIEST":                 "earliest",
		"by_duration:PT1H":         "by_duration:PT3600S",
		"by_duration:P1DT2H3M4.5S": "by_duration:PT93784.5S",
		"BY_DURATION:pt0s":         "by_duration:PT0S",
		"by_duration:PT-1S":        "error",
		"by_duration:-PT1S":        "error",
		"by_duration:PT":           "error",
		"by_duration:P":            "error",
		"by_duration:1H":           "error",
		"none":                     "error",
	} {
		r, err := ParseAutoOffsetReset(in)
		got := r.String()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("%q: got %s (%v), want %s", in, got, err, want)
		}
	}
	r, _ := ParseAutoOffsetReset("by_duration:PT10S")
	if r.Duration != 10*time.Second || r.Timestamp(60000) != 50000 {
		t.Errorf("by_duration: %+v %d", r, r.Timestamp(60000))
	}
	if (AutoOffsetReset{Kind: ResetEarliest}).Timestamp(5) != -2 || (AutoOffsetReset{}).Timestamp(5) != -1 {
		t.Error("earliest/latest timestamps")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	err := Config{RecordLockDurationMs: -1, DeliveryCountLimit: -1, PartitionMaxRecordLocks: -1, SnapshotUpdateRecordsPerSnapshot: -1}.Validate()
	for _, name := range []string{"lock.duration", "delivery.count", "max.record.locks", "per.snapshot"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("want an error about %s, got %v", name, err)
		}
	}
}

// fuzzRecords cuts data into records for testKey: a flags byte (bit 0:
// update, bit 1: tombstone), a big-endian uint16 length, the value.
func fuzzRecords(data []byte) []Record {
	var recs []Record
	for len(data) >= 3 {
		flags, n := data[0], int(binary.BigEndian.Uint16(data[1:3]))
		data = data[3:]
		n = min(n, len(data))
		r := Record{Key: EncodeKey(RecordType(flags&1), testKey), Value: data[:n]}
		if flags&2 != 0 {
			r = Tombstone(testKey)
		}
		data = data[n:]
		recs = append(recs, r)
	}
	return recs
}

func fuzzFrame(recs []Record) []byte {
	var b []byte
	for _, r := range recs {
		t, _, _ := DecodeKey(r.Key)
		flags := byte(t)
		if r.Value == nil {
			flags |= 2
		}
		b = append(b, flags)
		b = binary.BigEndian.AppendUint16(b, uint16(len(r.Value)))
		b = append(b, r.Value...)
	}
	return b
}

// FuzzRestore feeds arbitrary bytes to Restore as stored records: it must
// return an error or a Partition that keeps its invariants and can serve.
func FuzzRestore(f *testing.F) {
	for seed := range int64(3) {
		var recs []Record
		p, r := New(testKey, Config{SnapshotUpdateRecordsPerSnapshot: 4}, Init{LeaderEpoch: 1}, 0)
		recs = append(recs, r...)
		_, r = p.Acquire(0, "a", Fetch{From: 0, End: 20 + seed, Records: []Range{{0, 4}, {7, 9 + seed}}, MaxRecords: 10})
		recs = append(recs, r...)
		r, _ = p.Acknowledge(1, "a", []AckBatch{{First: 1, Last: 3, Types: []int8{1, 2, 3}}})
		recs = append(recs, r...)
		f.Add(fuzzFrame(recs))
	}
	f.Add([]byte{0, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs := fuzzRecords(data)
		cfg := Config{PartitionMaxRecordLocks: 20, DeliveryCountLimit: 3}
		p, out, err := Restore(testKey, cfg, 1, 0, recs)
		if err != nil {
			return
		}
		if err := p.checkInvariants(); err != nil {
			t.Fatalf("invariants after restore: %v", err)
		}
		if err := restoresTo(p, append(recs, out...)); err != nil {
			t.Fatal(err)
		}
		// It serves.
		from := p.NextFetchOffset()
		p.Acquire(1, "a", Fetch{From: from, End: from + 50, Records: []Range{{from, from + 40}}, MaxRecords: 30})
		for _, b := range p.Batches() {
			if b.State == Acquired {
				p.Acknowledge(2, "a", []AckBatch{{First: b.First, Last: b.Last, Types: []int8{AckAccept}}})
				break
			}
		}
		p.Tick(1 << 40)
		if err := p.checkInvariants(); err != nil {
			t.Fatalf("invariants after serving: %v", err)
		}
	})
}

// FuzzDecodeRecord: any key and value decode or fail with ErrCorrupt.
func FuzzDecodeRecord(f *testing.F) {
	good := EncodeUpdate(goldenKey, &UpdateValue{StartOffset: 1, DeliveryCompleteCount: 7, StateBatches: []StateBatch{{1, 2, Archived, 1}}})
	f.Add(good.Key, good.Value)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if _, err := DecodeRecord(Record{Key: key, Value: value}); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
	})
}
