package controller

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// Tiered storage (KIP-405): the metadata of the log segments a partition
// leader copies to the remote object store. The metadata log is Kafka's
// remote log metadata manager (RLMM) here, not a compacted internal topic;
// docs/architecture.md ("Tiered storage") gives the reasons. Two records:
//
//   - RemoteSegment starts an upload attempt (COPY_STARTED) and carries
//     the segment's whole metadata;
//   - RemoteSegmentStateChange moves an attempt on: COPY_FINISHED,
//     DELETE_STARTED, DELETE_FINISHED.
//
// Two types rather than one with every field in every record: a state
// change names the attempt and its sender, a few dozen bytes, and the
// metadata is written once (Kafka's RemoteLogSegmentMetadataRecord and
// RemoteLogSegmentMetadataUpdateRecord split the same way).
//
// An attempt's lifecycle, only forward:
//
//	COPY_STARTED ─► COPY_FINISHED ─► DELETE_STARTED ─► DELETE_FINISHED
//	      └──────────────────────────────►┘ (an abandoned attempt)
//
// Readers use only COPY_FINISHED segments, so the objects of an attempt
// that never finished are never visible; the next leader deletes them.
//
// Who may propose (DecideRemoteSegment, the controller's check; Apply
// checks only the structure, because a snapshot replays these records
// under whatever leaders the partition has now): every record comes from
// the partition's current leader at its current leader epoch and broker
// epoch; COPY_FINISHED only from the broker and leader epoch that started
// the attempt, so an old leader can never finish an upload after a new
// one took over. Kafka's topic-based RLMM cannot check that: any broker
// may write its topic.

// RemoteSegmentState is the state of one upload attempt. Values are part
// of the log format.
type RemoteSegmentState uint8

const (
	RemoteCopyStarted    RemoteSegmentState = 1
	RemoteCopyFinished   RemoteSegmentState = 2
	RemoteDeleteStarted  RemoteSegmentState = 3
	RemoteDeleteFinished RemoteSegmentState = 4
)

// String is Kafka's name of the state.
func (s RemoteSegmentState) String() string {
	switch s {
	case RemoteCopyStarted:
		return "COPY_SEGMENT_STARTED"
	case RemoteCopyFinished:
		return "COPY_SEGMENT_FINISHED"
	case RemoteDeleteStarted:
		return "DELETE_SEGMENT_STARTED"
	case RemoteDeleteFinished:
		return "DELETE_SEGMENT_FINISHED"
	}
	return fmt.Sprintf("RemoteSegmentState(%d)", uint8(s))
}

// next reports whether an attempt in state s may move to t.
func (s RemoteSegmentState) next(t RemoteSegmentState) bool {
	switch t {
	case RemoteCopyFinished:
		return s == RemoteCopyStarted
	case RemoteDeleteStarted:
		return s == RemoteCopyStarted || s == RemoteCopyFinished
	case RemoteDeleteFinished:
		return s == RemoteDeleteStarted
	}
	return false
}

// EpochStart is one leader epoch's first offset within a segment (the
// segment's slice of the leader-epoch checkpoint).
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// ObjectKind names one of a copied segment's objects other than its .log
// (whose batches carry their own CRCs). Values are part of the log format.
type ObjectKind uint8

const (
	ObjectIndex           ObjectKind = 1 // .index
	ObjectTimeIndex       ObjectKind = 2 // .timeindex
	ObjectSnapshot        ObjectKind = 3 // .snapshot, the producer snapshot at the segment's end
	ObjectEpochCheckpoint ObjectKind = 4 // .leader-epoch-checkpoint
	ObjectTxnIndex        ObjectKind = 5 // .txnindex, only for a segment with aborted transactions
)

// String is the object's key suffix (broker/tier's keys).
func (k ObjectKind) String() string {
	switch k {
	case ObjectIndex:
		return "index"
	case ObjectTimeIndex:
		return "timeindex"
	case ObjectSnapshot:
		return "snapshot"
	case ObjectEpochCheckpoint:
		return "leader-epoch-checkpoint"
	case ObjectTxnIndex:
		return "txnindex"
	}
	return fmt.Sprintf("ObjectKind(%d)", uint8(k))
}

