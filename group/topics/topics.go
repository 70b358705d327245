// Package topics is the view of the cluster's topics that KIP-848 consumer
// groups (group/consumer) and KIP-932 share groups (group/share) resolve
// their subscriptions against: an immutable Image of names, ids and
// partition counts, built by the coordinator from its metadata image, and
// the fingerprint of a subscription that tells a group when to rebalance.
// Both packages re-export its types under their own names (consumer.Image,
// share.Image, ...), so that callers outside group/ need not import it.
//
// Like the group packages it is pure: no goroutines, clocks or I/O.
package topics

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/fjordlog/fjord/group/assign"
)

// ID is a topic's KIP-516 id.
type ID = assign.TopicID

// Topic is what a group needs to know of a topic.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// Image is an immutable view of the cluster's topics. Groups resolve
// subscriptions (names and, in consumer groups, regular expressions)
// against it and hand its partition counts to the assignors. It holds
// every topic, internal ones included: Kafka matches regular expressions
// against all topic names too.
//
// Invariants: topics sorted by name; names and ids distinct; Partitions >= 1.
type Image struct {
	topics []Topic
	byName map[string]int
	byID   map[ID]int
}

// NewImage copies topics into an Image. Topics without partitions (being
// created) or without a name are left out; of two topics with the same
// name or id the first is kept.
func NewImage(topics []Topic) *Image {
	img := &Image{byName: make(map[string]int, len(topics)), byID: make(map[ID]int, len(topics))}
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
// modify the slice. A nil Image has no topics, as have all its lookups.
func (img *Image) Topics() []Topic {
	if img == nil {
		return nil
	}
	return img.topics
}

// ByName returns the topic named name, if the image has it.
func (img *Image) ByName(name string) (Topic, bool) {
	if img == nil {
		return Topic{}, false
	}
	i, ok := img.byName[name]
	if !ok {
		return Topic{}, false
	}
	return img.topics[i], true
}

// ByID returns the topic with id id, if the image has it.
func (img *Image) ByID(id ID) (Topic, bool) {
	if img == nil {
		return Topic{}, false
	}
	i, ok := img.byID[id]
	if !ok {
		return Topic{}, false
	}
	return img.topics[i], true
}

// Resolve returns the topics of names that exist, sorted by id (the order
// an assign.Spec wants); a name listed twice gives its topic twice.
func (img *Image) Resolve(names []string) []Topic {
	var ts []Topic
	for _, n := range names {
		if t, ok := img.ByName(n); ok {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b Topic) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return ts
}

// MetadataHash fingerprints the topics of names that exist in the image:
// their names, ids and partition counts; 0 when none exists, as in Kafka.
// It plays the part of Kafka 4.1's MetadataHash in ConsumerGroupMetadataValue
// and ShareGroupMetadataValue (KIP-1101): when it changes, the group epoch
// goes up and the target assignment is recomputed. The value is ours
// (FNV-64a), not Kafka's (XXHash64 over names, ids, partition counts and
// racks): it is only ever compared with values this package computed, and
// a record written by Kafka merely costs one extra epoch bump.
func (img *Image) MetadataHash(names []string) int64 {
	ts := img.Resolve(names)
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
