package broker

import (
	"fmt"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The checks of authzRules (authz.go), one per API that needs more than a
// single top-level check. Each keeps the request's order for what it lets
// through and appends what it denies to the handler's response.

var (
	topicDenied   = kerr.TopicAuthorizationFailed.Code
	groupDenied   = kerr.GroupAuthorizationFailed.Code
	clusterDenied = kerr.ClusterAuthorizationFailed.Code
	txnDenied     = kerr.TransactionalIDAuthorizationFailed.Code
)

// split divides ts by whether op on each one's topic is allowed; keep is
// never nil when ts is not (an empty list must stay a list, not "all").
func split[T any](z *authz, op acl.Operation, ts []T, name func(T) string) (keep, denied []T) {
	if ts == nil {
		return nil, nil
	}
	keep = make([]T, 0, len(ts))
	for _, t := range ts {
		if z.ok(op, acl.ResourceTopic, name(t)) {
			keep = append(keep, t)
		} else {
			denied = append(denied, t)
		}
	}
	return keep, denied
}

func checkProduce(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ProduceRequest)
	code := int16(0)
	if req.TransactionID != nil && !z.ok(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) {
		code = txnDenied
	}
	name := func(t kmsg.ProduceRequestTopic) string { return z.b.topicName(t.Topic, t.TopicID) }
	var denied []kmsg.ProduceRequestTopic
	if code != 0 {
		denied, req.Topics = req.Topics, []kmsg.ProduceRequestTopic{}
	} else {
		req.Topics, denied = split(z, acl.OpWrite, req.Topics, name)
		code = topicDenied
	}
	if len(denied) == 0 {
		return nil, nil
	}
	if req.Acks == 0 {
		// No response to carry the error: close the connection, as Kafka
		// does for an acks=0 produce that fails.
		return &authzClose{err: fmt.Errorf("broker: acks=0 produce not authorized: %s", kerr.ErrorForCode(code))}, nil
	}
	fill := func(resp *kmsg.ProduceResponse) {
		for _, t := range denied {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) {
		if resp, ok := r.(*kmsg.ProduceResponse); ok {
			fill(resp)
		}
	}
}

func checkFetch(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FetchRequest)
	var denied []kmsg.FetchRequestTopic
	if isFollowerFetch(req) {
		if z.cluster(acl.OpClusterAction) {
			return nil, nil
		}
		denied, req.Topics = req.Topics, []kmsg.FetchRequestTopic{}
	} else {
		req.Topics, denied = split(z, acl.OpRead, req.Topics, func(t kmsg.FetchRequestTopic) string { return z.b.topicName(t.Topic, t.TopicID) })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp, ok := r.(*kmsg.FetchResponse)
		if pf, pooled := r.(*pooledFetch); pooled {
			resp, ok = pf.FetchResponse, true
		}
		if !ok {
			return
		}
		for _, t := range denied {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkListOffsets(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	var denied []kmsg.ListOffsetsRequestTopic
	req.Topics, denied = split(z, acl.OpDescribe, req.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// checkMetadata: a named topic the principal may not describe is answered
// TOPIC_AUTHORIZATION_FAILED; one that does not exist and would be
// auto-created needs CREATE on the cluster or the topic, else it is
// answered TOPIC_AUTHORIZATION_FAILED too (Kafka's behaviour). A request
// for all topics lists only those the principal may describe.
func checkMetadata(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.MetadataRequest)
	if req.Topics == nil {
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.MetadataResponse)
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && z.quiet(acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
	}
	autoCreate := z.b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	canCreateAll := autoCreate && z.az.Authorize(z.cc.principal, z.cc.clientHost, acl.OpCreate, acl.ResourceCluster, acl.ClusterName)
	img := z.b.image()
	keep := make([]kmsg.MetadataRequestTopic, 0, len(req.Topics))
	var denied []kmsg.MetadataRequestTopic
	for _, t := range req.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else {
			name = z.b.topicName("", t.TopicID)
		}
		allowed := z.ok(acl.OpDescribe, acl.ResourceTopic, name)
		if allowed && autoCreate && !canCreateAll && img != nil && img.Topic(name) == nil &&
			!z.ok(acl.OpCreate, acl.ResourceTopic, name) {
			allowed = false
		}
		if allowed {
			keep = append(keep, t)
		} else {
			denied = append(denied, t)
		}
	}
	req.Topics = keep
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		for _, t := range denied {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, topicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkOffsetCommit(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	code := int16(0)
	var denied []kmsg.OffsetCommitRequestTopic
	if !z.ok(acl.OpRead, acl.ResourceGroup, req.Group) {
		code = groupDenied
		denied, req.Topics = req.Topics, []kmsg.OffsetCommitRequestTopic{}
	} else {
		code = topicDenied
		req.Topics, denied = split(z, acl.OpRead, req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetCommitResponse) {
		for _, t := range denied {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if code == groupDenied {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetCommitResponse)) }
}

// checkOffsetFetch: the group needs DESCRIBE (GROUP_AUTHORIZATION_FAILED
// at the top, or per group from v8); named topics the principal may not
// describe are answered TOPIC_AUTHORIZATION_FAILED per partition, and a
// fetch of all topics lists only the describable ones.
func checkOffsetFetch(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if req.Version >= 8 {
		deniedGroups := map[string]bool{}
		keep := make([]kmsg.OffsetFetchRequestGroup, 0, len(req.Groups))
		for _, g := range req.Groups {
			if z.ok(acl.OpDescribe, acl.ResourceGroup, g.Group) {
				keep = append(keep, g)
			} else {
				deniedGroups[g.Group] = true
			}
		}
		denied := req.Groups
		req.Groups = keep
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.OffsetFetchResponse)
			for i := range resp.Groups {
				g := &resp.Groups[i]
				kept := g.Topics[:0]
				for _, t := range g.Topics {
					if z.quiet(acl.OpDescribe, acl.ResourceTopic, t.Topic) {
						kept = append(kept, t)
					}
				}
				g.Topics = kept
			}
			for _, g := range denied {
				if deniedGroups[g.Group] {
					rg := kmsg.NewOffsetFetchResponseGroup()
					rg.Group, rg.ErrorCode = g.Group, groupDenied
					resp.Groups = append(resp.Groups, rg)
				}
			}
		}
	}
	if !z.ok(acl.OpDescribe, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = groupDenied
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, groupDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	var denied []kmsg.OffsetFetchRequestTopic
	req.Topics, denied = split(z, acl.OpDescribe, req.Topics, func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic })
	all := req.Topics == nil
	if !all && len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		if all {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if z.quiet(acl.OpDescribe, acl.ResourceTopic, t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkFindCoordinator(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	rt, code := acl.ResourceGroup, groupDenied
	if req.CoordinatorType == 1 {
		rt, code = acl.ResourceTransactionalID, txnDenied
	}
	if req.Version < 4 {
		if z.ok(acl.OpDescribe, rt, req.CoordinatorKey) {
			return nil, nil
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID = code, -1
		return resp, nil
	}
	keep := make([]string, 0, len(req.CoordinatorKeys))
	var denied []string
	for _, k := range req.CoordinatorKeys {
		if z.ok(acl.OpDescribe, rt, k) {
			keep = append(keep, k)
		} else {
			denied = append(denied, k)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.CoordinatorKeys = keep
	fill := func(resp *kmsg.FindCoordinatorResponse) {
		for _, k := range denied {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode = k, -1, code
			resp.Coordinators = append(resp.Coordinators, c)
		}
	}
	if len(keep) == 0 {
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.FindCoordinatorResponse)) }
}

func checkDescribeGroups(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	keep := make([]string, 0, len(req.Groups))
	var denied []string
	for _, g := range req.Groups {
		if z.ok(acl.OpDescribe, acl.ResourceGroup, g) {
			keep = append(keep, g)
		} else {
			denied = append(denied, g)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.Groups = keep
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeGroupsResponse)
		for _, g := range denied {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
	}
}

// checkListGroups: with DESCRIBE on the cluster every group is listed,
// else only the groups the principal may describe (Kafka's behaviour).
func checkListGroups(z *authz, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if z.az.Authorize(z.cc.principal, z.cc.clientHost, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if z.quiet(acl.OpDescribe, acl.ResourceGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
	}
}

func checkCreateTopics(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	if z.az.Authorize(z.cc.principal, z.cc.clientHost, acl.OpCreate, acl.ResourceCluster, acl.ClusterName) {
		return nil, nil
	}
	var denied []kmsg.CreateTopicsRequestTopic
	req.Topics, denied = split(z, acl.OpCreate, req.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.CreateTopicsResponse) {
		for _, t := range denied {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, topicDenied
			msg := "Authorization failed."
			rt.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.CreateTopicsResponse)) }
}

func checkDeleteTopics(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	var deniedNames []string
	var deniedTopics []kmsg.DeleteTopicsRequestTopic
	if req.TopicNames != nil {
		keep := make([]string, 0, len(req.TopicNames))
		for _, n := range req.TopicNames {
			if z.ok(acl.OpDelete, acl.ResourceTopic, n) {
				keep = append(keep, n)
			} else {
				deniedNames = append(deniedNames, n)
			}
		}
		req.TopicNames = keep
	}
	if req.Topics != nil {
		keep := make([]kmsg.DeleteTopicsRequestTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if z.ok(acl.OpDelete, acl.ResourceTopic, z.b.topicName(name, t.TopicID)) {
				keep = append(keep, t)
			} else {
				deniedTopics = append(deniedTopics, t)
			}
		}
		req.Topics = keep
	}
	if len(deniedNames)+len(deniedTopics) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.DeleteTopicsResponse) {
		for _, n := range deniedNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = &n, topicDenied
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range deniedTopics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, topicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.TopicNames)+len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DeleteTopicsResponse)) }
}

func checkDeleteRecords(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	var denied []kmsg.DeleteRecordsRequestTopic
	req.Topics, denied = split(z, acl.OpDelete, req.Topics, func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.DeleteRecordsResponse) {
		for _, t := range denied {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DeleteRecordsResponse)) }
}

func checkInitProducerID(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if z.ok(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			return nil, nil
		}
		resp.ErrorCode = txnDenied
		return resp, nil
	}
	if z.az.Authorize(z.cc.principal, z.cc.clientHost, acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName) ||
		z.az.AuthorizeAny(z.cc.principal, z.cc.clientHost, acl.OpWrite, acl.ResourceTopic) {
		return nil, nil
	}
	z.b.audit.denied(z.cc, 22, acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName)
	resp.ErrorCode = clusterDenied
	return resp, nil
}

func checkOffsetForLeaderEpoch(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	var denied []kmsg.OffsetForLeaderEpochRequestTopic
	code := topicDenied
	if req.Version >= 3 && req.ReplicaID >= 0 {
		if z.cluster(acl.OpClusterAction) {
			return nil, nil
		}
		code = clusterDenied
		denied, req.Topics = req.Topics, []kmsg.OffsetForLeaderEpochRequestTopic{}
	} else {
		req.Topics, denied = split(z, acl.OpDescribe, req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetForLeaderEpochResponse) {
		for _, t := range denied {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetForLeaderEpochResponse)) }
}

// checkAddPartitionsToTxn (v0-3, a producer's own request): a denied
// transactional id fails every partition; otherwise a denied topic fails
// its partitions and, as Kafka does, the others are OPERATION_NOT_ATTEMPTED
// and nothing is added. v4+ batches (brokers verifying transactions) need
// CLUSTER_ACTION.
func checkAddPartitionsToTxn(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		if z.cluster(acl.OpClusterAction) {
			return nil, nil
		}
		return setTopError(req.ResponseKind(), clusterDenied), nil
	}
	txnOK := z.ok(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID)
	deniedTopic := map[string]bool{}
	if txnOK {
		for _, t := range req.Topics {
			if !z.ok(acl.OpWrite, acl.ResourceTopic, t.Topic) {
				deniedTopic[t.Topic] = true
			}
		}
		if len(deniedTopic) == 0 {
			return nil, nil
		}
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code := kerr.OperationNotAttempted.Code
		switch {
		case !txnOK:
			code = txnDenied
		case deniedTopic[t.Topic]:
			code = topicDenied
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func checkWriteTxnMarkers(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	if z.cluster(acl.OpClusterAction) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, clusterDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

func checkTxnOffsetCommit(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	code := int16(0)
	switch {
	case !z.ok(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		code = txnDenied
	case !z.ok(acl.OpRead, acl.ResourceGroup, req.Group):
		code = groupDenied
	}
	var denied []kmsg.TxnOffsetCommitRequestTopic
	if code != 0 {
		denied, req.Topics = req.Topics, []kmsg.TxnOffsetCommitRequestTopic{}
	} else {
		code = topicDenied
		req.Topics, denied = split(z, acl.OpRead, req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.TxnOffsetCommitResponse) {
		for _, t := range denied {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.TxnOffsetCommitResponse)) }
}

func checkCreateACLs(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateACLsRequest)
	if z.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = clusterDenied
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func checkDeleteACLs(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	if z.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = clusterDenied
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// configResourceAllowed: topic configs need op on the topic, broker and
// broker-logger configs op on the cluster.
func configResourceAllowed(z *authz, op acl.Operation, typ kmsg.ConfigResourceType, name string) (bool, int16) {
	if typ == kmsg.ConfigResourceTypeTopic {
		return z.ok(op, acl.ResourceTopic, name), topicDenied
	}
	return z.cluster(op), clusterDenied
}

func checkDescribeConfigs(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	keep := make([]kmsg.DescribeConfigsRequestResource, 0, len(req.Resources))
	var denied []kmsg.DescribeConfigsResponseResource
	for _, r := range req.Resources {
		if ok, code := configResourceAllowed(z, acl.OpDescribeConfigs, r.ResourceType, r.ResourceName); ok {
			keep = append(keep, r)
		} else {
			d := kmsg.NewDescribeConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, d)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.Resources = keep
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	}
}

func checkAlterConfigs(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	keep := make([]kmsg.AlterConfigsRequestResource, 0, len(req.Resources))
	var denied []kmsg.AlterConfigsResponseResource
	for _, r := range req.Resources {
		if ok, code := configResourceAllowed(z, acl.OpAlterConfigs, r.ResourceType, r.ResourceName); ok {
			keep = append(keep, r)
		} else {
			d := kmsg.NewAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, d)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.Resources = keep
	if len(keep) == 0 {
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		resp.Resources = denied
		return resp, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.AlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	}
}

func checkIncrementalAlterConfigs(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	keep := make([]kmsg.IncrementalAlterConfigsRequestResource, 0, len(req.Resources))
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	for _, r := range req.Resources {
		if ok, code := configResourceAllowed(z, acl.OpAlterConfigs, r.ResourceType, r.ResourceName); ok {
			keep = append(keep, r)
		} else {
			d := kmsg.NewIncrementalAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode = r.ResourceType, r.ResourceName, code
			denied = append(denied, d)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.Resources = keep
	if len(keep) == 0 {
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = denied
		return resp, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	}
}

func checkAlterReplicaLogDirs(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterReplicaLogDirsRequest)
	if z.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, clusterDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp, nil
}

func checkCreatePartitions(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	var denied []kmsg.CreatePartitionsRequestTopic
	req.Topics, denied = split(z, acl.OpAlter, req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.CreatePartitionsResponse) {
		for _, t := range denied {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, topicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.CreatePartitionsResponse)) }
}

func checkDeleteGroups(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	keep := make([]string, 0, len(req.Groups))
	var denied []string
	for _, g := range req.Groups {
		if z.ok(acl.OpDelete, acl.ResourceGroup, g) {
			keep = append(keep, g)
		} else {
			denied = append(denied, g)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.Groups = keep
	fill := func(resp *kmsg.DeleteGroupsResponse) {
		for _, g := range denied {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
	}
	if len(keep) == 0 {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DeleteGroupsResponse)) }
}

func checkOffsetDelete(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !z.ok(acl.OpDelete, acl.ResourceGroup, req.Group) {
		return setTopError(req.ResponseKind(), groupDenied), nil
	}
	var denied []kmsg.OffsetDeleteRequestTopic
	req.Topics, denied = split(z, acl.OpRead, req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetDeleteResponse) {
		for _, t := range denied {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetDeleteResponse)) }
}

func checkAlterClientQuotas(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	if z.cluster(acl.OpAlterConfigs) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		se := kmsg.NewAlterClientQuotasResponseEntry()
		se.ErrorCode = clusterDenied
		for _, p := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			se.Entity = append(se.Entity, re)
		}
		resp.Entries = append(resp.Entries, se)
	}
	return resp, nil
}

func checkDescribeProducers(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	var denied []kmsg.DescribeProducersRequestTopic
	req.Topics, denied = split(z, acl.OpRead, req.Topics, func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.DescribeProducersResponse) {
		for _, t := range denied {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DescribeProducersResponse)) }
}

func checkDescribeTransactions(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	keep := make([]string, 0, len(req.TransactionalIDs))
	var denied []string
	for _, id := range req.TransactionalIDs {
		if z.ok(acl.OpDescribe, acl.ResourceTransactionalID, id) {
			keep = append(keep, id)
		} else {
			denied = append(denied, id)
		}
	}
	req.TransactionalIDs = keep
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		for i := range resp.TransactionStates {
			s := &resp.TransactionStates[i]
			kept := s.Topics[:0]
			for _, t := range s.Topics {
				if z.quiet(acl.OpDescribe, acl.ResourceTopic, t.Topic) {
					kept = append(kept, t)
				}
			}
			s.Topics = kept
		}
		for _, id := range denied {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = id, txnDenied, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
	}
}

func checkListTransactions(z *authz, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListTransactionsResponse)
		kept := resp.TransactionStates[:0]
		for _, s := range resp.TransactionStates {
			if z.quiet(acl.OpDescribe, acl.ResourceTransactionalID, s.TransactionalID) {
				kept = append(kept, s)
			}
		}
		resp.TransactionStates = kept
	}
}

func checkDescribeTopicPartitions(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	var denied []kmsg.DescribeTopicPartitionsRequestTopic
	listAll := len(req.Topics) == 0
	req.Topics, denied = split(z, acl.OpDescribe, req.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) string { return t.Topic })
	if !listAll && len(denied) == 0 {
		return nil, nil
	}
	if !listAll && len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
		for _, t := range denied {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := t.Topic
			rt.Topic, rt.ErrorCode = &name, topicDenied
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTopicPartitionsResponse)
		if listAll {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && z.quiet(acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		for _, t := range denied {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			name := t.Topic
			rt.Topic, rt.ErrorCode = &name, topicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkAlterUserScramCredentials(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if z.cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, clusterDenied
		resp.Results = append(resp.Results, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp, nil
}
