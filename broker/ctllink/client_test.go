package ctllink

import (
	"context"
	"errors"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/tcpopt"
)

// cannedController is an active controller in this process that answers
// every request with answer(req), committed at offset, and records what
// it was asked.
type cannedController struct {
	answer func(kmsg.Request) kmsg.Response
	offset uint64
	asked  []kmsg.Request
}

func (c *cannedController) Image() *controller.Image { return nil }
func (c *cannedController) WaitFor(context.Context, func(*controller.Image) bool) error {
	return nil
}
func (c *cannedController) Leader() int32 { return 7 }
func (c *cannedController) Close() error  { return nil }
func (c *cannedController) Serve()        {}
func (c *cannedController) Call(_ context.Context, req kmsg.Request) (kmsg.Response, uint64) {
	c.asked = append(c.asked, req)
	return c.answer(req), c.offset
}

// cannedClient is a Client of node 7, which leads the quorum and
// answers with answer.
func cannedClient(answer func(kmsg.Request) kmsg.Response) (*Client, *cannedController) {
	actl := &cannedController{answer: answer}
	c := NewClient(Config{NodeID: 7, Leader: actl.Leader, Local: func() Local { return actl },
		SessionTimeout: 9 * time.Second, HeartbeatInterval: 2 * time.Second})
	return c, actl
}

// registration is what cannedClient's node registers.
var registration = Registration{ClusterID: "c", Rack: "r1", Listeners: []Listener{{Name: "PLAINTEXT", Host: "h", Port: 9092}}}

func TestCtlClientRegister(t *testing.T) {
	c, actl := cannedClient(func(kmsg.Request) kmsg.Response {
		r := kmsg.NewPtrBrokerRegistrationResponse()
		r.BrokerEpoch = 12
		return r
	})
	epoch, err := c.register(context.Background(), registration, [16]byte{1})
	if err != nil || epoch != 12 {
		t.Fatalf("register: %d, %v", epoch, err)
	}
	req := actl.asked[0].(*kmsg.BrokerRegistrationRequest)
	if req.BrokerID != 7 || req.ClusterID != "c" || req.IncarnationID != [16]byte{1} || *req.Rack != "r1" ||
		len(req.Listeners) != 1 || req.Listeners[0].Port != 9092 {
		t.Fatalf("request: %+v", req)
	}
}

func TestCtlClientHeartbeat(t *testing.T) {
	c, actl := cannedClient(func(kmsg.Request) kmsg.Response {
		r := kmsg.NewPtrBrokerHeartbeatResponse()
		r.IsFenced, r.ShouldShutdown = true, true
		return r
	})
	a, err := c.heartbeat(context.Background(), 12, 40, true)
	if err != nil || a != (heartbeatAnswer{fenced: true, shouldShutdown: true}) {
		t.Fatalf("heartbeat: %+v, %v", a, err)
	}
	req := actl.asked[0].(*kmsg.BrokerHeartbeatRequest)
	if req.BrokerID != 7 || req.BrokerEpoch != 12 || req.CurrentMetadataOffset != 40 || !req.WantShutdown {
		t.Fatalf("request: %+v", req)
	}
}

