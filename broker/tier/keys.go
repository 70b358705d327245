package tier

import (
	"encoding/base64"
	"fmt"
)

// Object keys follow Aiven's tiered-storage-for-apache-kafka layout, so an
// operator's tools (and a later migration) find the objects where they
// expect them:
//
//	<prefix><topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>.<suffix>
//
// Ids are Kafka's Uuid.toString (unpadded URL-safe base64). One attempt's
// objects share everything but the suffix, so deleting an attempt is
// deleting its Suffixes under ObjectKey.

// Suffixes are the objects of one attempt, in upload order: the segment,
// its offset and time indexes, the producer snapshot at its end, its
// leader-epoch checkpoint entries, and its aborted-transaction index
// (uploaded only when the segment has one; deleted regardless).
var Suffixes = []string{"log", "index", "timeindex", "snapshot", "leader-epoch-checkpoint", "txnindex"}

// ObjectKey is the key of one attempt's object with suffix.
func ObjectKey(prefix, topic string, topicID [16]byte, partition int32, base int64, segment [16]byte, suffix string) string {
	return fmt.Sprintf("%s%s/%d/%020d-%s.%s", prefix, TopicDir(topic, topicID), partition, base, uuidString(segment), suffix)
}

// TopicDir is a topic's directory under the prefix: what a topic
// deletion lists and deletes.
func TopicDir(topic string, topicID [16]byte) string {
	return topic + "-" + uuidString(topicID)
}

func uuidString(u [16]byte) string { return base64.RawURLEncoding.EncodeToString(u[:]) }
