package active

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/node"
	"github.com/fjordlog/fjord/controller/quorum"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// checkFor polls f until it returns true or d passes.
func checkFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startOne starts a quorum of one on a CONTROLLER listener of its own and
// serves it until the test ends.
func startOne(t *testing.T) (*Controller, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.NodeID = 0 // raft id 1: node id 0 is allowed
	cfg.ClusterID = "test-cluster"
	cfg.Voters = map[int32]string{0: ln.Addr().String()}
	cfg.Dir = t.TempDir()
	cfg.Listener = ln
	cfg.TickInterval = 10 * time.Millisecond
	var c *Controller
	cfg.KafkaHandler, cfg.KafkaVersions = testFront{&c}, testFront{}
	c, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	c.Serve()
	checkFor(t, 10*time.Second, "leadership", func() bool { return c.Leader() == 0 })
	return c, ln.Addr().String()
}

// request sends req to addr's Kafka half as a broker's ctllink.Client does.
func request(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

func TestStartValidates(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Listener = ln
	cfg.Voters = map[int32]string{0: ln.Addr().String()}
	cfg.Dir = t.TempDir()
	// A listener without the broker's dispatch would serve requests no
	// one authorized: refused.
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), "KafkaHandler") {
		t.Fatalf("started a CONTROLLER listener without a dispatch: %v", err)
	}
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	cfg.KafkaHandler, cfg.KafkaVersions = testFront{}, testFront{}
	cfg.Voters = map[int32]string{1: ln.Addr().String(), 2: "127.0.0.1:1"}
	if _, err := Start(cfg); err == nil {
		t.Fatal("node 0 started though not a voter")
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("listener left open after a failed Start")
	}
}

// Start joins, Serve decides over the CONTROLLER listener: a broker
// registers, heartbeats in, creates a topic and fetches the metadata log.
func TestServeOverListener(t *testing.T) {
	c, addr := startOne(t)

	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.IncarnationID, reg.ClusterID = 0, [16]byte{1}, "test-cluster"
	rr := request(t, addr, reg).(*kmsg.BrokerRegistrationResponse)
	if rr.ErrorCode != 0 || rr.BrokerEpoch <= 0 {
		t.Fatalf("register: %+v", rr)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = 0, rr.BrokerEpoch, rr.BrokerEpoch
	if hr := request(t, addr, hb).(*kmsg.BrokerHeartbeatResponse); hr.ErrorCode != 0 || hr.IsFenced {
		t.Fatalf("heartbeat: %+v", hr)
	}
	// A follower starts from a snapshot, then applies the entries shipped
	// after it: it ends with the image the member has.
	fs := kmsg.NewPtrFetchSnapshotRequest()
	fst := kmsg.NewFetchSnapshotRequestTopic()
	fst.Topic = MetadataTopic
	fst.Partitions = append(fst.Partitions, kmsg.NewFetchSnapshotRequestTopicPartition())
	fs.Topics = append(fs.Topics, fst)
	ssp := request(t, addr, fs).(*kmsg.FetchSnapshotResponse).Topics[0].Partitions[0]
	img, err := quorum.DecodeImage(ssp.Bytes, uint64(ssp.SnapshotID.EndOffset))
	if err != nil || ssp.ErrorCode != 0 {
		t.Fatalf("snapshot: code %d, %v", ssp.ErrorCode, err)
	}
	if b, ok := img.Broker(0); !ok || b.Fenced {
		t.Fatalf("snapshot at %d: broker 0 %+v", img.Version(), b)
	}

	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", -1, -1
	ct.Topics = append(ct.Topics, rt)
	if st := request(t, addr, ct).(*kmsg.CreateTopicsResponse).Topics[0]; st.ErrorCode != 0 || st.NumPartitions != 3 {
		t.Fatalf("create: %+v", st)
	}
	if err := c.WaitFor(t.Context(), func(img *controller.Image) bool { return img.Topic("t") != nil }); err != nil {
		t.Fatal(err)
	}

	f := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = MetadataTopic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = int64(img.Version())+1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	sp := request(t, addr, f).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.CurrentLeader.LeaderID != 0 {
		t.Fatalf("fetch: code %d, leader %d", sp.ErrorCode, sp.CurrentLeader.LeaderID)
	}
	for data := sp.RecordBatches; len(data) > 0; {
		info, err := recordbatch.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		base := uint64(recordbatch.BaseOffset(data))
		recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
			img, err = quorum.ApplyEntry(img, base+uint64(r.OffsetDelta), r.Value)
			return err == nil
		})
		if err != nil {
			t.Fatal(err)
		}
		data = data[info.Bytes:]
	}
	if img.Topic("t") == nil || img.Version() != c.Image().Version() {
		t.Fatalf("follower at %d (topic %v), member at %d", img.Version(), img.Topic("t"), c.Image().Version())
	}
}

// The mux hands a connection opening with the raft preamble to the raft
// half and any other to the Kafka half, first byte replayed.
func TestMuxRoutesByFirstByte(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newConnMux(ln, nil, testConfig().Logger)
	done := make(chan struct{})
	go func() { m.run(); close(done) }()
	defer func() { ln.Close(); <-done }()

	for _, tc := range []struct {
		first []byte
		half  net.Listener
	}{
		{node.Preamble[:], m.raft},
		{[]byte{0, 0, 0, 20}, m.kafka},
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write(tc.first); err != nil {
			t.Fatal(err)
		}
		got, err := tc.half.Accept()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(tc.first))
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != string(tc.first) {
			t.Fatalf("read %x, %v; want %x", buf, err, tc.first)
		}
		got.Close()
	}
}

// testFront serves the Kafka half in these tests as the broker's dispatch
// would with no authorizer: every key kmsg knows, answered by Answer.
// Broker-level tests (broker/brokertest, compat-tests) cover the real
// dispatch.
type testFront struct{ c **Controller }

func (f testFront) Handle(ctx context.Context, req *protocol.Request, respond protocol.Responder) {
	if av, ok := req.Body.(*kmsg.ApiVersionsRequest); ok {
		resp := av.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = f.All()
		respond(resp, nil)
		return
	}
	(*f.c).Answer(ctx, req.Body, func(resp kmsg.Response) {
		if resp == nil {
			respond(nil, errors.New("not the controller"))
			return
		}
		respond(resp, nil)
	})
}

func (testFront) Supported(key int16) (int16, int16, bool) {
	if key == 1 {
		return 12, 12, true // the metadata log is fetched by name
	}
	r := fjordmsg.AnyRequestForKey(key)
	if r == nil {
		return 0, 0, false
	}
	return 0, r.MaxVersion(), true
}

func (f testFront) All() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k := int16(0); k < 100; k++ {
		if lo, hi, ok := f.Supported(k); ok {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: lo, MaxVersion: hi})
		}
	}
	return out
}