// ObjectSum is what the uploader read of one object before uploading it:
// its length and CRC-32C (Castagnoli). A reader refuses an object whose
// bytes do not match (broker/tier).
type ObjectSum struct {
	Kind ObjectKind
	Size int64
	CRC  uint32
}

// RemoteSegment is an upload attempt's start (COPY_STARTED) with the
// segment's metadata. Offsets are the partition's; EndOffset is the
// segment's last offset (inclusive), as Kafka's RemoteLogSegmentMetadata.
//
// Invariant (Apply checks): 0 <= BaseOffset <= EndOffset; SegmentID is not
// zero and not in use in the partition; LeaderEpochs is non-empty, its
// epochs strictly increasing and its start offsets strictly increasing
// within [BaseOffset, EndOffset], the first at BaseOffset; SizeBytes >= 0;
// Objects' kinds are known and strictly increasing, their sizes >= 0;
// EndOffset is above the end of every segment of the partition that is
// COPY_STARTED or COPY_FINISHED (attempts of a partition go forward in
// offset order, one live attempt per offset).
type RemoteSegment struct {
	TopicID      [16]byte
	Partition    int32
	SegmentID    [16]byte // random (UUID v4) per upload attempt
	BaseOffset   int64
	EndOffset    int64
	MaxTimestamp int64 // ms; -1 when the segment has no timestamps
	SizeBytes    int64 // of the .log object
	LeaderEpochs []EpochStart
	Broker       int32 // the uploading leader
	LeaderEpoch  int32 // its leader epoch when it started
	// Objects lists every object of the attempt other than the .log, with
	// its length and checksum, taken from the sealed files before any is
	// uploaded: an object not listed was not uploaded (a segment without
	// aborted transactions has no .txnindex; the leader-epoch checkpoint
	// is always uploaded, so the list is never empty). Empty in a record
	// written before checksums (body version 1): then which objects exist is not
	// known and readers take them unchecked, as they did before; such
	// records stay readable for as long as their segments are in the
	// image.
	Objects []ObjectSum
}

// Checksummed reports whether s lists its objects (Objects): false for
// a record from before checksums, whose objects are read unchecked.
func (s RemoteSegment) Checksummed() bool { return len(s.Objects) > 0 }

// Object returns the sum of s's object of kind k, false when s does not
// list one (see Checksummed for what that means).
func (s RemoteSegment) Object(k ObjectKind) (ObjectSum, bool) {
	for _, o := range s.Objects {
		if o.Kind == k {
			return o, true
		}
	}
	return ObjectSum{}, false
}

// RemoteSegmentStateChange moves attempt SegmentID of a partition to State,
// proposed by Broker at LeaderEpoch.
type RemoteSegmentStateChange struct {
	TopicID     [16]byte
	Partition   int32
	SegmentID   [16]byte
	State       RemoteSegmentState // COPY_FINISHED, DELETE_STARTED or DELETE_FINISHED
	Broker      int32
	LeaderEpoch int32
}

func (RemoteSegment) Type() RecordType            { return TypeRemoteSegment }
func (RemoteSegmentStateChange) Type() RecordType { return TypeRemoteSegmentState }

// RemoteSegmentMeta is an attempt as the image keeps it. Read-only.
type RemoteSegmentMeta struct {
	RemoteSegment
	State RemoteSegmentState
	// StateBroker and StateEpoch are who proposed the latest state.
	StateBroker int32
	StateEpoch  int32
}

// RemoteSegments returns a partition's upload attempts that are not
// DELETE_FINISHED, ordered by base offset, then end offset, then segment
// id. Read-only: the slice is the image's.
func (img *Image) RemoteSegments(tp TopicPartition) []RemoteSegmentMeta { return img.remote[tp] }

// RemotePartitions lists the partitions with at least one remote segment
// entry, by topic id then partition. The caller owns the slice.
func (img *Image) RemotePartitions() []TopicPartition {
	tps := slices.Collect(maps.Keys(img.remote))
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(slices.Compare(a.TopicID[:], b.TopicID[:]), cmp.Compare(a.Partition, b.Partition))
	})
	return tps
}

