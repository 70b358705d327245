package coordinator

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Loading: which offsets partitions this node leads, and reading a
// partition's log back into the store when it gains the leadership. The
// steps for a gained partition (Coordinator.Follow, then load):
//
//  1. follow records the partition, not loaded: its groups answer
//     ErrLoading.
//  2. replay applies every record of its log, in order, to the table;
//     stored groups are kept aside.
//  3. takeStoredGroups hands those to the groups, which restore them.
//  4. markLoaded serves the partition, unless follow has replaced or
//     dropped it meanwhile (a later load, or none, then owns it).
//
// A lost partition's offsets, stored groups and pending commits are
// forgotten at once (forgetLocked); a commit still waiting on it is never
// applied here (if it was committed, the next leader reads it back).

// follow records the offsets partitions this node leads now, from parts
// (this node's replicas of the offsets topic, nil where none), and
// returns the ones it has stopped leading (forgotten already) and the
// ones it has begun to lead (to be loaded).
func (o *offsetStore) follow(parts []*replica.Partition) (lost, gained []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.mu.parts) < len(parts) {
		o.mu.parts = append(o.mu.parts, make([]*replica.Partition, len(parts)-len(o.mu.parts))...)
		o.mu.loaded = append(o.mu.loaded, make([]bool, len(parts)-len(o.mu.loaded))...)
		o.count.Store(int32(len(parts)))
	}
	for i, p := range parts {
		cur := o.mu.parts[i]
		switch {
		case p.Leads() && cur != p:
			o.mu.parts[i], o.mu.loaded[i] = p, false
			gained = append(gained, int32(i))
		case !p.Leads() && cur != nil:
			o.mu.parts[i], o.mu.loaded[i] = nil, false
			lost = append(lost, int32(i))
		}
	}
	for _, pi := range lost {
		o.forgetLocked(pi)
	}
	return lost, gained
}

// forgetLocked drops what the store holds for offsets partition pi.
// REQUIRES: o.mu held.
func (o *offsetStore) forgetLocked(pi int32) {
	for g := range o.mu.offsets {
		if o.partitionFor(g) == pi {
			delete(o.mu.offsets, g)
		}
	}
	for g := range o.mu.groupMeta {
		if o.partitionFor(g) == pi {
			delete(o.mu.groupMeta, g)
		}
	}
	for k := range o.mu.nextGenRecs {
		if o.partitionFor(k.id) == pi {
			delete(o.mu.nextGenRecs, k)
		}
	}
	for _, pc := range o.mu.pending[pi] {
		delete(o.mu.inFlight, pc.group)
	}
	delete(o.mu.pending, pi)
	delete(o.mu.txnPending, pi)
}

// replay applies offsets partition pi's log to the store and returns the
// records read; false when the partition cannot be loaded here (no longer
// led here, deleted, or its log unreadable: the next leader loads it).
func (o *offsetStore) replay(pi int32, p *replica.Partition) (int, bool) {
	n := 0
	lg, _, code := p.Serve(replica.ConsumerRead)
	if code != 0 {
		return 0, false
	}
	off := lg.StartOffset()
	for {
		data, err := lg.Read(off, 1<<20, lg.EndOffset(), nil)
		if err != nil {
			o.log.Error().Err(err).Int32("partition", pi).Msg("loading committed offsets; partition stays unavailable")
			o.host.ReadFailed(p, err) // a damaged log: hand the partition to a sound replica
			return n, false
		}
		if len(data) == 0 {
			return n, true
		}
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil || info.Bytes > len(data) {
				o.log.Error().Err(err).Int32("partition", pi).Msg("bad batch in offsets topic")
				return n, false
			}
			base := recordbatch.BaseOffset(data)
			end := base + int64(info.LastDelta) + 1
			switch {
			case info.Control:
				// A transaction's marker settles its offset commits.
				if m, err := recordbatch.ParseEndTxnMarker(data[:info.Bytes], info); err == nil {
					o.mu.Lock()
					o.settleLocked(pi, info.ProducerID, base, m.Commit)
					o.mu.Unlock()
				}
			case info.Transactional:
				var recs []recordbatch.KV
				recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
					recs = append(recs, recordbatch.KV{Key: r.Key, Value: r.Value})
					n++
					return true
				})
				o.mu.Lock()
				o.addTxnLocked(pi, info.ProducerID, txnCommit{end: end, recs: recs})
				o.mu.Unlock()
			default:
				recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
					o.apply(r.Key, r.Value)
					n++
					return true
				})
			}
			off = end
			data = data[info.Bytes:]
		}
	}
}

// takeStoredGroups removes and returns the stored groups (encoded
// GroupMetadataValues) of offsets partition pi that replay found.
func (o *offsetStore) takeStoredGroups(pi int32) map[string][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]byte{}
	for id, v := range o.mu.groupMeta {
		if o.partitionFor(id) == pi {
			out[id] = v
			delete(o.mu.groupMeta, id)
		}
	}
	return out
}

// markLoaded serves offsets partition pi, if p still is this node's
// leading replica of it.
func (o *offsetStore) markLoaded(pi int32, p *replica.Partition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if int(pi) < len(o.mu.parts) && o.mu.parts[pi] == p {
		o.mu.loaded[pi] = true
	}
}

// apply folds one offsets-topic record into the store.
func (o *offsetStore) apply(key, value []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applyLocked(key, value)
}

// REQUIRES: o.mu held.
func (o *offsetStore) applyLocked(key, value []byte) {
	if k, ok := nextGenOfKey(key); ok {
		// Copied: the log's read buffer is reused.
		r := recordbatch.KV{Key: append([]byte(nil), key...)}
		if value != nil {
			r.Value = append([]byte(nil), value...)
		}
		o.mu.nextGenRecs[k] = append(o.mu.nextGenRecs[k], r)
		return
	}
	if len(key) >= 2 && int16(key[0])<<8|int16(key[1]) == 2 {
		var gk kmsg.GroupMetadataKey
		if gk.ReadFrom(key) != nil {
			return
		}
		if value == nil {
			delete(o.mu.groupMeta, gk.Group)
		} else {
			o.mu.groupMeta[gk.Group] = value
		}
		return
	}
	var k kmsg.OffsetCommitKey
	if len(key) < 2 || k.ReadFrom(key) != nil || k.Version > 1 {
		return
	}
	tp := TopicPartition{k.Topic, k.Partition}
	if value == nil {
		if g := o.mu.offsets[k.Group]; g != nil {
			delete(g, tp)
			if len(g) == 0 {
				delete(o.mu.offsets, k.Group)
			}
		}
		return
	}
	var v kmsg.OffsetCommitValue
	if v.ReadFrom(value) != nil {
		return
	}
	g := o.mu.offsets[k.Group]
	if g == nil {
		g = map[TopicPartition]Committed{}
		o.mu.offsets[k.Group] = g
	}
	g[tp] = Committed{v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp}
}

func offsetKey(group string, tp TopicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, group, tp.Topic, tp.Partition
	return k.AppendTo(nil)
}

func offsetValue(c Committed) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, c.Offset, c.LeaderEpoch, c.Metadata, c.CommitTimeMs
	return v.AppendTo(nil)
}

// groupOfKey is the group an offsets-topic key names ("" if unreadable).
func groupOfKey(key []byte) string {
	var k kmsg.OffsetCommitKey
	if len(key) < 2 || k.ReadFrom(key) != nil {
		return ""
	}
	return k.Group
}
