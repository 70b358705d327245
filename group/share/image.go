package share

import (
	"bytes"
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
// coordinator from its metadata image. Groups resolve subscribed topic
// names against it and hand its partition counts to the assignor.
//
// Invariants: topics sorted by name; names and ids distinct; Partitions >= 1.
type Image struct {
	topics []Topic
	byName map[string]int
	byID   map[TopicID]int
}

// NewImage copies topics into an Image. Topics without partitions (being
// created) or without a name are left out; of two topics with the same
// name or id the first is kept.
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

// resolve returns the topics of names that exist, sorted by id (the order
// an assign.Spec wants).
func (img *Image) resolve(names []string) []Topic {
	var ts []Topic
	for _, n := range names {
		if t, ok := img.byTopicName(n); ok {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b Topic) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return ts
}

// metadataHash fingerprints the topics of names that exist in the image:
// names, ids and partition counts. 0 when none exists, as in Kafka. It
// plays the part of Kafka 4.1's ShareGroupMetadataValue.MetadataHash
// (KIP-1101): when it changes, the group epoch goes up and the target
// assignment is recomputed. The value is ours (FNV-64a), not Kafka's
// (XXHash64 over names, ids, partition counts and racks): it is only ever
// compared with values this package computed, and a record written by
// Kafka merely costs one extra epoch bump.
func (img *Image) metadataHash(names []string) int64 {
	ts := img.resolve(names)
	if len(ts) == 0 {
		return 0
	}
	slices.SortFunc(ts, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	h := fnv.New64a()
	var buf []byte
	for _, t := range ts {
		buf = buf[:0]
		buf = append(buf, 0) // version of this fingerprint
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
