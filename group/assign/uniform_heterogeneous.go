package assign

import (
	"cmp"
	"slices"
)

// assignHeterogeneous assigns when members subscribe to different topics,
// so there is no common quota: how many partitions a member can have
// depends on which other members share its topics.
//
// Steps:
//
//  1. Every member claims its current partitions (claimCurrent).
//  2. Each unowned partition goes to the least loaded subscriber of its
//     topic (ties: lowest member id). Topics with the fewest subscribers go
//     first, since they have the least choice, then topics with more
//     partitions, then by id.
//  3. balanceLoads repairs what steps 1 and 2 left unbalanced.
//
// Kafka's UniformHeterogeneousAssignmentBuilder also keeps, places and then
// balances, but its last phase only moves a partition directly from a
// member to a less loaded subscriber of the same topic, for at most 16
// rounds. Moving along paths (below) reaches the best balance the
// subscriptions allow, which single moves do not when subscriptions
// overlap in a chain.
func assignHeterogeneous(v *view) []int {
	owner, kept := claimCurrent(v)
	load := make([]int, len(v.members))
	sticky := make([]bool, len(owner))
	for m, fs := range kept {
		load[m] = len(fs)
		for _, f := range fs {
			sticky[f] = true
		}
	}

	var order []int
	for t := range v.topics {
		if len(v.subscribers[t]) > 0 {
			order = append(order, t)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(len(v.subscribers[a]), len(v.subscribers[b])); c != 0 {
			return c
		}
		if c := cmp.Compare(v.topics[b].Partitions, v.topics[a].Partitions); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, t := range order {
		for f := v.base[t]; f < v.base[t+1]; f++ {
			if owner[f] >= 0 {
				continue
			}
			best := -1
			for _, m := range v.subscribers[t] {
				if best < 0 || load[m] < load[best] {
					best = m
				}
			}
			owner[f] = best
			load[best]++
		}
	}

	balanceLoads(v, owner, load, sticky)
	return owner
}

// balanceLoads moves partitions until no member can pass one, directly or
// along a chain, to a member with at least two fewer.
//
// A moving path from member s to member w is a sequence s = u0, u1, ...,
// uk = w where each u(i) owns a partition of some topic that u(i+1)
// subscribes to. Moving one partition along every step leaves the middle
// members' counts unchanged and moves one from s to w. When load(w) <=
// load(s)-2 this strictly lowers the sum of squared loads, so the loop
// ends. When no such path exists anywhere, the assignment is optimal: by
// the semi-matching theorem (Harvey, Ladner, Lovász, Tamir: "Semi-matchings
// for bipartite graphs and load balancing", 2006) it then minimises the
// largest load and every Lp norm of the loads at once. Tests check the
// no-path condition directly.
//
// Each round takes the most loaded member that has a path, searches
// breadth first (so paths are shortest: fewest partitions move), and picks
// the least loaded member reached (ties: reached first). Along each step
// it moves a partition the giver did not have in its Current assignment if
// it can (sticky[f] false), since that costs no stickiness.
//
// The search visits each topic once (every subscriber of a topic is
// reached the first time any owner of one of its partitions is), so a
// round costs O(members + subscriptions) per source tried.
//
// Invariant on entry and exit: owner is complete over subscribed topics
// and exclusive; load[m] is the number of partitions m owns.
func balanceLoads(v *view, owner, load []int, sticky []bool) {
	M, T := len(v.members), len(v.topics)
	// owns[m][j]: how many partitions of topic v.subs[m][j] member m owns.
	owns := make([][]int, M)
	for m := range M {
		owns[m] = make([]int, len(v.subs[m]))
	}
	slot := func(m, t int) int {
		j, _ := slices.BinarySearch(v.subs[m], t)
		return j
	}
	for t := range T {
		for f := v.base[t]; f < v.base[t+1]; f++ {
			if m := owner[f]; m >= 0 {
				owns[m][slot(m, t)]++
			}
		}
	}

	var order []int // members that subscribe to something
	for m := range M {
		if len(v.subs[m]) > 0 {
			order = append(order, m)
		}
	}
	if len(order) < 2 {
		return
	}

	// Breadth-first search state, reset by bumping stamp.
	visited := make([]int, M)
	seen := make([]int, T)
	from := make([]int, M) // the member w was reached from
	via := make([]int, M)  // the topic w was reached through
	queue := make([]int, 0, M)
	stamp := 0

	for {
		minLoad := load[order[0]]
		for _, m := range order {
			minLoad = min(minLoad, load[m])
		}
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(load[b], load[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})

		moved := false
		for _, s := range order {
			if load[s] < minLoad+2 {
				break // nobody lighter enough is left to reach
			}
			stamp++
			visited[s] = stamp
			queue = append(queue[:0], s)
			best := -1
		search:
			for h := 0; h < len(queue); h++ {
				u := queue[h]
				for j, t := range v.subs[u] {
					if owns[u][j] == 0 || seen[t] == stamp {
						continue
					}
					seen[t] = stamp
					for _, w := range v.subscribers[t] {
						if visited[w] == stamp {
							continue
						}
						visited[w], from[w], via[w] = stamp, u, t
						queue = append(queue, w)
						if best < 0 || load[w] < load[best] {
							best = w
							if load[w] == minLoad {
								break search
							}
						}
					}
				}
			}
			if best < 0 || load[best] > load[s]-2 {
				continue
			}
			for w := best; w != s; w = from[w] {
				u, t := from[w], via[w]
				f := movable(v, owner, sticky, u, t)
				owner[f] = w
				sticky[f] = false
				owns[u][slot(u, t)]--
				owns[w][slot(w, t)]++
			}
			load[s]--
			load[best]++
			moved = true
			break
		}
		if !moved {
			return
		}
	}
}

// movable picks the partition of topic t that member u gives up: the
// highest numbered one it did not have in Current, else its highest.
// Topics on one moving path are distinct, so u still owns one.
func movable(v *view, owner []int, sticky []bool, u, t int) int {
	fallback := -1
	for f := v.base[t+1] - 1; f >= v.base[t]; f-- {
		if owner[f] != u {
			continue
		}
		if !sticky[f] {
			return f
		}
		if fallback < 0 {
			fallback = f
		}
	}
	return fallback
}
