package tier

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
)

// Log is what a Copier reads of a partition's local log (storage.Log).
type Log interface {
	SealedSegments() []storage.SealedSegment
	OpenSegmentFile(base int64, ext string) (storage.File, int64, error)
	ProducerSnapshot(end int64) ([]byte, error)
	EpochsIn(base, last int64) []storage.EpochStart
}

// Proposer proposes one remote segment record to the active controller
// (ctllink.Client.RemoteLogSegment) and returns once it is committed and
// applied to this broker's image, or refused: code is the controller's
// (0: applied). An error means the outcome is unknown (the controller
// unreachable until ctx ended): the next round reads the image again.
type Proposer interface {
	Propose(ctx context.Context, rec controller.Record) (code int16, err error)
}

// Ref names a partition for a Copier: its topic's name and id and the
// partition, which the object keys hold.
type Ref struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// Copier carries out Plan's actions for partitions this broker leads: the
// I/O half of the remote log manager. One Copier serves every partition;
// Run for one partition is called by one goroutine at a time (the
// manager's per-partition task), and different partitions' runs may
// overlap (bounded by the manager).
type Copier struct {
	Store    remote.Store
	Prefix   string // rsm.config key prefix of every object
	Proposer Proposer
	Log      zerolog.Logger
	// NoChecksums leaves the objects' sums out of COPY_STARTED, which is
	// then a version-1 record that nodes from before checksums can read
	// (a rolling upgrade); its objects are read unchecked.
	NoChecksums bool

	// Counters, for Prometheus (broker/metrics reads Metrics).
	bytesUploaded atomic.Int64
	segsUploaded  atomic.Int64
	segsDeleted   atomic.Int64
	errs          [len(errKinds)]atomic.Int64
}

// errKinds are remote.Kind's values, and "refused" for a proposal the
// controller refused.
var errKinds = [...]string{"not_found", "access_denied", "no_bucket", "unavailable", "canceled", "other", "refused"}

// ErrorKinds lists the kinds Metrics.Errors counts. Read-only.
var ErrorKinds = errKinds[:]

// Metrics is a snapshot of a Copier's counters.
type Metrics struct {
	BytesUploaded    int64            // object bytes Put for finished and unfinished attempts
	SegmentsUploaded int64            // attempts that reached COPY_FINISHED
	SegmentsDeleted  int64            // attempts that reached DELETE_FINISHED
	Errors           map[string]int64 // by remote.Kind, and "refused"
}

// Metrics returns the counters.
func (c *Copier) Metrics() Metrics {
	m := Metrics{BytesUploaded: c.bytesUploaded.Load(), SegmentsUploaded: c.segsUploaded.Load(),
		SegmentsDeleted: c.segsDeleted.Load(), Errors: map[string]int64{}}
	for i, k := range errKinds {
		m.Errors[k] = c.errs[i].Load()
	}
	return m
}

func (c *Copier) countErr(kind string) {
	for i, k := range errKinds {
		if k == kind {
			c.errs[i].Add(1)
			return
		}
	}
}

// errRefused is a proposal the controller refused; it wraps the Kafka
// error.
var errRefused = errors.New("tier: proposal refused")

// Run plans p and carries out its actions in order, stopping at the first
// failure (the next round plans again from the image). It returns the
// actions done and that failure.
func (c *Copier) Run(ctx context.Context, ref Ref, p Partition, log Log) (done []Action, err error) {
	for _, a := range Plan(p) {
		switch a.Kind {
		case Abandon, Expire:
			if err = c.propose(ctx, controller.RemoteSegmentStateChange{TopicID: ref.TopicID, Partition: ref.Partition,
				SegmentID: a.Remote.SegmentID, State: controller.RemoteDeleteStarted, Broker: p.Broker, LeaderEpoch: p.LeaderEpoch}); err != nil {
				return done, err
			}
			fallthrough
		case FinishDelete:
			if err = c.deleteObjects(ctx, ref, a.Remote.BaseOffset, a.Remote.SegmentID); err != nil {
				return done, err
			}
			if err = c.propose(ctx, controller.RemoteSegmentStateChange{TopicID: ref.TopicID, Partition: ref.Partition,
				SegmentID: a.Remote.SegmentID, State: controller.RemoteDeleteFinished, Broker: p.Broker, LeaderEpoch: p.LeaderEpoch}); err != nil {
				return done, err
			}
			c.segsDeleted.Add(1)
		case Upload:
			if err = c.upload(ctx, ref, p, a.Local, log); err != nil {
				return done, err
			}
		}
		done = append(done, a)
	}
	return done, nil
}

