package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The active controller's pure decisions about topics, partitions and
// producer ids. Each reads the applied image (there is no speculative
// one, see the package doc) and returns the records to propose, or a
// Kafka error code and message. None modifies the image; applying the
// returned records in order to that image succeeds. The Decide functions
// at the end wrap them for the Kafka requests (decision.go).

// TopicSpec is one topic of a CreateTopics request.
type TopicSpec struct {
	Name       string
	Partitions int32 // -1: Defaults.Partitions
	RF         int16 // -1: Defaults.RF
	// Assignment, if non-empty, is a manual replica assignment by partition;
	// Partitions and RF must then be -1.
	Assignment map[int32][]int32
	Configs    map[string]string
}

// Defaults are the cluster settings topic creation uses.
type Defaults struct {
	Partitions    int32 // num.partitions
	RF            int16 // default.replication.factor
	MaxPartitions int32 // per topic; 0 = no limit beyond int32
	// ValidateConfig checks one topic config; nil accepts every config.
	ValidateConfig func(key, value string) error
	// ValidateConfigs, if not nil, judges a new topic's configs as a
	// whole once each key passed ValidateConfig (rules between keys: a
	// tiered topic's local.retention.* within retention.*). Its error's
	// text is the INVALID_CONFIG message as it is.
	ValidateConfigs func(configs map[string]string) error
}

// TopicResult is the outcome for one TopicSpec. On success Records holds a
// CreateTopic and one CreatePartition per partition; otherwise ErrorCode is
// a Kafka error code and Message says why.
type TopicResult struct {
	Name       string
	ID         [16]byte
	Partitions int32
	RF         int16
	Records    []Record
	ErrorCode  int16
	Message    string
}

func fail(r *TopicResult, e *kerr.Error, format string, args ...any) {
	r.ErrorCode, r.Message = e.Code, fmt.Sprintf(format, args...)
}

// maxTopicNameLen is Kafka's limit (249, so "<name>-<partition>" directory
// names fit in 255 bytes).
const maxTopicNameLen = 249

// InvalidTopicName applies Kafka's rules (1-249 characters of
// [a-zA-Z0-9._-], not "." or "..") and says what name breaks, "" when it
// breaks none. The broker checks names with it before asking (auto
// creation, Metadata, DescribeTopicPartitions), the controller when it
// decides.
func InvalidTopicName(name string) string {
	if name == "" || name == "." || name == ".." {
		return fmt.Sprintf("topic name %q is illegal", name)
	}
	if len(name) > maxTopicNameLen {
		return fmt.Sprintf("topic name is longer than %d characters", maxTopicNameLen)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("topic name %q contains %q (allowed: a-z A-Z 0-9 . _ -)", name, c)
		}
	}
	return ""
}

// collisionKey maps '.' to '_': Kafka refuses two topics that differ only
// there, because metric names would collide.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// CreateTopics decides a CreateTopics request, one TopicResult per spec in
// order. ids are fresh topic ids drawn by the caller (random in production,
// a counter in tests), taken in order; one that is zero or in use is
// skipped, and a topic left without one is UNKNOWN_SERVER_ERROR.
//
// Kafka's rules: an invalid name is INVALID_TOPIC_EXCEPTION; an existing name
// is TOPIC_ALREADY_EXISTS whatever the partition count (never merged); a
// name given twice in one request is INVALID_REQUEST for every occurrence; a
// name that collides with another up to '.' versus '_' is
// INVALID_TOPIC_EXCEPTION; partitions < 1 is INVALID_PARTITIONS;
// RF < 1 or RF > live brokers is INVALID_REPLICATION_FACTOR; a bad manual
// assignment is INVALID_REPLICA_ASSIGNMENT. Topics created earlier in the
// same call count as existing for later ones.
func CreateTopics(img *Image, specs []TopicSpec, d Defaults, ids [][16]byte) []TopicResult {
	count := map[string]int{}
	for _, s := range specs {
		count[s.Name]++
	}
	collide := map[string]string{} // collision key → name, existing and accepted
	placed := 0                    // partitions in the cluster, for the placement hint
	for _, t := range img.Topics() {
		collide[collisionKey(t.Name)] = t.Name
		placed += len(t.Partitions)
	}
	pool := &idPool{ids: ids, used: map[[16]byte]bool{}}
	out := make([]TopicResult, len(specs))
	for i, s := range specs {
		r := &out[i]
		r.Name = s.Name
		createTopic(img, s, d, r, count, collide, pool, &placed)
	}
	return out
}

