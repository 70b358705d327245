package ctllink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/protocol/tcpopt"
)

// Client carries this broker's requests to the active controller:
// in-process when this node leads the quorum, else over Kafka's protocol to
// the leader's CONTROLLER listener. Both paths reach the same
// active.Controller, so a single node and a cluster run one code path.
//
// The broker's own requests (register, heartbeat, AlterPartitions,
// AllocateProducerIDs) are typed methods (requests.go): each builds its
// request, sends it with Call (which retries while there is no controller
// or it moves, until the context ends) and checks the answer's type and
// shape, so a malformed answer is an error, never a panic. Retrying a
// failed request is the caller's (Lifecycle's loop, the replica core's
// backoff). Admin requests forwarded for clients (CreateTopics,
// DeleteTopics, CreatePartitions, ElectLeaders...) go through Call as they
// came.
type Client struct {
	cfg Config
	mu  struct {
		sync.Mutex
		clients map[route]*kgo.Client // dialled lazily
	}
}

// Config is what a Client needs of its node. The client is made before
// the node's metadata log and listeners (the replica manager it serves is
// made first), so what those give is read at each request, through
// functions.
type Config struct {
	// NodeID is this node's node.id: the broker id of its requests and
	// the replica id of a follower's fetches.
	NodeID int32
	// Voters are the metadata quorum's voters with their CONTROLLER
	// listeners' addresses, in controller.quorum.voters order.
	Voters []Voter
	// Leader is the node id of the active controller as this node's
	// metadata log knows it, -1 if unknown.
	Leader func() int32
	// Local is this node's controller role, nil without one.
	Local func() Local
	// Dial opens a connection to a voter's CONTROLLER listener (with its
	// TLS when it has it).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// SASL is this node's identity towards the controllers when their
	// listener is SASL, nil when not.
	SASL func() kgosasl.Mechanism
	// SessionTimeout and HeartbeatInterval are broker.session.timeout.ms
	// and broker.heartbeat.interval.ms: a heartbeat is bounded by both
	// (controller.HeartbeatTimeout), and a controlled shutdown by the
	// first.
	SessionTimeout, HeartbeatInterval time.Duration
}

// Voter is one member of the metadata quorum.
type Voter struct {
	ID   int32
	Addr string // host:port of its CONTROLLER listener
}

// Local is this node's controller role, as the client calls it in-process.
type Local interface {
	// Call decides req in-process: the controller's answer, or nil when
	// this node is not the active controller (now) or ctx ended first,
	// and the metadata offset of the records the answer committed (0 for
	// none).
	Call(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64)
}

// route is one connection to a voter's controller listener. Heartbeats
// and registrations have a connection of their own: behind a storm of
// AlterPartitions (each waiting for a quorum round trip, sixteen in flight
// per connection) a heartbeat sharing their connection was not even read
// for seconds, and its broker was fenced for silence.
type route struct {
	voter    int32
	liveness bool
}

// routeOf is the connection req goes on, to voter.
func routeOf(voter int32, req kmsg.Request) route {
	switch req.(type) {
	case *kmsg.BrokerHeartbeatRequest, *kmsg.BrokerRegistrationRequest:
		return route{voter: voter, liveness: true}
	}
	return route{voter: voter}
}

// errNotController means no node is known to be the active controller, or
// the one asked no longer is.
var errNotController = errors.New("broker: not the active controller")

// errMalformedAnswer is an answer from the controller whose type or shape
// is not what the request asks for.
var errMalformedAnswer = errors.New("broker: malformed answer from the controller")

// NewClient returns a client that dials nothing until its first request
// over the wire.
func NewClient(cfg Config) *Client {
	c := &Client{cfg: cfg}
	c.mu.clients = map[route]*kgo.Client{}
	return c
}

// client returns the connection to a voter's controller listener.
func (c *Client) client(r route) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.mu.clients[r]; cl != nil {
		return cl, nil
	}
	for _, v := range c.cfg.Voters {
		if v.ID == r.voter {
			opts := []kgo.Opt{kgo.SeedBrokers(v.Addr),
				kgo.ClientID(fmt.Sprintf("fjord-broker-%d", c.cfg.NodeID)), kgo.RequestRetries(0),
				kgo.Dialer(c.dial), kgo.MaxVersions(clientVersions())}
			if m := c.sasl(); m != nil {
				opts = append(opts, kgo.SASL(m))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return nil, err
			}
			c.mu.clients[r] = cl
			return cl, nil
		}
	}
	return nil, fmt.Errorf("controller %d is not in controller.quorum.voters", r.voter)
}

// clientVersions are the versions the client sends: kgo's defaults and
// Fjord's private keys (kgo refuses to send a key its versions lack).
func clientVersions() *kversion.Versions {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(fjordmsg.RemoteLogSegmentKey, 0)
	return vs
}

// dial opens a connection to a voter's controller listener, with
// tcpopt.UserTimeout: a request sent into a path that went dead (a
// partition) closes the connection within it, instead of every later
// request queueing behind it until TCP's backed-off retransmission
// crosses the healed path. kgo dials with the request's context, so a
// dial started during a partition ends with its request.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if c.cfg.Dial != nil {
		conn, err = c.cfg.Dial(ctx, network, addr)
	} else {
		d := net.Dialer{Timeout: 2 * time.Second}
		conn, err = d.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	_ = tcpopt.SetUserTimeout(conn, tcpopt.UserTimeout) // best effort
	return conn, nil
}