// RemoteCopiedEnd is the highest EndOffset of a partition's COPY_FINISHED
// segments, -1 when none: offsets at or below it that are not below the
// oldest COPY_FINISHED base are readable from the store.
func (img *Image) RemoteCopiedEnd(tp TopicPartition) int64 {
	end := int64(-1)
	for _, s := range img.remote[tp] {
		if s.State == RemoteCopyFinished {
			end = max(end, s.EndOffset)
		}
	}
	return end
}

// remoteIndex is the position of segment id in segs, -1 if absent.
func remoteIndex(segs []RemoteSegmentMeta, id [16]byte) int {
	return slices.IndexFunc(segs, func(s RemoteSegmentMeta) bool { return s.SegmentID == id })
}

func (s *RemoteSegment) check() error {
	switch {
	case s.SegmentID == [16]byte{}:
		return fmt.Errorf("zero segment id")
	case s.BaseOffset < 0 || s.EndOffset < s.BaseOffset:
		return fmt.Errorf("offsets [%d, %d]", s.BaseOffset, s.EndOffset)
	case s.SizeBytes < 0:
		return fmt.Errorf("size %d", s.SizeBytes)
	case len(s.LeaderEpochs) == 0 || s.LeaderEpochs[0].StartOffset != s.BaseOffset:
		return fmt.Errorf("leader epochs %v do not start at base offset %d", s.LeaderEpochs, s.BaseOffset)
	}
	for i, o := range s.Objects {
		if o.Kind < ObjectIndex || o.Kind > ObjectTxnIndex || o.Size < 0 || (i > 0 && o.Kind <= s.Objects[i-1].Kind) {
			return fmt.Errorf("objects %v: unknown, repeated or out of order kind, or negative size", s.Objects)
		}
	}
	for i, e := range s.LeaderEpochs {
		if e.Epoch < 0 || e.StartOffset > s.EndOffset {
			return fmt.Errorf("leader epoch entry %v outside the segment", e)
		}
		if i > 0 && (e.Epoch <= s.LeaderEpochs[i-1].Epoch || e.StartOffset <= s.LeaderEpochs[i-1].StartOffset) {
			return fmt.Errorf("leader epochs %v not increasing", s.LeaderEpochs)
		}
	}
	return nil
}

func (img *Image) addRemoteSegment(b RemoteSegment) error {
	tp := TopicPartition{b.TopicID, b.Partition}
	if _, ok := img.Partition(b.TopicID, b.Partition); !ok {
		return fmt.Errorf("%w: remote segment: unknown partition %x-%d", ErrNotApplicable, b.TopicID, b.Partition)
	}
	if err := b.check(); err != nil {
		return fmt.Errorf("%w: remote segment %x of %x-%d: %v", ErrNotApplicable, b.SegmentID, b.TopicID, b.Partition, err)
	}
	segs := img.remote[tp]
	if remoteIndex(segs, b.SegmentID) >= 0 {
		return fmt.Errorf("%w: remote segment %x of %x-%d: id in use", ErrNotApplicable, b.SegmentID, b.TopicID, b.Partition)
	}
	if end := liveRemoteEnd(segs); b.EndOffset <= end {
		return fmt.Errorf("%w: remote segment %x of %x-%d: end %d not above the live segments' end %d",
			ErrNotApplicable, b.SegmentID, b.TopicID, b.Partition, b.EndOffset, end)
	}
	b.LeaderEpochs = slices.Clone(b.LeaderEpochs) // the record's slices are the proposer's
	b.Objects = slices.Clone(b.Objects)
	m := RemoteSegmentMeta{RemoteSegment: b, State: RemoteCopyStarted, StateBroker: b.Broker, StateEpoch: b.LeaderEpoch}
	i, _ := slices.BinarySearchFunc(segs, m, compareRemote)
	img.setRemote(tp, slices.Insert(slices.Clip(segs), i, m)) // Clip: never write into a shared array
	return nil
}

