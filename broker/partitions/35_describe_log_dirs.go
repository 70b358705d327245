package partitions

import (
	"encoding/binary"
	"path/filepath"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
)

// DescribeLogDirs: v0-5
//
// Behaviour (kafka-log-dirs.sh, kadm DescribeAllLogDirs and
// DescribeBrokerLogDirs, sarama ClusterAdmin.DescribeLogDirs):
//   - One result per directory of log.dirs, as absolute paths. Fjord
//     stores every partition in the first; the others hold nothing and are
//     reported as Kafka reports an offline log directory,
//     KAFKA_STORAGE_ERROR with no partitions, so no tool takes them for
//     usable space.
//   - Per partition whose log is open here (leader or follower): its size
//     in bytes (every segment's .log), its offset lag — on a follower, the
//     leader's high watermark in the last fetch response minus its own log
//     end (never negative), 0 on the leader as in Kafka — and IsFuture
//     false (Fjord never moves a replica between directories).
//   - A tiered partition with copied segments carries, from v2 (flexible),
//     the bytes of its copy in the remote store as a Fjord tagged field
//     (RemoteSizeTag, a signed varint), which Kafka's DescribeLogDirs has
//     no field for; clients skip tags they do not know. `fjord topic
//     describe` shows it.
//   - Topics null means every topic; otherwise the partitions named, those
//     not hosted here simply absent. Topics without a partition here are
//     left out.
//
// Version notes: v1 no change; v2 flexible; v3 top-level ErrorCode
// (always 0: no ACLs); v4 TotalBytes and UsableBytes of the directory's
// file system (statfs: blocks and blocks available to unprivileged users,
// times the block size; -1 if statfs fails, as the default says); v5
// IsCordoned (KIP-1066), always false: Fjord has no cordoning of log
// directories.
func describeLogDirsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 35, Client: api.Versions(0, 5), Handle: bindTo(h, handleDescribeLogDirs),
		Rule: api.Needs("DESCRIBE on CLUSTER", 0, api.ClusterTop(acl.OpDescribe)),
	}
}

func handleDescribeLogDirs(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dirs := logDirsAbs(h)
	for i, dir := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = dir
		if i > 0 {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		if req.Version >= 4 {
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err == nil {
				rd.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
				rd.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
			}
		}
		rd.Topics = describeLocalTopics(h.Replicas(), req)
		if req.Version >= 2 {
			tagRemoteSizes(h, rd.Topics)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	respond(resp)
}

// describeLocalTopics lists the partitions req asks about (all when its
// Topics is null) whose log is open here, by topic name.
func describeLocalTopics(m *replicamgr.Manager, req *kmsg.DescribeLogDirsRequest) []kmsg.DescribeLogDirsResponseDirTopic {
	wanted := func(name string, idx int32) bool { return true }
	if req.Topics != nil {
		asked := map[string]map[int32]bool{}
		for _, rt := range req.Topics {
			if asked[rt.Topic] == nil {
				asked[rt.Topic] = map[int32]bool{}
			}
			for _, p := range rt.Partitions {
				asked[rt.Topic][p] = true
			}
		}
		wanted = func(name string, idx int32) bool { return asked[name][idx] }
	}
	topics := m.Topics()
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []kmsg.DescribeLogDirsResponseDirTopic
	for _, name := range names {
		st := kmsg.NewDescribeLogDirsResponseDirTopic()
		st.Topic = name
		for _, p := range topics[name].Local() {
			if !wanted(name, p.Index) {
				continue
			}
			lg, _, code := p.Serve(replica.LocalRead)
			if code != 0 {
				continue // not open (yet), or going: no size to report
			}
			sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			sp.Partition, sp.Size, sp.OffsetLag = p.Index, lg.Size(), p.OffsetLag()
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			out = append(out, st)
		}
	}
	return out
}

// RemoteSizeTag is DescribeLogDirs' tagged field of a partition holding
// the bytes of its copy in the remote store ("FR").
const RemoteSizeTag = 0x4652

// tagRemoteSizes sets RemoteSizeTag on the partitions of topics with
// copied segments.
func tagRemoteSizes(h Host, topics []kmsg.DescribeLogDirsResponseDirTopic) {
	r := h.Remote()
	if r == nil {
		return
	}
	m := h.Replicas()
	for i := range topics {
		t := m.Topic(topics[i].Topic)
		if t == nil {
			continue
		}
		for j := range topics[i].Partitions {
			sp := &topics[i].Partitions[j]
			if n := r.Size(t.ID, sp.Partition); n > 0 {
				sp.UnknownTags.Set(RemoteSizeTag, binary.AppendVarint(nil, n))
			}
		}
	}
}

// RemoteSize reads RemoteSizeTag from a DescribeLogDirs partition: the
// bytes of its copy in the remote store, false when it has none.
func RemoteSize(sp *kmsg.DescribeLogDirsResponseDirTopicPartition) (int64, bool) {
	var n int64
	ok := false
	sp.UnknownTags.Each(func(tag uint32, v []byte) {
		if tag == RemoteSizeTag {
			if x, k := binary.Varint(v); k > 0 {
				n, ok = x, true
			}
		}
	})
	return n, ok
}

// logDirsAbs is log.dirs as absolute, cleaned paths; the first is the one
// Fjord stores partitions in.
func logDirsAbs(h Host) []string {
	configured, inUse := h.LogDirs()
	var out []string
	for i, d := range strings.Split(configured, ",") {
		d = strings.TrimSpace(d)
		if i == 0 {
			d = inUse
		}
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		out = append(out, filepath.Clean(d))
	}
	return out
}
