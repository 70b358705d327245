package active

import (
	"context"
	"crypto/rand"
	"slices"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kmsg adapter: each controller request becomes the inputs of a pure
// decision in package controller, its records are proposed (propose), and
// the answer is read back from the image they applied to. AlterPartition
// and CreatePartitions propose per partition or topic, so each decides
// against the image with the earlier ones applied; the others propose one
// batch for the whole request.

// decide answers one request. REQUIRES: leading.
// arrived is when the request reached the controller (ms).
func (c *Controller) decide(ctx context.Context, kreq kmsg.Request, arrived int64) kmsg.Response {
	now := time.Now().UnixMilli()
	img := c.m.Image()
	switch req := kreq.(type) {
	case *kmsg.BrokerRegistrationRequest:
		resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		reg := controller.RegisterBroker{ID: req.BrokerID, Incarnation: req.IncarnationID}
		for _, l := range req.Listeners {
			reg.Endpoints = append(reg.Endpoints, controller.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
		}
		if req.Rack != nil {
			reg.Rack = *req.Rack
		}
		recs, code := c.live.Register(img, reg, now, c.sessionMs())
		if code != 0 {
			resp.ErrorCode = code
			return resp
		}
		if _, err := c.propose(ctx, recs); err != nil {
			resp.ErrorCode = proposeCode(err)
			return resp
		}
		if bs, ok := c.m.Image().Broker(req.BrokerID); ok && bs.Incarnation == req.IncarnationID {
			resp.BrokerEpoch = bs.Epoch
			c.log.Info().Int32("broker", req.BrokerID).Int64("epoch", bs.Epoch).Msg("broker registered")
		} else {
			resp.ErrorCode = kerr.RequestTimedOut.Code
		}
		return resp

	case *kmsg.BrokerHeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		bs, ok := img.Broker(req.BrokerID)
		caughtUp := ok && req.CurrentMetadataOffset >= bs.Epoch
		var recs []controller.Record
		var code int16
		what := "broker unfenced"
		if req.WantShutdown {
			recs, code = c.live.Shutdown(img, req.BrokerID, req.BrokerEpoch, now)
			what = "controlled shutdown: broker fenced, its leaderships moved"
		} else {
			early := c.live.MayFenceEarly(req.BrokerID, req.BrokerEpoch)
			// As it arrived: one sent before its broker was found gone
			// must not unfence it (Liveness.Refused).
			recs, code = c.live.HeartbeatSent(img, req.BrokerID, req.BrokerEpoch, caughtUp, arrived, now)
			if early && !c.live.MayFenceEarly(req.BrokerID, req.BrokerEpoch) {
				c.log.Warn().Int32("broker", req.BrokerID).
					Msg("broker heartbeats though its listeners refused the controller's connections: not fenced early again until it registers anew")
			}
		}
		if code != 0 {
			resp.ErrorCode = code
			return resp
		}
		if _, err := c.propose(ctx, recs); err != nil {
			resp.ErrorCode = proposeCode(err)
			return resp
		}
		if len(recs) > 0 {
			c.log.Info().Int32("broker", req.BrokerID).Int("records", len(recs)).Msg(what)
		}
		bs, _ = c.m.Image().Broker(req.BrokerID)
		resp.IsCaughtUp, resp.IsFenced = caughtUp, bs.Fenced
		// A broker asking to stop may once the image shows it fenced.
		resp.ShouldShutdown = req.WantShutdown && bs.Fenced
		return resp

	case *kmsg.AllocateProducerIDsRequest:
		resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		if bs, ok := img.Broker(req.BrokerID); !ok || bs.Epoch != req.BrokerEpoch {
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
			return resp
		}
		const block = 1000
		r := controller.AllocateProducerIDs(img, req.BrokerID, block)
		if _, err := c.propose(ctx, []controller.Record{r}); err != nil {
			resp.ErrorCode = proposeCode(err)
			return resp
		}
		pids := r.Body.(controller.ProducerIDs)
		resp.ProducerIDStart, resp.ProducerIDLen = pids.First, int32(pids.Count)
		return resp

	case *kmsg.CreateTopicsRequest:
		return c.createTopics(ctx, img, req)
	case *kmsg.DeleteTopicsRequest:
		return c.deleteTopics(ctx, img, req)
	case *kmsg.CreatePartitionsRequest:
		return c.createPartitions(ctx, req)
	case *kmsg.AlterPartitionRequest:
		return c.alterPartition(ctx, req)
	case *kmsg.ElectLeadersRequest:
		return c.electLeaders(ctx, img, req)
	case *kmsg.IncrementalAlterConfigsRequest:
		return c.incrementalAlterConfigs(ctx, img, req)
	case *kmsg.AlterConfigsRequest:
		return c.legacyAlterConfigs(ctx, img, req)
	case *kmsg.AlterClientQuotasRequest:
		return c.alterClientQuotas(ctx, img, req) // quota.go
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return c.alterUserScramCredentials(ctx, img, req) // scram.go
	case *kmsg.AlterPartitionAssignmentsRequest:
		return c.alterReassignments(ctx, img, req)
	case *kmsg.ListPartitionReassignmentsRequest:
		return c.listReassignments(img, req)
	case *kmsg.CreateACLsRequest:
		return c.createACLs(ctx, req) // acl.go
	case *kmsg.DeleteACLsRequest:
		return c.deleteACLs(ctx, img, req) // acl.go
	}
	return nil
}

// electLeaders decides an operator's ElectLeaders: preferred elections for
// the named (or all) partitions, unclean ones refused.
func (c *Controller) electLeaders(ctx context.Context, img *controller.Image, req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	topics := req.Topics
	if topics == nil {
		for _, t := range img.Topics() {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = t.Name
			for p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, int32(p))
			}
			topics = append(topics, rt)
		}
	}
	var recs []controller.Record
	codes := map[string]map[int32]int16{}
	for _, rt := range topics {
		if req.ElectionType == 1 {
			codes[rt.Topic] = map[int32]int16{}
			t := img.Topic(rt.Topic)
			for _, p := range rt.Partitions {
				switch {
				case t == nil || p < 0 || int(p) >= len(t.Partitions):
					codes[rt.Topic][p] = kerr.UnknownTopicOrPartition.Code
				case t.Partitions[p].Leader >= 0:
					codes[rt.Topic][p] = kerr.ElectionNotNeeded.Code
				default:
					codes[rt.Topic][p] = kerr.EligibleLeadersNotAvailable.Code
				}
			}
			continue
		}
		r, cs := controller.ElectPreferredFor(img, rt.Topic, rt.Partitions)
		recs = append(recs, r...)
		codes[rt.Topic] = cs
	}
	_, perr := c.propose(ctx, recs)
	for _, rt := range topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[rt.Topic][p]
			if sp.ErrorCode == 0 && perr != nil {
				sp.ErrorCode = proposeCode(perr)
			}
			if req.ElectionType == 1 && sp.ErrorCode == kerr.EligibleLeadersNotAvailable.Code {
				m := "unclean leader election is disabled: only an in-sync replica may lead"
				sp.ErrorMessage = &m
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(recs) > 0 && perr == nil {
		c.log.Info().Int("partitions", len(recs)).Msg("preferred leaders elected on request")
	}
	return resp
}

// alterPartition decides each partition's ISR change and commits them
// all in one proposal: a leader back from a restart sends hundreds at
// once, and a quorum round trip each kept the decision loop (and every
// call behind it) busy for seconds. Changes to distinct partitions are
// independent, so all are decided against one image; a partition named
// again is decided after the changes before it are committed. A new ISR
// without the leader itself is Fjord's resignation: the leader cannot
// serve the partition (controller.Resign).
func (c *Controller) alterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	type key struct {
		topic [16]byte
		index int32
	}
	var (
		pending []controller.Record
		waiting [][2]int         // resp.Topics[i].Partitions[j] decided, in pending
		keys    = map[key]bool{} // partitions in pending
	)
	commit := func() {
		if len(pending) > 0 {
			if _, err := c.propose(ctx, pending); err != nil {
				for _, w := range waiting {
					resp.Topics[w[0]].Partitions[w[1]].ErrorCode = proposeCode(err)
				}
			}
		}
		pending, waiting = nil, nil
		clear(keys)
	}
	img := c.m.Image()
	for ti, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.TopidID = rt.TopicID
		resp.Topics = append(resp.Topics, st)
		for _, rp := range rt.Partitions {
			if k := (key{rt.TopicID, rp.Partition}); keys[k] {
				commit()
				img = c.m.Image()
			} else {
				keys[k] = true
			}
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			isr := rp.NewISR
			if req.Version >= 3 {
				isr = nil
				for _, m := range rp.NewEpochISR {
					if bs, ok := img.Broker(m.BrokerID); ok && m.BrokerEpoch != -1 && bs.Epoch != m.BrokerEpoch {
						sp.ErrorCode = kerr.IneligibleReplica.Code
					}
					isr = append(isr, m.BrokerID)
				}
			}
			var recs []controller.Record
			if sp.ErrorCode == 0 {
				if slices.Contains(isr, req.BrokerID) {
					recs, sp.ErrorCode = controller.AlterPartition(img, req.BrokerID, req.BrokerEpoch, rt.TopicID, rp.Partition,
						rp.LeaderEpoch, rp.PartitionEpoch, isr)
				} else {
					recs, sp.ErrorCode = controller.Resign(img, req.BrokerID, req.BrokerEpoch, rt.TopicID, rp.Partition,
						rp.LeaderEpoch, rp.PartitionEpoch)
					if sp.ErrorCode == 0 {
						c.log.Warn().Int32("broker", req.BrokerID).Int32("partition", rp.Partition).Msg("leader resigned a partition it cannot serve")
					}
				}
			}
			resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, sp)
			if sp.ErrorCode == 0 {
				pending = append(pending, recs...)
				waiting = append(waiting, [2]int{ti, len(resp.Topics[ti].Partitions) - 1})
			}
		}
	}
	commit()
	after := c.m.Image()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			if p, ok := after.Partition(rt.TopidID, sp.Partition); ok && sp.ErrorCode == 0 {
				sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = p.Leader, p.LeaderEpoch, p.ISR, p.PartitionEpoch
			}
		}
	}
	return resp
}