func createTopic(img *Image, s TopicSpec, d Defaults, r *TopicResult, count map[string]int,
	collide map[string]string, pool *idPool, placed *int) {
	if msg := InvalidTopicName(s.Name); msg != "" {
		fail(r, kerr.InvalidTopicException, "%s", msg)
		return
	}
	if count[s.Name] > 1 {
		fail(r, kerr.InvalidRequest, "topic %q appears more than once in the request", s.Name)
		return
	}
	if img.Topic(s.Name) != nil {
		fail(r, kerr.TopicAlreadyExists, "topic %q already exists", s.Name)
		return
	}
	if other, ok := collide[collisionKey(s.Name)]; ok {
		fail(r, kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' are equivalent in metric names)", s.Name, other)
		return
	}
	if d.ValidateConfig != nil {
		for _, k := range sortedKeys(s.Configs) {
			if err := d.ValidateConfig(k, s.Configs[k]); err != nil {
				fail(r, kerr.InvalidConfig, "config %q: %v", k, err)
				return
			}
		}
	}
	if d.ValidateConfigs != nil {
		if err := d.ValidateConfigs(s.Configs); err != nil {
			fail(r, kerr.InvalidConfig, "%v", err)
			return
		}
	}
	var assignment [][]int32
	if len(s.Assignment) > 0 {
		if s.Partitions != -1 || s.RF != -1 {
			fail(r, kerr.InvalidRequest, "give either a replica assignment or partitions and replication factor, not both")
			return
		}
		if d.MaxPartitions > 0 && len(s.Assignment) > int(d.MaxPartitions) {
			fail(r, kerr.InvalidPartitions, "number of partitions %d is above the limit %d", len(s.Assignment), d.MaxPartitions)
			return
		}
		var code *kerr.Error
		var msg string
		if assignment, code, msg = checkAssignment(img, s.Assignment, 0); code != nil {
			fail(r, code, "%s", msg)
			return
		}
		r.Partitions, r.RF = int32(len(assignment)), int16(len(assignment[0]))
	} else {
		r.Partitions, r.RF = s.Partitions, s.RF
		if r.Partitions == -1 {
			r.Partitions = d.Partitions
		}
		if r.RF == -1 {
			r.RF = d.RF
		}
		if code, msg := checkCounts(img, r.Partitions, r.RF, d.MaxPartitions); code != nil {
			fail(r, code, "%s", msg)
			return
		}
		assignment = Place(img, r.Partitions, r.RF, *placed)
	}
	id, ok := pool.fresh(img)
	if !ok {
		fail(r, kerr.UnknownServerError, "no unused topic id left")
		return
	}
	r.ID = id
	r.Records = append(make([]Record, 0, 1+len(assignment)),
		NewRecord(CreateTopic{Name: s.Name, ID: id, Configs: cloneConfigs(s.Configs)}))
	r.Records = append(r.Records, partitionRecords(img, id, 0, assignment)...)
	collide[collisionKey(s.Name)] = s.Name
	*placed += len(assignment)
}

// checkCounts validates a partition count and replication factor for
// automatic placement.
func checkCounts(img *Image, partitions int32, rf int16, maxPartitions int32) (*kerr.Error, string) {
	if partitions < 1 {
		return kerr.InvalidPartitions, fmt.Sprintf("number of partitions %d is below 1", partitions)
	}
	if maxPartitions > 0 && partitions > maxPartitions {
		return kerr.InvalidPartitions, fmt.Sprintf("number of partitions %d is above the limit %d", partitions, maxPartitions)
	}
	if rf < 1 {
		return kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor %d is below 1", rf)
	}
	if live := len(img.LiveBrokers()); int(rf) > live {
		return kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor %d is larger than the %d available brokers", rf, live)
	}
	return nil, ""
}

// checkAssignment validates a manual assignment for partitions
// [from, from+len(a)) and returns it as a slice. Replicas must be
// registered brokers, distinct, and every partition the same size (Kafka's
// rules); at least one replica of each partition must be live.
func checkAssignment(img *Image, a map[int32][]int32, from int32) ([][]int32, *kerr.Error, string) {
	out := make([][]int32, 0, len(a))
	for p := from; p < from+int32(len(a)); p++ {
		rs, ok := a[p]
		if !ok {
			return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("partitions must be consecutive from %d; %d is missing", from, p)
		}
		switch {
		case len(rs) == 0:
			return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("partition %d has no replicas", p)
		case len(rs) != len(a[from]):
			return nil, kerr.InvalidReplicaAssignment, "all partitions in the manual assignment must have the same number of replicas"
		case len(rs) > 32767:
			return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("partition %d has too many replicas", p)
		case dup(rs):
			return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("partition %d has duplicate replicas %v", p, rs)
		}
		for _, b := range rs {
			if _, ok := img.Broker(b); !ok {
				return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("partition %d: broker %d is not registered", p, b)
			}
		}
		if !slices.ContainsFunc(rs, img.live) {
			return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("partition %d: all brokers %v are fenced", p, rs)
		}
		out = append(out, slices.Clone(rs))
	}
	return out, nil, ""
}

// partitionRecords creates partitions [from, from+len(assignment)) of the
// topic: ISR is the live replicas, leader the first of them.
func partitionRecords(img *Image, id [16]byte, from int32, assignment [][]int32) []Record {
	out := make([]Record, 0, len(assignment))
	for i, rs := range assignment {
		isr := slices.DeleteFunc(slices.Clone(rs), func(b int32) bool { return !img.live(b) })
		out = append(out, NewRecord(CreatePartition{
			TopicID: id, Partition: from + int32(i),
			Replicas: rs, ISR: isr, Leader: isr[0],
		}))
	}
	return out
}

// idPool is the topic ids a CreateTopics decision was given, taken in
// order.
type idPool struct {
	ids  [][16]byte
	used map[[16]byte]bool // taken by an earlier topic of the request
}

// fresh takes the next id that is non-zero and unused, if any is left.
func (p *idPool) fresh(img *Image) ([16]byte, bool) {
	for len(p.ids) > 0 {
		id := p.ids[0]
		p.ids = p.ids[1:]
		if id != [16]byte{} && img.TopicByID(id) == nil && !p.used[id] {
			p.used[id] = true
			return id, true
		}
	}
	return [16]byte{}, false
}

// CreatePartitions grows topic to newCount partitions, placed automatically
// (assignment nil) or by a manual assignment of the new partitions
// (assignment[i] is partition current+i). Errors, as Kafka:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS when newCount is not above
// the current count, INVALID_REPLICATION_FACTOR when the topic's RF exceeds
// the live brokers, INVALID_REPLICA_ASSIGNMENT for a bad assignment.
func CreatePartitions(img *Image, topic string, newCount int32, assignment [][]int32, d Defaults) ([]Record, int16, string) {
	t := img.Topic(topic)
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", topic)
	}
	cur := int32(len(t.Partitions))
	switch {
	case newCount < cur:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("topic currently has %d partitions, which is higher than the requested %d", cur, newCount)
	case newCount == cur:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("topic already has %d partitions", cur)
	case d.MaxPartitions > 0 && newCount > d.MaxPartitions:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("number of partitions %d is above the limit %d", newCount, d.MaxPartitions)
	}
	rf := int16(len(t.Partitions[0].Target())) // not the grown list of a move in progress
	var placed [][]int32
	if assignment != nil {
		if int32(len(assignment)) != newCount-cur {
			return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("assignment has %d partitions, %d are being added", len(assignment), newCount-cur)
		}
		m := make(map[int32][]int32, len(assignment))
		for i, rs := range assignment {
			m[cur+int32(i)] = rs
		}
		var code *kerr.Error
		var msg string
		if placed, code, msg = checkAssignment(img, m, cur); code != nil {
			return nil, code.Code, msg
		}
		if len(placed[0]) != int(rf) {
			return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("assignment has %d replicas per partition, the topic has %d", len(placed[0]), rf)
		}
	} else {
		if code, msg := checkCounts(img, newCount-cur, rf, 0); code != nil {
			return nil, code.Code, msg
		}
		total := 0
		for _, t := range img.Topics() {
			total += len(t.Partitions)
		}
		placed = Place(img, newCount-cur, rf, total)
	}
	return partitionRecords(img, t.ID, cur, placed), 0, ""
}

