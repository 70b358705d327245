package txncoord

import (
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Follow matches the coordinator to the topic's local replicas: parts[i]
// is this node's replica of partition i, nil where it holds none (a nil
// parts changes nothing). Partitions this node has begun to lead are
// loaded in the background; those it no longer leads are unloaded (their
// waiting requests answered NOT_COORDINATOR). The broker calls it after
// every metadata image and whenever a local replica's role changes.
func (c *Coordinator) Follow(parts []*replica.Partition) {
	if parts == nil {
		return
	}
	var gained, lost []*part
	c.mu.Lock()
	if len(c.mu.parts) < len(parts) {
		c.mu.parts = append(c.mu.parts, make([]*part, len(parts)-len(c.mu.parts))...)
		c.count.Store(int32(len(parts)))
	}
	for i, p := range parts {
		cur := c.mu.parts[i]
		switch {
		case p.Leads() && (cur == nil || cur.p != p):
			if cur != nil {
				lost = append(lost, cur)
			}
			pt := &part{idx: int32(i), p: p}
			pt.mu.tbl = txn.NewTable(c.cfg.Txn, int32(i))
			c.mu.parts[i] = pt
			gained = append(gained, pt)
		case !p.Leads() && cur != nil:
			c.mu.parts[i] = nil
			lost = append(lost, cur)
		}
	}
	c.mu.Unlock()
	for _, pt := range lost {
		c.unload(pt)
	}
	for _, pt := range gained {
		c.host.Go(func() { c.load(pt) })
	}
}

// load reads pt's partition log into its table, then serves it.
func (c *Coordinator) load(pt *part) {
	start := time.Now()
	lg, v, code := pt.p.Serve(replica.ConsumerRead)
	if code != 0 {
		return // no longer led here, or deleted: Follow unloads it
	}
	// Only a committed log is loaded (replica.Partition.WaitHW says why): a
	// PrepareCommit in a tail that a failover cuts would have its markers
	// sent, and the next leader, without it, would abort the transaction:
	// committed on some partitions, aborted on others.
	if err := pt.p.WaitHW(c.ctx, lg.EndOffset(), v.LeaderEpoch); err != nil {
		return
	}
	if !c.do(pt, func(t *txn.Table, _ int64) txn.Ready { return t.BeginLoad(v.LeaderEpoch) }) {
		return // lost again before the load began
	}
	n := 0
	off := lg.StartOffset()
	for {
		data, err := lg.Read(off, 1<<20, lg.EndOffset(), nil)
		if err != nil {
			c.log.Error().Err(err).Int32("partition", pt.idx).Msg("loading transaction state; partition stays unavailable")
			c.host.ReadFailed(pt.p, err)
			return
		}
		if len(data) == 0 {
			break
		}
		var recs []txn.LogRecord
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil || info.Bytes > len(data) {
				c.log.Error().Err(err).Int32("partition", pt.idx).Msg("bad batch in transaction state; partition stays unavailable")
				return
			}
			base := recordbatch.BaseOffset(data)
			if !info.Control {
				recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
					recs = append(recs, txn.LogRecord{Key: r.Key, Value: r.Value})
					return true
				})
			}
			off = base + int64(info.LastDelta) + 1
			data = data[info.Bytes:]
		}
		n += len(recs)
		pt.mu.Lock()
		if pt.mu.gone {
			pt.mu.Unlock()
			return // lost meanwhile: the next leader loads it
		}
		for len(recs) > 0 {
			k, err := pt.mu.tbl.LoadRecords(recs)
			if err == nil {
				break
			}
			c.log.Warn().Err(err).Int32("partition", pt.idx).Msg("skipping an unreadable transaction state record")
			recs = recs[k+1:]
		}
		pt.mu.Unlock()
	}
	c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.FinishLoad(now) })
	if n > 0 || time.Since(start) > 100*time.Millisecond {
		c.log.Info().Int32("partition", pt.idx).Int("records", n).Dur("took", time.Since(start)).Msg("loaded transaction state")
	}
}