func newUUID() [16]byte {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80
	return b
}

func (c *Controller) createTopics(ctx context.Context, img *controller.Image, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	specs := make([]controller.TopicSpec, len(req.Topics))
	nullConfig := map[int]string{}
	for i, rt := range req.Topics {
		s := controller.TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, RF: rt.ReplicationFactor}
		for _, a := range rt.ReplicaAssignment {
			if s.Assignment == nil {
				s.Assignment = map[int32][]int32{}
			}
			s.Assignment[a.Partition] = a.Replicas
		}
		for _, cf := range rt.Configs {
			if s.Configs == nil {
				s.Configs = map[string]string{}
			}
			if cf.Value == nil {
				nullConfig[i] = cf.Name
				continue
			}
			s.Configs[cf.Name] = *cf.Value
		}
		specs[i] = s
	}
	results := controller.CreateTopics(img, specs, c.defaults(), newUUID)
	var recs []controller.Record
	for i := range results {
		if k, ok := nullConfig[i]; ok && results[i].ErrorCode == 0 {
			// Dropping a topic's records leaves the others valid: each
			// topic's records apply on their own.
			results[i].Records, results[i].ErrorCode = nil, kerr.InvalidConfig.Code
			results[i].Message = "config " + k + " has a null value"
		}
		recs = append(recs, results[i].Records...)
	}
	var perr error
	if !req.ValidateOnly {
		_, perr = c.propose(ctx, recs)
	}
	for _, r := range results {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic, st.NumPartitions, st.ReplicationFactor = r.Name, -1, -1
		switch {
		case r.ErrorCode != 0:
			st.ErrorCode = r.ErrorCode
			if r.Message != "" {
				m := r.Message
				st.ErrorMessage = &m
			}
		case perr != nil:
			st.ErrorCode = proposeCode(perr)
		default:
			st.TopicID, st.NumPartitions, st.ReplicationFactor = r.ID, r.Partitions, r.RF
		}
		resp.Topics = append(resp.Topics, st)
	}
	for _, r := range results {
		if r.ErrorCode == 0 && perr == nil && !req.ValidateOnly {
			c.log.Info().Str("topic", r.Name).Int32("partitions", r.Partitions).Int16("rf", r.RF).Msg("created topic")
		}
	}
	return resp
}

