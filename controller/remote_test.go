package controller

import (
	"fmt"
	"strconv"
	"strings"
)

// remote runs the datadriven tiered-storage commands (see TestDataDriven).
// Segment ids are the number seg in their last byte.
func (e *ddEnv) remote() string {
	if len(e.d.CmdArgs) == 0 {
		e.d.Fatalf(e.t, "%s: no topic", e.d.Cmd)
	}
	name := e.d.CmdArgs[0].Key
	t := e.c.img.Topic(name)
	var id [16]byte
	for tid, n := range e.names {
		if n == name {
			id = tid
		}
	}
	if t != nil {
		id = t.ID
	}
	p := int32(e.int("p", 0))
	if e.d.Cmd == "remote-show" {
		var b strings.Builder
		for _, s := range e.c.img.RemoteSegments(TopicPartition{id, p}) {
			fmt.Fprintf(&b, "seg=%d [%d, %d] %s by %d@%d (started by %d@%d)\n", s.SegmentID[15], s.BaseOffset, s.EndOffset,
				s.State, s.StateBroker, s.StateEpoch, s.Broker, s.LeaderEpoch)
		}
		if b.Len() == 0 {
			return "none\n"
		}
		fmt.Fprintf(&b, "copied end: %d\n", e.c.img.RemoteCopiedEnd(TopicPartition{id, p}))
		return b.String()
	}
	broker := int32(e.int("broker", 0))
	epoch := int32(-1)
	if pt, ok := e.c.img.Partition(id, p); ok {
		epoch = pt.LeaderEpoch
	}
	epoch = int32(e.int("epoch", int(epoch)))
	var seg [16]byte
	seg[15] = byte(e.int("seg", 0))
	prop := RemoteProposal{BrokerEpoch: e.brokerEpoch("broker-epoch", broker)}
	if e.d.Cmd == "remote-copy" {
		s := RemoteSegment{TopicID: id, Partition: p, SegmentID: seg, BaseOffset: int64(e.int("base", 0)),
			EndOffset: int64(e.int("end", 0)), MaxTimestamp: -1, SizeBytes: 1024, Broker: broker, LeaderEpoch: epoch}
		for _, v := range e.strs("epochs") {
			ep, off, ok := strings.Cut(v, ":")
			a, err1 := strconv.Atoi(ep)
			b, err2 := strconv.Atoi(off)
			if !ok || err1 != nil || err2 != nil {
				e.d.Fatalf(e.t, "epochs: %q is not epoch:offset", v)
			}
			s.LeaderEpochs = append(s.LeaderEpochs, EpochStart{Epoch: int32(a), StartOffset: int64(b)})
		}
		// objects=(kind:size ...), kind a name (index, txnindex) or a
		// number; CRCs are the size's low bits (Apply does not read them).
		for _, v := range e.strs("objects") {
			k, size, ok := strings.Cut(v, ":")
			n, err := strconv.Atoi(size)
			kind, ok2 := objectKindByName(k)
			if !ok || err != nil || !ok2 {
				e.d.Fatalf(e.t, "objects: %q is not kind:size", v)
			}
			s.Objects = append(s.Objects, ObjectSum{Kind: kind, Size: int64(n), CRC: uint32(n)})
		}
		if s.LeaderEpochs == nil {
			s.LeaderEpochs = []EpochStart{{Epoch: max(epoch, 0), StartOffset: s.BaseOffset}}
		}
		prop.Start = &s
	} else {
		states := map[string]RemoteSegmentState{"started": RemoteCopyStarted, "finished": RemoteCopyFinished,
			"delete": RemoteDeleteStarted, "deleted": RemoteDeleteFinished}
		st, ok := states[e.str("state", "")]
		if !ok {
			e.d.Fatalf(e.t, "state: one of started, finished, delete, deleted")
		}
		prop.Change = &RemoteSegmentStateChange{TopicID: id, Partition: p, SegmentID: seg, State: st, Broker: broker, LeaderEpoch: epoch}
	}
	rec, code := DecideRemoteSegment(e.c.img, prop)
	if code != 0 {
		return "refused: " + codeName(code) + "\n"
	}
	out := e.record(rec) + "\n"
	if err := e.apply([]Record{rec}); err != nil {
		out += fmt.Sprintf("not applied: %v\n", err)
	}
	return out
}

// objectKindByName is the ObjectKind named k (its String) or numbered k.
func objectKindByName(k string) (ObjectKind, bool) {
	for kind := ObjectKind(1); kind <= ObjectTxnIndex; kind++ {
		if kind.String() == k {
			return kind, true
		}
	}
	n, err := strconv.Atoi(k)
	return ObjectKind(n), err == nil && n >= 0 && n < 256
}
