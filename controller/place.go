package controller

import (
	"cmp"
	"slices"
)

// Place assigns replicas for partitions new partitions of replication factor
// rf over the image's live (unfenced) brokers. Result[i][0] is partition i's
// preferred leader. It returns nil if partitions < 1, rf < 1 or rf exceeds the
// live brokers.
//
// The algorithm is Kafka's (AdminUtils.assignReplicasToBrokers), made
// deterministic: Kafka draws the start index and the follower shift at
// random; here both come from startHint, as if the partition were number
// startHint of one long round-robin sequence. Passing the number of
// partitions already in the cluster therefore continues the sequence and
// keeps leaders balanced across many small topics.
//
// Without racks, over n brokers sorted by id, global partition g = startHint+i
// gets its leader at position g mod n and its followers at a shift that grows
// by one every n partitions, so for a multiple of n partitions every broker
// leads partitions/n of them and holds partitions*rf/n replicas.
//
// With racks (any live broker has a non-empty rack; brokers without one
// share the rack ""), the broker list is first arranged to alternate racks
// (rack a's first broker, rack b's first, rack a's second, ...), leaders go
// round-robin over that list, and each follower is the next broker in the
// shifted sequence whose rack holds no replica of the partition yet (until
// every rack has one) and which is not yet a replica.
func Place(img *Image, partitions int32, rf int16, startHint int) [][]int32 {
	live := img.LiveBrokers()
	n := len(live)
	if partitions < 1 || rf < 1 || int(rf) > n {
		return nil
	}
	startHint = max(startHint, 0)
	racked := slices.ContainsFunc(live, func(b BrokerState) bool { return b.Rack != "" })
	out := make([][]int32, partitions)
	if !racked {
		ids := make([]int32, n)
		for i, b := range live {
			ids[i] = b.ID
		}
		for i := range out {
			g := startHint + i
			first, shift := g%n, g/n
			rs := make([]int32, 0, rf)
			rs = append(rs, ids[first])
			for j := 1; j < int(rf); j++ {
				rs = append(rs, ids[replicaIndex(first, shift, j-1, n)])
			}
			out[i] = rs
		}
		return out
	}
	arranged, rackOf, numRacks := rackAlternated(live)
	for i := range out {
		g := startHint + i
		first, shift := g%n, g/n
		leader := arranged[first]
		rs := make([]int32, 0, rf)
		rs = append(rs, leader)
		racks := map[string]bool{rackOf[leader]: true}
		for k := 0; len(rs) < int(rf); k++ {
			b := arranged[replicaIndex(first, shift*numRacks, k, n)]
			if (!racks[rackOf[b]] || len(racks) == numRacks) &&
				(!slices.Contains(rs, b) || len(rs) == n) {
				rs = append(rs, b)
				racks[rackOf[b]] = true
			}
		}
		out[i] = rs
	}
	return out
}

// replicaIndex is Kafka's follower position: the j-th follower of the
// partition whose leader is at first, under shift, never lands on first.
// Requires n >= 2 (there are followers only when rf >= 2 and rf <= n).
func replicaIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

// rackAlternated orders brokers so racks alternate: racks sorted by name,
// brokers within a rack by id, then taken one per rack in turn.
func rackAlternated(live []BrokerState) (arranged []int32, rackOf map[int32]string, numRacks int) {
	byRack := map[string][]int32{}
	rackOf = map[int32]string{}
	for _, b := range live { // sorted by id, so each rack's list is too
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
		rackOf[b.ID] = b.Rack
	}
	racks := make([]string, 0, len(byRack))
	for r := range byRack {
		racks = append(racks, r)
	}
	slices.SortFunc(racks, cmp.Compare[string])
	for i := 0; len(arranged) < len(live); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				arranged = append(arranged, byRack[r][i])
			}
		}
	}
	return arranged, rackOf, len(racks)
}
