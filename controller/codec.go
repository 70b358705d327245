package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// The envelope layout (see the package doc for the picture).
const (
	formatV1       = 1 // byte 0: the envelope format
	currentVersion = 1 // byte 2: the version of every body type but RemoteSegment's
	headerLen      = 7 // format, type, version, CRC-32C
	// remoteSegmentV2 is RemoteSegment's body with Objects (the objects'
	// checksums). A RemoteSegment without them is still written at
	// version 1, byte for byte as before, so records of segments copied
	// before checksums (and by nodes without them) keep their encoding.
	remoteSegmentV2 = 2
)

// bodyVersion is the version Encode writes b at: the lowest that holds
// it, so each body has one encoding.
func bodyVersion(b Body) uint8 {
	if s, ok := b.(RemoteSegment); ok && len(s.Objects) > 0 {
		return remoteSegmentV2
	}
	return currentVersion
}

// ErrCorrupt marks bytes that are not a record this code can read: bad
// envelope, bad checksum, unknown type or version, truncated or trailing
// body bytes. Test with errors.Is.
var ErrCorrupt = errors.New("controller: corrupt record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode serializes r at the current version of its body type. The encoding
// is canonical: equal records give equal bytes (maps are written sorted by
// key). It panics if r has no body, or is an empty or nested Batch, which
// are programming errors.
func Encode(r Record) []byte {
	if r.Body == nil {
		panic("controller: Encode of a record without a body")
	}
	e := enc{b: make([]byte, headerLen, 64)}
	e.b[0] = formatV1
	e.b[1] = byte(r.Type())
	e.b[2] = bodyVersion(r.Body)
	switch b := r.Body.(type) {
	case RegisterBroker:
		e.i32(b.ID)
		e.b = append(e.b, b.Incarnation[:]...)
		e.uvarint(uint64(len(b.Endpoints)))
		for _, ep := range b.Endpoints {
			e.str(ep.Name)
			e.str(ep.Host)
			e.i32(ep.Port)
		}
		e.str(b.Rack)
		e.i64(b.Epoch)
	case FenceBroker:
		e.i32(b.ID)
		e.i64(b.Epoch)
	case UnfenceBroker:
		e.i32(b.ID)
		e.i64(b.Epoch)
	case UnregisterBroker:
		e.i32(b.ID)
	case CreateTopic:
		e.str(b.Name)
		e.b = append(e.b, b.ID[:]...)
		e.strMap(b.Configs)
	case CreatePartition:
		e.b = append(e.b, b.TopicID[:]...)
		e.i32(b.Partition)
		e.i32s(b.Replicas)
		e.i32s(b.ISR)
		e.i32(b.Leader)
		e.i32(b.LeaderEpoch)
		e.i32(b.PartitionEpoch)
	case ChangePartition:
		e.b = append(e.b, b.TopicID[:]...)
		e.i32(b.Partition)
		if b.ISR == nil {
			e.b = append(e.b, 0)
		} else {
			e.b = append(e.b, 1)
			e.i32s(*b.ISR)
		}
		if b.Leader == nil {
			e.b = append(e.b, 0)
		} else {
			e.b = append(e.b, 1)
			e.i32(*b.Leader)
		}
	case DeleteTopic:
		e.b = append(e.b, b.ID[:]...)
	case ChangeReplicas:
		e.b = append(e.b, b.TopicID[:]...)
		e.i32(b.Partition)
		e.i32s(b.Replicas)
		e.i32s(b.Adding)
		e.i32s(b.Removing)
		e.i32s(b.ISR)
		e.i32(b.Leader)
	case SetConfig:
		e.b = append(e.b, byte(b.Resource.Type))
		e.str(b.Resource.Name)
		e.str(b.Key)
		if b.Value == nil {
			e.b = append(e.b, 0)
		} else {
			e.b = append(e.b, 1)
			e.str(*b.Value)
		}
	case ProducerIDs:
		e.i32(b.Broker)
		e.i64(b.First)
		e.i64(b.Count)
	case ClientQuota:
		e.uvarint(uint64(len(b.Entity)))
		for _, p := range b.Entity {
			e.str(p.Type)
			e.optStr(p.Name)
		}
		e.str(b.Key)
		if b.Value == nil {
			e.b = append(e.b, 0)
		} else {
			e.b = append(e.b, 1)
			e.b = binary.BigEndian.AppendUint64(e.b, math.Float64bits(*b.Value))
		}
	case ACLChange:
		a := b.ACL
		e.b = append(e.b, byte(a.ResourceType))
		e.str(a.Name)
		e.b = append(e.b, byte(a.PatternType))
		e.str(a.Principal)
		e.str(a.Host)
		e.b = append(e.b, byte(a.Operation), byte(a.Permission))
		if b.Remove {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case ScramCredential:
		e.str(b.User)
		e.b = append(e.b, byte(b.Mechanism))
		if b.Remove {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
			e.str(string(b.Salt))
			e.str(string(b.StoredKey))
			e.str(string(b.ServerKey))
			e.i32(b.Iterations)
		}
	case RemoteSegment:
		e.b = append(e.b, b.TopicID[:]...)
		e.i32(b.Partition)
		e.b = append(e.b, b.SegmentID[:]...)
		e.i64(b.BaseOffset)
		e.i64(b.EndOffset)
		e.i64(b.MaxTimestamp)
		e.i64(b.SizeBytes)
		e.uvarint(uint64(len(b.LeaderEpochs)))
		for _, le := range b.LeaderEpochs {
			e.i32(le.Epoch)
			e.i64(le.StartOffset)
		}
		e.i32(b.Broker)
		e.i32(b.LeaderEpoch)
		if len(b.Objects) > 0 { // version 2
			e.uvarint(uint64(len(b.Objects)))
			for _, o := range b.Objects {
				e.b = append(e.b, byte(o.Kind))
				e.i64(o.Size)
				e.b = binary.BigEndian.AppendUint32(e.b, o.CRC)
			}
		}
	case RemoteSegmentStateChange:
		e.b = append(e.b, b.TopicID[:]...)
		e.i32(b.Partition)
		e.b = append(e.b, b.SegmentID[:]...)
		e.b = append(e.b, byte(b.State))
		e.i32(b.Broker)
		e.i32(b.LeaderEpoch)
	case Batch:
		if len(b.Records) == 0 {
			panic("controller: Encode of an empty Batch")
		}
		e.uvarint(uint64(len(b.Records)))
		for _, in := range b.Records {
			if in.Type() == TypeBatch {
				panic("controller: Encode of a nested Batch")
			}
			inner := Encode(in)
			e.uvarint(uint64(len(inner)))
			e.b = append(e.b, inner...)
		}
	default:
		panic(fmt.Sprintf("controller: Encode of unknown body %T", r.Body))
	}
	binary.BigEndian.PutUint32(e.b[3:7], checksum(e.b))
	return e.b
}

// checksum is the CRC-32C of the type and version bytes and the body.
func checksum(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[1:3])
	return crc32.Update(c, castagnoli, b[headerLen:])
}

// Decode parses one record. It never panics, and it allocates at most in
// proportion to len(data): every length is checked against the bytes left
// before anything is allocated. The returned record does not alias data.
func Decode(data []byte) (Record, error) { return decode(data, false) }

// minRecordLen is the least a record inside a Batch takes: a one-byte
// length and a header.
const minRecordLen = 1 + headerLen

// decode is Decode; inBatch says data is a record inside a Batch, which
// must not be a Batch itself (so decoding never recurses deeper than one
// level).
func decode(data []byte, inBatch bool) (Record, error) {
	if len(data) < headerLen {
		return Record{}, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(data))
	}
	if data[0] != formatV1 {
		return Record{}, fmt.Errorf("%w: unknown format %d", ErrCorrupt, data[0])
	}
	if want, got := binary.BigEndian.Uint32(data[3:7]), checksum(data); want != got {
		return Record{}, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	typ, ver := RecordType(data[1]), data[2]
	if ver != currentVersion && !(typ == TypeRemoteSegment && ver == remoteSegmentV2) {
		return Record{}, fmt.Errorf("%w: %s version %d unknown", ErrCorrupt, typ, ver)
	}
	d := dec{b: data[headerLen:]}
	var body Body
	switch typ {
	case TypeRegisterBroker:
		var b RegisterBroker
		b.ID = d.i32()
		d.uuid(&b.Incarnation)
		if n := d.count(1 + 1 + 4); n > 0 {
			b.Endpoints = make([]Endpoint, n)
			for i := range b.Endpoints {
				b.Endpoints[i] = Endpoint{Name: d.str(), Host: d.str(), Port: d.i32()}
			}
		}
		b.Rack = d.str()
		b.Epoch = d.i64()
		body = b
	case TypeFenceBroker:
		body = FenceBroker{ID: d.i32(), Epoch: d.i64()}
	case TypeUnfenceBroker:
		body = UnfenceBroker{ID: d.i32(), Epoch: d.i64()}
	case TypeUnregisterBroker:
		body = UnregisterBroker{ID: d.i32()}
	case TypeCreateTopic:
		var b CreateTopic
		b.Name = d.str()
		d.uuid(&b.ID)
		b.Configs = d.strMap()
		body = b
	case TypeCreatePartition:
		var b CreatePartition
		d.uuid(&b.TopicID)
		b.Partition = d.i32()
		b.Replicas = d.i32s()
		b.ISR = d.i32s()
		b.Leader = d.i32()
		b.LeaderEpoch = d.i32()
		b.PartitionEpoch = d.i32()
		body = b
	case TypeChangePartition:
		var b ChangePartition
		d.uuid(&b.TopicID)
		b.Partition = d.i32()
		if d.flag() {
			isr := d.i32s()
			b.ISR = &isr
		}
		if d.flag() {
			l := d.i32()
			b.Leader = &l
		}
		body = b
	case TypeDeleteTopic:
		var b DeleteTopic
		d.uuid(&b.ID)
		body = b
	case TypeChangeReplicas:
		var b ChangeReplicas
		d.uuid(&b.TopicID)
		b.Partition = d.i32()
		b.Replicas = d.i32s()
		b.Adding = d.i32s()
		b.Removing = d.i32s()
		b.ISR = d.i32s()
		b.Leader = d.i32()
		body = b
	case TypeSetConfig:
		var b SetConfig
		b.Resource.Type = ResourceType(d.byte())
		b.Resource.Name = d.str()
		b.Key = d.str()
		if d.flag() {
			v := d.str()
			b.Value = &v
		}
		body = b
	case TypeProducerIDs:
		body = ProducerIDs{Broker: d.i32(), First: d.i64(), Count: d.i64()}
	case TypeClientQuota:
		var b ClientQuota
		if n := d.count(1 + 1); n > 0 {
			b.Entity = make([]QuotaEntityPart, n)
			for i := range b.Entity {
				b.Entity[i] = QuotaEntityPart{Type: d.str(), Name: d.optStr()}
			}
		}
		b.Key = d.str()
		if d.flag() {
			v := math.Float64frombits(uint64(d.i64()))
			b.Value = &v
		}
		body = b
	case TypeACL:
		var a ACL
		a.ResourceType = int8(d.byte())
		a.Name = d.str()
		a.PatternType = int8(d.byte())
		a.Principal = d.str()
		a.Host = d.str()
		a.Operation = int8(d.byte())
		a.Permission = int8(d.byte())
		body = ACLChange{ACL: a, Remove: d.flag()}
	case TypeScramCredential:
		b := ScramCredential{User: d.str(), Mechanism: ScramMechanism(d.byte())}
		if b.Remove = d.flag(); !b.Remove {
			b.Salt, b.StoredKey, b.ServerKey = []byte(d.str()), []byte(d.str()), []byte(d.str())
			b.Iterations = d.i32()
		}
		body = b
	case TypeRemoteSegment:
		var b RemoteSegment
		d.uuid(&b.TopicID)
		b.Partition = d.i32()
		d.uuid(&b.SegmentID)
		b.BaseOffset, b.EndOffset, b.MaxTimestamp, b.SizeBytes = d.i64(), d.i64(), d.i64(), d.i64()
		if n := d.count(4 + 8); n > 0 {
			b.LeaderEpochs = make([]EpochStart, n)
			for i := range b.LeaderEpochs {
				b.LeaderEpochs[i] = EpochStart{Epoch: d.i32(), StartOffset: d.i64()}
			}
		}
		b.Broker, b.LeaderEpoch = d.i32(), d.i32()
		if ver == remoteSegmentV2 {
			// Never empty: a body without sums is written at version 1.
			n := d.count(1 + 8 + 4)
			if d.err == nil && n == 0 {
				return Record{}, fmt.Errorf("%w: %s version 2 without objects", ErrCorrupt, typ)
			}
			if n > 0 {
				b.Objects = make([]ObjectSum, n)
				for i := range b.Objects {
					b.Objects[i] = ObjectSum{Kind: ObjectKind(d.byte()), Size: d.i64(), CRC: uint32(d.i32())}
				}
			}
		}
		body = b
	case TypeRemoteSegmentState:
		var b RemoteSegmentStateChange
		d.uuid(&b.TopicID)
		b.Partition = d.i32()
		d.uuid(&b.SegmentID)
		b.State = RemoteSegmentState(d.byte())
		b.Broker, b.LeaderEpoch = d.i32(), d.i32()
		body = b
	case TypeBatch:
		if inBatch {
			return Record{}, fmt.Errorf("%w: Batch inside a Batch", ErrCorrupt)
		}
		n := d.count(minRecordLen)
		if d.err == nil && n == 0 {
			return Record{}, fmt.Errorf("%w: empty Batch", ErrCorrupt)
		}
		b := Batch{Records: make([]Record, n)}
		for i := range b.Records {
			p := d.take(d.count(1))
			if d.err != nil {
				break
			}
			in, err := decode(p, true)
			if err != nil {
				return Record{}, fmt.Errorf("%w (Batch record %d)", err, i) // err is ErrCorrupt's
			}
			b.Records[i] = in
		}
		body = b
	default:
		return Record{}, fmt.Errorf("%w: unknown type %d", ErrCorrupt, typ)
	}
	if d.err != nil {
		return Record{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, typ, d.err)
	}
	if len(d.b) != 0 {
		return Record{}, fmt.Errorf("%w: %s: %d trailing bytes", ErrCorrupt, typ, len(d.b))
	}
	return Record{Version: ver, Body: body}, nil
}

// enc appends primitives; see the package doc for their encodings.
type enc struct{ b []byte }

func (e *enc) i32(v int32)      { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64)      { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) optStr(s *string) {
	if s == nil {
		e.b = append(e.b, 0)
		return
	}
	e.b = append(e.b, 1)
	e.str(*s)
}
func (e *enc) i32s(vs []int32) {
	e.uvarint(uint64(len(vs)))
	for _, v := range vs {
		e.i32(v)
	}
}
func (e *enc) strMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}

