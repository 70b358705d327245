package controller

import (
	"reflect"
	"slices"
	"testing"
)

// counts returns, per broker, how many partitions it leads and how many
// replicas it holds.
func counts(assign [][]int32) (leaders, replicas map[int32]int) {
	leaders, replicas = map[int32]int{}, map[int32]int{}
	for _, rs := range assign {
		leaders[rs[0]]++
		for _, r := range rs {
			replicas[r]++
		}
	}
	return leaders, replicas
}

func TestPlaceEvenThreeBrokers(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	for _, rf := range []int16{1, 2, 3} {
		tp := c.create("t"+string(rune('0'+rf)), 30, rf)
		assign := make([][]int32, len(tp.Partitions))
		for i, p := range tp.Partitions {
			assign[i] = p.Replicas
			if len(p.Replicas) != int(rf) || dup(p.Replicas) {
				t.Fatalf("rf %d partition %d: replicas %v", rf, i, p.Replicas)
			}
			if p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) {
				t.Fatalf("rf %d partition %d: %+v", rf, i, p)
			}
		}
		leaders, replicas := counts(assign)
		for b := int32(1); b <= 3; b++ {
			if leaders[b] != 10 || replicas[b] != 10*int(rf) {
				t.Errorf("rf %d: broker %d leads %d (want 10), holds %d (want %d)", rf, b, leaders[b], replicas[b], 10*int(rf))
			}
		}
		if got := len(c.img.PartitionsLedBy(1)); got != 10*int(rf) {
			t.Errorf("after rf %d, broker 1 leads %d partitions in all", rf, got)
		}
	}
}

// TestPlaceFollowersSpread checks that with 5 brokers and RF 3 every
// ordered (leader, follower) pair is used about equally, so a broker's
// failure spreads its load instead of dumping it on one neighbour.
func TestPlaceFollowersSpread(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "", "", "")
	assign := Place(c.img, 100, 3, 0)
	leaders, replicas := counts(assign)
	for b := int32(1); b <= 5; b++ {
		if leaders[b] != 20 || replicas[b] != 60 {
			t.Errorf("broker %d: leads %d, holds %d", b, leaders[b], replicas[b])
		}
	}
	pairs := map[[2]int32]int{}
	for _, rs := range assign {
		pairs[[2]int32{rs[0], rs[1]}]++
	}
	for p, n := range pairs {
		if n != 5 {
			t.Errorf("leader %d with first follower %d: %d times, want 5", p[0], p[1], n)
		}
	}
}

func TestPlaceRacks(t *testing.T) {
	c := newCluster(t)
	c.brokers("a", "a", "b", "b") // 1,2 in a; 3,4 in b
	rack := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}
	assign := Place(c.img, 40, 2, 0)
	for i, rs := range assign {
		if rack[rs[0]] == rack[rs[1]] {
			t.Errorf("partition %d: replicas %v share rack %s", i, rs, rack[rs[0]])
		}
	}
	leaders, replicas := counts(assign)
	for b := int32(1); b <= 4; b++ {
		if leaders[b] != 10 || replicas[b] != 20 {
			t.Errorf("broker %d leads %d, holds %d", b, leaders[b], replicas[b])
		}
	}
	// RF 3 over 2 racks: both racks always present, and still balanced.
	assign = Place(c.img, 40, 3, 0)
	_, replicas = counts(assign)
	for i, rs := range assign {
		if !slices.ContainsFunc(rs, func(b int32) bool { return rack[b] == "a" }) ||
			!slices.ContainsFunc(rs, func(b int32) bool { return rack[b] == "b" }) {
			t.Errorf("partition %d: %v misses a rack", i, rs)
		}
	}
	for b := int32(1); b <= 4; b++ {
		if replicas[b] != 30 {
			t.Errorf("rf 3: broker %d holds %d, want 30", b, replicas[b])
		}
	}
}

func TestPlaceSkipsFencedAndRejects(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	c.apply(NewRecord(FenceBroker{ID: 2, Epoch: c.epoch(2)}))
	for _, rs := range Place(c.img, 10, 2, 0) {
		if slices.Contains(rs, 2) {
			t.Fatalf("fenced broker placed: %v", rs)
		}
	}
	for _, tc := range []struct {
		p  int32
		rf int16
	}{{0, 1}, {1, 0}, {1, 3}} {
		if got := Place(c.img, tc.p, tc.rf, 0); got != nil {
			t.Errorf("Place(%d, %d) = %v, want nil", tc.p, tc.rf, got)
		}
	}
}

// TestPlaceContinues checks that the start hint continues one round-robin
// sequence: two placements of 4 and 5 equal one of 9.
func TestPlaceContinues(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	whole := Place(c.img, 9, 2, 0)
	split := append(Place(c.img, 4, 2, 0), Place(c.img, 5, 2, 4)...)
	if !reflect.DeepEqual(whole, split) {
		t.Fatalf("whole %v\nsplit %v", whole, split)
	}
	if !reflect.DeepEqual(whole, Place(c.img, 9, 2, 0)) {
		t.Fatal("not deterministic")
	}
}
