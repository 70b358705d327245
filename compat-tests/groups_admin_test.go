package compattests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupAdmin: kadm against groups: ListGroups (with a state filter, on
// ListGroups v4), DescribeGroups of an active group, DeleteGroups refused
// while the group has members, OffsetDelete refused for a subscribed topic
// and allowed once the group is empty, DeleteGroups once empty; deletions
// survive a broker restart.
func TestGroupAdmin(t *testing.T) {
	const topic, active, idle = "adm-topic", "adm-active", "adm-idle"
	b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, 3, nil)
	produceAcked(t, newClient(t, b.Addr), topic, "adm", 300)
	end := endOffsets(t, adm, topic)
	ctx := func() context.Context { return testCtx(t, 15*time.Second) }

	// An Empty group that only has offsets committed by an admin client.
	idleOffsets := kadm.Offsets{}
	for p := int32(0); p < 3; p++ {
		idleOffsets.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(10 + p), LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx(), idle, idleOffsets); err != nil {
		t.Fatalf("CommitAllOffsets(%s): %v", idle, err)
	}

	// An active group: one member reads everything and commits.
	log := newConsumedLog()
	m := startFranzMember(t, "adm-member", b.Addr, active, topic, log, nil)
	defer m.Close(5 * time.Second)
	waitUntil(t, 30*time.Second, "member owns all partitions", func() (bool, string) { return ownership(3, 3, 3, m) })
	checkCommittedAtEnd(t, adm, active, topic, m)

	listStates := func(filter ...string) map[string]string {
		t.Helper()
		lg, err := adm.ListGroups(ctx(), filter...)
		if err != nil {
			t.Fatalf("ListGroups(%v): %v", filter, err)
		}
		out := map[string]string{}
		for g, l := range lg {
			out[g] = l.State
			// A group that only has admin commits never had a protocol
			// type (Kafka lists it with ""); the consumer group has one.
			if g == active && l.ProtocolType != "consumer" {
				t.Errorf("ListGroups(%v): %s has protocol type %q, want consumer", filter, g, l.ProtocolType)
			}
		}
		return out
	}
	if all := listStates(); all[active] != "Stable" || all[idle] != "Empty" || len(all) != 2 {
		t.Errorf("ListGroups() = %v, want %s Stable and %s Empty", all, active, idle)
	}
	if empty := listStates("Empty"); len(empty) != 1 || empty[idle] != "Empty" {
		t.Errorf(`ListGroups("Empty") = %v, want only %s`, empty, idle)
	}
	if stable := listStates("Stable"); len(stable) != 1 || stable[active] != "Stable" {
		t.Errorf(`ListGroups("Stable") = %v, want only %s`, stable, active)
	}
	// The same with a raw ListGroups v4 (the version that added the filter).
	{
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 4
		req.StatesFilter = []string{"Empty"}
		resp := dialRaw(t, b.Addr).roundTrip(t, req).(*kmsg.ListGroupsResponse)
		var names []string
		for _, g := range resp.Groups {
			names = append(names, g.Group+"="+g.GroupState)
		}
		if resp.ErrorCode != 0 || len(resp.Groups) != 1 || resp.Groups[0].Group != idle || resp.Groups[0].GroupState != "Empty" {
			t.Errorf(`raw ListGroups v4 StatesFilter ["Empty"]: error %v, groups %v; want only %s=Empty`, kerr.ErrorForCode(resp.ErrorCode), names, idle)
		}
	}

	// DescribeGroups shows the member and its assignment.
	dg, err := adm.DescribeGroups(ctx(), active)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	g := dg[active]
	if g.Err != nil || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol == "" || len(g.Members) != 1 {
		t.Errorf("DescribeGroups(%s): err %v state %q protocol type %q protocol %q, %d members; want Stable consumer with 1 member",
			active, g.Err, g.State, g.ProtocolType, g.Protocol, len(g.Members))
	} else {
		mem := g.Members[0]
		assigned := g.AssignedPartitions()
		if mem.ClientID != "adm-member" || mem.MemberID == "" || mem.ClientHost == "" || len(assigned[topic]) != 3 {
			t.Errorf("DescribeGroups(%s) member: id %q client %q host %q, assigned %v; want client adm-member with %s 0-2",
				active, mem.MemberID, mem.ClientID, mem.ClientHost, assigned, topic)
		}
		if meta, ok := mem.Join.AsConsumer(); !ok || len(meta.Topics) != 1 || meta.Topics[0] != topic {
			t.Errorf("DescribeGroups(%s) member metadata: %+v (decoded %v), want a subscription to %s", active, meta, ok, topic)
		}
		t.Logf("DescribeGroups(%s): %s protocol %q, member %s (%s from %s) assigned %v", active, g.State, g.Protocol, mem.MemberID, mem.ClientID, mem.ClientHost, assigned)
	}

	// DeleteGroups refuses a group with members.
	if err := deleteGroup(t, adm, active); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("DeleteGroups(%s) while a member is active: %v, want NON_EMPTY_GROUP", active, err)
	}
	// OffsetDelete refuses a topic the group is subscribed to.
	if err := deleteOffset(t, adm, active, topic, 0); !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Errorf("OffsetDelete(%s, %s[0]) while a member consumes the topic: %v, want GROUP_SUBSCRIBED_TO_TOPIC", active, topic, err)
	}
	if got := committedOffsets(t, adm, active, topic); !sameOffsets(got, end) {
		t.Errorf("after the refused deletes, %s offsets %s, want %s", active, fmtOffsets(got), fmtOffsets(end))
	}

	// The member leaves: the group becomes Empty.
	m.Close(10 * time.Second)
	waitUntil(t, 10*time.Second, "group Empty after its member left", func() (bool, string) {
		dg, err := adm.DescribeGroups(ctx(), active)
		if err != nil {
			return false, err.Error()
		}
		g := dg[active]
		return g.Err == nil && g.State == "Empty" && len(g.Members) == 0, fmt.Sprintf("state %q, %d members, err %v", g.State, len(g.Members), g.Err)
	})
	if empty := listStates("Empty"); len(empty) != 2 || empty[active] != "Empty" || empty[idle] != "Empty" {
		t.Errorf(`ListGroups("Empty") after the member left = %v, want %s and %s`, empty, active, idle)
	}

	// OffsetDelete on the empty group removes exactly one partition.
	if err := deleteOffset(t, adm, active, topic, 0); err != nil {
		t.Errorf("OffsetDelete(%s, %s[0]) on the empty group: %v", active, topic, err)
	}
	wantActive := map[int32]int64{1: end[1], 2: end[2]}
	if got := committedOffsets(t, adm, active, topic); !sameOffsets(got, wantActive) {
		t.Errorf("after OffsetDelete of partition 0, %s offsets %s, want %s", active, fmtOffsets(got), fmtOffsets(wantActive))
	}

	// DeleteGroups now succeeds; the offsets are gone; deleting again
	// finds no group.
	if err := deleteGroup(t, adm, active); err != nil {
		t.Errorf("DeleteGroups(%s) once empty: %v", active, err)
	}
	checkDeleted := func(when string) {
		t.Helper()
		resp, err := adm.FetchOffsets(ctx(), active)
		if err != nil {
			t.Errorf("%s: FetchOffsets(%s) of the deleted group: %v", when, active, err)
		} else if n := countOffsets(resp); n != 0 {
			t.Errorf("%s: FetchOffsets(%s) of the deleted group returned %d offsets: %v", when, active, n, resp)
		}
		if all := listStates(); len(all) != 1 || all[idle] != "Empty" {
			t.Errorf("%s: ListGroups() = %v, want only %s", when, all, idle)
		}
		dg, err := adm.DescribeGroups(ctx(), active)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			t.Errorf("%s: DescribeGroups(%s) of the deleted group: %v", when, active, err)
		} else if g := dg[active]; !(g.Err == nil && g.State == "Dead" && len(g.Members) == 0) && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			t.Errorf("%s: DescribeGroups(%s) of the deleted group: state %q, %d members, err %v; want Dead or GROUP_ID_NOT_FOUND", when, active, g.State, len(g.Members), g.Err)
		}
		wantIdle := map[int32]int64{0: 10, 1: 11, 2: 12}
		if got := committedOffsets(t, adm, idle, topic); !sameOffsets(got, wantIdle) {
			t.Errorf("%s: %s offsets %s, want %s", when, idle, fmtOffsets(got), fmtOffsets(wantIdle))
		}
	}
	checkDeleted("after DeleteGroups")
	if err := deleteGroup(t, adm, active); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("DeleteGroups(%s) a second time: %v, want GROUP_ID_NOT_FOUND", active, err)
	}

	// Deletions are durable.
	b.Stop()
	b.Restart()
	adm = newAdmin(t, b.Addr)
	checkDeleted("after a broker restart")
}

func deleteGroup(t *testing.T, adm *kadm.Client, group string) error {
	t.Helper()
	resp, err := adm.DeleteGroups(testCtx(t, 15*time.Second), group)
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	r, ok := resp[group]
	if !ok {
		return fmt.Errorf("group %s missing from the response %v", group, resp)
	}
	return r.Err
}

func deleteOffset(t *testing.T, adm *kadm.Client, group, topic string, p int32) error {
	t.Helper()
	s := kadm.TopicsSet{}
	s.Add(topic, p)
	resp, err := adm.DeleteOffsets(testCtx(t, 15*time.Second), group, s)
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	perr, ok := resp[topic][p]
	if !ok {
		return fmt.Errorf("%s[%d] missing from the response %v", topic, p, resp)
	}
	return perr
}

func countOffsets(r kadm.OffsetResponses) int {
	n := 0
	for _, ps := range r {
		n += len(ps)
	}
	return n
}
