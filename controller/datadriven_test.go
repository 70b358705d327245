package controller

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDataDriven runs testdata/*.txt against the active controller's pure
// decisions, each file on a fresh cluster. A request command builds the
// Kafka request, drives its Decision as the active controller does (each
// round's records applied through Encode, Decode and Apply, as the quorum
// would) and prints every round's records, the answer and the notes.
// go test ./controller -run TestDataDriven -rewrite regenerates the
// expected output; review the diff.
//
// Setup and state:
//
//	brokers n=3 [racks=(a,b,c)]   register and unfence brokers 1..n (records applied directly)
//	defaults [partitions=n] [rf=n] [max=n]   what a topic asking for -1 gets
//	session ms=n                  broker.session.timeout.ms (9000)
//	show                          brokers and partitions
//
// Requests ([fail=CODE] fails every round that has records, fail-round=n
// only round n, as a proposal that times out or loses the leadership):
//
//	register id=n t=ms [rack=r] [incarnation=n]
//	heartbeat id=n t=ms [epoch=n] [behind] [shutdown] [sent=ms]
//	allocate-pids broker=n [epoch=n]
//	create-topics [validate-only]
//	  <name> [partitions=n] [rf=n] [assign=(1 2, 2 3)] [config=(k:v, ..)] [null-config=k]
//	create-partitions [validate-only]
//	  <name> count=n [assign=(1 2, 2 3)]
//	delete-topics [disabled]
//	  <name>
//	alter-partition broker=n [broker-epoch=n] [version=n]
//	  <topic> p=n isr=(..) [epoch=n] [pepoch=n] [isr-epochs=(..)]
//	elect [unclean]               no lines: every partition
//	  <topic> p=(..)
//	create-acls
//	  <resource> principal=p host=h [type=topic] [pattern=literal] [op=read] [perm=allow]
//	delete-acls                   resource - matches any name; no principal or host: any
//	  <resource> [principal=p] [host=h] [type=..] [pattern=..] [op=..] [perm=..]
//
// The epochs an alter-partition line leaves out are the partition's
// current ones, and isr-epochs (version 3) default to the members' current
// broker epochs; broker-epoch defaults to the broker's.
//
// The liveness table's own steps, outside requests:
//
//	tick t=ms [lost]              session expiry (Liveness.Tick)
//	refused id=n t=ms [lost]      the listener watch found broker n gone
//
// (lost: the records are printed and not applied, as a proposal the
// quorum dropped.)
//
//	rebalance                     preferred leaders back (ElectPreferred)
//
// Tiered storage (remote_test.go): a leader's proposals through
// DecideRemoteSegment, the record printed and applied, or the refusal:
//
//	remote-copy <topic> p=n broker=n seg=n base=n end=n [epoch=n] [broker-epoch=n] [epochs=(e:o, ..)]
//	remote-state <topic> p=n broker=n seg=n state=finished|delete|deleted [epoch=n] [broker-epoch=n]
//	remote-show <topic> p=n        the image's entries for the partition
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := &ddEnv{c: newCluster(t), live: NewLiveness(), session: 9000, names: map[[16]byte]string{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			e.t, e.d = t, d
			return e.run()
		})
	})
}

// ddEnv is one file's cluster: the image, the controller's liveness table
// and the settings decisions read.
type ddEnv struct {
	t        *testing.T
	d        *datadriven.TestData
	c        *cluster
	live     *Liveness
	session  int64
	defaults Defaults
	names    map[[16]byte]string // topic id → name, kept after deletion
}

func (e *ddEnv) run() string {
	d := e.d
	switch d.Cmd {
	case "brokers":
		n := e.int("n", 0)
		racks := e.strs("racks")
		if len(racks) == 0 {
			racks = make([]string, n)
		}
		if len(racks) != n {
			d.Fatalf(e.t, "racks: %d for %d brokers", len(racks), n)
		}
		e.c.brokers(racks...)
		return e.show()
	case "defaults":
		e.defaults.Partitions = int32(e.int("partitions", int(e.defaults.Partitions)))
		e.defaults.RF = int16(e.int("rf", int(e.defaults.RF)))
		e.defaults.MaxPartitions = int32(e.int("max", int(e.defaults.MaxPartitions)))
		return ""
	case "session":
		e.session = int64(e.int("ms", 9000))
		return ""
	case "show":
		return e.show()
	case "tick":
		return e.records(e.live.Tick(e.c.img, e.now(), e.session))
	case "refused":
		id := int32(e.int("id", 0))
		return e.records(e.live.Refused(e.c.img, id, e.brokerEpoch("epoch", id), e.now()))
	case "rebalance":
		return e.records(ElectPreferred(e.c.img))
	case "register":
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID = int32(e.int("id", 0))
		req.IncarnationID[0] = byte(e.int("incarnation", int(req.BrokerID)))
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = "PLAINTEXT", "h", uint16(9092+req.BrokerID)
		req.Listeners = append(req.Listeners, l)
		if r := e.str("rack", ""); r != "" {
			req.Rack = &r
		}
		req.ClusterID = e.str("cluster", "c")
		return e.drive(DecideRegistration(req, "c", e.live, e.now(), e.session))
	case "heartbeat":
		req := kmsg.NewPtrBrokerHeartbeatRequest()
		req.BrokerID = int32(e.int("id", 0))
		req.BrokerEpoch = e.brokerEpoch("epoch", req.BrokerID)
		req.CurrentMetadataOffset = int64(e.c.img.Version())
		if d.HasArg("behind") {
			req.CurrentMetadataOffset = 0
		}
		req.WantShutdown = d.HasArg("shutdown")
		now := e.now()
		return e.drive(DecideHeartbeat(req, e.live, int64(e.int("sent", int(now))), now))
	case "allocate-pids":
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID = int32(e.int("broker", 0))
		req.BrokerEpoch = e.brokerEpoch("epoch", req.BrokerID)
		return e.drive(DecideAllocateProducerIDs(req, 1000))
	case "create-topics":
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly = d.HasArg("validate-only")
		for _, l := range e.lines() {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = l.name
			rt.NumPartitions, rt.ReplicationFactor = int32(l.int("partitions", -1)), int16(l.int("rf", -1))
			for i, rs := range l.assignment() {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = int32(i), rs
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
			for _, kv := range l.strs("config") {
				k, v, _ := strings.Cut(kv, ":")
				rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
			}
			for _, k := range l.strs("null-config") {
				rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k})
			}
			req.Topics = append(req.Topics, rt)
		}
		return e.drive(DecideCreateTopics(req, e.defaults, e.c.ids(len(req.Topics))))
	case "create-partitions":
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = d.HasArg("validate-only")
		for _, l := range e.lines() {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = l.name, int32(l.int("count", 0))
			for _, rs := range l.assignment() {
				rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: rs})
			}
			req.Topics = append(req.Topics, rt)
		}
		return e.drive(DecideCreatePartitions(req, e.defaults))
	case "delete-topics":
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 5
		for _, l := range e.lines() {
			req.TopicNames = append(req.TopicNames, l.name)
		}
		return e.drive(DecideDeleteTopics(req, !d.HasArg("disabled")))
	case "alter-partition":
		return e.drive(DecideAlterPartition(e.alterPartition()))
	case "elect":
		req := kmsg.NewPtrElectLeadersRequest()
		if d.HasArg("unclean") {
			req.ElectionType = 1
		}
		for _, l := range e.lines() {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = l.name, l.ids("p")
			req.Topics = append(req.Topics, rt)
		}
		return e.drive(DecideElectLeaders(req))
	case "remote-copy", "remote-state", "remote-show":
		return e.remote()
	case "create-acls":
		req := kmsg.NewPtrCreateACLsRequest()
		for _, l := range e.lines() {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceName = l.name
			c.ResourceType, c.ResourcePatternType, c.Operation, c.PermissionType = l.aclEnums()
			c.Principal, c.Host = l.str("principal", ""), l.str("host", "")
			req.Creations = append(req.Creations, c)
		}
		return e.drive(DecideCreateACLs(req, nil))
	case "delete-acls":
		req := kmsg.NewPtrDeleteACLsRequest()
		for _, l := range e.lines() {
			f := kmsg.NewDeleteACLsRequestFilter()
			if l.name != "-" {
				f.ResourceName = kmsg.StringPtr(l.name)
			}
			f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = l.aclEnums()
			if p := l.vals("principal"); p != nil {
				f.Principal = kmsg.StringPtr(p[0])
			}
			if h := l.vals("host"); h != nil {
				f.Host = kmsg.StringPtr(h[0])
			}
			req.Filters = append(req.Filters, f)
		}
		return e.drive(DecideDeleteACLs(req, nil))
	}
	d.Fatalf(e.t, "unknown command %s", d.Cmd)
	return ""
}

// alterPartition builds an AlterPartition from the command and its lines.
func (e *ddEnv) alterPartition() *kmsg.AlterPartitionRequest {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = int16(e.int("version", 2))
	req.BrokerID = int32(e.int("broker", 0))
	req.BrokerEpoch = e.brokerEpoch("broker-epoch", req.BrokerID)
	for _, l := range e.lines() {
		tp := e.c.img.Topic(l.name)
		if tp == nil {
			e.d.Fatalf(e.t, "no topic %s", l.name)
		}
		if n := len(req.Topics); n == 0 || req.Topics[n-1].TopicID != tp.ID {
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.TopicID = tp.ID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = int32(l.int("p", 0))
		var cur Partition
		if int(rp.Partition) < len(tp.Partitions) {
			cur = tp.Partitions[rp.Partition]
		}
		rp.LeaderEpoch, rp.PartitionEpoch = int32(l.int("epoch", int(cur.LeaderEpoch))), int32(l.int("pepoch", int(cur.PartitionEpoch)))
		rp.NewISR = l.ids("isr")
		if req.Version >= 3 {
			epochs := l.ids("isr-epochs")
			for i, id := range rp.NewISR {
				m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
				m.BrokerID, m.BrokerEpoch = id, -1
				if b, ok := e.c.img.Broker(id); ok {
					m.BrokerEpoch = b.Epoch
				}
				if i < len(epochs) {
					m.BrokerEpoch = int64(epochs[i])
				}
				rp.NewEpochISR = append(rp.NewEpochISR, m)
			}
			rp.NewISR = nil
		}
		req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, rp)
	}
	return req
}

// drive runs d as the active controller does, and prints it.
func (e *ddEnv) drive(d Decision) string {
	var b strings.Builder
	failAll := e.code("fail")
	failRound := e.int("fail-round", 0)
	for round := 1; ; round++ {
		recs, ok := d.Next(e.c.img)
		if !ok {
			break
		}
		if len(recs) == 0 {
			fmt.Fprintf(&b, "round %d: nothing to propose\n", round)
			d.Proposed(0)
			continue
		}
		fmt.Fprintf(&b, "round %d:\n", round)
		for _, r := range recs {
			fmt.Fprintf(&b, "  %s\n", e.record(r))
		}
		code := failAll
		if round == failRound {
			code = kerr.RequestTimedOut.Code
		}
		if code == 0 {
			if err := e.apply(recs); err != nil {
				// What the quorum does with an entry that does not apply:
				// skipped, its proposer told.
				fmt.Fprintf(&b, "  not applied: %v\n", err)
				code = kerr.RequestTimedOut.Code
			}
		}
		if code != 0 {
			fmt.Fprintf(&b, "  failed: %s\n", codeName(code))
		}
		d.Proposed(code)
	}
	resp, notes := d.Answer(e.c.img)
	b.WriteString("answer:\n")
	e.value(&b, reflect.ValueOf(resp).Elem(), "  ")
	for _, n := range notes {
		level := "info"
		if n.Warn {
			level = "warn"
		}
		fmt.Fprintf(&b, "%s: %s", level, n.Msg)
		for i := 0; i+1 < len(n.Fields); i += 2 {
			fmt.Fprintf(&b, " %v=%v", n.Fields[i], n.Fields[i+1])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// apply applies recs as one entry, as the quorum would.
func (e *ddEnv) apply(recs []Record) error {
	r, err := Decode(Encode(NewBatch(recs)))
	if err != nil {
		return err
	}
	next, err := e.c.img.Apply(e.c.index+1, r)
	e.c.index++
	if err != nil {
		return err
	}
	e.c.img = next
	for _, t := range next.Topics() {
		e.names[t.ID] = t.Name
	}
	return nil
}

// records prints and applies the records of a liveness step, or, with
// the argument lost, only prints them (the proposal was lost).
func (e *ddEnv) records(recs []Record) string {
	if len(recs) == 0 {
		return "nothing to propose\n"
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s\n", e.record(r))
	}
	if e.d.HasArg("lost") {
		b.WriteString("lost\n")
	} else if err := e.apply(recs); err != nil {
		fmt.Fprintf(&b, "not applied: %v\n", err)
	}
	return b.String()
}

// record prints r with topic names for ids.
func (e *ddEnv) record(r Record) string {
	tp := func(id [16]byte, p int32) string { return fmt.Sprintf("%s-%d", e.id(id), p) }
	switch b := r.Body.(type) {
	case RegisterBroker:
		return fmt.Sprintf("RegisterBroker id=%d rack=%q", b.ID, b.Rack)
	case FenceBroker:
		return fmt.Sprintf("FenceBroker id=%d epoch=%d", b.ID, b.Epoch)
	case UnfenceBroker:
		return fmt.Sprintf("UnfenceBroker id=%d epoch=%d", b.ID, b.Epoch)
	case CreateTopic:
		e.names[b.ID] = b.Name // ids are never reused: name it from its decision on
		s := fmt.Sprintf("CreateTopic %s id=%s", b.Name, e.id(b.ID))
		if len(b.Configs) > 0 {
			s += fmt.Sprintf(" configs=%v", b.Configs)
		}
		return s
	case CreatePartition:
		return fmt.Sprintf("CreatePartition %s replicas=%v isr=%v leader=%d", tp(b.TopicID, b.Partition), b.Replicas, b.ISR, b.Leader)
	case ChangePartition:
		s := "ChangePartition " + tp(b.TopicID, b.Partition)
		if b.ISR != nil {
			s += fmt.Sprintf(" isr=%v", *b.ISR)
		}
		if b.Leader != nil {
			s += fmt.Sprintf(" leader=%d", *b.Leader)
		}
		return s
	case ChangeReplicas:
		return fmt.Sprintf("ChangeReplicas %s replicas=%v adding=%v removing=%v isr=%v leader=%d",
			tp(b.TopicID, b.Partition), b.Replicas, b.Adding, b.Removing, b.ISR, b.Leader)
	case DeleteTopic:
		return "DeleteTopic " + e.id(b.ID)
	case ProducerIDs:
		return fmt.Sprintf("ProducerIDs broker=%d first=%d count=%d", b.Broker, b.First, b.Count)
	case RemoteSegment:
		out := fmt.Sprintf("RemoteSegment %s seg=%d [%d, %d] epochs=%v broker=%d epoch=%d",
			tp(b.TopicID, b.Partition), b.SegmentID[15], b.BaseOffset, b.EndOffset, b.LeaderEpochs, b.Broker, b.LeaderEpoch)
		if b.Checksummed() {
			var objs []string
			for _, o := range b.Objects {
				objs = append(objs, fmt.Sprintf("%s:%d", o.Kind, o.Size))
			}
			out += " objects=" + fmt.Sprint(objs)
		}
		return out
	case RemoteSegmentStateChange:
		return fmt.Sprintf("RemoteSegmentState %s seg=%d %s broker=%d epoch=%d",
			tp(b.TopicID, b.Partition), b.SegmentID[15], b.State, b.Broker, b.LeaderEpoch)
	}
	return r.String()
}

// id names a topic id: the topic's name, #n for a counter id not (yet)
// in the image, else hex.
func (e *ddEnv) id(id [16]byte) string {
	if n, ok := e.names[id]; ok {
		return n
	}
	if binary.BigEndian.Uint64(id[:8]) == 0 {
		return fmt.Sprintf("#%d", binary.BigEndian.Uint64(id[8:]))
	}
	return fmt.Sprintf("%x", id)
}

// show prints the brokers and every partition.
func (e *ddEnv) show() string {
	var b strings.Builder
	for _, br := range e.c.img.Brokers() {
		fmt.Fprintf(&b, "broker %d epoch=%d", br.ID, br.Epoch)
		if br.Rack != "" {
			fmt.Fprintf(&b, " rack=%s", br.Rack)
		}
		if br.Fenced {
			b.WriteString(" fenced")
		}
		b.WriteString("\n")
	}
	for _, t := range e.c.img.Topics() {
		for i, p := range t.Partitions {
			fmt.Fprintf(&b, "%s-%d replicas=%v isr=%v leader=%d epoch=%d pepoch=%d\n",
				t.Name, i, p.Replicas, p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
		}
	}
	return b.String()
}

// value prints a response struct: scalars of one level on one line,
// nested lists below, an item to a "- ". Error codes print by name and only when
// set; false, nil, empty and zero ids print nothing, nor do the fields no decision
// sets (Version, ThrottleMillis, LeaderRecoveryState).
func (e *ddEnv) value(b *strings.Builder, v reflect.Value, indent string) {
	var line []string
	type nested struct {
		name string
		v    reflect.Value
	}
	var lists []nested
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		switch {
		case !f.IsExported(), f.Name == "Version", f.Name == "ThrottleMillis", f.Name == "UnknownTags",
			f.Name == "LeaderRecoveryState":
		case fv.Kind() == reflect.String && fv.String() == "":
		case strings.HasSuffix(f.Name, "ErrorCode"):
			if c := int16(fv.Int()); c != 0 {
				line = append(line, f.Name+"="+codeName(c))
			}
		case fv.Kind() == reflect.Pointer:
			if !fv.IsNil() {
				line = append(line, fmt.Sprintf("%s=%q", f.Name, fv.Elem().Interface()))
			}
		case fv.Kind() == reflect.Bool:
			if fv.Bool() {
				line = append(line, f.Name)
			}
		case fv.Type() == reflect.TypeFor[[16]byte]():
			if id := fv.Interface().([16]byte); id != [16]byte{} {
				line = append(line, f.Name+"="+e.id(id))
			}
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			if fv.Len() > 0 {
				lists = append(lists, nested{f.Name, fv})
			}
		default:
			line = append(line, fmt.Sprintf("%s=%v", f.Name, fv.Interface()))
		}
	}
	if len(line) > 0 {
		fmt.Fprintf(b, "%s%s\n", indent, strings.Join(line, " "))
	} else if len(lists) == 0 {
		fmt.Fprintf(b, "%sok\n", indent) // a list entry with nothing set: success
	}
	for _, l := range lists {
		fmt.Fprintf(b, "%s%s:\n", indent, l.name)
		for i := range l.v.Len() {
			var item strings.Builder
			e.value(&item, l.v.Index(i), indent+"  ")
			b.WriteString(indent + "- " + item.String()[len(indent)+2:])
		}
	}
}

func codeName(code int16) string {
	if err, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return err.Message
	}
	return strconv.Itoa(int(code))
}

// ddLine is one input line: a name and arguments.
type ddLine struct {
	e    *ddEnv
	name string
	args []datadriven.CmdArg
}

func (e *ddEnv) lines() []ddLine {
	var out []ddLine
	for _, s := range strings.Split(e.d.Input, "\n") {
		name, args, err := datadriven.ParseLine(s)
		if err != nil {
			e.d.Fatalf(e.t, "%v", err)
		}
		if name != "" {
			out = append(out, ddLine{e, name, args})
		}
	}
	return out
}

func (l ddLine) vals(key string) []string {
	for _, a := range l.args {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

func (l ddLine) int(key string, def int) int { return l.e.atoi(l.vals(key), key, def) }
func (l ddLine) ids(key string) []int32      { return l.e.ints(l.vals(key), key) }
func (l ddLine) strs(key string) []string    { return l.vals(key) }

func (l ddLine) str(key, def string) string {
	if vs := l.vals(key); len(vs) == 1 {
		return vs[0]
	}
	return def
}

// aclEnums are the type, pattern, op and perm arguments by Kafka's names
// (topic, literal, read, allow; any for a filter).
func (l ddLine) aclEnums() (kmsg.ACLResourceType, kmsg.ACLResourcePatternType, kmsg.ACLOperation, kmsg.ACLPermissionType) {
	must := func(err error) {
		if err != nil {
			l.e.d.Fatalf(l.e.t, "%s: %v", l.name, err)
		}
	}
	rt, err := kmsg.ParseACLResourceType(l.str("type", "topic"))
	must(err)
	pt, err := kmsg.ParseACLResourcePatternType(l.str("pattern", "literal"))
	must(err)
	op, err := kmsg.ParseACLOperation(l.str("op", "read"))
	must(err)
	perm, err := kmsg.ParseACLPermissionType(l.str("perm", "allow"))
	must(err)
	return rt, pt, op, perm
}

// assignment is the assign argument: one value per partition, its
// replicas separated by spaces.
func (l ddLine) assignment() [][]int32 {
	var out [][]int32
	for _, v := range l.vals("assign") {
		out = append(out, l.e.ints(strings.Fields(v), "assign"))
	}
	return out
}

func (e *ddEnv) vals(key string) []string {
	if a, ok := e.d.Arg(key); ok {
		return a.Vals
	}
	return nil
}

func (e *ddEnv) int(key string, def int) int { return e.atoi(e.vals(key), key, def) }
func (e *ddEnv) now() int64                  { return int64(e.int("t", 0)) }
func (e *ddEnv) strs(key string) []string    { return e.vals(key) }

func (e *ddEnv) str(key, def string) string {
	if vs := e.vals(key); len(vs) == 1 {
		return vs[0]
	}
	return def
}

// code is the error code named by key (REQUEST_TIMED_OUT), 0 if absent.
func (e *ddEnv) code(key string) int16 {
	name := e.str(key, "")
	if name == "" {
		return 0
	}
	for c := int16(1); c < 200; c++ {
		if codeName(c) == name {
			return c
		}
	}
	e.d.Fatalf(e.t, "%s: unknown error %s", key, name)
	return 0
}

// brokerEpoch is the epoch given by key, else broker's current one (0 if
// it is not registered).
func (e *ddEnv) brokerEpoch(key string, broker int32) int64 {
	b, _ := e.c.img.Broker(broker)
	return int64(e.int(key, int(b.Epoch)))
}

func (e *ddEnv) atoi(vs []string, key string, def int) int {
	if len(vs) == 0 {
		return def
	}
	if len(vs) > 1 {
		e.d.Fatalf(e.t, "%s: one value", key)
	}
	n, err := strconv.Atoi(vs[0])
	if err != nil {
		e.d.Fatalf(e.t, "%s: %v", key, err)
	}
	return n
}

func (e *ddEnv) ints(vs []string, key string) []int32 {
	out := make([]int32, 0, len(vs))
	for _, v := range slices.DeleteFunc(slices.Clone(vs), func(s string) bool { return s == "" }) {
		out = append(out, int32(e.atoi([]string{v}, key, 0)))
	}
	return out
}
