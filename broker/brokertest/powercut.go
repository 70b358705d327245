package brokertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/storage"
)

// PowerCut cuts the power of the given nodes at one instant, then starts
// them again on what their disks kept, on the same ports. It needs
// Options.PowerLoss, and every node named must be running.
//
// The cut, in order:
//
//  1. Every node named falls silent at once: its links to the other
//     nodes and its client proxy are cut (connections reset, new ones
//     refused). Nothing it sends from now on reaches anyone, so no client
//     or peer can learn of anything the node does after step 2.
//  2. Each node's disks are frozen: its partition logs' MemFS is replaced
//     by its crash image (storage.MemFS.CrashClone: each file as of its
//     last fsync, each directory's names as of its last directory fsync,
//     plus a random part of the rest with Options.PowerLossSeed), and its
//     metadata log's strict pebble FS stops taking syncs. A write the node
//     makes after this is lost, whether or not it syncs it.
//  3. The nodes are closed, all at once. A power loss runs no shutdown
//     code; here it runs, but nothing it writes survives (step 2) and
//     nothing it says is heard (step 1).
//  4. The metadata logs are reset to their synced state, the links healed
//     (every link of each node: a Cut of one of them ends too) and the
//     nodes started together, as Start does, so that a quorum is there
//     for each to register with. PowerCut returns once every one serves,
//     or with the first node's error.
//
// Between steps 1 and 2 a node may still make things durable; that is a
// node whose network died a moment before its power, a possible history,
// and one no other node or client can tell apart from a cut at step 1.
func (c *Cluster) PowerCut(ids ...int32) error {
	if !c.opts.PowerLoss {
		return errors.New("brokertest: PowerCut needs Options.PowerLoss")
	}
	if len(ids) == 0 {
		return nil
	}
	c.mu.Lock()
	ms := make([]*member, 0, len(ids))
	for _, id := range ids {
		m, err := c.member(id)
		if err != nil {
			c.mu.Unlock()
			return err
		}
		if m.b == nil {
			c.mu.Unlock()
			return fmt.Errorf("brokertest: PowerCut: node %d is not running", id)
		}
		if slices.Contains(ms, m) {
			c.mu.Unlock()
			return fmt.Errorf("brokertest: PowerCut: node %d named twice", id)
		}
		ms = append(ms, m)
	}
	// 1. Silence.
	for _, m := range ms {
		c.setLinksLocked(m.id, linkCut)
		m.client.set(linkCut)
	}
	// 2. Freeze the disks.
	images := make([]*storage.MemFS, len(ms))
	olds := make([]*broker.Broker, len(ms))
	for i, m := range ms {
		images[i] = m.fs.CrashClone(c.crashRand)
		m.meta.SetIgnoreSyncs(true)
		olds[i], m.b = m.b, nil
	}
	c.mu.Unlock()

	// 3. Tear down. Errors are of no interest: whatever the nodes do now
	// is lost.
	cutAt := time.Now()
	var wg sync.WaitGroup
	for _, b := range olds {
		wg.Go(func() { _ = b.Close() })
	}
	wg.Wait()
	c.opts.Logger.Info().Ints32("nodes", ids).Dur("took", time.Since(cutAt)).Msg("brokertest: power cut: the old nodes are closed")

	// 4. Power back.
	c.mu.Lock()
	for i, m := range ms {
		m.fs = images[i]
		m.meta.ResetToSyncedState()
		m.meta.SetIgnoreSyncs(false)
		c.setLinksLocked(m.id, linkUp)
		m.client.set(linkUp)
	}
	c.mu.Unlock()
	errs := make(chan error, len(ms))
	for _, m := range ms {
		go func() { errs <- c.start(m.id) }()
	}
	var first error
	for range ms {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	c.opts.Logger.Info().Ints32("nodes", ids).Dur("took", time.Since(cutAt)).Err(first).Msg("brokertest: power cut: the nodes serve again")
	return first
}
