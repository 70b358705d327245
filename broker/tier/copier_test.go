package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// metadata is the metadata log as the copier meets it: proposals decided
// by the controller's own DecideRemoteSegment and applied to an image
// through the record codec, as the quorum does.
type metadata struct {
	t     *testing.T
	img   *controller.Image
	index uint64
}

func (m *metadata) apply(b controller.Body) {
	m.t.Helper()
	if code := m.applyRecord(controller.NewRecord(b)); code != 0 {
		m.t.Fatalf("%v: %d", b, code)
	}
}

func (m *metadata) applyRecord(r controller.Record) int16 {
	d, err := controller.Decode(controller.Encode(r))
	if err != nil {
		m.t.Fatal(err)
	}
	m.index++
	next, err := m.img.Apply(m.index, d)
	if err != nil {
		m.t.Fatalf("apply %v: %v", r, err)
	}
	m.img = next
	return 0
}

func (m *metadata) Propose(_ context.Context, r controller.Record) (int16, error) {
	var p controller.RemoteProposal
	switch b := r.Body.(type) {
	case controller.RemoteSegment:
		p = controller.RemoteProposal{Start: &b}
	case controller.RemoteSegmentStateChange:
		p = controller.RemoteProposal{Change: &b}
	}
	if b, ok := m.img.Broker(1); ok {
		p.BrokerEpoch = b.Epoch
	}
	rec, code := controller.DecideRemoteSegment(m.img, p)
	if code != 0 {
		return code, nil
	}
	return m.applyRecord(rec), nil
}