// dec reads primitives. The first failure sticks in err; later reads return
// zero values, so callers check err once at the end.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) byte() byte {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *dec) flag() bool {
	switch v := d.byte(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		if d.err == nil {
			d.err = fmt.Errorf("presence byte %d, want 0 or 1", v)
		}
		return false
	}
}

func (d *dec) i32() int32 {
	if p := d.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (d *dec) i64() int64 {
	if p := d.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (d *dec) uuid(u *[16]byte) {
	if p := d.take(16); p != nil {
		copy(u[:], p)
	}
}

// count reads a uvarint element count and checks that n elements of at least
// minSize bytes each can still follow, so a forged count cannot make the
// caller allocate more than the input justifies.
func (d *dec) count(minSize int) int {
	if d.err != nil {
		return 0
	}
	n, w := binary.Uvarint(d.b)
	if w <= 0 || w != varintLen(n) {
		d.err = errors.New("bad or non-minimal varint")
		return 0
	}
	d.b = d.b[w:]
	if n > math.MaxInt32 || int(n)*minSize > len(d.b) {
		d.err = errShort
		return 0
	}
	return int(n)
}

func (d *dec) str() string {
	n := d.count(1)
	return string(d.take(n))
}

func (d *dec) optStr() *string {
	if !d.flag() {
		return nil
	}
	s := d.str()
	return &s
}

// i32s returns nil for an empty list, which Encode writes like an empty one.
func (d *dec) i32s() []int32 {
	n := d.count(4)
	if n == 0 {
		return nil
	}
	p := d.take(4 * n)
	if p == nil {
		return nil
	}
	vs := make([]int32, n)
	for i := range vs {
		vs[i] = int32(binary.BigEndian.Uint32(p[4*i:]))
	}
	return vs
}

// strMap returns nil for an empty map. Keys must be strictly increasing, so
// each map has exactly one encoding.
func (d *dec) strMap() map[string]string {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := range n {
		k, v := d.str(), d.str()
		if d.err != nil {
			return nil
		}
		if i > 0 && k <= prev {
			d.err = fmt.Errorf("map key %q not after %q", k, prev)
			return nil
		}
		m[k], prev = v, k
	}
	return m
}

// varintLen is the length of the minimal uvarint encoding of n.
func varintLen(n uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], n)
}