// liveRemoteEnd is the highest end offset of segs' COPY_STARTED and
// COPY_FINISHED entries, -1 when none.
func liveRemoteEnd(segs []RemoteSegmentMeta) int64 {
	end := int64(-1)
	for _, s := range segs {
		if s.State == RemoteCopyStarted || s.State == RemoteCopyFinished {
			end = max(end, s.EndOffset)
		}
	}
	return end
}

func compareRemote(a, b RemoteSegmentMeta) int {
	return cmp.Or(cmp.Compare(a.BaseOffset, b.BaseOffset), cmp.Compare(a.EndOffset, b.EndOffset),
		slices.Compare(a.SegmentID[:], b.SegmentID[:]))
}

func (img *Image) changeRemoteSegment(b RemoteSegmentStateChange) error {
	tp := TopicPartition{b.TopicID, b.Partition}
	segs := img.remote[tp]
	i := remoteIndex(segs, b.SegmentID)
	if i < 0 {
		return fmt.Errorf("%w: remote segment %x of %x-%d: unknown", ErrNotApplicable, b.SegmentID, b.TopicID, b.Partition)
	}
	if !segs[i].State.next(b.State) {
		return fmt.Errorf("%w: remote segment %x of %x-%d: %s to %s", ErrNotApplicable, b.SegmentID, b.TopicID, b.Partition, segs[i].State, b.State)
	}
	if b.State == RemoteDeleteFinished {
		// Finished deletions leave the image (and so every snapshot): the
		// objects are gone and nothing refers to the attempt again.
		img.setRemote(tp, slices.Delete(slices.Clone(segs), i, i+1))
		return nil
	}
	segs = slices.Clone(segs)
	segs[i].State, segs[i].StateBroker, segs[i].StateEpoch = b.State, b.Broker, b.LeaderEpoch
	img.setRemote(tp, segs)
	return nil
}

// setRemote installs a partition's new segment list in a clone of the map.
func (img *Image) setRemote(tp TopicPartition, segs []RemoteSegmentMeta) {
	img.remote = maps.Clone(img.remote)
	if len(segs) == 0 {
		delete(img.remote, tp)
		if len(img.remote) == 0 {
			img.remote = nil
		}
		return
	}
	if img.remote == nil {
		img.remote = map[TopicPartition][]RemoteSegmentMeta{}
	}
	img.remote[tp] = segs
}

// dropRemoteTopic forgets a deleted topic's remote segments. Their
// objects are the brokers' to delete: the image cannot reach the store.
func (img *Image) dropRemoteTopic(t *Topic) {
	if img.remote == nil {
		return
	}
	img.remote = maps.Clone(img.remote)
	for p := range t.Partitions {
		delete(img.remote, TopicPartition{t.ID, int32(p)})
	}
	if len(img.remote) == 0 {
		img.remote = nil
	}
}

// RemoteProposal is what a partition leader asks the controller to record:
// exactly one of Start (a new attempt) or Change (an attempt's next
// state), with the sender's broker epoch.
type RemoteProposal struct {
	BrokerEpoch int64
	Start       *RemoteSegment
	Change      *RemoteSegmentStateChange
}

