package assign

// Uniform returns KIP-848's "uniform" assignor, the default of
// group.consumer.assignors.
//
// Its goals, in order (those of Kafka's UniformAssignor; the algorithm is
// our own):
//
//  1. Every partition of a subscribed topic goes to exactly one member
//     subscribed to that topic. A topic nobody subscribes to is not
//     assigned.
//  2. Balance. When every member subscribes to the same topics, partition
//     counts differ by at most one. Otherwise the counts are as balanced as
//     the subscriptions allow, in the strong sense that no sequence of moves
//     can take a partition off one member and add one to another that has
//     at least two fewer (see balanceLoads); this minimises the largest
//     count and the sum of squared counts at once.
//  3. Stickiness. A member keeps the partitions of its Current assignment
//     unless balance needs them elsewhere; partitions that must move are
//     taken from the members that have too many.
//
// Two cases, as in Kafka. Homogeneous subscriptions get per-member quotas
// (assignHomogeneous), which is linear in partitions plus members and moves
// the fewest partitions possible: adding one member to a balanced group of
// N moves exactly floor(P/(N+1)) partitions, all to the new member, and
// removing one moves exactly the partitions it had (both tested).
// Heterogeneous subscriptions keep, then place, then repair balance along
// moving paths (assignHeterogeneous).
//
// Racks are ignored: the Spec carries the members' racks but not the
// partitions' replica racks, so there is nothing to match them with.
// Kafka's uniform assignor only uses racks to break ties as well.
func Uniform() Assignor { return uniform{} }

type uniform struct{}

func (uniform) Name() string { return "uniform" }

func (uniform) Assign(s Spec) Assignment {
	v := newView(s)
	var owner []int
	if v.homogeneous() {
		owner = assignHomogeneous(v)
	} else {
		owner = assignHeterogeneous(v)
	}
	return v.output(v.ownersToHeld(owner))
}

// claimCurrent gives every member the partitions of its Current assignment
// that are still valid (subscribed topic, existing partition), in member
// then partition order. A partition two members claim (which a consumer
// group's target assignment never holds) goes to the first.
//
// It returns the owner table (flat partition -> member, -1 if unowned) and
// each member's claims in partition order.
func claimCurrent(v *view) (owner []int, kept [][]int) {
	owner = make([]int, v.total())
	for f := range owner {
		owner[f] = -1
	}
	kept = make([][]int, len(v.members))
	for m := range v.members {
		for _, t := range v.subs[m] {
			for _, p := range v.current(m, t) {
				f := v.base[t] + int(p)
				if owner[f] < 0 {
					owner[f] = m
					kept[m] = append(kept[m], f)
				}
			}
		}
	}
	return owner, kept
}

// assignHomogeneous assigns when every member subscribes to the same
// topics: P partitions over M members, so each member's quota is q =
// floor(P/M) and r = P mod M of them get one more.
//
// Steps:
//
//  1. Every member claims its current partitions (claimCurrent).
//  2. Each member keeps at most q of them; the first r members (in id
//     order) that claimed more than q keep q+1. The rest are released.
//  3. The extras not used in step 2 raise the quota of the first members
//     (in id order) still at q.
//  4. The unowned partitions, in topic then partition order, are dealt
//     round-robin to the members below quota, in id order.
//
// Every member ends at exactly its quota, and the number of partitions a
// member keeps is the largest any balanced assignment allows: sum over
// members of min(claimed, q), plus min(r, #members that claimed more than
// q). That is why the join and leave bounds in the Uniform doc hold.
func assignHomogeneous(v *view) []int {
	owner, kept := claimCurrent(v)
	M := len(v.members)
	if M == 0 || len(v.subs[0]) == 0 {
		return owner
	}
	P := 0
	for _, t := range v.subs[0] {
		P += int(v.topics[t].Partitions)
	}
	q, extras := P/M, P%M

	quota := make([]int, M)
	count := make([]int, M)
	for m := range M {
		quota[m] = q
		if len(kept[m]) > q && extras > 0 {
			quota[m]++
			extras--
		}
		if len(kept[m]) > quota[m] {
			for _, f := range kept[m][quota[m]:] {
				owner[f] = -1
			}
			kept[m] = kept[m][:quota[m]]
		}
		count[m] = len(kept[m])
	}
	for m := 0; m < M && extras > 0; m++ {
		if quota[m] == q {
			quota[m]++
			extras--
		}
	}

	// Deal. below holds the members still under quota, in id order; i
	// walks it round-robin.
	var below []int
	for m := range M {
		if count[m] < quota[m] {
			below = append(below, m)
		}
	}
	i := 0
	for _, t := range v.subs[0] {
		for f := v.base[t]; f < v.base[t+1]; f++ {
			if owner[f] >= 0 {
				continue
			}
			m := below[i]
			owner[f] = m
			count[m]++
			if count[m] == quota[m] {
				below = append(below[:i], below[i+1:]...)
			} else {
				i++
			}
			if i >= len(below) {
				i = 0
			}
		}
	}
	return owner
}
