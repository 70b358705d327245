package broker

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
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
func init() { regKey(34, 0, 2, handleAlterReplicaLogDirs) }

func handleAlterReplicaLogDirs(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	dirs := b.logDirsAbs()
	byTopic := map[string]int{}
	for _, rd := range req.Dirs {
		dirCode := int16(0)
		switch i := slices.Index(dirs, filepath.Clean(rd.Dir)); {
		case !filepath.IsAbs(rd.Dir) || i < 0:
			dirCode = kerr.LogDirNotFound.Code
		case i > 0:
			dirCode = kerr.KafkaStorageError.Code
		}
		for _, rt := range rd.Topics {
			at, ok := byTopic[rt.Topic]
			if !ok {
				st := kmsg.NewAlterReplicaLogDirsResponseTopic()
				st.Topic = rt.Topic
				resp.Topics = append(resp.Topics, st)
				at = len(resp.Topics) - 1
				byTopic[rt.Topic] = at
			}
			t := b.lookup(rt.Topic)
			for _, idx := range rt.Partitions {
				sp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				sp.Partition = idx
				sp.ErrorCode = dirCode
				if dirCode == 0 {
					sp.ErrorCode = replicaHere(t, idx)
				}
				resp.Topics[at].Partitions = append(resp.Topics[at].Partitions, sp)
			}
		}
	}
	respond(resp)
}

// replicaHere is AlterReplicaLogDirs' answer for a partition asked to stay
// in the directory it is in: NONE when its replica is open here.
func replicaHere(t *topic, idx int32) int16 {
	if t == nil || idx < 0 || int(idx) >= len(t.parts) {
		return kerr.UnknownTopicOrPartition.Code
	}
	p := t.parts[idx]
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
