package controller

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// ErrNotApplicable is returned by Apply for a record that does not apply to
// the image (unknown id, duplicate name, stale broker epoch, broken
// partition invariant). Only validated records are proposed, so callers
// treat it as a bug.
var ErrNotApplicable = errors.New("controller: record does not apply")

// Image is an immutable snapshot of the cluster metadata after applying the
// log up to and including index Version.
//
// Design: copy-on-write. Apply shallow-copies the Image and replaces only the
// maps it changes (cloned, then modified); the untouched maps, Topic values
// and slices are shared between versions. So an *Image may be read from any
// goroutine without locks while its owner applies the next record, and an
// old image stays valid forever. Nothing reachable from an Image is ever
// modified: everything accessors return is read-only for the caller.
//
// Cost: a partition change clones the topic's partition slice and the topic
// map, O(partitions of the topic + topics). That is fine for thousands of
// topics; a persistent (HAMT) map would be the next step, not a mutable
// image with locks.
//
// The zero Image is the empty cluster at version 0.
type Image struct {
	version uint64

	// brokers by id.
	brokers map[int32]BrokerState
	// topics by id; names maps each topic name to its id.
	// Invariant: names and topics are inverse: len equal, names[t.Name]==t.ID.
	topics map[[16]byte]*Topic
	names  map[string][16]byte
	// brokerConfigs by ConfigResource.Name of a ResourceBroker ("" is the
	// cluster default); topic configs live in their Topic.
	brokerConfigs map[string]map[string]string
	// groupConfigs are the groups' dynamic configs, by group id.
	// Invariant: no group id is "" and no group has an empty map.
	groupConfigs map[string]map[string]string
	// nextProducerID is the first producer id not yet handed out.
	nextProducerID int64
	// quotas are the client quotas by entity (quota.go). Invariant: no
	// entity has an empty map.
	quotas map[QuotaEntity]map[string]float64
	// acls is the set of ACL bindings (acl.go); nil when empty.
	acls map[ACL]struct{}
	// scram are the SCRAM credentials (scram.go).
	scram map[ScramKey]ScramSecret
	// remote are the tiered partitions' remote segment attempts
	// (remote.go), each partition's in the order compareRemote gives.
	// Invariant: no partition has an empty slice, no entry is
	// DELETE_FINISHED, and every key is a partition of a topic in topics.
	remote map[TopicPartition][]RemoteSegmentMeta

	// owned is set only while applyBatch builds this image: what the
	// batch's records allocated themselves, and so may change in place
	// (no other image can reach it). Without it a batch creating a topic
	// of n partitions copied the topic map and the partition slice n
	// times: O(n²), 10 s and more for 10,000 partitions, at creation and
	// again at every start-up's replay.
	owned *batchOwned
}

// batchOwned is what a batch being applied has allocated: the topic map
// (cloned once), and topics (their Topic value and partition array; a
// record that makes a Topic sharing another image's array, such as a
// config change, does not own it).
type batchOwned struct {
	topicMap bool
	topics   map[[16]byte]bool
}

// BrokerState is a registered broker as the image sees it.
type BrokerState struct {
	RegisterBroker       // the latest registration; its Epoch is set to Epoch
	Fenced         bool  // may not lead or be in an ISR
	Epoch          int64 // broker epoch: the log index of the registration
}

// Topic is a topic in an image. Read-only.
type Topic struct {
	Name    string
	ID      [16]byte
	Configs map[string]string // topic-level overrides; nil when none
	// Partitions[p] is partition p. Invariant: partitions are [0, n).
	Partitions []Partition
}

// Partition is the replication state of one partition. Read-only: the
// slices are shared with other images.
//
// Invariant: Replicas is non-empty and distinct; ISR is a non-empty subset
// of Replicas; Leader is in ISR or -1. ISR holds only unfenced brokers,
// except that it never becomes empty: when its last member is fenced it
// stays there with Leader -1, so that broker (the only one known to have
// every committed record) leads again when it returns, and no unclean
// election is ever needed.
//
// During a reassignment (KIP-455; reassign.go) Adding and Removing are
// disjoint subsets of Replicas, and Replicas is the target (Replicas minus
// Removing, in order, so the target's first replica is the preferred
// leader) followed by Removing: Replicas = target ∪ removing, and the
// original assignment, which a cancellation restores, is Replicas minus
// Adding. Both the target and the original are non-empty. Adding and
// Removing are nil when no reassignment is in progress.
type Partition struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32   // -1: no leader
	LeaderEpoch    int32   // bumped on each leader change
	PartitionEpoch int32   // bumped on each change of any field
	Adding         []int32 // replicas the reassignment adds (not in the original)
	Removing       []int32 // replicas it removes (not in the target)
}

