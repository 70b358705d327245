package tier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// The copier's record lists exactly the objects it uploaded other than
// the .log, with the length and CRC-32C of the bytes in the store.
func TestCopierRecordsObjectSums(t *testing.T) {
	m, _, ref, store := setUpTxn(t)
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	kinds := map[controller.ObjectKind]int{}
	for _, s := range segs {
		if !s.Checksummed() {
			t.Fatalf("segment %d has no object sums", s.BaseOffset)
		}
		for k := controller.ObjectIndex; k <= controller.ObjectTxnIndex; k++ {
			b, err := getAll(t.Context(), store, ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, k.String()), 0, -1)
			want, listed := s.Object(k)
			switch {
			case !listed && errors.Is(err, remote.ErrNotFound):
			case !listed || err != nil:
				t.Fatalf("segment %d %s: listed %t, read %v", s.BaseOffset, k, listed, err)
			case sumOf(k, b) != want:
				t.Fatalf("segment %d %s: stored %+v, listed %+v", s.BaseOffset, k, sumOf(k, b), want)
			default:
				kinds[k]++
			}
		}
	}
	for k := controller.ObjectIndex; k <= controller.ObjectTxnIndex; k++ {
		if kinds[k] == 0 {
			t.Errorf("no segment has a %s object: the test proves nothing about it", k)
		}
	}
}

// Every object read back other than the .log is checked: for each kind
// and each read path that reads it, an intact object reads; one with a
// byte flipped, or deleted from the store, is refused with ErrDamaged
// naming the object (never read as absent), and counted; once restored it
// reads again, also through the chunk cache (damaged bytes are not kept).
func TestObjectsChecked(t *testing.T) {
	m, _, ref, store := setUpTxn(t)
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	with := func(t *testing.T, k controller.ObjectKind) controller.RemoteSegmentMeta {
		for _, s := range segs {
			if _, ok := s.Object(k); ok && s.BaseOffset > 0 {
				return s
			}
		}
		t.Fatalf("no segment with a %s", k)
		return controller.RemoteSegmentMeta{}
	}
	type readFunc func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error
	cases := []struct {
		kind controller.ObjectKind
		path string
		read readFunc
	}{
		{controller.ObjectTxnIndex, "TxnIndex", func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error {
			es, err := r.TxnIndex(t.Context(), ref, s)
			if err == nil && len(es) == 0 {
				return errors.New("no aborted transactions from the .txnindex")
			}
			return err
		}},
		{controller.ObjectTxnIndex, "Aborted", func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error {
			_, _, _, _, err := r.Aborted(t.Context(), ref, segs, s.BaseOffset, s.EndOffset+1)
			return err
		}},
		{controller.ObjectSnapshot, "Restart", func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error {
			rs, err := r.Restart(t.Context(), ref, segs, s.EndOffset+1)
			if err == nil && (rs.Segment.SegmentID != s.SegmentID || len(rs.Snapshot) == 0) {
				return fmt.Errorf("restart after segment %d: %+v", s.BaseOffset, rs)
			}
			return err
		}},
		{controller.ObjectIndex, "Read", func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error {
			_, err := r.Read(t.Context(), ref, s, s.EndOffset, 1)
			return err
		}},
		{controller.ObjectIndex, "OffsetForTimestamp", func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error {
			_, _, ok, err := r.OffsetForTimestamp(t.Context(), ref, []controller.RemoteSegmentMeta{s}, 0)
			if err == nil && !ok {
				return errors.New("no record at or after timestamp 0")
			}
			return err
		}},
		{controller.ObjectTimeIndex, "OffsetForTimestamp", func(t *testing.T, r *Reader, s controller.RemoteSegmentMeta) error {
			_, _, _, err := r.OffsetForTimestamp(t.Context(), ref, []controller.RemoteSegmentMeta{s}, 0)
			return err
		}},
	}
	for _, tc := range cases {
		for _, cached := range []bool{false, true} {
			name := tc.kind.String() + "/" + tc.path
			if cached {
				name += "/cached"
			}
			t.Run(name, func(t *testing.T) {
				s := with(t, tc.kind)
				key := ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, tc.kind.String())
				orig, err := getAll(t.Context(), store, key, 0, -1)
				if err != nil {
					t.Fatal(err)
				}
				restore := func() {
					if err := store.Put(context.Background(), key, strings.NewReader(string(orig)), int64(len(orig))); err != nil {
						t.Fatal(err)
					}
				}
				t.Cleanup(restore)
				fresh := func() *Reader {
					r := &Reader{Store: store}
					if cached {
						r.Cache = NewChunkCache(store, 256, 1<<20, 0, context.Background(), goNow)
					}
					return r
				}
				if err := tc.read(t, fresh(), s); err != nil {
					t.Fatalf("intact: %v", err)
				}
				refused := func(how string, r *Reader) {
					t.Helper()
					err := tc.read(t, r, s)
					if !errors.Is(err, ErrDamaged) || errors.Is(err, remote.ErrNotFound) || !strings.Contains(err.Error(), key) {
						t.Fatalf("%s: %v; want ErrDamaged naming %s", how, err, key)
					}
					if r.Damaged() == 0 {
						t.Fatalf("%s: not counted as damaged", how)
					}
				}
				r := fresh()
				for _, off := range []int64{0, int64(len(orig)) - 1} {
					if !store.Corrupt(key, off) {
						t.Fatalf("corrupt %s at %d", key, off)
					}
					refused("flipped byte", r)
					store.Corrupt(key, off) // flip back
				}
				if err := tc.read(t, r, s); err != nil {
					t.Fatalf("restored after a flipped byte: %v", err)
				}
				if err := store.Delete(t.Context(), key); err != nil {
					t.Fatal(err)
				}
				refused("deleted", fresh())
				// Deleted by remote retention while read: the image now
				// has the segment deleting or deleted, or no longer at all.
				r = fresh()
				r.Current = imageWith(segs, s, controller.RemoteCopyFinished)
				refused("deleted, still COPY_FINISHED in the image now", r)
				for _, st := range []controller.RemoteSegmentState{controller.RemoteDeleteStarted, controller.RemoteDeleteFinished, notThere} {
					r := fresh()
					r.Current = imageWith(segs, s, st)
					err := tc.read(t, r, s)
					if !errors.Is(err, ErrSegmentGone) || errors.Is(err, ErrDamaged) || errors.Is(err, remote.ErrNotFound) || r.Damaged() != 0 {
						t.Fatalf("deleted, %v in the image now: %v, %d counted damaged; want ErrSegmentGone, not counted", st, err, r.Damaged())
					}
				}
				// Cut short (the length alone differs at the end).
				if err := store.Put(t.Context(), key, strings.NewReader(string(orig[:len(orig)-1])), int64(len(orig)-1)); err != nil {
					t.Fatal(err)
				}
				refused("cut short", fresh())
				restore()
				if err := tc.read(t, fresh(), s); err != nil {
					t.Fatalf("restored: %v", err)
				}
			})
		}
	}
}

