package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// ctlClient carries this broker's requests to the active controller:
// in-process when this node leads the quorum, else over Kafka's protocol to
// the leader's CONTROLLER listener. Both paths reach the same
// active.Controller, so a single node and a cluster run one code path.
//
// The broker's own requests (Register, Heartbeat, AlterPartition,
// AllocateProducerIDs) are typed methods: each builds its request, sends
// it with call (which retries while there is no controller or it moves,
// until the context ends) and checks the answer's type and shape, so a
// malformed answer is an error, never a panic. Retrying a failed request
// is the caller's (lifecycle's loop, the replica core's backoff). Admin
// requests forwarded for clients (CreateTopics, DeleteTopics,
// CreatePartitions, ElectLeaders) go through call as they came.
type ctlClient struct {
	b  *Broker
	mu struct {
		sync.Mutex
		clients map[ctlRoute]*kgo.Client // dialled lazily
	}
}

// ctlRoute is one connection to a voter's controller listener. Heartbeats
// and registrations have a connection of their own: behind a storm of
// AlterPartitions (each waiting for a quorum round trip, sixteen in flight
// per connection) a heartbeat sharing their connection was not even read
// for seconds, and its broker was fenced for silence.
type ctlRoute struct {
	voter    int32
	liveness bool
}

// routeOf is the connection req goes on, to voter.
func routeOf(voter int32, req kmsg.Request) ctlRoute {
	switch req.(type) {
	case *kmsg.BrokerHeartbeatRequest, *kmsg.BrokerRegistrationRequest:
		return ctlRoute{voter: voter, liveness: true}
	}
	return ctlRoute{voter: voter}
}

// errNotController means no node is known to be the active controller, or
// the one asked no longer is.
var errNotController = errors.New("broker: not the active controller")

// errMalformedAnswer is an answer from the controller whose type or shape
// is not what the request asks for.
var errMalformedAnswer = errors.New("broker: malformed answer from the controller")

func newCtlClient(b *Broker) *ctlClient {
	c := &ctlClient{b: b}
	c.mu.clients = map[ctlRoute]*kgo.Client{}
	return c
}

