package main

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/group/lag"
)

// cliGroup is a group as `fjord group` shows it, whichever protocol it
// runs: a classic group from DescribeGroups, a KIP-848 consumer group
// from ConsumerGroupDescribe, a KIP-932 share group from
// ShareGroupDescribe (DescribeGroups v6+ answers GROUP_ID_NOT_FOUND for
// the others, as Kafka does, so the tool asks the other APIs, as Kafka's
// tools do).
type cliGroup struct {
	Exists      bool
	Type        string // "classic", "consumer" or "share"
	State       string
	Protocol    string // the classic protocol, or a consumer group's assignor
	Coordinator int32
	Members     []cliMember
	Err         error // the group could not be described
}

// cliMember is one member with its subscription (classic: from its join
// metadata) and assignment, both decoded only for the consumer protocol.
type cliMember struct {
	lag.Member
	InstanceID, ClientID, Host string
}

// describeGroups describes each named group through the API its
// protocol answers.
func describeGroups(ctx context.Context, adm *kadm.Client, names []string) (map[string]cliGroup, error) {
	classic, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		return nil, err
	}
	out := map[string]cliGroup{}
	var other []string
	for _, name := range names {
		g, ok := classic[name]
		if !ok {
			out[name] = cliGroup{Err: errors.New("not described")}
			continue
		}
		if g.State == "Dead" || errors.Is(g.Err, kerr.GroupIDNotFound) {
			out[name] = cliGroup{}
			other = append(other, name)
			continue
		}
		cg := cliGroup{Exists: true, Type: "classic", State: g.State, Protocol: g.Protocol, Coordinator: g.Coordinator.NodeID, Err: g.Err}
		for _, m := range g.Members {
			cm := cliMember{Member: lag.Member{ID: m.MemberID}, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				cm.InstanceID = *m.InstanceID
			}
			if md, ok := m.Join.AsConsumer(); ok {
				cm.Subscribed = md.Topics
			}
			if a, ok := m.Assigned.AsConsumer(); ok {
				cm.Assigned = map[string][]int32{}
				for _, t := range a.Topics {
					cm.Assigned[t.Topic] = append(cm.Assigned[t.Topic], t.Partitions...)
				}
			}
			cg.Members = append(cg.Members, cm)
		}
		out[name] = cg
	}
	if len(other) == 0 {
		return out, nil
	}
	// A broker without KIP-848 or KIP-932 answers these with
	// UNSUPPORTED_VERSION: the groups simply do not exist there.
	consumers, _ := adm.DescribeConsumerGroups(ctx, other...)
	var shares []string
	for _, name := range other {
		g, ok := consumers[name]
		if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) || g.State == "Dead" {
			shares = append(shares, name)
			continue
		}
		cg := cliGroup{Exists: true, Type: "consumer", State: g.State, Protocol: g.AssignorName, Coordinator: g.Coordinator.NodeID, Err: g.Err}
		for _, m := range g.Members {
			cm := cliMember{Member: lag.Member{ID: m.MemberID, Subscribed: m.SubscribedTopics, Assigned: topicsSet(m.Assignment)},
				ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				cm.InstanceID = *m.InstanceID
			}
			cg.Members = append(cg.Members, cm)
		}
		out[name] = cg
	}
	if len(shares) == 0 {
		return out, nil
	}
	described, _ := adm.DescribeShareGroups(ctx, shares...)
	for _, name := range shares {
		g, ok := described[name]
		if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) || g.GroupState == "Dead" {
			continue
		}
		cg := cliGroup{Exists: true, Type: "share", State: g.GroupState, Protocol: g.Assignor, Coordinator: g.Coordinator.NodeID, Err: g.Err}
		for _, m := range g.Members {
			cm := cliMember{Member: lag.Member{ID: m.MemberID, Subscribed: m.SubscribedTopicNames, Assigned: topicsSet(m.Assignment)},
				ClientID: m.ClientID, Host: m.ClientHost}
			cg.Members = append(cg.Members, cm)
		}
		out[name] = cg
	}
	return out, nil
}

// topicsSet is kadm's set of partitions as sorted lists by topic.
func topicsSet(ts kadm.TopicsSet) map[string][]int32 {
	out := map[string][]int32{}
	for t, ps := range ts {
		for p := range ps {
			out[t] = append(out[t], p)
		}
		slices.Sort(out[t])
	}
	return out
}