func TestCtlClientAlterPartitions(t *testing.T) {
	// echo answers the request's partitions in order, with code for each,
	// after bend changes the answer's shape.
	echo := func(code int16, bend func(*kmsg.AlterPartitionResponse)) func(kmsg.Request) kmsg.Response {
		return func(kreq kmsg.Request) kmsg.Response {
			req := kreq.(*kmsg.AlterPartitionRequest)
			r := kmsg.NewPtrAlterPartitionResponse()
			for _, qt := range req.Topics {
				rt := kmsg.NewAlterPartitionResponseTopic()
				rt.TopidID = qt.TopicID
				for _, qp := range qt.Partitions {
					rp := kmsg.NewAlterPartitionResponseTopicPartition()
					rp.Partition, rp.ErrorCode = qp.Partition, code+int16(qp.Partition)
					rt.Partitions = append(rt.Partitions, rp)
				}
				r.Topics = append(r.Topics, rt)
			}
			if bend != nil {
				bend(r)
			}
			return r
		}
	}
	prop := replicamgr.ISRProposal{BrokerEpoch: 12, TopicID: [16]byte{9}, Index: 3, LeaderEpoch: 4, PartitionEpoch: 5,
		ISR: []replicamgr.ISRMember{{ID: 7, Epoch: 12}, {ID: 8, Epoch: -1}}}
	c, actl := cannedClient(echo(0, nil))
	if codes, err := c.AlterPartitions(context.Background(), 12, []replicamgr.ISRProposal{prop}); err != nil || !slices.Equal(codes, []int16{3}) {
		t.Fatalf("alter: %v, %v", codes, err)
	}
	req := actl.asked[0].(*kmsg.AlterPartitionRequest)
	rp := req.Topics[0].Partitions[0]
	if req.BrokerID != 7 || req.BrokerEpoch != 12 || req.Topics[0].TopicID != prop.TopicID || rp.Partition != 3 ||
		rp.LeaderEpoch != 4 || rp.PartitionEpoch != 5 || len(rp.NewISR) != 2 || rp.NewEpochISR[1].BrokerEpoch != -1 {
		t.Fatalf("request: %+v", req)
	}
	// Three proposals over two topics, one partition twice: one request,
	// each answer back to its proposal.
	other := prop
	other.TopicID, other.Index = [16]byte{10}, 1
	again := prop
	again.PartitionEpoch = 6
	c, actl = cannedClient(echo(100, nil))
	codes, err := c.AlterPartitions(context.Background(), 12, []replicamgr.ISRProposal{prop, other, again})
	if err != nil || !slices.Equal(codes, []int16{103, 101, 103}) || len(actl.asked) != 1 {
		t.Fatalf("batch: %v, %v, %d requests", codes, err, len(actl.asked))
	}
	req = actl.asked[0].(*kmsg.AlterPartitionRequest)
	if len(req.Topics) != 2 || len(req.Topics[0].Partitions) != 2 || req.Topics[0].Partitions[1].PartitionEpoch != 6 {
		t.Fatalf("batch request: %+v", req)
	}
	// A request refused whole gives every proposal its code.
	c, _ = cannedClient(func(kmsg.Request) kmsg.Response {
		r := kmsg.NewPtrAlterPartitionResponse()
		r.ErrorCode = kerr.StaleBrokerEpoch.Code
		return r
	})
	if codes, err := c.AlterPartitions(context.Background(), 12, []replicamgr.ISRProposal{prop, other}); err != nil ||
		!slices.Equal(codes, []int16{kerr.StaleBrokerEpoch.Code, kerr.StaleBrokerEpoch.Code}) {
		t.Fatalf("refused whole: %v, %v", codes, err)
	}
	for name, bad := range map[string]func(kmsg.Request) kmsg.Response{
		"no topics":     echo(0, func(r *kmsg.AlterPartitionResponse) { r.Topics = nil }),
		"no partitions": echo(0, func(r *kmsg.AlterPartitionResponse) { r.Topics[0].Partitions = nil }),
		"extra topic":   echo(0, func(r *kmsg.AlterPartitionResponse) { r.Topics = append(r.Topics, r.Topics[0]) }),
		"extra partition": echo(0, func(r *kmsg.AlterPartitionResponse) {
			r.Topics[0].Partitions = append(r.Topics[0].Partitions, r.Topics[0].Partitions[0])
		}),
		"other partition": echo(0, func(r *kmsg.AlterPartitionResponse) { r.Topics[0].Partitions[0].Partition = 4 }),
		"other topic":     echo(0, func(r *kmsg.AlterPartitionResponse) { r.Topics[0].TopidID = [16]byte{1} }),
		"other api":       func(kmsg.Request) kmsg.Response { return kmsg.NewPtrApiVersionsResponse() },
	} {
		c, _ := cannedClient(bad)
		if codes, err := c.AlterPartitions(context.Background(), 12, []replicamgr.ISRProposal{prop}); !errors.Is(err, errMalformedAnswer) || codes != nil {
			t.Errorf("%s: %v, %v", name, codes, err)
		}
	}
}

func TestCtlClientAllocateProducerIDs(t *testing.T) {
	block := func(start int64, n int32) func(kmsg.Request) kmsg.Response {
		return func(kmsg.Request) kmsg.Response {
			r := kmsg.NewPtrAllocateProducerIDsResponse()
			r.ProducerIDStart, r.ProducerIDLen = start, n
			return r
		}
	}
	c, _ := cannedClient(block(1000, 1000))
	if start, n, err := c.AllocateProducerIDs(context.Background(), 12); err != nil || start != 1000 || n != 1000 {
		t.Fatalf("allocate: %d %d %v", start, n, err)
	}
	for _, bad := range []func(kmsg.Request) kmsg.Response{block(1000, 0), block(-1, 1000)} {
		c, _ := cannedClient(bad)
		if _, _, err := c.AllocateProducerIDs(context.Background(), 12); !errors.Is(err, errMalformedAnswer) {
			t.Errorf("malformed answer: %v", err)
		}
	}
}

// A refusal is an error, not a malformed answer.
func TestCtlClientRefusals(t *testing.T) {
	c, _ := cannedClient(func(req kmsg.Request) kmsg.Response {
		switch req.(type) {
		case *kmsg.BrokerRegistrationRequest:
			r := kmsg.NewPtrBrokerRegistrationResponse()
			r.ErrorCode = kerr.DuplicateBrokerRegistration.Code
			return r
		default:
			r := kmsg.NewPtrAllocateProducerIDsResponse()
			r.ErrorCode = kerr.StaleBrokerEpoch.Code
			return r
		}
	})
	if _, err := c.register(context.Background(), registration, [16]byte{}); !errors.Is(err, kerr.DuplicateBrokerRegistration) {
		t.Errorf("register: %v", err)
	}
	if _, _, err := c.AllocateProducerIDs(context.Background(), 12); !errors.Is(err, kerr.StaleBrokerEpoch) {
		t.Errorf("allocate: %v", err)
	}
}

// TestDialBoundsUnackedData: the connections to the voters carry
// TCP_USER_TIMEOUT, the configured dialer's and the default one alike, so
// a request sent into a partition closes its connection within
// tcpopt.UserTimeout instead of holding the route until TCP's backed-off
// retransmission crosses the healed path (its broker stayed fenced
// seconds after heals that way; compat-tests' TestNetworkFaults).
func TestDialBoundsUnackedData(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	var d net.Dialer
	for name, dial := range map[string]func(context.Context, string, string) (net.Conn, error){
		"default": nil, "configured": d.DialContext,
	} {
		c := NewClient(Config{NodeID: 1, Dial: dial})
		conn, err := c.dial(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := tcpopt.UserTimeoutOf(conn)
		conn.Close()
		if err != nil || got != tcpopt.UserTimeout {
			t.Errorf("%s dialer: TCP_USER_TIMEOUT %v (%v), want %v", name, got, err, tcpopt.UserTimeout)
		}
	}
}
