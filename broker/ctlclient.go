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
)

// ctlClient carries this broker's requests to the active controller:
// in-process when this node leads the quorum, else over Kafka's protocol to
// the leader's CONTROLLER listener. Both paths reach the same
// active.Controller, so a single node and a cluster run one code path.
type ctlClient struct {
	b  *Broker
	mu struct {
		sync.Mutex
		clients map[int32]*kgo.Client // by voter node id; dialled lazily
	}
}

// errNotController means no node is known to be the active controller, or
// the one asked no longer is.
var errNotController = errors.New("broker: not the active controller")

func newCtlClient(b *Broker) *ctlClient {
	c := &ctlClient{b: b}
	c.mu.clients = map[int32]*kgo.Client{}
	return c
}

// client returns the connection pool to voter id's controller listener.
func (c *ctlClient) client(id int32) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.mu.clients[id]; cl != nil {
		return cl, nil
	}
	vs, _ := ParseVoters(c.b.cfg.ControllerQuorumVoters)
	for _, v := range vs {
		if v.ID == id {
			cl, err := kgo.NewClient(kgo.SeedBrokers(v.Addr), kgo.DialTimeout(2*time.Second),
				kgo.ClientID(fmt.Sprintf("fjord-broker-%d", c.b.cfg.NodeID)), kgo.RequestRetries(0))
			if err != nil {
				return nil, err
			}
			c.mu.clients[id] = cl
			return cl, nil
		}
	}
	return nil, fmt.Errorf("controller %d is not in controller.quorum.voters", id)
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
// it moves, until ctx ends.
func (c *ctlClient) call(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	backoff := 20 * time.Millisecond
	for {
		resp, err := c.once(ctx, req)
		if err == nil && !notController(resp) {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errNotController
			}
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

func (c *ctlClient) once(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	id := c.b.meta.Leader()
	if id < 0 {
		return nil, errNotController
	}
	if id == c.b.cfg.NodeID && c.b.actl != nil {
		if resp := c.b.actl.Call(ctx, req); resp != nil {
			return resp, nil
		}
		return nil, errNotController
	}
	// A kmsg request is reused across attempts; kgo sets its version.
	return c.request(ctx, id, req)
}

// request sends req to voter id's controller listener itself.
func (c *ctlClient) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.client(id)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errNotController
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return seeds[0].Request(rctx, req)
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
	}
	return false
}
