package console

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/discovery"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/lag"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// NodeSource is Source read from a node's parts, each given as the narrow
// thing the console reads of it; the console never sees the broker. Each
// call works from published state: the metadata image and the replica
// manager's topics map (copy-on-write, read without locks), the
// replicas' atomics, the coordinator's tables under its lock for a copy
// only, and the servers' client records. Only Tail reads a log, with no
// lock held.
//
// The fields are set once, before the console serves, and not changed
// after; the funcs must be safe to call from any goroutine.
type NodeSource struct {
	ClusterID string
	NodeID    int32
	Roles     string  // the node's process.roles
	Voters    []Voter // the metadata quorum; none when its setting does not parse
	// Image returns the node's current metadata image.
	Image func() *controller.Image
	// Controller is the active controller as this node knows it; -1 when
	// unknown.
	Controller func() int32
	Replicas   *replicamgr.Manager
	Coord      *coordinator.Coordinator
	// Servers returns the client listeners' servers: a slice the caller
	// owns (a copy taken under the node's lock).
	Servers func() []*protocol.Server
	// Remote returns the node's tiered-storage uploads; nil (the func or
	// its result) when the node has no remote store.
	Remote func() *RemoteHealth
}

var _ Source = (*NodeSource)(nil)

// maxTailHeaders bounds the headers shown per record.
const maxTailHeaders = 16

func (s *NodeSource) Identity() (string, int32) { return s.ClusterID, s.NodeID }

