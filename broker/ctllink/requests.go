package ctllink

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// Registration is what a broker registers: what BrokerRegistration says
// of it besides its id and incarnation.
type Registration struct {
	ClusterID string
	// Listeners are its client listeners as advertised, ports resolved.
	Listeners []Listener
	Rack      string // broker.rack; "" for none
}

// Listener is one advertised client listener.
type Listener struct {
	Name, Host string
	Port       int32
}

// register registers this broker (BrokerRegistration: reg, its client
// listeners as advertised, its rack) under incarnation, a random id of
// this process, and returns the broker epoch the controller gave it.
// Bounded by 30 s.
func (c *Client) register(ctx context.Context, reg Registration, incarnation [16]byte) (int64, error) {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = c.cfg.NodeID
	req.ClusterID = reg.ClusterID
	req.IncarnationID = incarnation
	for _, a := range reg.Listeners {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = a.Name, a.Host, uint16(a.Port)
		req.Listeners = append(req.Listeners, l)
	}
	if reg.Rack != "" {
		r := reg.Rack
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

// heartbeat sends a BrokerHeartbeat for the registration of the given
// broker epoch, saying the metadata offset this broker has applied and
// whether it wants to shut down. Bounded by controller.HeartbeatTimeout, so
// a controller too busy to answer still hears from this broker several
// times per session.
func (c *Client) heartbeat(ctx context.Context, epoch, appliedOffset int64, wantShutdown bool) (heartbeatAnswer, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = c.cfg.NodeID, epoch
	req.WantShutdown = wantShutdown
	req.CurrentMetadataOffset = appliedOffset
	ctx, cancel := context.WithTimeout(ctx, controller.HeartbeatTimeout(c.cfg.SessionTimeout, c.cfg.HeartbeatInterval))
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
func (c *Client) AlterPartitions(ctx context.Context, brokerEpoch int64, props []replicamgr.ISRProposal) ([]int16, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = c.cfg.NodeID, brokerEpoch
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
func (c *Client) AllocateProducerIDs(ctx context.Context, brokerEpoch int64) (start int64, n int32, err error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = c.cfg.NodeID, brokerEpoch
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

// RemoteLogSegment proposes one remote log segment metadata record (a
// controller.RemoteSegment or RemoteSegmentStateChange whose Broker is
// this node) as this broker at brokerEpoch. code is the controller's
// decision (0: the record is committed); offset is the metadata offset
// from which it is in the image, for the caller to wait on before it
// reads the image again.
func (c *Client) RemoteLogSegment(ctx context.Context, brokerEpoch int64, rec controller.Record) (code int16, offset uint64, err error) {
	req := &fjordmsg.RemoteLogSegmentRequest{BrokerID: c.cfg.NodeID, BrokerEpoch: brokerEpoch, Record: controller.Encode(rec)}
	kresp, offset, err := c.Call(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp, ok := kresp.(*fjordmsg.RemoteLogSegmentResponse)
	if !ok {
		return 0, 0, fmt.Errorf("%w: %T for RemoteLogSegment", errMalformedAnswer, kresp)
	}
	return resp.ErrorCode, offset, nil
}

// callAs is call for a request whose answer must be of type R.
func callAs[R kmsg.Response](ctx context.Context, c *Client, req kmsg.Request) (R, error) {
	var zero R
	kresp, _, err := c.Call(ctx, req)
	if err != nil {
		return zero, err
	}
	resp, ok := kresp.(R)
	if !ok {
		return zero, fmt.Errorf("%w: %T for %T", errMalformedAnswer, kresp, req)
	}
	return resp, nil
}
