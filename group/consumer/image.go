package consumer

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/fjordlog/fjord/group/assign"
)

// TopicID is a topic's KIP-516 id.
type TopicID = assign.TopicID

// Topic is what a group needs to know of a topic.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// Image is an immutable view of the cluster's topics, built by the
// coordinator from its metadata image. Groups resolve subscriptions (names
// and regular expressions) against it and hand its partition counts to the
// assignors. It holds every topic, internal ones included: Kafka matches
// regular expressions against all topic names too.
//
// Invariants: topics sorted by name; names and ids distinct; Partitions >= 1.
type Image struct {
	topics []Topic
	byName map[string]int
	byID   map[TopicID]int
}

// NewImage copies topics into an Image. Topics without partitions are left
// out (a topic being created); of two topics with the same name or id the
// first is kept.
func NewImage(topics []Topic) *Image {
	img := &Image{byName: make(map[string]int, len(topics)), byID: make(map[TopicID]int, len(topics))}
	ts := slices.Clone(topics)
	slices.SortStableFunc(ts, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range ts {
		if t.Partitions < 1 || t.Name == "" {
			continue
		}
		if _, dup := img.byName[t.Name]; dup {
			continue
		}
		if _, dup := img.byID[t.ID]; dup {
			continue
		}
		img.byName[t.Name] = len(img.topics)
		img.byID[t.ID] = len(img.topics)
		img.topics = append(img.topics, t)
	}
	return img
}

// Topics returns the image's topics sorted by name. The caller must not
// modify the slice.
func (img *Image) Topics() []Topic {
	if img == nil {
		return nil
	}
	return img.topics
}

func (img *Image) byTopicName(name string) (Topic, bool) {
	if img == nil {
		return Topic{}, false
	}
	i, ok := img.byName[name]
	if !ok {
		return Topic{}, false
	}
	return img.topics[i], true
}

func (img *Image) byTopicID(id TopicID) (Topic, bool) {
	if img == nil {
		return Topic{}, false
	}
	i, ok := img.byID[id]
	if !ok {
		return Topic{}, false
	}
	return img.topics[i], true
}

// metadataHash fingerprints the topics with the given names that exist in
// the image: their names, ids and partition counts. 0 when none exist, as
// in Kafka. It plays the role of Kafka 4.1's ConsumerGroupMetadataValue
// MetadataHash (KIP-1101): a change means the group must rebalance. The
// value is ours (FNV-64a), not Kafka's (XXHash64 with racks): it is only
// ever compared with values this package computed.
func (img *Image) metadataHash(names []string) int64 {
	var ts []Topic
	for _, n := range names {
		if t, ok := img.byTopicName(n); ok {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return 0
	}
	slices.SortFunc(ts, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	h := fnv.New64a()
	var buf []byte
	for _, t := range ts {
		buf = buf[:0]
		buf = append(buf, 0) // magic: version of this fingerprint
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(t.Name)))
		buf = append(buf, t.Name...)
		buf = append(buf, t.ID[:]...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(t.Partitions))
		h.Write(buf)
	}
	v := int64(h.Sum64())
	if v == 0 {
		v = 1 // 0 means "no topics"
	}
	return v
}