// sasl is the mechanism to dial the voters with, nil for none.
func (c *Client) sasl() kgosasl.Mechanism {
	if c.cfg.SASL == nil {
		return nil
	}
	return c.cfg.SASL()
}

// Close closes the connections to the voters.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.mu.clients {
		cl.Close()
	}
	c.mu.clients = nil
}

// Call sends req to the active controller, retrying while there is none or
// it moves, until ctx ends. offset is the metadata offset from which the
// records the answer committed are in the image (active.Controller.Call),
// 0 when it committed none. The answer is at req's version, whichever
// path it took, and carries nothing a Kafka client would not expect.
func (c *Client) Call(ctx context.Context, req kmsg.Request) (resp kmsg.Response, offset uint64, err error) {
	// Short first pauses: at start-up the only voter becomes leader within
	// a millisecond or two of the first call, which should not wait 20 ms.
	backoff := lifecycle.Backoff{Initial: 2 * time.Millisecond, Max: 500 * time.Millisecond}
	for fails := 1; ; fails++ {
		resp, offset, err := c.once(ctx, req)
		if err == nil && !notController(resp) {
			return resp, offset, nil
		}
		if !lifecycle.Sleep(ctx, backoff.Delay(fails)) {
			if err == nil {
				err = errNotController
			}
			return nil, 0, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

// once is one try of Call: in-process when this node leads, else over the
// wire.
func (c *Client) once(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	id := c.cfg.Leader()
	if id < 0 {
		return nil, 0, errNotController
	}
	if id != c.cfg.NodeID {
		return c.request(ctx, id, req)
	}
	local := c.local()
	if local == nil {
		return c.request(ctx, id, req)
	}
	if resp, offset := local.Call(ctx, req); resp != nil {
		return resp, offset, nil
	}
	return nil, 0, errNotController
}

// local is this node's controller role, nil without one.
func (c *Client) local() Local {
	if c.cfg.Local == nil {
		return nil
	}
	return c.cfg.Local()
}

// request sends req to voter id's controller listener itself.
//
// kgo sends a request at the highest version both ends serve, setting
// that version on it, whatever version it had: a client's CreateTopics v4
// goes out as v7. request puts req's version back afterwards and gives
// the answer that version too, so the broker answers its client at the
// version the client asked for (before, a forwarded answer went back at
// the version kgo had chosen, which an older client cannot parse). The
// versions the CONTROLLER listener serves at most are all flexible, so
// the answer carries the controller's offset in a tagged field
// (active.OffsetTag), which request takes out.
func (c *Client) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, uint64, error) {
	cl, err := c.client(routeOf(id, req))
	if err != nil {
		return nil, 0, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, 0, errNotController
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	version := req.GetVersion()
	resp, err := seeds[0].Request(rctx, onWire(req))
	if err != nil {
		return nil, 0, err
	}
	offset, _ := active.TakeOffset(resp)
	resp.SetVersion(version)
	return resp, offset, nil
}

// onWire is a copy of req as request sends it. A copy, because kgo sets
// the version it chooses on the request it is given, and may still do so
// after Request returned (a request whose context ended is still being
// handled by kgo's own goroutine): writing req's version back then raced
// with kgo, and a caller that reuses its request (the metadata follower's
// Fetch) would meet kgo's write. The copy is shallow: kgo only sets its
// version and encodes it.
//
// It is sent at a version kgo chooses: a field that later versions
// dropped must travel in its successor. Among the
// requests brokers forward, only DeleteTopics has one: its names (v0-5)
// became topics (v6: a name or an id), so a client's DeleteTopics v5 sent
// as v6 with its names alone would delete nothing. The copy carries both
// lists, and kmsg encodes whichever the chosen version has.
func onWire(req kmsg.Request) kmsg.Request {
	r, ok := req.(*kmsg.DeleteTopicsRequest)
	if !ok || r.Version >= 6 || len(r.TopicNames) == 0 {
		v := reflect.ValueOf(req).Elem() // every kmsg.Request is a pointer to a struct
		c := reflect.New(v.Type())
		c.Elem().Set(v)
		return c.Interface().(kmsg.Request)
	}
	up := *r
	up.Topics = nil
	for _, n := range r.TopicNames {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		up.Topics = append(up.Topics, t)
	}
	return &up
}

// notController reports whether resp says its sender was not (or no longer)
// the active controller.
func notController(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode == nc
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode == nc
	case *fjordmsg.RemoteLogSegmentResponse:
		return r.ErrorCode == nc
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == nc
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionAssignmentsResponse:
		if r.ErrorCode == nc {
			return true
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == nc {
					return true
				}
			}
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.AlterClientQuotasResponse:
		for _, e := range r.Entries {
			if e.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, e := range r.Results {
			if e.ErrorCode == nc {
				return true
			}
		}
	}
	return false
}