// TopicPartition names one partition.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// BrokerConfigs returns every broker-level config by resource name ("" is
// the cluster default). The caller owns the maps.
func (img *Image) BrokerConfigs() map[string]map[string]string {
	out := make(map[string]map[string]string, len(img.brokerConfigs))
	for k, m := range img.brokerConfigs {
		out[k] = maps.Clone(m)
	}
	return out
}

// Version is the log index of the last record applied.
func (img *Image) Version() uint64 { return img.version }

// NextProducerID is the first producer id not yet handed out.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// Endpoint is broker id's endpoint on the listener named listener.
func (img *Image) Endpoint(id int32, listener string) (Endpoint, bool) {
	bs, ok := img.Broker(id)
	if !ok {
		return Endpoint{}, false
	}
	for _, e := range bs.Endpoints {
		if e.Name == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Broker returns the broker's state.
func (img *Image) Broker(id int32) (BrokerState, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Brokers returns every registered broker, by id. The caller owns the slice.
func (img *Image) Brokers() []BrokerState {
	bs := slices.Collect(maps.Values(img.brokers))
	slices.SortFunc(bs, func(a, b BrokerState) int { return cmp.Compare(a.ID, b.ID) })
	return bs
}

// LiveBrokers returns the unfenced brokers, by id. The caller owns the slice.
func (img *Image) LiveBrokers() []BrokerState {
	return slices.DeleteFunc(img.Brokers(), func(b BrokerState) bool { return b.Fenced })
}

// live reports whether id is a registered, unfenced broker.
func (img *Image) live(id int32) bool {
	b, ok := img.brokers[id]
	return ok && !b.Fenced
}

// Topic returns the named topic, or nil.
func (img *Image) Topic(name string) *Topic {
	id, ok := img.names[name]
	if !ok {
		return nil
	}
	return img.topics[id]
}

// TopicByID returns the topic with that id, or nil.
func (img *Image) TopicByID(id [16]byte) *Topic { return img.topics[id] }

// Topics returns every topic, by name. The caller owns the slice, not the
// topics.
func (img *Image) Topics() []*Topic {
	ts := slices.Collect(maps.Values(img.topics))
	slices.SortFunc(ts, func(a, b *Topic) int { return cmp.Compare(a.Name, b.Name) })
	return ts
}

// Partition returns one partition's state.
func (img *Image) Partition(topicID [16]byte, p int32) (Partition, bool) {
	t := img.topics[topicID]
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return Partition{}, false
	}
	return t.Partitions[p], true
}

// PartitionsLedBy returns the partitions whose leader is broker, ordered by
// topic name, then partition. The caller owns the slice.
func (img *Image) PartitionsLedBy(broker int32) []TopicPartition {
	var out []TopicPartition
	for _, t := range img.Topics() {
		for p, pt := range t.Partitions {
			if pt.Leader == broker {
				out = append(out, TopicPartition{t.ID, int32(p)})
			}
		}
	}
	return out
}

// Config returns a config value set for exactly that resource. It does not
// fall back from a broker to the cluster default, or to static config:
// layering is the reader's business.
func (img *Image) Config(res ConfigResource, key string) (string, bool) {
	var m map[string]string
	switch res.Type {
	case ResourceTopic:
		if t := img.Topic(res.Name); t != nil {
			m = t.Configs
		}
	case ResourceBroker:
		m = img.brokerConfigs[res.Name]
	case ResourceGroup:
		m = img.groupConfigs[res.Name]
	}
	v, ok := m[key]
	return v, ok
}

// GroupConfig is the value of a group config stored for group (its
// override), false when it has none. It is not the effective value: the
// default when there is no override is the reader's business (the broker's
// group.* keys; broker/config.GroupValue layers the two).
func (img *Image) GroupConfig(group, key string) (string, bool) {
	v, ok := img.groupConfigs[group][key]
	return v, ok
}

// GroupConfigs is every config stored for group, by key; nil when none.
// Read-only: the map is the image's.
func (img *Image) GroupConfigs(group string) map[string]string { return img.groupConfigs[group] }

// ConfiguredGroups lists, sorted, the groups with at least one stored
// config. The caller owns the slice.
func (img *Image) ConfiguredGroups() []string { return slices.Sorted(maps.Keys(img.groupConfigs)) }

// Apply returns the image after applying r at log index index, which must
// be greater than img.Version. img is not modified. If r does not apply, the
// error wraps ErrNotApplicable (or says why index is wrong) and the image is
// nil.
//
// A Batch applies all or nothing: its records apply in order, each at
// index, to one new image; if any does not apply, Apply returns nil and
// that record's error (and img, as always, is as it was).
func (img *Image) Apply(index uint64, r Record) (*Image, error) {
	if index <= img.version {
		return nil, fmt.Errorf("%w: index %d not after version %d", ErrNotApplicable, index, img.version)
	}
	next := *img
	next.version = index
	var err error
	if b, ok := r.Body.(Batch); ok {
		err = next.applyBatch(index, b)
	} else {
		err = next.apply(index, r)
	}
	if err != nil {
		return nil, err
	}
	return &next, nil
}

// applyBatch applies b's records in order to img, a shallow copy of an
// image that Apply made; see apply. On an error img may be half-changed;
// Apply drops it.
func (img *Image) applyBatch(index uint64, b Batch) error {
	if len(b.Records) == 0 {
		return fmt.Errorf("%w: empty batch", ErrNotApplicable)
	}
	regs := 0
	for i, r := range b.Records {
		switch r.Body.(type) {
		case Batch:
			return fmt.Errorf("%w: batch record %d is a batch", ErrNotApplicable, i)
		case RegisterBroker:
			if regs++; regs > 1 {
				return fmt.Errorf("%w: batch has more than one RegisterBroker", ErrNotApplicable)
			}
		}
	}
	img.owned = &batchOwned{topics: map[[16]byte]bool{}}
	defer func() { img.owned = nil }()
	for i, r := range b.Records {
		if err := img.apply(index, r); err != nil {
			return fmt.Errorf("%w (batch record %d of %d)", err, i, len(b.Records))
		}
	}
	return nil
}

// apply applies one record (not a Batch) at index to img, a shallow copy
// of an image that Apply made. Like every method that changes an image, it
// replaces img's fields and maps with changed clones and never writes into
// a map, slice or Topic reachable from img: those may be shared with the
// image img was copied from, which must stay as it was (for a Batch, even
// when a later record fails). On an error img may be half-changed; Apply
// drops it.
func (img *Image) apply(index uint64, r Record) error {
	switch b := r.Body.(type) {
	case RegisterBroker:
		return img.registerBroker(index, b)
	case FenceBroker:
		return img.setFenced(b.ID, b.Epoch, true)
	case UnfenceBroker:
		return img.setFenced(b.ID, b.Epoch, false)
	case UnregisterBroker:
		if _, ok := img.brokers[b.ID]; !ok {
			return fmt.Errorf("%w: unregister: broker %d not registered", ErrNotApplicable, b.ID)
		}
		img.brokers = maps.Clone(img.brokers)
		delete(img.brokers, b.ID)
	case CreateTopic:
		return img.createTopic(b)
	case CreatePartition:
		return img.createPartition(b)
	case ChangePartition:
		return img.changePartition(b)
	case ChangeReplicas:
		return img.changeReplicas(b)
	case DeleteTopic:
		t := img.topics[b.ID]
		if t == nil {
			return fmt.Errorf("%w: delete: unknown topic id %x", ErrNotApplicable, b.ID)
		}
		img.dropRemoteTopic(t)
		img.topics, img.names = maps.Clone(img.topics), maps.Clone(img.names)
		delete(img.topics, b.ID)
		delete(img.names, t.Name)
	case SetConfig:
		return img.setConfig(b)
	case ProducerIDs:
		if b.First != img.nextProducerID || b.Count <= 0 || b.First > maxProducerID-b.Count {
			return fmt.Errorf("%w: producer ids [%d, +%d) (next is %d)", ErrNotApplicable, b.First, b.Count, img.nextProducerID)
		}
		img.nextProducerID = b.First + b.Count
	case ClientQuota:
		return img.setClientQuota(b)
	case ACLChange:
		return img.applyACL(b)
	case ScramCredential:
		return img.setScramCredential(b)
	case RemoteSegment:
		return img.addRemoteSegment(b)
	case RemoteSegmentStateChange:
		return img.changeRemoteSegment(b)
	default:
		return fmt.Errorf("%w: unknown body %T", ErrNotApplicable, r.Body)
	}
	return nil
}

// maxProducerID bounds producer id blocks; ids are int64 and must stay
// non-negative.
const maxProducerID = 1<<63 - 1

func (img *Image) registerBroker(index uint64, b RegisterBroker) error {
	if b.ID < 0 {
		return fmt.Errorf("%w: register: broker id %d", ErrNotApplicable, b.ID)
	}
	if b.Epoch != 0 && uint64(b.Epoch) != index {
		return fmt.Errorf("%w: register: broker %d epoch %d at index %d", ErrNotApplicable, b.ID, b.Epoch, index)
	}
	b.Epoch = int64(index)
	img.brokers = maps.Clone(img.brokers)
	if img.brokers == nil {
		img.brokers = map[int32]BrokerState{}
	}
	img.brokers[b.ID] = BrokerState{RegisterBroker: b, Fenced: true, Epoch: b.Epoch}
	return nil
}

func (img *Image) setFenced(id int32, epoch int64, fenced bool) error {
	b, ok := img.brokers[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: fence=%t: broker %d not registered", ErrNotApplicable, fenced, id)
	case b.Epoch != epoch:
		return fmt.Errorf("%w: fence=%t: broker %d epoch %d, record has %d", ErrNotApplicable, fenced, id, b.Epoch, epoch)
	case b.Fenced == fenced:
		return fmt.Errorf("%w: fence=%t: broker %d already so", ErrNotApplicable, fenced, id)
	}
	b.Fenced = fenced
	img.brokers = maps.Clone(img.brokers)
	img.brokers[id] = b
	return nil
}

func (img *Image) createTopic(b CreateTopic) error {
	switch {
	case b.ID == [16]byte{}:
		return fmt.Errorf("%w: create topic %q: zero id", ErrNotApplicable, b.Name)
	case b.Name == "":
		return fmt.Errorf("%w: create topic: empty name", ErrNotApplicable)
	case img.topics[b.ID] != nil:
		return fmt.Errorf("%w: create topic %q: id %x in use", ErrNotApplicable, b.Name, b.ID)
	}
	if _, ok := img.names[b.Name]; ok {
		return fmt.Errorf("%w: create topic %q: name in use", ErrNotApplicable, b.Name)
	}
	var configs map[string]string
	if len(b.Configs) > 0 {
		configs = maps.Clone(b.Configs) // the record's map is the proposer's
	}
	img.putTopic(&Topic{Name: b.Name, ID: b.ID, Configs: configs})
	img.ownTopic(b.ID)
	img.names = maps.Clone(img.names)
	if img.names == nil {
		img.names = map[string][16]byte{}
	}
	img.names[b.Name] = b.ID
	return nil
}

// putTopic installs t in a clone of the topic map.
func (img *Image) putTopic(t *Topic) {
	if img.owned == nil || !img.owned.topicMap {
		img.topics = maps.Clone(img.topics)
		if img.topics == nil {
			img.topics = map[[16]byte]*Topic{}
		}
	}
	img.topics[t.ID] = t
	if img.owned != nil {
		img.owned.topicMap = true
	}
}

// setPartition installs p as partition i of t: in place when this batch
// owns t, else in a copy that it then owns.
func (img *Image) setPartition(t *Topic, i int32, p Partition) {
	if img.owned != nil && img.owned.topics[t.ID] {
		t.Partitions[i] = p
		return
	}
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	nt.Partitions[i] = p
	img.putTopic(&nt)
	img.ownTopic(nt.ID)
}

// ownTopic records that the batch being applied allocated topic id's Topic
// value and partition array itself (a new topic, or a fresh copy).
func (img *Image) ownTopic(id [16]byte) {
	if img.owned != nil {
		img.owned.topics[id] = true
	}
}

func (img *Image) createPartition(b CreatePartition) error {
	t := img.topics[b.TopicID]
	if t == nil {
		return fmt.Errorf("%w: create partition %d: unknown topic id %x", ErrNotApplicable, b.Partition, b.TopicID)
	}
	if int(b.Partition) != len(t.Partitions) {
		return fmt.Errorf("%w: create partition %d of %q: next is %d", ErrNotApplicable, b.Partition, t.Name, len(t.Partitions))
	}
	p := Partition{
		Replicas:       slices.Clone(b.Replicas),
		ISR:            slices.Clone(b.ISR),
		Leader:         b.Leader,
		LeaderEpoch:    b.LeaderEpoch,
		PartitionEpoch: b.PartitionEpoch,
	}
	if err := p.check(); err != nil {
		return fmt.Errorf("%w: create partition %q-%d: %v", ErrNotApplicable, t.Name, b.Partition, err)
	}
	if img.owned != nil && img.owned.topics[t.ID] {
		t.Partitions = append(t.Partitions, p) // this batch's own topic and array
		return nil
	}
	nt := *t
	nt.Partitions = append(slices.Clip(t.Partitions), p) // Clip: never write into a shared array
	img.putTopic(&nt)
	img.ownTopic(nt.ID)
	return nil
}

func (img *Image) changePartition(b ChangePartition) error {
	t := img.topics[b.TopicID]
	if t == nil || b.Partition < 0 || int(b.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: change partition %x-%d: unknown", ErrNotApplicable, b.TopicID, b.Partition)
	}
	p := t.Partitions[b.Partition]
	if b.ISR != nil {
		p.ISR = slices.Clone(*b.ISR)
	}
	if b.Leader != nil && *b.Leader != p.Leader {
		p.Leader = *b.Leader
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	if err := p.check(); err != nil {
		return fmt.Errorf("%w: change partition %q-%d: %v", ErrNotApplicable, t.Name, b.Partition, err)
	}
	img.setPartition(t, b.Partition, p)
	return nil
}

// check verifies the structural invariants of a partition (not liveness,
// which is the deciding controller's policy).
func (p *Partition) check() error {
	if len(p.Replicas) == 0 {
		return errors.New("no replicas")
	}
	if dup(p.Replicas) {
		return fmt.Errorf("duplicate replicas %v", p.Replicas)
	}
	if len(p.ISR) == 0 {
		return errors.New("empty ISR")
	}
	if dup(p.ISR) {
		return fmt.Errorf("duplicate ISR %v", p.ISR)
	}
	for _, r := range p.ISR {
		if !slices.Contains(p.Replicas, r) {
			return fmt.Errorf("ISR %v not within replicas %v", p.ISR, p.Replicas)
		}
	}
	if p.Leader != -1 && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("leader %d not in ISR %v", p.Leader, p.ISR)
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
		return fmt.Errorf("negative epochs %d/%d", p.LeaderEpoch, p.PartitionEpoch)
	}
	return p.checkReassignment()
}

// dup reports whether ids has a repeated element; lists are short (a
// replication factor), so quadratic is fine and allocation-free.
func dup(ids []int32) bool {
	for i := range ids {
		if slices.Contains(ids[i+1:], ids[i]) {
			return true
		}
	}
	return false
}

func (img *Image) setConfig(b SetConfig) error {
	set := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		if b.Value == nil {
			delete(m, b.Key)
			if len(m) == 0 {
				return nil
			}
			return m
		}
		if m == nil {
			m = map[string]string{}
		}
		m[b.Key] = *b.Value
		return m
	}
	if b.Key == "" {
		return fmt.Errorf("%w: set config: empty key", ErrNotApplicable)
	}
	switch b.Resource.Type {
	case ResourceTopic:
		t := img.Topic(b.Resource.Name)
		if t == nil {
			return fmt.Errorf("%w: set config: unknown topic %q", ErrNotApplicable, b.Resource.Name)
		}
		nt := *t
		nt.Configs = set(t.Configs)
		img.putTopic(&nt)
	case ResourceBroker:
		if b.Resource.Name != "" {
			if id, err := strconv.ParseInt(b.Resource.Name, 10, 32); err != nil || id < 0 || strconv.Itoa(int(id)) != b.Resource.Name {
				return fmt.Errorf("%w: set config: broker %q is not a broker id", ErrNotApplicable, b.Resource.Name)
			}
		}
		img.brokerConfigs = maps.Clone(img.brokerConfigs)
		if img.brokerConfigs == nil {
			img.brokerConfigs = map[string]map[string]string{}
		}
		if m := set(img.brokerConfigs[b.Resource.Name]); m != nil {
			img.brokerConfigs[b.Resource.Name] = m
		} else {
			delete(img.brokerConfigs, b.Resource.Name)
		}
	case ResourceGroup:
		if b.Resource.Name == "" {
			return fmt.Errorf("%w: set config: empty group id", ErrNotApplicable)
		}
		img.groupConfigs = maps.Clone(img.groupConfigs)
		if img.groupConfigs == nil {
			img.groupConfigs = map[string]map[string]string{}
		}
		if m := set(img.groupConfigs[b.Resource.Name]); m != nil {
			img.groupConfigs[b.Resource.Name] = m
		} else {
			delete(img.groupConfigs, b.Resource.Name)
		}
	default:
		return fmt.Errorf("%w: set config: resource type %d", ErrNotApplicable, b.Resource.Type)
	}
	return nil
}
