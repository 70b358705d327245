package assign

import (
	"cmp"
	"slices"
)

// Simple returns KIP-932's "simple" assignor for share groups, following
// the observable behaviour of Kafka 4.1 and 4.2's SimpleAssignor (its
// homogeneous and heterogeneous assignment builders, KAFKA-19362 and
// KAFKA-19363).
//
// Share groups let several members consume one partition, so the aim is
// not exclusivity but even work: every subscribed partition gets at least
// one member; when a topic has more members than partitions, each
// partition is shared by about members/partitions of them; when fewer,
// the partitions are spread evenly and not shared.
//
// The pool: with homogeneous subscriptions, all partitions of the
// subscribed topics over all members; otherwise each topic separately over
// its subscribers (so a member's load is balanced per topic, not in total,
// as in Kafka). For a pool of P partitions and n members:
//
//   - desired sharing s = ceil(n/P): how many members each partition
//     should have (1 unless members outnumber partitions);
//   - s*P assignments in all, so each member's quota is floor(s*P/n), and
//     s*P mod n members get one more.
//
// Steps, as Kafka's:
//
//  1. Keep each member's current partitions in the pool.
//  2. Revoke from members over quota, preferring partitions shared by the
//     most members, then the highest numbered.
//  3. Revoke from partitions shared by more than s members, taking them
//     from the holders with the most partitions (ties: the last by id).
//  4. Hand the partitions shared by fewer than s, in order, to the members
//     under quota, round-robin in id order, skipping members that already
//     have the partition. If every member under quota already has it, the
//     partition stays under-shared (Kafka tolerates that imbalance too).
//
// Step 4 always gives a partition with no member one, because the room
// left under the quotas equals the sharing still wanted: sum of quotas is
// s*P, and after steps 2 and 3 no member is over quota and no partition
// over s. So every partition gets a member, and with n <= P (s = 1) every
// partition exactly one, and counts differ by at most one.
//
// Where this differs from Kafka, observably only in which member gets
// what:
//
//   - Kafka gives the larger quotas to the first members in its internal
//     order (a hash map's); we give them to the members that currently hold
//     the most, ties by id, so fewer partitions move: adding a member to a
//     balanced group with n+1 <= P moves exactly floor(P/(n+1)) partitions
//     (the proof is uniform's; tested).
//   - Kafka computes the quotas in floating point; we use integers.
//   - In step 4 Kafka stops handing out partitions altogether once a full
//     round of the members under quota could take none; we move on to the
//     next partition, so a partition with no member always gets one.
//   - Kafka leaves out partitions whose share-group state is not
//     initialized yet (GroupSpec.isPartitionAssignable); the Spec has no
//     such notion, so the caller must leave such topics out of Spec.Topics.
//
// Racks are ignored, as in Kafka.
func Simple() Assignor { return simple{} }

type simple struct{}

func (simple) Name() string { return "simple" }

func (simple) Assign(s Spec) Assignment {
	v := newView(s)
	held := make([][]int, len(v.members))
	if v.homogeneous() {
		if len(v.members) > 0 && len(v.subs[0]) > 0 {
			all := make([]int, len(v.members))
			for m := range all {
				all[m] = m
			}
			share(v, v.subs[0], all, held)
		}
	} else {
		for t := range v.topics {
			if len(v.subscribers[t]) > 0 {
				share(v, []int{t}, v.subscribers[t], held)
			}
		}
	}
	return v.output(held)
}

// share assigns the partitions of topics (the pool) to members, every one
// of whom subscribes to every pool topic, and appends each member's flat
// partitions to held.
//
// Inside, partitions are pool positions [0, P) and members positions
// [0, n). Invariant: have[j] and holders[pos] describe the same pairs.
func share(v *view, topics, members []int, held [][]int) {
	var flat []int // pool position -> flat partition
	for _, t := range topics {
		for f := v.base[t]; f < v.base[t+1]; f++ {
			flat = append(flat, f)
		}
	}
	P, n := len(flat), len(members)
	sharing := (n + P - 1) / P
	total := sharing * P

	have := make([][]int, n)    // member -> pool positions
	holders := make([][]int, P) // pool position -> members
	for j, m := range members {
		off := 0
		for _, t := range topics {
			for _, p := range v.current(m, t) {
				pos := off + int(p)
				have[j] = append(have[j], pos)
				holders[pos] = append(holders[pos], j)
			}
			off += int(v.topics[t].Partitions)
		}
	}

	quota := make([]int, n)
	byHeld := make([]int, n)
	for j := range n {
		quota[j] = total / n
		byHeld[j] = j
	}
	slices.SortStableFunc(byHeld, func(a, b int) int { return cmp.Compare(len(have[b]), len(have[a])) })
	for _, j := range byHeld[:total%n] {
		quota[j]++
	}

	drop := func(j, pos int) {
		holders[pos] = slices.DeleteFunc(holders[pos], func(k int) bool { return k == j })
	}

	// 2. Members over quota.
	for j := range n {
		excess := len(have[j]) - quota[j]
		if excess <= 0 {
			continue
		}
		order := slices.Clone(have[j])
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(len(holders[b]), len(holders[a])); c != 0 {
				return c
			}
			return cmp.Compare(b, a)
		})
		for _, pos := range order[:excess] {
			drop(j, pos)
		}
		gone := order[:excess]
		have[j] = slices.DeleteFunc(have[j], func(pos int) bool { return slices.Contains(gone, pos) })
	}

	// 3. Partitions over the desired sharing.
	for pos := range P {
		for len(holders[pos]) > sharing {
			most := holders[pos][0]
			for _, j := range holders[pos][1:] {
				if len(have[j]) > len(have[most]) || len(have[j]) == len(have[most]) && j > most {
					most = j
				}
			}
			drop(most, pos)
			have[most] = slices.DeleteFunc(have[most], func(p int) bool { return p == pos })
		}
	}

	// 4. Fill. under holds the members below quota in id order; i walks it
	// round-robin.
	var under []int
	for j := range n {
		if len(have[j]) < quota[j] {
			under = append(under, j)
		}
	}
	i := 0
	for pos := 0; pos < P && len(under) > 0; pos++ {
		for len(holders[pos]) < sharing && len(under) > 0 {
			c := -1
			for k := range len(under) {
				if at := (i + k) % len(under); !slices.Contains(holders[pos], under[at]) {
					c = at
					break
				}
			}
			if c < 0 {
				break // everyone with room already has it
			}
			j := under[c]
			have[j] = append(have[j], pos)
			holders[pos] = append(holders[pos], j)
			if len(have[j]) == quota[j] {
				under = slices.Delete(under, c, c+1)
				i = c
			} else {
				i = c + 1
			}
			if i >= len(under) {
				i = 0
			}
		}
	}

	for j, m := range members {
		for _, pos := range have[j] {
			held[m] = append(held[m], flat[pos])
		}
	}
}