// notThere, as imageWith's state, leaves the segment out of the image.
const notThere controller.RemoteSegmentState = 255

// imageWith is a Reader.Current whose image has segs with s in state st
// (notThere: s not in it at all).
func imageWith(segs []controller.RemoteSegmentMeta, s controller.RemoteSegmentMeta, st controller.RemoteSegmentState) func(controller.TopicPartition) ([]controller.RemoteSegmentMeta, bool) {
	var now []controller.RemoteSegmentMeta
	for _, c := range segs {
		if c.SegmentID == s.SegmentID {
			if st == notThere {
				continue
			}
			c.State = st
		}
		now = append(now, c)
	}
	return func(controller.TopicPartition) ([]controller.RemoteSegmentMeta, bool) { return now, true }
}

// A read of a segment whose .log is missing: a segment deleted meanwhile
// (no longer COPY_FINISHED in the image now) is ErrSegmentGone and not
// counted damaged; one the image still has COPY_FINISHED is the store's
// failure, as before.
func TestReadLogGone(t *testing.T) {
	m, _, ref, store := setUpTxn(t)
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	s := segs[len(segs)-1]
	if err := store.Delete(t.Context(), ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, "log")); err != nil {
		t.Fatal(err)
	}
	for _, cached := range []bool{false, true} {
		for _, st := range []controller.RemoteSegmentState{controller.RemoteCopyFinished, controller.RemoteDeleteStarted, notThere} {
			r := &Reader{Store: store, Current: imageWith(segs, s, st)}
			if cached {
				r.Cache = NewChunkCache(store, 256, 1<<20, 0, context.Background(), goNow)
			}
			_, err := r.Read(t.Context(), ref, s, s.BaseOffset, 1)
			gone := st != controller.RemoteCopyFinished
			if errors.Is(err, ErrSegmentGone) != gone || err == nil || r.Damaged() != 0 {
				t.Errorf("cached %t, %v in the image now: %v (%d counted damaged); want ErrSegmentGone %t", cached, st, err, r.Damaged(), gone)
			}
		}
	}
}

// A segment whose record is from before checksums (no Objects) is read
// unchecked, as before: a missing .txnindex is none, a missing snapshot
// gives no snapshot.
func TestObjectsUncheckedBeforeChecksums(t *testing.T) {
	m, _, ref, store := setUpTxn(t)
	var s controller.RemoteSegmentMeta
	for _, c := range m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID}) {
		if _, ok := c.Object(controller.ObjectTxnIndex); ok {
			s = c
		}
	}
	s.Objects = nil
	key := ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, "txnindex")
	if err := store.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if es, err := (&Reader{Store: store}).TxnIndex(t.Context(), ref, s); err != nil || es != nil {
		t.Fatalf("unchecked segment without its .txnindex: %v, %v", es, err)
	}
}

// With NoChecksums (a rolling upgrade) the copier's COPY_STARTED carries
// no sums, so it encodes as a version-1 record (which nodes from before
// checksums read), and its objects are read unchecked.
func TestCopierNoChecksums(t *testing.T) {
	m, _, ref, store := setUpTxn(t, func(c *Copier) { c.NoChecksums = true })
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	if len(segs) == 0 {
		t.Fatal("nothing copied")
	}
	for _, s := range segs {
		if s.Checksummed() {
			t.Fatalf("segment %d has object sums", s.BaseOffset)
		}
		if rec := controller.Encode(controller.Record{Body: s.RemoteSegment}); rec[2] != 1 {
			t.Fatalf("segment %d: COPY_STARTED at version %d, want 1", s.BaseOffset, rec[2])
		}
	}
	if _, _, _, _, err := (&Reader{Store: store}).Aborted(t.Context(), ref, segs, segs[0].BaseOffset, CopiedEnd(segs)); err != nil {
		t.Fatalf("reading the unchecked copy's aborts: %v", err)
	}
}