// TopicRef names a topic to delete, by ID if non-zero, else by Name.
type TopicRef struct {
	Name string
	ID   [16]byte
}

// DeleteResult is the outcome for one TopicRef.
type DeleteResult struct {
	Name      string // resolved name, if found
	ID        [16]byte
	Records   []Record // one DeleteTopic on success
	ErrorCode int16
	Message   string
}

// DeleteTopics decides a DeleteTopics request. Unknown names are
// UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, a ref with both
// a name and an id INVALID_REQUEST, and a topic named more than once (by
// name or id) INVALID_REQUEST for every occurrence, as in Kafka. Whether
// deletion is enabled at all is the broker's policy.
func DeleteTopics(img *Image, refs []TopicRef) []DeleteResult {
	out := make([]DeleteResult, len(refs))
	seen := map[[16]byte]int{}
	for i, ref := range refs {
		r := &out[i]
		r.Name, r.ID = ref.Name, ref.ID
		var t *Topic
		switch {
		case ref.ID != [16]byte{} && ref.Name != "":
			r.ErrorCode, r.Message = kerr.InvalidRequest.Code, "give a topic name or a topic id, not both"
			continue
		case ref.ID != [16]byte{}:
			if t = img.TopicByID(ref.ID); t == nil {
				r.ErrorCode, r.Message = kerr.UnknownTopicID.Code, fmt.Sprintf("topic id %x does not exist", ref.ID)
				continue
			}
		default:
			if t = img.Topic(ref.Name); t == nil {
				r.ErrorCode, r.Message = kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", ref.Name)
				continue
			}
		}
		r.Name, r.ID = t.Name, t.ID
		seen[t.ID]++
	}
	for i := range out {
		r := &out[i]
		switch {
		case r.ErrorCode != 0:
		case seen[r.ID] > 1:
			r.ErrorCode, r.Message = kerr.InvalidRequest.Code, fmt.Sprintf("topic %q appears more than once in the request", r.Name)
		default:
			r.Records = []Record{NewRecord(DeleteTopic{ID: r.ID})}
		}
	}
	return out
}

