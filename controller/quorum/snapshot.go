package quorum

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fjordlog/fjord/controller"
)

// Image snapshots.
//
// An Image has no encoder of its own and its fields are unexported, so the
// only way to build one outside package controller is Image.Apply. A
// snapshot is therefore a list of synthetic records, each with the log index
// to apply it at, that rebuild an image equal (through every accessor) to
// the one snapshotted:
//
//   - RegisterBroker for every broker, at its broker epoch (Apply checks
//     that a non-zero Epoch equals the index), then UnfenceBroker for the
//     unfenced ones;
//   - CreateTopic (with its configs) and a CreatePartition per partition,
//     carrying the current replicas, ISR, leader and both epochs; a
//     partition being reassigned gets its partition epoch less one and a
//     ChangeReplicas after it with its adding and removing replicas (the
//     log held at least those two records for it too);
//   - SetConfig for every broker and cluster-default config (the image has
//     no accessor listing them, so Member keeps a shadow of them, fed by the
//     SetConfig records it applies);
//   - SetConfig for every group config (Image.ConfiguredGroups lists
//     them; no shadow needed);
//   - ProducerIDs{First: 0, Count: NextProducerID} when ids were handed out;
//   - ClientQuota for every key of every quota entity;
//   - ACLChange (an add) for every ACL binding.
//   - ScramCredential for every SCRAM credential.
//   - for every remote segment attempt (controller/remote.go): its
//     RemoteSegment, then a RemoteSegmentStateChange to its state when it
//     is past COPY_STARTED (straight to DELETE_STARTED for a deleting
//     one: a legal step from COPY_STARTED, and one record where the log
//     had at least one). Deleting attempts go first: a live attempt's end
//     must be above every live attempt's, and a deleting one's need not.
//
// The records are placed at strictly increasing indexes no greater than the
// snapshot index: registrations at their epochs, the others greedily in the
// free indexes (an unfence only after its registration). If the log had no
// controller.Batch entries, it proves such a placement exists: it held at
// least these records (the others are folded into them), one per index, in
// an order that respects the same constraints. A Batch puts many records at
// one index (a topic's CreatePartitions), so they may not fit; then every
// record but the registrations before the snapshot index goes into one
// Batch at the snapshot index. So a snapshot holds a Batch only when the
// log it summarizes did, and older code reads every other snapshot.
// Finally the version is brought to the snapshot index with noop.
//
// Encoding: byte 1 (format), uvarint count, then per record uvarint index,
// uvarint length and controller.Encode bytes. It is deterministic: equal
// images (and shadow configs) give equal bytes.
//
// Caveat: a field added to Image later must be added here too, or snapshots
// silently drop it. TestSnapshotRoundTrip compares every accessor.

const snapFormat = 1

// noopKey is a cluster-default config key nobody sets. Deleting it is a
// SetConfig that applies and changes nothing an accessor can see, which is
// the only way to advance an image's Version without a change: package
// controller has no version-only record.
const noopKey = "\x00fjord.quorum.noop"

// noop returns img advanced to index with no visible change.
func noop(img *controller.Image, index uint64) (*controller.Image, error) {
	if _, ok := img.Config(controller.ClusterResource(), noopKey); ok {
		return nil, fmt.Errorf("quorum: reserved config key %q is set", noopKey)
	}
	return img.Apply(index, controller.NewRecord(controller.SetConfig{Resource: controller.ClusterResource(), Key: noopKey}))
}

// brokerConfigs shadows the image's broker and cluster-default configs:
// resource name ("" = cluster default) → key → value.
type brokerConfigs map[string]map[string]string

// apply mirrors a record that Image.Apply accepted: a SetConfig on a broker
// resource, or each of a Batch's records.
func (bc brokerConfigs) apply(r controller.Record) {
	if b, ok := r.Body.(controller.Batch); ok {
		for _, in := range b.Records {
			bc.apply(in)
		}
		return
	}
	s, ok := r.Body.(controller.SetConfig)
	if !ok || s.Resource.Type != controller.ResourceBroker || s.Key == noopKey {
		return
	}
	m := bc[s.Resource.Name]
	if s.Value == nil {
		delete(m, s.Key)
		if len(m) == 0 {
			delete(bc, s.Resource.Name)
		}
		return
	}
	if m == nil {
		m = map[string]string{}
		bc[s.Resource.Name] = m
	}
	m[s.Key] = *s.Value
}

type placed struct {
	index uint64
	rec   controller.Record
}

