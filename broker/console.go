package broker

import (
	"slices"
	"time"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/console"
	"github.com/fjordlog/fjord/protocol"
)

// consoleSource is what the web console (package broker/console, on
// fjord.console.listener) reads of the broker: the parts of it that
// console.NodeSource reads, taken once at start-up. The servers are read
// under b.mu at each call, as serveClients adds them after the console
// starts.
func consoleSource(b *Broker) *console.NodeSource {
	s := &console.NodeSource{
		ClusterID:  b.clusterID,
		NodeID:     b.cfg.NodeID,
		Roles:      b.cfg.ProcessRoles,
		Image:      b.image,
		Controller: b.meta.Leader,
		Replicas:   b.replicas,
		Coord:      b.coord,
		Servers: func() []*protocol.Server {
			b.mu.RLock()
			defer b.mu.RUnlock()
			return slices.Clone(b.servers)
		},
	}
	if b.tier != nil {
		s.Remote = func() *console.RemoteHealth {
			h := b.tier.Health(time.Now())
			return &console.RemoteHealth{Failing: h.Failing, FailingPartitions: h.FailingPartitions, LastError: h.LastError,
				Waiting: h.Waiting, PendingSegments: h.PendingSegments, PendingBytes: h.PendingBytes, OldestPending: h.OldestPending.Round(time.Second)}
		}
	}
	if vs, err := config.ParseVoters(b.cfg.ControllerQuorumVoters); err == nil {
		for _, v := range vs {
			s.Voters = append(s.Voters, console.Voter{ID: v.ID, Addr: v.Addr})
		}
	}
	return s
}
