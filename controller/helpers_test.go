package controller

import (
	"encoding/binary"
	"testing"
)

// cluster is a test harness: an image and the next log index. Every record
// goes through Encode and Decode before Apply, as it would through raft.
type cluster struct {
	t      testing.TB
	img    *Image
	index  uint64
	lastID uint64 // the last topic id drawn (ids)
}

func newCluster(t testing.TB) *cluster {
	return &cluster{t: t, img: &Image{}}
}

// ids draws n topic ids from a deterministic source: 1, 2, 3, ... in the
// last bytes.
func (c *cluster) ids(n int) [][16]byte {
	out := make([][16]byte, n)
	for i := range out {
		c.lastID++
		binary.BigEndian.PutUint64(out[i][8:], c.lastID)
	}
	return out
}

func (c *cluster) apply(recs ...Record) {
	c.t.Helper()
	for _, r := range recs {
		d, err := Decode(Encode(r))
		if err != nil {
			c.t.Fatalf("decode %v: %v", r, err)
		}
		c.index++
		next, err := c.img.Apply(c.index, d)
		if err != nil {
			c.t.Fatalf("apply %v: %v", r, err)
		}
		c.img = next
	}
}

// brokers registers and unfences brokers with the given racks ("" = none),
// ids 1..len(racks).
func (c *cluster) brokers(racks ...string) {
	c.t.Helper()
	for i, rack := range racks {
		id := int32(i + 1)
		c.apply(NewRecord(RegisterBroker{ID: id, Incarnation: [16]byte{byte(id)}, Rack: rack,
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092 + id}}}))
		b, _ := c.img.Broker(id)
		c.apply(NewRecord(UnfenceBroker{ID: id, Epoch: b.Epoch}))
	}
}

// create creates a topic by automatic placement and returns it.
func (c *cluster) create(name string, partitions int32, rf int16) *Topic {
	c.t.Helper()
	res := CreateTopics(c.img, []TopicSpec{{Name: name, Partitions: partitions, RF: rf}}, Defaults{}, c.ids(1))
	if res[0].ErrorCode != 0 {
		c.t.Fatalf("create %s: %d %s", name, res[0].ErrorCode, res[0].Message)
	}
	c.apply(res[0].Records...)
	return c.img.Topic(name)
}

func (c *cluster) epoch(id int32) int64 {
	b, ok := c.img.Broker(id)
	if !ok {
		c.t.Fatalf("broker %d not registered", id)
	}
	return b.Epoch
}

func (c *cluster) part(t *Topic, p int32) Partition {
	c.t.Helper()
	pt, ok := c.img.Partition(t.ID, p)
	if !ok {
		c.t.Fatalf("no partition %s-%d", t.Name, p)
	}
	return pt
}

func ptr[T any](v T) *T { return &v }
