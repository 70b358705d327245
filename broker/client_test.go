package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// testBroker starts a broker on a free loopback port in dir.
func testBroker(t *testing.T, dir string, mod func(*config.Config)) *Broker {
	t.Helper()
	return testBrokerLogging(t, dir, mod, zerolog.NewTestWriter(t))
}

// withImage gives b, a Broker made as a literal rather than by New, the
// replica manager New would make, then applies img to it unless nil: the
// image b answers from. It places no replica on b.
func withImage(b *Broker, img *controller.Image) *Broker {
	b.replicas = replicamgr.New(context.Background(), replicamgr.Config{NodeID: b.cfg.NodeID, Logger: zerolog.Nop()})
	if img != nil {
		b.replicas.Apply(img)
	}
	return b
}

// testBrokerLogging is testBroker logging to w.
func testBrokerLogging(t *testing.T, dir string, mod func(*config.Config), w io.Writer) *Broker {
	t.Helper()
	cfg := config.Default()
	cfg.Listeners = "PLAINTEXT://127.0.0.1:0"
	cfg.LogDirs = filepath.Join(dir, "data")
	cfg.RetentionCheckInterval = 20
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(cfg, zerolog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(func() { b.Close() })
	select {
	case <-b.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("broker not ready after 20s")
	}
	return b
}

// rawClient speaks the Kafka protocol with kmsg, one request at a time.
type rawClient struct {
	t    *testing.T
	c    net.Conn
	br   *bufio.Reader
	corr int32
}

func dial(t *testing.T, b *Broker) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", b.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

func (rc *rawClient) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(rc.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	if _, err := rc.c.Write(frame); err != nil {
		rc.t.Fatal(err)
	}
	return rc.corr
}

func (rc *rawClient) recv(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := protocol.ReadFrame(rc.br, 1<<30)
	if err != nil {
		rc.t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body := f[4:]
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatal(err)
	}
	return resp
}

func (rc *rawClient) do(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	rc.send(req)
	return rc.recv(req)
}

func (rc *rawClient) createTopic(name string, parts int32, configs map[string]string) int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
	}
	req.Topics = append(req.Topics, rt)
	return rc.do(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
}

// batchSpec describes a record batch to build.
type batchSpec struct {
	pid      int64
	epoch    int16
	seq      int32
	values   []string
	baseTime int64
}

// makeBatch builds a valid uncompressed magic-2 batch.
func makeBatch(s batchSpec) []byte {
	if s.pid == 0 {
		s.pid, s.epoch, s.seq = -1, -1, -1
	}
	var recs []byte
	for i, v := range s.values {
		var r []byte
		r = append(r, 0)                          // attributes
		r = binary.AppendVarint(r, int64(i))      // timestamp delta
		r = binary.AppendVarint(r, int64(i))      // offset delta
		r = binary.AppendVarint(r, -1)            // null key
		r = binary.AppendVarint(r, int64(len(v))) // value
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	b := make([]byte, 61, 61+len(recs))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(len(s.values)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(s.baseTime))
	binary.BigEndian.PutUint64(b[35:], uint64(s.baseTime+int64(len(s.values)-1)))
	binary.BigEndian.PutUint64(b[43:], uint64(s.pid))
	binary.BigEndian.PutUint16(b[51:], uint16(s.epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(s.seq))
	binary.BigEndian.PutUint32(b[57:], uint32(len(s.values)))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func produceReq(topic string, part int32, acks int16, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: part, Records: batch}}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

func (rc *rawClient) produce(topic string, part int32, batch []byte) (int16, int64) {
	rc.t.Helper()
	resp := rc.do(produceReq(topic, part, -1, batch)).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

func fetchReq(topic string, part int32, offset int64, maxWait, minBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = part, offset, 1<<20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// fetchValues returns the values of the records read from offset.
func (rc *rawClient) fetchValues(topic string, part int32, offset int64) (int16, []string) {
	rc.t.Helper()
	resp := rc.do(fetchReq(topic, part, offset, 0, 0)).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, recordValues(rc.t, p.RecordBatches)
}

func recordValues(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		info, err := recordbatch.ParseHeader(b)
		if err != nil || info.Bytes > len(b) {
			t.Fatalf("bad batch in fetch response: %v", err)
		}
		if err := recordbatch.EachRecord(b[:info.Bytes], info, func(r recordbatch.Record) bool {
			out = append(out, string(r.Value))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		b = b[info.Bytes:]
	}
	return out
}