// setUp: broker 1 registered, topic t (one partition, broker 1 leading),
// a local log of several sealed segments with leader epoch 0.
func setUp(t *testing.T) (*metadata, *storage.Log, Ref, [][]byte) {
	m := &metadata{t: t, img: &controller.Image{}}
	m.apply(controller.RegisterBroker{ID: 1})
	b, _ := m.img.Broker(1)
	m.apply(controller.UnfenceBroker{ID: 1, Epoch: b.Epoch})
	ref := Ref{Topic: "t", TopicID: [16]byte{0xaa, 1}}
	m.apply(controller.CreateTopic{Name: ref.Topic, ID: ref.TopicID})
	m.apply(controller.CreatePartition{TopicID: ref.TopicID, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})

	cfg := storage.DefaultConfig()
	cfg.SegmentBytes, cfg.RetentionMs, cfg.FS = 400, -1, storage.NewMemFS()
	cfg.Tier = storage.TierRetention{Enabled: true, LocalRetentionMs: -2, LocalRetentionBytes: -2}
	l, err := storage.Open("/p", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l.SetRemoteCopiedEnd(func() int64 { return m.img.RemoteCopiedEnd(controller.TopicPartition{TopicID: ref.TopicID}) })
	t.Cleanup(func() { l.Close() })
	var values [][]byte
	for i := range 20 {
		v := []byte(fmt.Sprintf("value-%03d-%s", i, strings.Repeat("x", 40)))
		batch := recordbatch.Build([]recordbatch.KV{{Value: v}}, int64(1000+i))
		info, err := recordbatch.Validate(batch, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(batch, info, 0, int64(1000+i)); err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	if n := len(l.SealedSegments()); n < 3 {
		t.Fatalf("%d sealed segments, want several", n)
	}
	return m, l, ref, values
}

func view(m *metadata, l *storage.Log, ref Ref, broker int32) Partition {
	pt, _ := m.img.Partition(ref.TopicID, ref.Partition)
	p := Partition{Broker: broker, Leader: pt.Leader == broker, LeaderEpoch: pt.LeaderEpoch, Enabled: true,
		HighWatermark: l.EndOffset(), LastStable: l.EndOffset(), RetentionMs: -1, RetentionBytes: -1, Now: 5000,
		Remote: m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID, Partition: ref.Partition})}
	for _, s := range l.SealedSegments() {
		p.Sealed = append(p.Sealed, LocalSegment{Base: s.Base, Last: s.Last, Size: s.Size, MaxTimestamp: s.MaxTimestamp})
	}
	return p
}

// storedValues decodes every record value of the partition's
// COPY_FINISHED .log objects, in offset order.
func storedValues(t *testing.T, store remote.Store, m *metadata, ref Ref) (vals [][]byte) {
	t.Helper()
	for _, s := range m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID}) {
		if s.State != controller.RemoteCopyFinished {
			continue
		}
		r, err := store.Get(t.Context(), ObjectKey("", ref.Topic, ref.TopicID, ref.Partition, s.BaseOffset, s.SegmentID, "log"), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil || int64(len(b)) != s.SizeBytes {
			t.Fatalf("segment %d: %d bytes of %d, %v", s.BaseOffset, len(b), s.SizeBytes, err)
		}
		for len(b) > 0 {
			info, err := recordbatch.ParseHeader(b)
			if err != nil {
				t.Fatalf("segment %d: %v", s.BaseOffset, err)
			}
			err = recordbatch.EachRecord(b[:info.Bytes], info, func(r recordbatch.Record) bool {
				vals = append(vals, r.Value)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			b = b[info.Bytes:]
		}
	}
	return vals
}

// The leader copies every sealed segment below the high watermark, one
// per round, each as COPY_STARTED → objects → COPY_FINISHED; the records
// in the store are those appended, in order.
func TestCopierUploads(t *testing.T) {
	m, l, ref, values := setUp(t)
	store := remote.NewMemStore()
	c := &Copier{Store: store, Proposer: m}
	sealed := l.SealedSegments()
	for range sealed {
		done, err := c.Run(t.Context(), ref, view(m, l, ref, 1), l)
		if err != nil || len(done) != 1 || done[0].Kind != Upload {
			t.Fatalf("round: %v, %v", done, err)
		}
	}
	if done, err := c.Run(t.Context(), ref, view(m, l, ref, 1), l); err != nil || len(done) != 0 {
		t.Fatalf("all copied, yet: %v, %v", done, err)
	}
	tp := controller.TopicPartition{TopicID: ref.TopicID}
	if end := m.img.RemoteCopiedEnd(tp); end != sealed[len(sealed)-1].Last {
		t.Fatalf("copied end %d, want %d", end, sealed[len(sealed)-1].Last)
	}
	// .log, .index, .timeindex, .snapshot (a tiered log keeps the one at
	// each segment's end until the segment is copied), and
	// .leader-epoch-checkpoint per segment.
	if n := store.Len(); n != 5*len(sealed) {
		t.Fatalf("%d objects for %d segments", n, len(sealed))
	}
	for _, s := range m.img.RemoteSegments(tp) {
		key := ObjectKey("", ref.Topic, ref.TopicID, 0, s.BaseOffset, s.SegmentID, "snapshot")
		r, err := store.Get(t.Context(), key, 0, -1)
		if err != nil {
			t.Fatalf("segment %d: no producer snapshot: %v", s.BaseOffset, err)
		}
		r.Close()
	}
	got := storedValues(t, store, m, ref)
	if len(got) != int(sealed[len(sealed)-1].Last+1) {
		t.Fatalf("%d records in the store, want %d", len(got), sealed[len(sealed)-1].Last+1)
	}
	for i, v := range got {
		if string(v) != string(values[i]) {
			t.Fatalf("record %d: %q, want %q", i, v, values[i])
		}
	}
	mt := c.Metrics()
	if mt.SegmentsUploaded != int64(len(sealed)) || mt.BytesUploaded == 0 {
		t.Fatalf("metrics %+v", mt)
	}
	// A follower plans nothing.
	if done, err := c.Run(t.Context(), ref, view(m, l, ref, 2), l); err != nil || len(done) != 0 {
		t.Fatalf("follower: %v, %v", done, err)
	}
}

// A store that fails mid-upload leaves a COPY_STARTED attempt with some of
// its objects; the next round abandons it (DELETE_STARTED, its objects
// deleted, DELETE_FINISHED) and copies the segment again under a new id.
// Readers never see the partial attempt: it is never COPY_FINISHED.
func TestCopierRecoversAFailedUpload(t *testing.T) {
	m, l, ref, _ := setUp(t)
	store := &failAfter{MemStore: remote.NewMemStore(), puts: 2}
	c := &Copier{Store: store, Proposer: m}
	_, err := c.Run(t.Context(), ref, view(m, l, ref, 1), l)
	if !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("run with a failing store: %v", err)
	}
	tp := controller.TopicPartition{TopicID: ref.TopicID}
	segs := m.img.RemoteSegments(tp)
	if len(segs) != 1 || segs[0].State != controller.RemoteCopyStarted || store.Len() != 2 {
		t.Fatalf("after the failure: %+v, %d objects", segs, store.Len())
	}
	if m.img.RemoteCopiedEnd(tp) != -1 {
		t.Fatal("a partial attempt is readable")
	}
	failed := segs[0].SegmentID
	store.puts = -1 // the store is back
	done, err := c.Run(t.Context(), ref, view(m, l, ref, 1), l)
	if err != nil || len(done) != 1 || done[0].Kind != Abandon {
		t.Fatalf("clean-up round: %v, %v", done, err)
	}
	if n := store.Len(); n != 0 {
		t.Fatalf("%d objects of the abandoned attempt left", n)
	}
	if done, err = c.Run(t.Context(), ref, view(m, l, ref, 1), l); err != nil || len(done) != 1 || done[0].Kind != Upload {
		t.Fatalf("retry round: %v, %v", done, err)
	}
	segs = m.img.RemoteSegments(tp)
	if len(segs) != 1 || segs[0].State != controller.RemoteCopyFinished || segs[0].SegmentID == failed {
		t.Fatalf("after the retry: %+v", segs)
	}
	if c.Metrics().Errors["unavailable"] != 1 {
		t.Fatalf("errors %v", c.Metrics().Errors)
	}
}

// A leader change mid-upload: broker 1's attempt stays COPY_STARTED; the
// old leader can no longer finish it (the controller fences its epoch);
// the new leader, broker 2, abandons it and copies the segment anew.
func TestCopierLeaderChangeMidUpload(t *testing.T) {
	m, l, ref, _ := setUp(t)
	m.apply(controller.RegisterBroker{ID: 2})
	b2, _ := m.img.Broker(2)
	m.apply(controller.UnfenceBroker{ID: 2, Epoch: b2.Epoch})
	store := &failAfter{MemStore: remote.NewMemStore(), puts: 1}
	old := &Copier{Store: store, Proposer: m}
	if _, err := old.Run(t.Context(), ref, view(m, l, ref, 1), l); err == nil {
		t.Fatal("the old leader's upload did not stop")
	}
	tp := controller.TopicPartition{TopicID: ref.TopicID}
	attempt := m.img.RemoteSegments(tp)[0]
	m.apply(controller.ChangeReplicas{TopicID: ref.TopicID, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2})
	pt, _ := m.img.Partition(ref.TopicID, 0)
	code, _ := (&epochProposer{m, b2.Epoch}).Propose(t.Context(), controller.NewRecord(controller.RemoteSegmentStateChange{
		TopicID: ref.TopicID, SegmentID: attempt.SegmentID, State: controller.RemoteCopyFinished, Broker: 1, LeaderEpoch: attempt.LeaderEpoch}))
	if code == 0 {
		t.Fatal("the old leader finished its attempt after the leader change")
	}
	store.puts = -1
	next := &Copier{Store: store, Proposer: &epochProposer{m, b2.Epoch}}
	v := view(m, l, ref, 2)
	if !v.Leader || v.LeaderEpoch != pt.LeaderEpoch {
		t.Fatalf("broker 2 does not lead: %+v", pt)
	}
	if done, err := next.Run(t.Context(), ref, v, l); err != nil || len(done) != 1 || done[0].Kind != Abandon {
		t.Fatalf("new leader's first round: %v, %v", done, err)
	}
	if done, err := next.Run(t.Context(), ref, view(m, l, ref, 2), l); err != nil || len(done) != 1 || done[0].Kind != Upload {
		t.Fatalf("new leader's second round: %v, %v", done, err)
	}
	segs := m.img.RemoteSegments(tp)
	if len(segs) != 1 || segs[0].State != controller.RemoteCopyFinished || segs[0].Broker != 2 {
		t.Fatalf("after the new leader: %+v", segs)
	}
}

// epochProposer proposes as a given broker epoch (broker 2's).
type epochProposer struct {
	m     *metadata
	epoch int64
}

func (e *epochProposer) Propose(_ context.Context, r controller.Record) (int16, error) {
	var p controller.RemoteProposal
	switch b := r.Body.(type) {
	case controller.RemoteSegment:
		p.Start = &b
	case controller.RemoteSegmentStateChange:
		p.Change = &b
	}
	p.BrokerEpoch = e.epoch
	rec, code := controller.DecideRemoteSegment(e.m.img, p)
	if code != 0 {
		return code, nil
	}
	return e.m.applyRecord(rec), nil
}

// failAfter is a MemStore whose Puts fail (unavailable) after puts
// successful ones; puts < 0: never.
type failAfter struct {
	*remote.MemStore
	puts int
}

func (f *failAfter) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if f.puts == 0 {
		return fmt.Errorf("%w: injected", remote.ErrUnavailable)
	}
	f.puts--
	return f.MemStore.Put(ctx, key, body, size)
}

