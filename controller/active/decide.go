package active

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The I/O of one controller request. What to do with it is decided in
// package controller (a controller.Decision, built from the request and
// the inputs below); this file reads the clock, draws the ids, proposes
// each round's records as one batch, waits for them to apply, logs the
// decision's notes and answers.

// producerIDBlock is how many producer ids one AllocateProducerIDs hands
// out (Kafka's block size).
const producerIDBlock = 1000

// spareTopicIDs are drawn beyond one per topic of a CreateTopics, for an
// id that turns out to be in use already (random ids practically never
// are).
const spareTopicIDs = 4

// decide answers one request: nil for a request this package does not
// decide. REQUIRES: leading. arrived is when the request reached the
// controller (ms). offset is the metadata offset from which every record
// the decision committed is in the image: the raft index of its last
// round that proposed records and applied (a batch applies at its own
// index, and the image version is the index last applied), 0 when none
// did. A round that failed is left out: its records may never apply, and
// the answer reports that round's parts as failed anyway.
func (c *Controller) decide(ctx context.Context, kreq kmsg.Request, arrived int64) (resp kmsg.Response, offset uint64) {
	d := c.decision(kreq, arrived)
	if d == nil {
		return nil, 0
	}
	for {
		recs, ok := d.Next(c.m.Image())
		if !ok {
			break
		}
		idx, err := c.propose(ctx, recs)
		if err == nil {
			offset = max(offset, idx) // propose gives 0 for no records
		}
		d.Proposed(proposeCode(err))
	}
	resp, notes := d.Answer(c.m.Image())
	for _, n := range notes {
		ev := c.log.Info()
		if n.Warn {
			ev = c.log.Warn()
		}
		ev.Fields(n.Fields).Msg(n.Msg)
	}
	return resp, offset
}

// decision is kreq's decision with the inputs it takes: the time, read
// here once per request, fresh topic ids, the liveness table and the
// configuration.
func (c *Controller) decision(kreq kmsg.Request, arrived int64) controller.Decision {
	now := time.Now().UnixMilli()
	switch req := kreq.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return controller.DecideRegistration(req, c.cfg.ClusterID, c.live, now, c.sessionMs())
	case *kmsg.BrokerHeartbeatRequest:
		return controller.DecideHeartbeat(req, c.live, arrived, now)
	case *kmsg.AllocateProducerIDsRequest:
		return controller.DecideAllocateProducerIDs(req, producerIDBlock)
	case *kmsg.CreateTopicsRequest:
		return controller.DecideCreateTopics(req, c.defaults(), newTopicIDs(len(req.Topics)+spareTopicIDs))
	case *kmsg.DeleteTopicsRequest:
		return controller.DecideDeleteTopics(req, c.cfg.DeleteTopicEnable)
	case *kmsg.CreatePartitionsRequest:
		return controller.DecideCreatePartitions(req, c.defaults())
	case *kmsg.AlterPartitionRequest:
		return controller.DecideAlterPartition(req)
	case *kmsg.ElectLeadersRequest:
		return controller.DecideElectLeaders(req)
	case *kmsg.IncrementalAlterConfigsRequest:
		return controller.DecideIncrementalAlterConfigs(req, c.cfg.ConfigPolicy)
	case *kmsg.AlterConfigsRequest:
		return controller.DecideAlterConfigs(req, c.cfg.ConfigPolicy)
	case *kmsg.AlterClientQuotasRequest:
		return controller.DecideAlterClientQuotas(req)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return controller.DecideAlterUserScramCredentials(req)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return controller.DecideAlterPartitionReassignments(req)
	case *kmsg.ListPartitionReassignmentsRequest:
		return controller.DecideListPartitionReassignments(req)
	case *kmsg.CreateACLsRequest:
		return controller.DecideCreateACLs(req, c.cfg.ACLBinding)
	case *kmsg.DeleteACLsRequest:
		return controller.DecideDeleteACLs(req, c.cfg.ACLHost)
	case *fjordmsg.RemoteLogSegmentRequest:
		return controller.DecideRemoteLogSegment(req)
	}
	return nil
}

// newTopicIDs draws n random (version 4) UUIDs.
func newTopicIDs(n int) [][16]byte {
	ids := make([][16]byte, n)
	for i := range ids {
		b := &ids[i]
		rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80
	}
	return ids
}