func (c *Controller) deleteTopics(ctx context.Context, img *controller.Image, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var refs []controller.TopicRef
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			refs = append(refs, controller.TopicRef{Name: n})
		}
	} else {
		for _, t := range req.Topics {
			r := controller.TopicRef{ID: t.TopicID}
			if t.Topic != nil {
				r.Name = *t.Topic
			}
			refs = append(refs, r)
		}
	}
	results := controller.DeleteTopics(img, refs)
	var recs []controller.Record
	if c.cfg.DeleteTopicEnable {
		for _, r := range results {
			recs = append(recs, r.Records...)
		}
	}
	_, perr := c.propose(ctx, recs)
	for i, r := range results {
		st := kmsg.NewDeleteTopicsResponseTopic()
		if r.Name != "" {
			n := r.Name
			st.Topic = &n
		} else if refs[i].Name != "" {
			n := refs[i].Name
			st.Topic = &n
		}
		st.TopicID = r.ID
		switch {
		case r.ErrorCode != 0:
			st.ErrorCode = r.ErrorCode
			if r.Message != "" {
				m := r.Message
				st.ErrorMessage = &m
			}
		case !c.cfg.DeleteTopicEnable:
			st.ErrorCode = kerr.TopicDeletionDisabled.Code
		case perr != nil:
			st.ErrorCode = proposeCode(perr)
		default:
			c.log.Info().Str("topic", r.Name).Msg("deleted topic")
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (c *Controller) createPartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if seen[rt.Topic] > 1 {
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var assignment [][]int32
		for _, a := range rt.Assignment {
			assignment = append(assignment, a.Replicas)
		}
		// Each topic decides against the image with the previous topics'
		// partitions applied, so placement continues evenly.
		recs, code, msg := controller.CreatePartitions(c.m.Image(), rt.Topic, rt.Count, assignment, c.defaults())
		if code == 0 && !req.ValidateOnly {
			if _, err := c.propose(ctx, recs); err != nil {
				code = proposeCode(err)
			} else {
				c.log.Info().Str("topic", rt.Topic).Int32("partitions", rt.Count).Msg("created partitions")
			}
		}
		st.ErrorCode = code
		if msg != "" {
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
