package tier

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// txnBatch is a transactional batch of producer pid at epoch 0 with base
// sequence seq (recordbatch.BuildTxn writes 0).
func txnBatch(pid int64, seq int32, v string) []byte {
	b := recordbatch.BuildTxn([]recordbatch.KV{{Value: []byte(v)}}, 1000, pid, 0)
	const offBaseSequence, offCRC, offAttributes = 53, 17, 21
	b[offBaseSequence], b[offBaseSequence+1], b[offBaseSequence+2], b[offBaseSequence+3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	crc := crc32.Checksum(b[offAttributes:], crc32.MakeTable(crc32.Castagnoli))
	b[offCRC], b[offCRC+1], b[offCRC+2], b[offCRC+3] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return b
}

// setUpTxn is setUp with transactional traffic: producers 1-4 open,
// commit and abort transactions that span several segments, between
// plain batches; every transaction is ended, every sealed segment copied.
func setUpTxn(t *testing.T, opts ...func(*Copier)) (*metadata, *storage.Log, Ref, *remote.MemStore) {
	m := &metadata{t: t, img: &controller.Image{}}
	m.apply(controller.RegisterBroker{ID: 1})
	b, _ := m.img.Broker(1)
	m.apply(controller.UnfenceBroker{ID: 1, Epoch: b.Epoch})
	ref := Ref{Topic: "t", TopicID: [16]byte{0xaa, 2}}
	m.apply(controller.CreateTopic{Name: ref.Topic, ID: ref.TopicID})
	m.apply(controller.CreatePartition{TopicID: ref.TopicID, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes, cfg.RetentionMs, cfg.FS = 600, -1, storage.NewMemFS()
	cfg.IndexIntervalBytes = 100
	cfg.Tier = storage.TierRetention{Enabled: true, LocalRetentionMs: -2, LocalRetentionBytes: -2}
	l, err := storage.Open("/p", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	appendBatch := func(batch []byte) {
		t.Helper()
		info, err := recordbatch.Validate(batch, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, info, 0, 1000); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(4, 5))
	seq := map[int64]int32{}
	open := map[int64]bool{}
	end := func(pid int64, commit bool) {
		if _, err := l.AppendMarker(storage.TxnMarker{ProducerID: pid, Commit: commit}, 0, 1000); err != nil {
			t.Fatal(err)
		}
		open[pid] = false
	}
	for i := range 300 {
		pid := int64(1 + rng.IntN(4))
		switch p := rng.IntN(100); {
		case p < 40:
			appendBatch(txnBatch(pid, seq[pid], fmt.Sprintf("txn-%d-%d", pid, i)))
			seq[pid]++
			open[pid] = true
		case p < 50 && open[pid]:
			end(pid, rng.IntN(3) == 0) // mostly aborts
		default:
			appendBatch(recordbatch.Build([]recordbatch.KV{{Value: []byte(fmt.Sprintf("plain-%d-%s", i, strings.Repeat("x", 20)))}}, 1000))
		}
	}
	for pid := range int64(5) {
		if open[pid] {
			end(pid, false)
		}
	}
	store := remote.NewMemStore()
	c := &Copier{Store: store, Proposer: m}
	for _, o := range opts {
		o(c)
	}
	for range l.SealedSegments() {
		if _, err := c.Run(t.Context(), ref, view(m, l, ref, 1), l); err != nil {
			t.Fatal(err)
		}
	}
	return m, l, ref, store
}

// Reader.Aborted against the local log's own answer
// (storage.Log.AbortedTransactions), for a read of the copy from every
// copied offset, of one batch and of many: the copied segments' .txnindex
// objects give exactly the local answer's entries from segments that were
// copied, and the search either completes there or stops at the copied
// end, after which the local answer has only entries of later segments.
// Segments with and without a .txnindex object are both walked.
func TestAbortedFromStore(t *testing.T) {
	m, l, ref, store := setUpTxn(t)
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	copied := CopiedEnd(segs)
	with := 0
	for _, s := range segs {
		if _, err := store.Get(t.Context(), ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, "txnindex"), 0, -1); err == nil {
			with++
		}
	}
	if copied < 50 || with == 0 || with == len(segs) {
		t.Fatalf("copied end %d; %d of %d segments with a .txnindex: want both kinds", copied, with, len(segs))
	}
	r := &Reader{Store: store}
	spanning, incomplete := 0, 0
	for off := int64(0); off <= copied; off++ {
		seg, _ := SegmentFor(segs, off)
		for _, maxBytes := range []int{1, 1 << 20} {
			data, err := r.Read(t.Context(), ref, seg, off, maxBytes)
			if err != nil || len(data) == 0 {
				t.Fatalf("read %d: %d bytes, %v", off, len(data), err)
			}
			end := storage.ReadEnd(off, data)
			want := l.AbortedTransactions(off, end)
			got, complete, next, walked, err := r.Aborted(t.Context(), ref, segs, off, end)
			if err != nil {
				t.Fatalf("aborted %d-%d: %v", off, end, err)
			}
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) || (complete && len(got) != len(want)) {
				t.Fatalf("aborted for [%d, %d): %+v (complete %t), want %+v", off, end, got, complete, want)
			}
			if !complete {
				incomplete++
				if next != copied+1 {
					t.Fatalf("aborted for [%d, %d): incomplete at %d, before the copied end %d", off, end, next, copied)
				}
				for _, a := range want[len(got):] {
					if a.LastOffset < next {
						t.Fatalf("aborted for [%d, %d): %+v missed in the copy", off, end, a)
					}
				}
			}
			if walked[0].SegmentID != seg.SegmentID {
				t.Fatalf("walk from %d began at segment %d", off, walked[0].BaseOffset)
			}
			for _, a := range want {
				if s, _ := SegmentFor(segs, a.LastOffset); a.FirstOffset < s.BaseOffset && a.FirstOffset >= seg.BaseOffset {
					spanning++ // the abort's marker is in a later segment than its start
				}
			}
		}
	}
	if spanning == 0 {
		t.Fatal("no read's aborted transaction ends in a later segment: the test proves nothing about the walk")
	}
	t.Logf("%d segments copied, %d with a .txnindex; %d answers with a transaction ending in a later segment, %d left to the local log",
		len(segs), with, spanning, incomplete)
}

// A store failure is an error, never "no aborted transactions"; a
// .txnindex the metadata says was not uploaded is none, without a Get (so
// even with the store failing); a damaged one is an error; what was read
// is cached.
func TestTxnIndexErrors(t *testing.T) {
	m, _, ref, store := setUpTxn(t)
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	var withIdx, without controller.RemoteSegmentMeta
	for _, s := range segs {
		if _, err := store.Get(t.Context(), ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, "txnindex"), 0, -1); err == nil {
			withIdx = s
		} else if errors.Is(err, remote.ErrNotFound) {
			without = s
		}
	}
	if withIdx.EndOffset == 0 || without.EndOffset == 0 {
		t.Fatal("want segments with and without a .txnindex")
	}
	r := &Reader{Store: store}
	if es, err := r.TxnIndex(t.Context(), ref, without); err != nil || es != nil {
		t.Fatalf("segment without a .txnindex: %v, %v", es, err)
	}
	if es, err := r.TxnIndex(t.Context(), ref, withIdx); err != nil || len(es) == 0 {
		t.Fatalf("segment with a .txnindex: %v, %v", es, err)
	}

	store.SetFault(fmt.Errorf("%w: injected", remote.ErrUnavailable))
	fresh := &Reader{Store: store} // nothing cached
	if es, err := fresh.TxnIndex(t.Context(), ref, withIdx); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("segment %d with the store failing: %v, %v", withIdx.BaseOffset, es, err)
	}
	if es, err := fresh.TxnIndex(t.Context(), ref, without); err != nil || es != nil {
		t.Fatalf("segment %d without a .txnindex, the store failing: %v, %v", without.BaseOffset, es, err)
	}
	if _, _, _, _, err := fresh.Aborted(t.Context(), ref, segs, withIdx.BaseOffset, withIdx.EndOffset+1); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("Aborted with the store failing: %v", err)
	}
	// What r read before is cached (an attempt's objects never change).
	if es, err := r.TxnIndex(t.Context(), ref, withIdx); err != nil || len(es) == 0 {
		t.Fatalf("cached segment with the store failing: %v, %v", es, err)
	}
	if es, err := r.TxnIndex(t.Context(), ref, without); err != nil || es != nil {
		t.Fatalf("cached segment without a .txnindex, the store failing: %v, %v", es, err)
	}
	store.SetFault(nil)

	key := ObjectKey("", ref.Topic, ref.TopicID, 0, withIdx.BaseOffset, withIdx.SegmentID, "txnindex")
	if !store.Corrupt(key, 0) {
		t.Fatal("corrupt")
	}
	if es, err := fresh.TxnIndex(t.Context(), ref, withIdx); err == nil {
		t.Fatalf("a damaged .txnindex read as %+v", es)
	}
}

// StillCopied refuses a walk over a segment that is no longer
// COPY_FINISHED (or gone) in the image read after it.
func TestStillCopied(t *testing.T) {
	m, _, ref, _ := setUpTxn(t)
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	walked := segs[1:3]
	if err := StillCopied(walked, segs); err != nil {
		t.Fatal(err)
	}
	deleting := slices.Clone(segs)
	deleting[2].State = controller.RemoteDeleteStarted
	if err := StillCopied(walked, deleting); err == nil {
		t.Fatal("a walked segment DELETE_STARTED passed")
	}
	if err := StillCopied(walked, segs[2:]); err == nil {
		t.Fatal("a walked segment gone from the image passed")
	}
}
