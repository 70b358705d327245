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
// members' counts unchanged and moves one from s to w. When no path
// anywhere leads to a member with two fewer, the assignment is optimal: by
// the semi-matching theorem (Harvey, Ladner, Lovász, Tamir: "Semi-matchings
// for bipartite graphs and load balancing", 2006) it then minimises the
// largest load and every Lp norm of the loads at once. Tests check the
// no-path condition directly.
//
// The work goes level by level, from the highest load L down. At level L
// one breadth-first search starts from every member with load L at once;
// if it reaches a member with load <= L-2 (the least loaded one it
// reaches, ties: the nearest), one partition moves along the path found
// and the search runs again. Each move takes a member off level L, so the
// level ends; when a search reaches no such member, the set R it reached
// is frozen. R is closed (every subscriber of a topic an R member owns is
// in R) and its loads are all >= L-1, and from then on only members with
// load < L-1 are sources and members with load <= L-3 targets, so no later
// path can pass through R: its ownership and loads never change again, and
// no member of R ever has a path. Loads never rise to a level already done
// (a target ends at most one above L-2). So when the levels run out every
// member is either frozen or within one of the smallest load, which is the
// optimality condition. It costs one search, O(members + subscriptions),
// per partition moved off a level plus one per level.
//
// Searching breadth first keeps paths short, so few partitions move; on
// each step the giver gives a partition it did not have in its Current
// assignment if it has one (sticky[f] false), since that costs no
// stickiness.
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

	// Members with no subscriptions own nothing and can take nothing: they
	// start frozen.
	frozen := make([]bool, M)
	top := 0
	for m := range M {
		frozen[m] = len(v.subs[m]) == 0
		if !frozen[m] {
			top = max(top, load[m])
		}
	}

	// Breadth-first search state, reset by bumping stamp.
	visited := make([]int, M)
	seen := make([]int, T)
	from := make([]int, M) // the member w was reached from; -1 for sources
	via := make([]int, M)  // the topic w was reached through
	queue := make([]int, 0, M)
	stamp := 0

	for level := top; level >= 2; {
		low := -1 // the smallest load of a member not frozen
		queue = queue[:0]
		stamp++
		for m := range M {
			if frozen[m] {
				continue
			}
			if low < 0 || load[m] < low {
				low = load[m]
			}
			if load[m] == level {
				visited[m], from[m] = stamp, -1
				queue = append(queue, m)
			}
		}
		if low < 0 || level < low+2 {
			return
		}
		if len(queue) == 0 {
			level--
			continue
		}

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
					if visited[w] == stamp || frozen[w] {
						continue
					}
					visited[w], from[w], via[w] = stamp, u, t
					queue = append(queue, w)
					if load[w] <= level-2 && (best < 0 || load[w] < load[best]) {
						best = w
						if load[w] == low {
							break search
						}
					}
				}
			}
		}
		if best < 0 {
			for _, m := range queue {
				frozen[m] = true
			}
			level--
			continue
		}
		w := best
		for ; from[w] >= 0; w = from[w] {
			u, t := from[w], via[w]
			f := movable(v, owner, sticky, u, t)
			owner[f] = w
			sticky[f] = false
			owns[u][slot(u, t)]--
			owns[w][slot(w, t)]++
		}
		load[w]-- // w is now the source the path started from
		load[best]++
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
