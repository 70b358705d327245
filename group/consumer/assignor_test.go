package consumer

import (
	"github.com/fjordlog/fjord/group/assign"
)

// testAssignor stands in for the real assignors until group/assign has
// them: each topic's partitions go round-robin over its subscribers,
// sorted by member id.
type testAssignor struct{ name string }

func (a testAssignor) Name() string { return a.name }

func (a testAssignor) Assign(s assign.Spec) assign.Assignment {
	out := assign.Assignment{}
	for _, m := range s.Members {
		out[m.ID] = map[assign.TopicID][]int32{}
	}
	for _, t := range s.Topics {
		var subs []string
		for _, m := range s.Members {
			for _, id := range m.Subscribed {
				if id == t.ID {
					subs = append(subs, m.ID)
				}
			}
		}
		if len(subs) == 0 {
			continue
		}
		for p := range t.Partitions {
			m := subs[int(p)%len(subs)]
			out[m][t.ID] = append(out[m][t.ID], p)
		}
	}
	return out
}

func testConfig() Config {
	c := DefaultConfig()
	if len(c.Assignors) == 0 {
		c.Assignors = []assign.Assignor{testAssignor{"uniform"}, testAssignor{"range"}}
	}
	return c
}