// imageRecords returns the placed records that rebuild img (with configs bc)
// at indexes ≤ img.Version().
func imageRecords(img *controller.Image, bc brokerConfigs) ([]placed, error) {
	v := img.Version()
	var regs, unfences []placed // both by epoch
	for _, b := range img.Brokers() {
		if b.Epoch <= 0 || uint64(b.Epoch) > v {
			return nil, fmt.Errorf("quorum: snapshot: broker %d epoch %d outside [1, %d]", b.ID, b.Epoch, v)
		}
		reg := b.RegisterBroker
		reg.Epoch = b.Epoch
		regs = append(regs, placed{uint64(b.Epoch), controller.NewRecord(reg)})
		if !b.Fenced {
			unfences = append(unfences, placed{uint64(b.Epoch), controller.NewRecord(controller.UnfenceBroker{ID: b.ID, Epoch: b.Epoch})})
		}
	}
	byIndex := func(a, b placed) int { return cmp.Compare(a.index, b.index) }
	slices.SortFunc(regs, byIndex)
	slices.SortFunc(unfences, byIndex)

	var free []controller.Record
	for _, t := range img.Topics() {
		free = append(free, controller.NewRecord(controller.CreateTopic{Name: t.Name, ID: t.ID, Configs: t.Configs}))
		for p, pt := range t.Partitions {
			cp := controller.CreatePartition{
				TopicID: t.ID, Partition: int32(p),
				Replicas: pt.Replicas, ISR: pt.ISR, Leader: pt.Leader,
				LeaderEpoch: pt.LeaderEpoch, PartitionEpoch: pt.PartitionEpoch,
			}
			if !pt.Reassigning() {
				free = append(free, controller.NewRecord(cp))
				continue
			}
			// A move in progress: its ChangeReplicas (same leader, so only
			// the partition epoch is bumped) sets adding and removing. The
			// move's start took a partition epoch, so it is at least 1.
			cp.PartitionEpoch--
			free = append(free, controller.NewRecord(cp), controller.NewRecord(controller.ChangeReplicas{
				TopicID: t.ID, Partition: int32(p), Replicas: pt.Replicas, Adding: pt.Adding, Removing: pt.Removing,
				ISR: pt.ISR, Leader: pt.Leader,
			}))
		}
	}
	for _, res := range slices.Sorted(maps.Keys(bc)) {
		for _, k := range slices.Sorted(maps.Keys(bc[res])) {
			val := bc[res][k]
			free = append(free, controller.NewRecord(controller.SetConfig{
				Resource: controller.ConfigResource{Type: controller.ResourceBroker, Name: res}, Key: k, Value: &val,
			}))
		}
	}
	for _, g := range img.ConfiguredGroups() {
		m := img.GroupConfigs(g)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			val := m[k]
			free = append(free, controller.NewRecord(controller.SetConfig{Resource: controller.GroupResource(g), Key: k, Value: &val}))
		}
	}
	if n := img.NextProducerID(); n > 0 {
		free = append(free, controller.NewRecord(controller.ProducerIDs{Broker: -1, First: 0, Count: n}))
	}
	for _, e := range img.QuotaEntities() {
		q := img.ClientQuotas(e)
		for _, k := range slices.Sorted(maps.Keys(q)) {
			v := q[k]
			free = append(free, controller.NewRecord(controller.ClientQuota{Entity: e.Parts(), Key: k, Value: &v}))
		}
	}
	for _, a := range img.ACLs() {
		free = append(free, controller.NewRecord(controller.ACLChange{ACL: a}))
	}
	for _, k := range img.ScramCredentials() {
		s, _ := img.ScramCredential(k.User, k.Mechanism)
		free = append(free, controller.NewRecord(controller.ScramCredential{User: k.User, Mechanism: k.Mechanism,
			Salt: s.Salt, StoredKey: s.StoredKey, ServerKey: s.ServerKey, Iterations: s.Iterations}))
	}
	free = append(free, remoteRecords(img)...)

	if out, ok := placeGreedy(regs, unfences, free, v); ok {
		return out, nil
	}
	return placeBatched(regs, unfences, free, v)
}

// placeGreedy places one record per index. Unit jobs with release times and
// a common deadline: filling every index with any ready record is optimal.
// It reports false if the records do not fit below v, which happens only
// when the log applied several of them in one Batch entry.
func placeGreedy(regs, unfences []placed, free []controller.Record, v uint64) ([]placed, bool) {
	out := make([]placed, 0, len(regs)+len(unfences)+len(free))
	k := uint64(1)
	for len(regs)+len(unfences)+len(free) > 0 {
		if k > v {
			return nil, false
		}
		switch {
		case len(regs) > 0 && regs[0].index == k:
			out, regs = append(out, regs[0]), regs[1:]
		case len(unfences) > 0 && unfences[0].index < k:
			out, unfences = append(out, placed{k, unfences[0].rec}), unfences[1:]
		case len(free) > 0:
			out, free = append(out, placed{k, free[0]}), free[1:]
		default: // only registrations and their unfences remain: jump
			k = regs[0].index
			continue
		}
		k++
	}
	return out, true
}