// AllocateProducerIDs hands broker the next count producer ids. count must
// be positive (Kafka's blocks are 1000).
func AllocateProducerIDs(img *Image, broker int32, count int64) Record {
	return NewRecord(ProducerIDs{Broker: broker, First: img.NextProducerID(), Count: count})
}

// DecideAllocateProducerIDs decides an AllocateProducerIDs: the next block
// of count producer ids (its bounds come from the image) for a broker at
// its current epoch, else STALE_BROKER_EPOCH.
func DecideAllocateProducerIDs(req *kmsg.AllocateProducerIDsRequest, count int64) Decision {
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	var block ProducerIDs
	return oneRound(func(img *Image) []Record {
		if bs, ok := img.Broker(req.BrokerID); !ok || bs.Epoch != req.BrokerEpoch {
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
			return nil
		}
		r := AllocateProducerIDs(img, req.BrokerID, count)
		block = r.Body.(ProducerIDs)
		return []Record{r}
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		if resp.ErrorCode = codeOr(resp.ErrorCode, code); resp.ErrorCode == 0 {
			resp.ProducerIDStart, resp.ProducerIDLen = block.First, int32(block.Count)
		}
		return resp, nil
	})
}

// DecideCreateTopics decides a CreateTopics request (CreateTopics) in one
// round: every topic that passes is created in the one batch, each with
// its own records, which apply on their own. ids are as CreateTopics takes
// them: one per topic and a few spare. A config given a null value makes
// its topic INVALID_CONFIG. A request that only validates proposes
// nothing and answers as if it had been created.
func DecideCreateTopics(req *kmsg.CreateTopicsRequest, d Defaults, ids [][16]byte) Decision {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	var results []TopicResult
	return oneRound(func(img *Image) []Record {
		specs := make([]TopicSpec, len(req.Topics))
		nullConfig := map[int]string{}
		for i, rt := range req.Topics {
			s := TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, RF: rt.ReplicationFactor}
			for _, a := range rt.ReplicaAssignment {
				if s.Assignment == nil {
					s.Assignment = map[int32][]int32{}
				}
				s.Assignment[a.Partition] = a.Replicas
			}
			for _, cf := range rt.Configs {
				if s.Configs == nil {
					s.Configs = map[string]string{}
				}
				if cf.Value == nil {
					nullConfig[i] = cf.Name
					continue
				}
				s.Configs[cf.Name] = *cf.Value
			}
			specs[i] = s
		}
		results = CreateTopics(img, specs, d, ids)
		var recs []Record
		for i := range results {
			if k, ok := nullConfig[i]; ok && results[i].ErrorCode == 0 {
				// Dropping a topic's records leaves the others valid: each
				// topic's records apply on their own.
				results[i].Records, results[i].ErrorCode = nil, kerr.InvalidConfig.Code
				results[i].Message = "config " + k + " has a null value"
			}
			recs = append(recs, results[i].Records...)
		}
		if req.ValidateOnly {
			return nil
		}
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		var notes []Note
		for _, r := range results {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.NumPartitions, st.ReplicationFactor = r.Name, -1, -1
			switch {
			case r.ErrorCode != 0:
				st.ErrorCode, st.ErrorMessage = r.ErrorCode, message(r.Message)
			case code != 0:
				st.ErrorCode = code
			default:
				st.TopicID, st.NumPartitions, st.ReplicationFactor = r.ID, r.Partitions, r.RF
				if !req.ValidateOnly {
					notes = append(notes, info("created topic", "topic", r.Name, "partitions", r.Partitions, "rf", r.RF))
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, notes
	})
}

// DecideDeleteTopics decides a DeleteTopics request (DeleteTopics) in one
// round: names before version 6, names or ids from it. With deletion
// disabled (delete.topic.enable false) it proposes nothing, and every
// topic that exists is TOPIC_DELETION_DISABLED.
func DecideDeleteTopics(req *kmsg.DeleteTopicsRequest, enabled bool) Decision {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var (
		refs    []TopicRef
		results []DeleteResult
	)
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			refs = append(refs, TopicRef{Name: n})
		}
	} else {
		for _, t := range req.Topics {
			r := TopicRef{ID: t.TopicID}
			if t.Topic != nil {
				r.Name = *t.Topic
			}
			refs = append(refs, r)
		}
	}
	return oneRound(func(img *Image) []Record {
		results = DeleteTopics(img, refs)
		return recordsOf(results, enabled, func(r DeleteResult) []Record { return r.Records })
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		var notes []Note
		for i, r := range results {
			st := kmsg.NewDeleteTopicsResponseTopic()
			if r.Name != "" {
				st.Topic = kmsg.StringPtr(r.Name)
			} else if refs[i].Name != "" {
				st.Topic = kmsg.StringPtr(refs[i].Name)
			}
			st.TopicID = r.ID
			switch {
			case r.ErrorCode != 0:
				st.ErrorCode, st.ErrorMessage = r.ErrorCode, message(r.Message)
			case !enabled:
				st.ErrorCode = kerr.TopicDeletionDisabled.Code
			case code != 0:
				st.ErrorCode = code
			default:
				notes = append(notes, info("deleted topic", "topic", r.Name))
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, notes
	})
}

// DecideCreatePartitions decides a CreatePartitions request
// (CreatePartitions), one round per topic: each topic is decided against
// the image with the earlier topics' partitions applied, so placement
// continues evenly. A topic named twice is INVALID_REQUEST each time; a
// request that only validates proposes nothing.
func DecideCreatePartitions(req *kmsg.CreatePartitionsRequest, d Defaults) Decision {
	c := &createPartitions{req: req, d: d, resp: req.ResponseKind().(*kmsg.CreatePartitionsResponse), seen: map[string]int{}}
	for _, rt := range req.Topics {
		c.seen[rt.Topic]++
	}
	return c
}

// createPartitions is the state of DecideCreatePartitions' rounds: round
// i decides req.Topics[i] into resp.Topics[i].
type createPartitions struct {
	req     *kmsg.CreatePartitionsRequest
	resp    *kmsg.CreatePartitionsResponse
	d       Defaults
	seen    map[string]int // topic name → times named in the request
	pending bool           // the last round proposed records
	notes   []Note
}

func (c *createPartitions) Next(img *Image) ([]Record, bool) {
	i := len(c.resp.Topics)
	if i == len(c.req.Topics) {
		return nil, false
	}
	rt := c.req.Topics[i]
	st := kmsg.NewCreatePartitionsResponseTopic()
	st.Topic = rt.Topic
	c.pending = false
	if c.seen[rt.Topic] > 1 {
		st.ErrorCode = kerr.InvalidRequest.Code
		c.resp.Topics = append(c.resp.Topics, st)
		return nil, true
	}
	var assignment [][]int32
	for _, a := range rt.Assignment {
		assignment = append(assignment, a.Replicas)
	}
	recs, code, msg := CreatePartitions(img, rt.Topic, rt.Count, assignment, c.d)
	st.ErrorCode, st.ErrorMessage = code, message(msg)
	c.resp.Topics = append(c.resp.Topics, st)
	if code != 0 || c.req.ValidateOnly {
		return nil, true
	}
	c.pending = true
	return recs, true
}

func (c *createPartitions) Proposed(code int16) {
	if !c.pending {
		return
	}
	st := &c.resp.Topics[len(c.resp.Topics)-1]
	if code != 0 {
		st.ErrorCode = code
		return
	}
	c.notes = append(c.notes, info("created partitions", "topic", st.Topic, "partitions", c.req.Topics[len(c.resp.Topics)-1].Count))
}

func (c *createPartitions) Answer(*Image) (kmsg.Response, []Note) { return c.resp, c.notes }

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func cloneConfigs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