func (s *NodeSource) Cluster() Cluster {
	img := s.Image()
	c := Cluster{ClusterID: s.ClusterID, NodeID: s.NodeID, Roles: s.Roles, Controller: s.Controller(), MetadataVersion: img.Version()}
	for _, bs := range img.Brokers() {
		cb := Broker{ID: bs.ID, Rack: bs.Rack, Fenced: bs.Fenced, Epoch: bs.Epoch}
		for _, e := range bs.Endpoints {
			cb.Endpoints = append(cb.Endpoints, e.Name+" "+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		}
		c.Brokers = append(c.Brokers, cb)
	}
	c.Voters = slices.Clone(s.Voters)
	for _, t := range img.Topics() {
		c.Topics++
		for i, p := range t.Partitions {
			c.Partitions++
			ref := PartitionRef{Topic: t.Name, Partition: int32(i), Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR}
			if p.Leader < 0 {
				if c.OfflineCount++; len(c.Offline) < MaxPartitionsListed {
					c.Offline = append(c.Offline, ref)
				}
			}
			if underReplicated(p) {
				if c.UnderReplicatedCount++; len(c.UnderReplicated) < MaxPartitionsListed {
					c.UnderReplicated = append(c.UnderReplicated, ref)
				}
			}
		}
	}
	now := time.Now().UnixMilli()
	for name, t := range s.Replicas.Topics() {
		for _, p := range t.Local() {
			if st := p.StorageState(now); st != replica.StorageOK {
				if c.SickDiskCount++; len(c.SickDisk) < MaxPartitionsListed {
					c.SickDisk = append(c.SickDisk, DiskProblem{Topic: name, Partition: p.Index, State: string(st)})
				}
			}
		}
	}
	slices.SortFunc(c.SickDisk, func(a, b DiskProblem) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if s.Remote != nil {
		c.Remote = s.Remote()
	}
	return c
}

func (s *NodeSource) Topics(limit int, internal bool) ([]TopicSummary, int, int) {
	local := s.Replicas.Topics()
	var out []TopicSummary
	total, hidden := 0, 0
	for _, t := range s.Image().Topics() { // by name
		if discovery.IsInternalTopic(t.Name) && !internal {
			hidden++
			continue
		}
		if total++; len(out) >= limit {
			continue
		}
		ts := TopicSummary{Name: t.Name, Internal: discovery.IsInternalTopic(t.Name), Partitions: len(t.Partitions)}
		lt := local[t.Name]
		for i, p := range t.Partitions {
			ts.RF = max(ts.RF, len(p.Replicas)-len(p.Removing))
			if underReplicated(p) {
				ts.UnderReplicated++
			}
			if p.Leader < 0 {
				ts.Offline++
			}
			if lt != nil && i < len(lt.Parts) && lt.Parts[i] != nil {
				if lg := lt.Parts[i].Log(); lg != nil {
					ts.Local++
					ts.Bytes += lg.Size()
				}
			}
		}
		out = append(out, ts)
	}
	return out, total, hidden
}

// underReplicated: the ISR is smaller than the replica set, the replicas
// a move removes not counted (kafka_exporter's and Kafka's definition).
func underReplicated(p controller.Partition) bool {
	return len(p.ISR) < len(p.Replicas)-len(p.Removing)
}

func (s *NodeSource) Topic(name string) (Topic, bool) {
	t := s.Image().Topic(name)
	if t == nil {
		return Topic{}, false
	}
	return s.topic(t, s.Replicas.Topics()[name]), true
}

// topic joins the image's topic with this node's replicas of it (lt, nil
// when it holds none).
func (s *NodeSource) topic(t *controller.Topic, lt *replicamgr.Topic) Topic {
	ct := Topic{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Internal: discovery.IsInternalTopic(t.Name)}
	for i, p := range t.Partitions {
		cp := Partition{Index: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, ISR: p.ISR, Adding: p.Adding, Removing: p.Removing}
		if lt != nil && i < len(lt.Parts) && lt.Parts[i] != nil {
			rp := lt.Parts[i]
			cp.Storage = string(rp.StorageState(time.Now().UnixMilli()))
			if lg := rp.Log(); lg != nil {
				cp.Local, cp.LocalLeads = true, rp.Leads()
				cp.LogStart, cp.LogEnd, cp.HighWater, cp.Bytes = lg.StartOffset(), lg.EndOffset(), rp.HW(), lg.Size()
			}
		}
		cp.Remote, cp.RemoteStart, cp.RemoteEnd, cp.RemoteBytes = remoteRange(s.Image().RemoteSegments(controller.TopicPartition{TopicID: t.ID, Partition: int32(i)}))
		ct.Partitions = append(ct.Partitions, cp)
	}
	for k, v := range t.Configs {
		ck, known := catalogue.Lookup(catalogue.Topic, k)
		ct.Configs = append(ct.Configs, Config{Name: k, Value: v, Sensitive: known && ck.Type == "password"})
	}
	slices.SortFunc(ct.Configs, func(a, b Config) int { return cmp.Compare(a.Name, b.Name) })
	return ct
}

// Tail reads the records of the last lim.Records offsets below the high
// watermark of this node's replica, leader or follower (a follower's high
// watermark trails the leader's by a fetch). Control records are skipped,
// so a transactional partition shows fewer. Reading stops after
// lim.ReadBytes of log, and a compressed batch may decompress to at most
// that much.
func (s *NodeSource) Tail(name string, partition int32, lim TailLimits) (Tail, error) {
	it := s.Image().Topic(name)
	if it == nil || partition < 0 || int(partition) >= len(it.Partitions) {
		return Tail{}, fmt.Errorf("no partition %s-%d", name, partition)
	}
	t := Tail{Topic: name, Partition: partition, Leader: it.Partitions[partition].Leader}
	t.Remote, t.RemoteStart, t.RemoteEnd, t.RemoteBytes = remoteRange(s.Image().RemoteSegments(controller.TopicPartition{TopicID: it.ID, Partition: partition}))
	lt := s.Replicas.Topic(name)
	if lt == nil || int(partition) >= len(lt.Parts) || lt.Parts[partition] == nil {
		return t, nil
	}
	p := lt.Parts[partition]
	lg, v, code := p.Serve(replica.LocalRead)
	if code != 0 {
		return t, fmt.Errorf("%s-%d: this node's replica is %s", name, partition, v.Phase)
	}
	t.Local = true
	t.LogStart, t.HighWater = lg.StartOffset(), p.HW()
	from := max(t.LogStart, t.HighWater-int64(lim.Records))
	read := 0
	for off := from; off < t.HighWater; {
		if read >= lim.ReadBytes {
			t.Short = true
			break
		}
		data, err := lg.Read(off, min(1<<20, lim.ReadBytes-read), t.HighWater, nil)
		if err != nil {
			return t, fmt.Errorf("%s-%d at offset %d: %w", name, partition, off, err)
		}
		if len(data) == 0 {
			break
		}
		read += len(data)
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil || info.Bytes > len(data) {
				return t, fmt.Errorf("%s-%d: unreadable batch after offset %d", name, partition, off)
			}
			base := recordbatch.BaseOffset(data)
			if !info.Control {
				err = recordbatch.EachRecordWithin(data[:info.Bytes], info, lim.ReadBytes, func(r recordbatch.Record) bool {
					o := base + int64(r.OffsetDelta)
					if o >= from && o < t.HighWater {
						t.Records = append(t.Records, tailRecord(r, o, info, lim.ValueBytes))
					}
					return true
				})
				if err != nil {
					return t, fmt.Errorf("%s-%d: batch at %d: %w", name, partition, base, err)
				}
			}
			off = base + int64(info.LastDelta) + 1
			data = data[info.Bytes:]
		}
	}
	if n := len(t.Records); n > lim.Records {
		t.Records = t.Records[n-lim.Records:]
	}
	return t, nil
}

func tailRecord(r recordbatch.Record, off int64, info recordbatch.Info, n int) Record {
	ts := info.BaseTimestamp + r.TimestampDelta
	if info.LogAppendTimed {
		ts = info.MaxTimestamp
	}
	cr := Record{Offset: off, Timestamp: time.UnixMilli(ts), Key: Clip(r.Key, n), Value: Clip(r.Value, n)}
	for i, h := range r.Headers {
		if i == maxTailHeaders {
			cr.Headers = append(cr.Headers, Header{Key: fmt.Sprintf("(%d more headers)", len(r.Headers)-i), Value: Bytes{Null: true}})
			break
		}
		cr.Headers = append(cr.Headers, Header{Key: string(Clip(h[0], n).Data), Value: Clip(h[1], n)})
	}
	return cr
}

// errNotLocal is a partition's lag error when this node holds no replica
// of it: the console reads offsets only from the node's own replicas.
var errNotLocal = errors.New("console: no local replica")

// partitionOffsets are what the group pages measure lag against: the
// local replica's log start offset, and its high watermark on the leader,
// on a follower what it has replicated (as the lag series of
// broker/metrics).
func (s *NodeSource) partitionOffsets(topic string, partition int) lag.Offsets {
	t := s.Replicas.Topic(topic)
	if t == nil || partition >= len(t.Parts) || t.Parts[partition] == nil {
		return lag.Offsets{Err: errNotLocal}
	}
	p := t.Parts[partition]
	lg := p.Log()
	if lg == nil {
		return lag.Offsets{Err: errNotLocal}
	}
	end := p.HW()
	if !p.Leads() {
		end = max(end, lg.EndOffset())
	}
	return lag.Offsets{Start: lg.StartOffset(), End: end}
}

// groupLag is the group's lag per partition (package lag, which `fjord
// group lag` computes too) from what this node holds: the members'
// subscriptions and assignments in d (consumer protocol; a group not
// Stable shows none, as DescribeGroups does), its committed offsets, and
// the image's partitions of those topics, measured on the local
// replicas. members are d's members as the lag decoded them.
func (s *NodeSource) groupLag(d kmsg.DescribeGroupsResponseGroup, offs map[coordinator.TopicPartition]coordinator.Committed) (rows []lag.Row, members []lag.Member) {
	for _, m := range d.Members {
		lm := lag.Member{ID: m.MemberID}
		if d.ProtocolType == "consumer" {
			lm = lag.ConsumerMember(m.MemberID, m.ProtocolMetadata, m.MemberAssignment)
		}
		members = append(members, lm)
	}
	return s.lagOf(members, offs), members
}

// nextGenView is a KIP-848 consumer group or a KIP-932 share group as the
// console shows it.
type nextGenView struct {
	Type, State, Assignor string
	Epoch                 int32
	Members               []Member
	lag                   []lag.Member // consumer groups only: share groups commit no offsets
}

// describeNextGen describes group id if it is a next-generation group
// here; ok is false otherwise.
func describeNextGen(c *coordinator.Coordinator, id string) (v nextGenView, ok bool) {
	member := func(id, clientID, host string, instance *string, assigned map[string][]int32) Member {
		m := Member{ID: id, ClientID: clientID, Host: host, Assigned: assigned}
		if instance != nil {
			m.InstanceID = *instance
		}
		return m
	}
	switch c.GroupType(id) {
	case coordinator.ConsumerGroupType:
		ok, _, _ = c.Consumer(id, false, nil, func(g *consumer.Group, img *consumer.Image, _ int64) []consumer.Record {
			d := g.Describe(img)
			v = nextGenView{Type: coordinator.ConsumerGroupType, State: d.State, Assignor: d.AssignorName, Epoch: d.Epoch}
			for _, m := range d.Members {
				lm := lag.KIP848Member(m)
				v.lag = append(v.lag, lm)
				v.Members = append(v.Members, member(m.MemberID, m.ClientID, m.ClientHost, m.InstanceID, lm.Assigned))
			}
			return nil
		})
	case coordinator.ShareGroupType:
		ok, _, _ = c.Share(id, false, func(g *share.Group, img *share.Image, _ int64) []share.Record {
			d := g.Describe(img)
			v = nextGenView{Type: coordinator.ShareGroupType, State: d.GroupState, Assignor: d.Assignor, Epoch: d.GroupEpoch}
			for _, m := range d.Members {
				assigned := map[string][]int32{}
				for _, t := range m.Assignment.TopicPartitions {
					assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
				}
				v.Members = append(v.Members, member(m.MemberID, m.ClientID, m.ClientHost, nil, assigned))
			}
			return nil
		})
	}
	return v, ok
}

// lagOf is the lag of a group with these members and commits.
func (s *NodeSource) lagOf(members []lag.Member, offs map[coordinator.TopicPartition]coordinator.Committed) []lag.Row {
	commits := make(map[lag.TP]lag.Commit, len(offs))
	for tp, o := range offs {
		commits[lag.TP{Topic: tp.Topic, Partition: tp.Partition}] = lag.Commit{Offset: o.Offset}
	}
	img := s.Image()
	offsets := map[lag.TP]lag.Offsets{}
	for _, name := range lag.Topics(members, commits) {
		t := img.Topic(name)
		if t == nil {
			continue // deleted: its commits are listed without a lag
		}
		for i := range t.Partitions {
			offsets[lag.TP{Topic: name, Partition: int32(i)}] = s.partitionOffsets(name, i)
		}
	}
	return lag.Compute(members, commits, offsets)
}

func (s *NodeSource) Groups(limit int) ([]GroupSummary, int) {
	c := s.Coord
	var out []GroupSummary
	total := 0
	for _, g := range c.ListGroups() { // by id
		if c.Status(g.ID) != nil {
			continue
		}
		if total++; len(out) >= limit {
			continue
		}
		gs := GroupSummary{ID: g.ID, State: g.State, ProtocolType: g.ProtocolType}
		var d kmsg.DescribeGroupsResponseGroup
		var rows []lag.Row
		if c.With(g.ID, false, func(gr *group.Group) []group.Reply {
			gs.Members, gs.Generation = gr.NumMembers(), gr.Generation()
			d = gr.Describe()
			return nil
		}) || g.Type == coordinator.ClassicGroupType {
			rows, _ = s.groupLag(d, c.Offsets(g.ID))
		} else if v, ok := describeNextGen(c, g.ID); ok {
			gs.Members, gs.Generation = len(v.Members), v.Epoch
			if v.lag != nil {
				rows = s.lagOf(v.lag, c.Offsets(g.ID))
			}
		}
		for _, r := range rows {
			if r.Err == nil {
				gs.Lag += r.Lag
				gs.LagKnown = true
			}
		}
		out = append(out, gs)
	}
	return out, total
}

func (s *NodeSource) Group(id string) (Group, bool) {
	c := s.Coord
	if c.Status(id) != nil {
		return Group{}, false
	}
	g := Group{ID: id, State: "Empty"}
	var d kmsg.DescribeGroupsResponseGroup
	exists := c.With(id, false, func(gr *group.Group) []group.Reply {
		d = gr.Describe()
		g.Generation, g.Leader, g.Protocol, g.Timeline = gr.Generation(), gr.Leader(), gr.Protocol(), gr.Timeline()
		return nil
	})
	offs := c.Offsets(id)
	if !exists {
		if v, ok := describeNextGen(c, id); ok {
			g.State, g.ProtocolType, g.Protocol, g.Generation, g.Members = v.State, v.Type, v.Assignor, v.Epoch, v.Members
			if v.lag != nil {
				g.Offsets = groupOffsets(s.lagOf(v.lag, offs))
			}
			return g, true
		}
	}
	if !exists && len(offs) == 0 {
		return Group{}, false
	}
	if exists {
		g.State, g.ProtocolType = d.State, d.ProtocolType
	}
	rows, members := s.groupLag(d, offs)
	for i, m := range d.Members {
		cm := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: members[i].Assigned}
		if m.InstanceID != nil {
			cm.InstanceID = *m.InstanceID
		}
		g.Members = append(g.Members, cm)
	}
	g.Offsets = groupOffsets(rows)
	return g, true
}