// placeBatched places the registrations before v at their epochs and every
// other record in one Batch at v: the registration at epoch v if there is
// one (a Batch holds at most one, and brokers' epochs are distinct), then
// the unfences, then the free records.
func placeBatched(regs, unfences []placed, free []controller.Record, v uint64) ([]placed, error) {
	if v == 0 {
		return nil, errors.New("quorum: snapshot: records in an image at version 0")
	}
	out := make([]placed, 0, len(regs)+1)
	var last []controller.Record
	for _, r := range regs {
		if r.index < v {
			out = append(out, r)
		} else {
			last = append(last, r.rec)
		}
	}
	for _, u := range unfences {
		last = append(last, u.rec)
	}
	last = append(last, free...)
	if len(last) > 0 {
		out = append(out, placed{v, controller.NewBatch(last)})
	}
	return out, nil
}

// encodeImage returns the snapshot data for img and bc.
func encodeImage(img *controller.Image, bc brokerConfigs) ([]byte, error) {
	recs, err := imageRecords(img, bc)
	if err != nil {
		return nil, err
	}
	b := []byte{snapFormat}
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, p := range recs {
		e := controller.Encode(p.rec)
		b = binary.AppendUvarint(b, p.index)
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b, nil
}

var errSnapCorrupt = errors.New("quorum: corrupt snapshot")

// decodeImage rebuilds the image at version index from snapshot data (nil
// data is the empty image).
func decodeImage(data []byte, index uint64) (*controller.Image, brokerConfigs, error) {
	img, bc := new(controller.Image), brokerConfigs{}
	if len(data) > 0 {
		if data[0] != snapFormat {
			return nil, nil, fmt.Errorf("%w: format %d", errSnapCorrupt, data[0])
		}
		d := data[1:]
		uv := func() (uint64, bool) {
			x, n := binary.Uvarint(d)
			if n <= 0 {
				return 0, false
			}
			d = d[n:]
			return x, true
		}
		count, ok := uv()
		if !ok || count > uint64(len(d)) {
			return nil, nil, fmt.Errorf("%w: bad count", errSnapCorrupt)
		}
		for i := uint64(0); i < count; i++ {
			at, ok1 := uv()
			n, ok2 := uv()
			if !ok1 || !ok2 || n > uint64(len(d)) {
				return nil, nil, fmt.Errorf("%w: record %d truncated", errSnapCorrupt, i)
			}
			r, err := controller.Decode(d[:n])
			if err != nil {
				return nil, nil, fmt.Errorf("%w: record %d: %v", errSnapCorrupt, i, err)
			}
			d = d[n:]
			if at > index {
				return nil, nil, fmt.Errorf("%w: record %d at index %d past snapshot index %d", errSnapCorrupt, i, at, index)
			}
			if img, err = img.Apply(at, r); err != nil {
				return nil, nil, fmt.Errorf("%w: record %d at %d: %v", errSnapCorrupt, i, at, err)
			}
			bc.apply(r)
		}
		if len(d) != 0 {
			return nil, nil, fmt.Errorf("%w: %d trailing bytes", errSnapCorrupt, len(d))
		}
	}
	if img.Version() < index {
		var err error
		if img, err = noop(img, index); err != nil {
			return nil, nil, err
		}
	}
	return img, bc, nil
}

// remoteRecords rebuilds img's remote segment attempts (see imageRecords).
func remoteRecords(img *controller.Image) []controller.Record {
	var out []controller.Record
	for _, deleting := range []bool{true, false} {
		for _, tp := range img.RemotePartitions() {
			for _, s := range img.RemoteSegments(tp) {
				if (s.State == controller.RemoteDeleteStarted) != deleting {
					continue
				}
				out = append(out, controller.NewRecord(s.RemoteSegment))
				if s.State != controller.RemoteCopyStarted {
					out = append(out, controller.NewRecord(controller.RemoteSegmentStateChange{
						TopicID: tp.TopicID, Partition: tp.Partition, SegmentID: s.SegmentID,
						State: s.State, Broker: s.StateBroker, LeaderEpoch: s.StateEpoch,
					}))
				}
			}
		}
	}
	return out
}