// upload copies one segment as a new attempt: COPY_STARTED, the objects,
// COPY_FINISHED. A failure after COPY_STARTED leaves the attempt for the
// next round to abandon (its Plan sees a COPY_STARTED entry not in
// flight), which deletes whatever objects were put.
func (c *Copier) upload(ctx context.Context, ref Ref, p Partition, s LocalSegment, log Log) error {
	var id [16]byte
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // UUID version 4
	id[8] = id[8]&0x3f | 0x80
	epochs := log.EpochsIn(s.Base, s.Last)
	if len(epochs) == 0 {
		return fmt.Errorf("tier: %s-%d segment %d: no leader epoch for its offsets", ref.Topic, ref.Partition, s.Base)
	}
	les := make([]controller.EpochStart, len(epochs))
	for i, e := range epochs {
		les[i] = controller.EpochStart{Epoch: e.Epoch, StartOffset: e.Start}
	}
	// The objects other than the .log are read whole before COPY_STARTED,
	// so the record holds the length and CRC of exactly the bytes then
	// uploaded (objects.go). Memory: at most segment.index.bytes for each
	// index, and the snapshot, per partition being copied (the manager
	// bounds how many at a time).
	objects, err := sealedObjects(log, s, epochs)
	if err != nil {
		return fmt.Errorf("tier: %s-%d segment %d: %w", ref.Topic, ref.Partition, s.Base, err)
	}
	var sums []controller.ObjectSum
	if !c.NoChecksums {
		sums = make([]controller.ObjectSum, len(objects))
		for i, o := range objects {
			sums[i] = sumOf(o.kind, o.data)
		}
	}
	start := controller.RemoteSegment{TopicID: ref.TopicID, Partition: ref.Partition, SegmentID: id,
		BaseOffset: s.Base, EndOffset: s.Last, MaxTimestamp: s.MaxTimestamp, SizeBytes: s.Size,
		LeaderEpochs: les, Broker: p.Broker, LeaderEpoch: p.LeaderEpoch, Objects: sums}
	if err := c.propose(ctx, start); err != nil {
		return err
	}
	key := func(suffix string) string {
		return ObjectKey(c.Prefix, ref.Topic, ref.TopicID, ref.Partition, s.Base, id, suffix)
	}
	f, size, err := log.OpenSegmentFile(s.Base, ".log")
	if err != nil {
		return fmt.Errorf("tier: %s-%d segment %d: %w", ref.Topic, ref.Partition, s.Base, err)
	}
	err = c.put(ctx, key("log"), io.NewSectionReader(f, 0, size), size)
	f.Close()
	if err != nil {
		return err
	}
	for _, o := range objects {
		if err := c.put(ctx, key(o.kind.String()), bytes.NewReader(o.data), int64(len(o.data))); err != nil {
			return err
		}
	}
	if err := c.propose(ctx, controller.RemoteSegmentStateChange{TopicID: ref.TopicID, Partition: ref.Partition,
		SegmentID: id, State: controller.RemoteCopyFinished, Broker: p.Broker, LeaderEpoch: p.LeaderEpoch}); err != nil {
		return err
	}
	c.segsUploaded.Add(1)
	return nil
}

// sealedObject is one object of a segment other than its .log, read
// before the upload.
type sealedObject struct {
	kind controller.ObjectKind
	data []byte
}

// sealedObjects reads segment s's objects other than the .log, in
// ObjectKind order (as the record lists them): its .index and .timeindex,
// the producer snapshot at its end and its .txnindex when the log has
// them, and the leader-epoch checkpoint of epochs.
func sealedObjects(log Log, s LocalSegment, epochs []storage.EpochStart) ([]sealedObject, error) {
	var out []sealedObject
	file := func(k controller.ObjectKind, ext string) error {
		f, size, err := log.OpenSegmentFile(s.Base, ext)
		if errors.Is(err, os.ErrNotExist) {
			return nil // e.g. no aborted transactions: no .txnindex
		}
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, size)
		if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
			return fmt.Errorf("%s: %w", ext, err)
		}
		out = append(out, sealedObject{k, b})
		return nil
	}
	if err := file(controller.ObjectIndex, ".index"); err != nil {
		return nil, err
	}
	if err := file(controller.ObjectTimeIndex, ".timeindex"); err != nil {
		return nil, err
	}
	if snap, err := log.ProducerSnapshot(s.Last + 1); err == nil {
		out = append(out, sealedObject{controller.ObjectSnapshot, snap})
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("producer snapshot: %w", err)
	}
	out = append(out, sealedObject{controller.ObjectEpochCheckpoint, epochCheckpoint(epochs)})
	if err := file(controller.ObjectTxnIndex, ".txnindex"); err != nil {
		return nil, err
	}
	return out, nil
}

// epochCheckpoint is Kafka's leader-epoch-checkpoint text of entries:
// version 0, the count, then "epoch start" lines.
func epochCheckpoint(es []storage.EpochStart) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.Start)
	}
	return b.Bytes()
}

func (c *Copier) put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := c.Store.Put(ctx, key, body, size); err != nil {
		c.countErr(remote.Kind(err))
		return fmt.Errorf("tier: put %s: %w", key, err)
	}
	c.bytesUploaded.Add(size)
	return nil
}

// deleteObjects deletes every object an attempt may have put.
func (c *Copier) deleteObjects(ctx context.Context, ref Ref, base int64, id [16]byte) error {
	for _, suffix := range Suffixes {
		key := ObjectKey(c.Prefix, ref.Topic, ref.TopicID, ref.Partition, base, id, suffix)
		if err := c.Store.Delete(ctx, key); err != nil {
			c.countErr(remote.Kind(err))
			return fmt.Errorf("tier: delete %s: %w", key, err)
		}
	}
	return nil
}

func (c *Copier) propose(ctx context.Context, b controller.Body) error {
	code, err := c.Proposer.Propose(ctx, controller.NewRecord(b))
	if err != nil {
		return fmt.Errorf("tier: proposing %s: %w", controller.NewRecord(b).Type(), err)
	}
	if code != 0 {
		c.countErr("refused")
		return fmt.Errorf("%w: %s: %w", errRefused, controller.NewRecord(b).Type(), kerr.ErrorForCode(code))
	}
	return nil
}