// groupOffsets are the console's rows of a group's lag.
func groupOffsets(rows []lag.Row) []GroupOffset {
	var out []GroupOffset
	for _, r := range rows {
		o := GroupOffset{Topic: r.Topic, Partition: r.Partition, Committed: r.Committed, Member: r.Member}
		if r.Err == nil {
			o.HighWater, o.Lag, o.LagKnown = r.End, r.Lag, true
		}
		out = append(out, o)
	}
	return out
}

func (s *NodeSource) Clients(limit int) ([]protocol.ClientInfo, int) {
	servers := s.Servers()
	var out []protocol.ClientInfo
	total := 0
	for _, srv := range servers {
		cs, n := srv.Clients(limit - len(out))
		out = append(out, cs...)
		total += n
	}
	return out, total
}

// remoteRange is what a partition's copied (COPY_FINISHED) segments hold:
// ok false when none.
func remoteRange(segs []controller.RemoteSegmentMeta) (ok bool, start, end, bytes int64) {
	for _, sg := range segs {
		if sg.State != controller.RemoteCopyFinished {
			continue
		}
		if !ok {
			start = sg.BaseOffset
		}
		ok = true
		end = max(end, sg.EndOffset)
		bytes += sg.SizeBytes
	}
	return ok, start, end, bytes
}
