package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// Tiered storage's wiring (broker/tier): the remote log manager reads the
// local replicas and the applied image, and proposes through the
// controller link.

func newTierManager(b *Broker, store remote.Store, interval time.Duration) *tier.Manager {
	return tier.NewManager(tier.ManagerConfig{
		NodeID:   b.cfg.NodeID,
		Store:    store,
		Interval: interval,
		Replicas: func() []*replica.Partition {
			var out []*replica.Partition
			for _, t := range b.replicas.Topics() {
				out = append(out, t.Local()...)
			}
			return out
		},
		Image:    func() *controller.Image { return b.replicas.Image() },
		Proposer: tierProposer{b},
		Logger:   b.log.With().Str("component", "tier").Logger(),
	})
}

// tierProposer proposes a remote segment record as this broker and waits
// until the applied image has it, so the next round's Plan sees it.
type tierProposer struct{ b *Broker }

func (p tierProposer) Propose(ctx context.Context, rec controller.Record) (int16, error) {
	code, offset, err := p.b.ctl.RemoteLogSegment(ctx, p.b.life.Epoch(), rec)
	if err != nil || code != 0 {
		return code, err
	}
	if !waitOffset(ctx, p.b.replicas, offset) {
		return 0, fmt.Errorf("tier: waiting for metadata offset %d: %w", offset, context.Cause(ctx))
	}
	return 0, nil
}
