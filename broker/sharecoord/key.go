package sharecoord

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/group/sharepart"
)

// Placement: a share-partition (group, topic id, partition) lives on the
// state partition its coordinator key hashes to, exactly as in Kafka, so a
// client's FindCoordinator and a broker's persister agree with each other
// and with a Kafka cluster's layout.

// TopicIDString is a topic id as Kafka's Uuid.toString writes it: URL-safe
// base64 without padding (22 characters).
func TopicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// CoordinatorKey is k as Kafka's SharePartitionKey.asCoordinatorKey:
// "groupId:topicId:partition", the string FindCoordinator (key type 2)
// carries and placement hashes.
func CoordinatorKey(k sharepart.Key) string {
	return k.Group + ":" + TopicIDString(k.TopicID) + ":" + strconv.Itoa(int(k.Partition))
}

// PartitionOf is k's partition of a state topic of n partitions (0 if n
// is 0): abs(javaStringHash(CoordinatorKey(k))) % n.
func PartitionOf(k sharepart.Key, n int32) int32 {
	return coordinator.PartitionOf(CoordinatorKey(k), n)
}

// ParseKey reads a FindCoordinator share key as Kafka 4.2's
// SharePartitionKey.getInstance(String) does: split on ':' as Java's
// String.split (trailing empty pieces dropped), the last piece the
// partition (Integer.parseInt: a sign is allowed, a negative partition
// too), the one before it the topic id (Uuid.fromString: base64url, with
// or without its padding, of exactly 16 bytes), everything before that
// the group id, which may hold colons but not be blank (Java's trim).
func ParseKey(s string) (sharepart.Key, error) {
	if s == "" {
		return sharepart.Key{}, fmt.Errorf("share coordinator key is empty")
	}
	parts := strings.Split(s, ":")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) < 3 {
		return sharepart.Key{}, fmt.Errorf("share coordinator key %q: want groupId:topicId:partition", s)
	}
	last := len(parts) - 1
	group := strings.Join(parts[:last-1], ":")
	if strings.TrimFunc(group, func(r rune) bool { return r <= ' ' }) == "" {
		return sharepart.Key{}, fmt.Errorf("share coordinator key %q: the group id is empty", s)
	}
	id, err := parseTopicID(parts[last-1])
	if err != nil {
		return sharepart.Key{}, fmt.Errorf("share coordinator key %q: %w", s, err)
	}
	p, err := strconv.ParseInt(parts[last], 10, 32)
	if err != nil {
		return sharepart.Key{}, fmt.Errorf("share coordinator key %q: invalid partition %q", s, parts[last])
	}
	return sharepart.Key{Group: group, TopicID: id, Partition: int32(p)}, nil
}

// parseTopicID is Kafka's Uuid.fromString: 22 base64url characters, or 24
// with their "==" padding.
func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	raw := s
	if len(s) == 24 && strings.HasSuffix(s, "==") {
		raw = s[:22]
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("invalid topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// partitionOfString places a coordinator key string as PartitionOf places
// the key it names.
func partitionOfString(coordKey string, n int32) int32 { return coordinator.PartitionOf(coordKey, n) }