// DecideRemoteSegment checks a leader's proposal against img and returns
// the record to propose, or the Kafka error code refusing it:
//
//   - UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION: no such partition;
//   - STALE_BROKER_EPOCH: the sender's registration is not BrokerEpoch;
//   - NOT_LEADER_OR_FOLLOWER: the sender is not the partition's leader;
//   - FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: its leader epoch is older
//     / newer than the partition's;
//   - INVALID_RECORD_STATE: a COPY_FINISHED not from the attempt's own
//     broker and leader epoch, or a state change not forward;
//   - INVALID_REQUEST: malformed metadata, a segment id in use, an end
//     offset not above the partition's live segments, or a change of an
//     attempt the image does not have (Kafka has no code of its own for
//     that).
func DecideRemoteSegment(img *Image, p RemoteProposal) (Record, int16) {
	var (
		topicID     [16]byte
		partition   int32
		broker      int32
		leaderEpoch int32
	)
	switch {
	case (p.Start == nil) == (p.Change == nil):
		return Record{}, kerr.InvalidRequest.Code
	case p.Start != nil:
		topicID, partition, broker, leaderEpoch = p.Start.TopicID, p.Start.Partition, p.Start.Broker, p.Start.LeaderEpoch
	default:
		topicID, partition, broker, leaderEpoch = p.Change.TopicID, p.Change.Partition, p.Change.Broker, p.Change.LeaderEpoch
	}
	if img.TopicByID(topicID) == nil {
		return Record{}, kerr.UnknownTopicID.Code
	}
	pt, ok := img.Partition(topicID, partition)
	if !ok {
		return Record{}, kerr.UnknownTopicOrPartition.Code
	}
	if b, ok := img.Broker(broker); !ok || b.Epoch != p.BrokerEpoch {
		return Record{}, kerr.StaleBrokerEpoch.Code
	}
	switch {
	case leaderEpoch < pt.LeaderEpoch:
		return Record{}, kerr.FencedLeaderEpoch.Code
	case leaderEpoch > pt.LeaderEpoch:
		return Record{}, kerr.UnknownLeaderEpoch.Code
	case pt.Leader != broker:
		return Record{}, kerr.NotLeaderForPartition.Code
	}
	tp := TopicPartition{topicID, partition}
	if p.Start != nil {
		probe := img.scratch()
		if err := probe.addRemoteSegment(*p.Start); err != nil {
			return Record{}, kerr.InvalidRequest.Code
		}
		return NewRecord(*p.Start), 0
	}
	c := *p.Change
	segs := img.remote[tp]
	i := remoteIndex(segs, c.SegmentID)
	switch {
	case i < 0:
		return Record{}, kerr.InvalidRequest.Code
	case !segs[i].State.next(c.State):
		return Record{}, kerr.InvalidRecordState.Code
	case c.State == RemoteCopyFinished && (segs[i].Broker != c.Broker || segs[i].LeaderEpoch != c.LeaderEpoch):
		return Record{}, kerr.InvalidRecordState.Code
	}
	return NewRecord(c), 0
}

// scratch is a shallow copy of img to try a change on: its
// maps are replaced, never written, so img stays as it was.
func (img *Image) scratch() *Image {
	c := *img
	c.owned = nil
	return &c
}

// DecideRemoteLogSegment decides a RemoteLogSegment request (a Fjord
// private key; protocol/fjordmsg) in one round: the record it carries,
// checked by DecideRemoteSegment, proposed alone. A record that is not a
// remote segment record, or names another broker than the request's
// sender, is INVALID_REQUEST.
func DecideRemoteLogSegment(req *fjordmsg.RemoteLogSegmentRequest) Decision {
	resp := req.ResponseKind().(*fjordmsg.RemoteLogSegmentResponse)
	var (
		code int16
		rec  Record
	)
	return oneRound(func(img *Image) []Record {
		prop, ok := remoteProposalOf(req)
		if !ok {
			code = kerr.InvalidRequest.Code
			return nil
		}
		if rec, code = DecideRemoteSegment(img, prop); code != 0 {
			return nil
		}
		return []Record{rec}
	}, func(_ *Image, proposal int16) (kmsg.Response, []Note) {
		resp.ErrorCode = codeOr(code, proposal)
		if code != 0 {
			return resp, []Note{warn("remote segment proposal refused", "broker", req.BrokerID,
				"error", kerr.ErrorForCode(code).Error())}
		}
		return resp, nil
	})
}

// remoteProposalOf reads a RemoteLogSegment request's record.
func remoteProposalOf(req *fjordmsg.RemoteLogSegmentRequest) (RemoteProposal, bool) {
	r, err := Decode(req.Record)
	if err != nil {
		return RemoteProposal{}, false
	}
	p := RemoteProposal{BrokerEpoch: req.BrokerEpoch}
	switch b := r.Body.(type) {
	case RemoteSegment:
		p.Start = &b
		return p, b.Broker == req.BrokerID
	case RemoteSegmentStateChange:
		p.Change = &b
		return p, b.Broker == req.BrokerID
	}
	return RemoteProposal{}, false
}
