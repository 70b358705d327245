package partitions

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
)

// AlterReplicaLogDirs: v0-2
//
// Behaviour: Fjord keeps every replica in the first directory of log.dirs
// and never moves one, so the only move it can grant is the one that is
// already done. Per partition, checked in Kafka's order
// (ReplicaManager.alterReplicaLogDirs):
//   - a directory that is not one of log.dirs (as an absolute path; Kafka
//     compares absolute paths too, so a relative one never matches):
//     LOG_DIR_NOT_FOUND;
//   - another directory of log.dirs: KAFKA_STORAGE_ERROR, the answer Kafka
//     gives for a directory that is offline, which is how DescribeLogDirs
//     reports Fjord's unused ones — a retry cannot succeed, and no data is
//     touched;
//   - the directory in use, for a partition whose replica is open here:
//     NONE (Kafka answers NONE without creating a future replica when the
//     replica already lives there);
//   - a partition this broker holds no replica of, or one not open yet:
//     REPLICA_NOT_AVAILABLE (Kafka's answer for this API where others say
//     NOT_LEADER_OR_FOLLOWER); one whose log failed to open
//     KAFKA_STORAGE_ERROR; a topic or partition that does not exist
//     UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes: v1 no change; v2 flexible.
func alterReplicaLogDirsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 34, Client: api.Versions(0, 2), Handle: bindTo(h, handleAlterReplicaLogDirs),
		Rule:    api.Needs("ALTER on CLUSTER", 4, checkAlterReplicaLogDirs),
		Mutates: true,
	}
}

func handleAlterReplicaLogDirs(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	dirs := logDirsAbs(h)
	replicas := h.Replicas()
	// A partition named under two directories gets one answer, for the
	// last (Kafka builds a map from partition to directory).
	type tp struct {
		topic string
		p     int32
	}
	dest := map[tp]string{}
	var order []tp
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			for _, idx := range rt.Partitions {
				k := tp{rt.Topic, idx}
				if _, ok := dest[k]; !ok {
					order = append(order, k)
				}
				dest[k] = rd.Dir
			}
		}
	}
	byTopic := map[string]int{}
	for _, k := range order {
		at, ok := byTopic[k.topic]
		if !ok {
			st := kmsg.NewAlterReplicaLogDirsResponseTopic()
			st.Topic = k.topic
			resp.Topics = append(resp.Topics, st)
			at = len(resp.Topics) - 1
			byTopic[k.topic] = at
		}
		sp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		sp.Partition = k.p
		dir := dest[k]
		switch i := slices.Index(dirs, filepath.Clean(dir)); {
		case !filepath.IsAbs(dir) || i < 0:
			sp.ErrorCode = kerr.LogDirNotFound.Code
		case i > 0:
			sp.ErrorCode = kerr.KafkaStorageError.Code
		default:
			sp.ErrorCode = replicaHere(replicas.Topic(k.topic), k.p)
		}
		resp.Topics[at].Partitions = append(resp.Topics[at].Partitions, sp)
	}
	respond(resp)
}

// replicaHere is AlterReplicaLogDirs' answer for a partition asked to stay
// in the directory it is in: NONE when its replica is open here.
func replicaHere(t *replicamgr.Topic, idx int32) int16 {
	if t == nil || idx < 0 || int(idx) >= len(t.Parts) {
		return kerr.UnknownTopicOrPartition.Code
	}
	p := t.Parts[idx]
	if p == nil {
		return kerr.ReplicaNotAvailable.Code
	}
	switch _, _, code := p.Serve(replica.LocalRead); code {
	case 0:
		return 0
	case kerr.KafkaStorageError.Code, kerr.UnknownTopicOrPartition.Code:
		return code
	default:
		return kerr.ReplicaNotAvailable.Code
	}
}

func checkAlterReplicaLogDirs(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterReplicaLogDirsRequest)
	if z.Cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, api.ClusterDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp, nil
}