// client returns the connection to a voter's controller listener.
func (c *ctlClient) client(r ctlRoute) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.mu.clients[r]; cl != nil {
		return cl, nil
	}
	vs, _ := config.ParseVoters(c.b.cfg.ControllerQuorumVoters)
	for _, v := range vs {
		if v.ID == r.voter {
			opts := []kgo.Opt{kgo.SeedBrokers(v.Addr), kgo.Dialer(c.b.ctlDial),
				kgo.ClientID(fmt.Sprintf("fjord-broker-%d", c.b.cfg.NodeID)), kgo.RequestRetries(0)}
			if c.b.ctlSASL != nil {
				opts = append(opts, kgo.SASL(c.b.ctlSASL))
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

func (c *ctlClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.mu.clients {
		cl.Close()
	}
	c.mu.clients = nil
}

// call sends req to the active controller, retrying while there is none or
// it moves, until ctx ends. offset is the metadata offset from which the
// records the answer committed are in the image (active.Controller.Call),
// 0 when it committed none. The answer is at req's version, whichever
// path it took, and carries nothing a Kafka client would not expect.
func (c *ctlClient) call(ctx context.Context, req kmsg.Request) (resp kmsg.Response, offset uint64, err error) {
	backoff := lifecycle.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}
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

func (c *ctlClient) once(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	id := c.b.meta.Leader()
	if id < 0 {
		return nil, 0, errNotController
	}
	if id == c.b.cfg.NodeID && c.b.actl != nil {
		if resp, offset := c.b.actl.Call(ctx, req); resp != nil {
			return resp, offset, nil
		}
		return nil, 0, errNotController
	}
	return c.request(ctx, id, req)
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
func (c *ctlClient) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, uint64, error) {
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
	req.SetVersion(version)
	if err != nil {
		return nil, 0, err
	}
	offset, _ := active.TakeOffset(resp)
	resp.SetVersion(version)
	return resp, offset, nil
}

// onWire is req as request sends it, at a version kgo chooses: a field
// that later versions dropped must travel in its successor. Among the
// requests brokers forward, only DeleteTopics has one: its names (v0-5)
// became topics (v6: a name or an id), so a client's DeleteTopics v5 sent
// as v6 with its names alone would delete nothing. The copy carries both
// lists, and kmsg encodes whichever the chosen version has.
func onWire(req kmsg.Request) kmsg.Request {
	r, ok := req.(*kmsg.DeleteTopicsRequest)
	if !ok || r.Version >= 6 || len(r.TopicNames) == 0 {
		return req
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

// Register registers this broker (BrokerRegistration: its client
// listeners as advertised, its rack) under incarnation, a random id of
// this process, and returns the broker epoch the controller gave it.
// Bounded by 30 s.
func (c *ctlClient) Register(ctx context.Context, incarnation [16]byte) (int64, error) {
	b := c.b
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = b.cfg.NodeID
	req.ClusterID = b.clusterID
	req.IncarnationID = incarnation
	for _, a := range b.advertised {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = a.Name, a.Host, uint16(a.Port)
		req.Listeners = append(req.Listeners, l)
	}
	if b.cfg.BrokerRack != "" {
		r := b.cfg.BrokerRack
		req.Rack = &r
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := callAs[*kmsg.BrokerRegistrationResponse](ctx, c, req)
	switch {
	case err != nil:
		return 0, err
	case resp.ErrorCode != 0:
		return 0, fmt.Errorf("broker registration: %w", kerr.ErrorForCode(resp.ErrorCode))
	case resp.BrokerEpoch < 0:
		return 0, fmt.Errorf("%w: broker registration gave epoch %d", errMalformedAnswer, resp.BrokerEpoch)
	}
	return resp.BrokerEpoch, nil
}

// heartbeatAnswer is what the controller said to a heartbeat.
type heartbeatAnswer struct {
	code           int16 // the error code; the flags mean nothing unless 0
	fenced         bool  // this broker is fenced
	shouldShutdown bool  // a controlled shutdown may finish: this broker is fenced
}

// Heartbeat sends a BrokerHeartbeat for the registration of the given
// broker epoch, saying the metadata offset this broker has applied and
// whether it wants to shut down. Bounded by controller.HeartbeatTimeout, so
// a controller too busy to answer still hears from this broker several
// times per session.
func (c *ctlClient) Heartbeat(ctx context.Context, epoch, appliedOffset int64, wantShutdown bool) (heartbeatAnswer, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = c.b.cfg.NodeID, epoch
	req.WantShutdown = wantShutdown
	req.CurrentMetadataOffset = appliedOffset
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	ctx, cancel := context.WithTimeout(ctx, controller.HeartbeatTimeout(ms(c.b.cfg.BrokerSessionTimeoutMs), ms(c.b.cfg.BrokerHeartbeatIntervalMs)))
	defer cancel()
	resp, err := callAs[*kmsg.BrokerHeartbeatResponse](ctx, c, req)
	if err != nil {
		return heartbeatAnswer{}, err
	}
	return heartbeatAnswer{code: resp.ErrorCode, fenced: resp.IsFenced, shouldShutdown: resp.ShouldShutdown}, nil
}

// AlterPartitions sends props, proposals of one broker epoch, as one
// AlterPartition and returns each partition's error code, in order (the
// request's code for every one if the controller refused it whole).
func (c *ctlClient) AlterPartitions(ctx context.Context, brokerEpoch int64, props []replicamgr.ISRProposal) ([]int16, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = c.b.cfg.NodeID, brokerEpoch
	// at[i][j] is the proposal behind req.Topics[i].Partitions[j]: one
	// topic entry per topic id, partitions in the order proposed.
	var at [][]int
	topicAt := map[[16]byte]int{}
	for k, prop := range props {
		i, ok := topicAt[prop.TopicID]
		if !ok {
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.TopicID = prop.TopicID
			req.Topics = append(req.Topics, rt)
			at = append(at, nil)
			i = len(req.Topics) - 1
			topicAt[prop.TopicID] = i
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = prop.Index, prop.LeaderEpoch, prop.PartitionEpoch
		for _, im := range prop.ISR {
			rp.NewISR = append(rp.NewISR, im.ID)
			m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			m.BrokerID, m.BrokerEpoch = im.ID, im.Epoch
			rp.NewEpochISR = append(rp.NewEpochISR, m)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		at[i] = append(at[i], k)
	}
	resp, err := callAs[*kmsg.AlterPartitionResponse](ctx, c, req)
	if err != nil {
		return nil, err
	}
	codes := make([]int16, len(props))
	if resp.ErrorCode != 0 {
		for k := range codes {
			codes[k] = resp.ErrorCode
		}
		return codes, nil
	}
	if len(resp.Topics) != len(req.Topics) {
		return nil, fmt.Errorf("%w: AlterPartition for %d topics answered with %d", errMalformedAnswer, len(req.Topics), len(resp.Topics))
	}
	for i, rt := range resp.Topics {
		if rt.TopidID != req.Topics[i].TopicID || len(rt.Partitions) != len(at[i]) {
			return nil, fmt.Errorf("%w: AlterPartition answer for topic %d does not match the request", errMalformedAnswer, i)
		}
		for j, rp := range rt.Partitions {
			if rp.Partition != req.Topics[i].Partitions[j].Partition {
				return nil, fmt.Errorf("%w: AlterPartition answered partition %d for %d", errMalformedAnswer, rp.Partition, req.Topics[i].Partitions[j].Partition)
			}
			codes[at[i][j]] = rp.ErrorCode
		}
	}
	return codes, nil
}

// AllocateProducerIDs reserves a block of producer ids for this broker
// (registered at brokerEpoch): [start, start+n), n >= 1.
func (c *ctlClient) AllocateProducerIDs(ctx context.Context, brokerEpoch int64) (start int64, n int32, err error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = c.b.cfg.NodeID, brokerEpoch
	resp, err := callAs[*kmsg.AllocateProducerIDsResponse](ctx, c, req)
	switch {
	case err != nil:
		return 0, 0, err
	case resp.ErrorCode != 0:
		return 0, 0, fmt.Errorf("allocating producer ids: %w", kerr.ErrorForCode(resp.ErrorCode))
	case resp.ProducerIDStart < 0 || resp.ProducerIDLen < 1:
		return 0, 0, fmt.Errorf("%w: producer id block [%d, +%d)", errMalformedAnswer, resp.ProducerIDStart, resp.ProducerIDLen)
	}
	return resp.ProducerIDStart, resp.ProducerIDLen, nil
}

// callAs is call for a request whose answer must be of type R.
func callAs[R kmsg.Response](ctx context.Context, c *ctlClient, req kmsg.Request) (R, error) {
	var zero R
	kresp, _, err := c.call(ctx, req)
	if err != nil {
		return zero, err
	}
	resp, ok := kresp.(R)
	if !ok {
		return zero, fmt.Errorf("%w: %T for %T", errMalformedAnswer, kresp, req)
	}
	return resp, nil
}