// Reader, the read path's interface: every copied offset is found in its
// segment and read back from the store as whole batches starting at the
// one holding it, with the values appended.
func TestReader(t *testing.T) {
	m, l, ref, values := setUp(t)
	store := remote.NewMemStore()
	c := &Copier{Store: store, Proposer: m}
	for range l.SealedSegments() {
		if _, err := c.Run(t.Context(), ref, view(m, l, ref, 1), l); err != nil {
			t.Fatal(err)
		}
	}
	segs := m.img.RemoteSegments(controller.TopicPartition{TopicID: ref.TopicID})
	end := CopiedEnd(segs)
	if end < 3 {
		t.Fatalf("copied end %d", end)
	}
	r := &Reader{Store: store}
	for off := int64(0); off <= end; off++ {
		seg, ok := SegmentFor(segs, off)
		if !ok {
			t.Fatalf("offset %d: no segment", off)
		}
		for _, maxBytes := range []int{1, 1 << 20} {
			data, err := r.Read(t.Context(), ref, seg, off, maxBytes)
			if err != nil || len(data) == 0 {
				t.Fatalf("offset %d: %d bytes, %v", off, len(data), err)
			}
			info, err := recordbatch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			base := recordbatch.BaseOffset(data)
			if base > off || base+int64(info.LastDelta) < off {
				t.Fatalf("offset %d: first batch [%d, %d]", off, base, base+int64(info.LastDelta))
			}
			if maxBytes == 1 && len(data) != info.Bytes {
				t.Fatalf("offset %d: maxBytes 1 gave %d bytes, want the first batch's %d", off, len(data), info.Bytes)
			}
			recordbatch.EachRecord(data[:info.Bytes], info, func(rec recordbatch.Record) bool {
				if o := base + int64(rec.OffsetDelta); string(rec.Value) != string(values[o]) {
					t.Fatalf("offset %d: %q, want %q", o, rec.Value, values[o])
				}
				return true
			})
		}
	}
	if _, ok := SegmentFor(segs, end+1); ok {
		t.Fatal("a segment for an offset not copied")
	}
}
