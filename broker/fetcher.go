package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Followers replicate by fetching from the leader, as Kafka's replica
// fetcher threads do: one fetcher per leader broker, carrying every
// partition this broker follows there in one Fetch request (ReplicaID = this
// broker). A partition that has just become a follower at a new leader
// epoch first finds where its log diverges from the leader's with
// OffsetForLeaderEpoch and truncates exactly there (KIP-101, KIP-279); then
// each response is appended verbatim (storage.AppendReplica), made durable,
// and the next fetch offset — the durable log end — is what the leader
// counts for its high watermark.

// fetchers owns the fetchers; publishLoop updates it with every image.
type fetchers struct {
	b  *Broker
	mu sync.Mutex
	// byLeader is the running fetcher of each leader broker.
	byLeader map[int32]*fetcher
}

func newFetchers(b *Broker) *fetchers { return &fetchers{b: b, byLeader: map[int32]*fetcher{}} }

// update sets the partitions followed at each leader: it starts and stops
// fetchers as needed.
func (fs *fetchers) update(want map[int32][]*partition) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for leader, f := range fs.byLeader {
		if len(want[leader]) == 0 {
			f.close()
			delete(fs.byLeader, leader)
		}
	}
	for leader, parts := range want {
		f := fs.byLeader[leader]
		if f == nil {
			f = newFetcher(fs.b, leader)
			fs.byLeader[leader] = f
		}
		f.set(parts)
	}
}

func (fs *fetchers) closeAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for leader, f := range fs.byLeader {
		f.close()
		delete(fs.byLeader, leader)
	}
}

// fetcher replicates the partitions this broker follows at one leader.
type fetcher struct {
	b      *Broker
	leader int32
	mu     struct {
		sync.Mutex
		parts []*partition
	}
	wake   chan struct{} // cap 1: the partition set changed
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by run.
	cl   *kgo.Client
	addr string
}

func newFetcher(b *Broker, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{b: b, leader: leader, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go f.run()
	return f
}

func (f *fetcher) set(parts []*partition) {
	f.mu.Lock()
	f.mu.parts = parts
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) close() {
	f.cancel()
	<-f.done
}

func (f *fetcher) partitions() []*partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.parts
}

// run fetches until closed.
func (f *fetcher) run() {
	defer close(f.done)
	defer func() {
		if f.cl != nil {
			f.cl.Close()
		}
	}()
	for f.ctx.Err() == nil {
		var ours []*partition
		for _, p := range f.partitions() {
			if st := p.state.Load(); st != nil && !st.leader && st.leaderID == f.leader {
				ours = append(ours, p)
			}
		}
		if len(ours) == 0 {
			select {
			case <-f.wake:
			case <-f.ctx.Done():
			}
			continue
		}
		if err := f.connect(); err != nil {
			f.b.log.Debug().Err(err).Int32("leader", f.leader).Msg("replica fetcher: no route to the leader")
			sleepCtx(f.ctx, 200*time.Millisecond)
			continue
		}
		var ready []*partition
		for _, p := range ours {
			if !f.b.repairDamaged(p) {
				continue
			}
			if p.needTruncate.Load() {
				if err := f.truncate(p); err != nil {
					p.logger.Debug().Err(err).Msg("finding the divergence point; retrying")
					continue
				}
			}
			ready = append(ready, p)
		}
		if len(ready) == 0 {
			sleepCtx(f.ctx, 200*time.Millisecond)
			continue
		}
		if err := f.fetch(ready); err != nil && f.ctx.Err() == nil {
			f.b.log.Debug().Err(err).Int32("leader", f.leader).Msg("replica fetch failed")
			sleepCtx(f.ctx, 100*time.Millisecond)
		}
	}
}

// connect makes sure the client points at the leader's current address.
func (f *fetcher) connect() error {
	img := f.b.image()
	e, ok := endpoint(img, f.leader, f.b.interBrokerListener())
	if !ok {
		return fmt.Errorf("leader %d has no %s endpoint", f.leader, f.b.interBrokerListener())
	}
	addr := net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
	if f.cl != nil && f.addr == addr {
		return nil
	}
	if f.cl != nil {
		f.cl.Close()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second),
		kgo.ClientID(fmt.Sprintf("fjord-replica-%d", f.b.cfg.NodeID)))
	if err != nil {
		return err
	}
	f.cl, f.addr = cl, addr
	return nil
}

func (f *fetcher) request(req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	seeds := f.cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no connection to leader %d", f.leader)
	}
	ctx, cancel := context.WithTimeout(f.ctx, timeout)
	defer cancel()
	return seeds[0].Request(ctx, req)
}

// truncate finds where p's log diverges from the leader's and cuts it
// there (KIP-279): ask the leader for the end of our latest epoch; if the
// leader's answer is an older epoch, our log is cut at the smaller of its
// end for that epoch and ours, and we ask again with our new latest epoch,
// until the leader answers with the epoch we asked for.
func (f *fetcher) truncate(p *partition) error {
	st := p.state.Load()
	if st == nil {
		return nil
	}
	for range 32 {
		latest := p.log.LatestEpoch()
		if latest < 0 {
			// No epochs (an empty log, or one written before epochs): the
			// high watermark is the last offset known to be committed.
			if err := p.truncateTo(p.hw.Load()); err != nil {
				return err
			}
			break
		}
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = f.b.cfg.NodeID
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = p.topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.index, st.leaderEpoch, latest
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := f.request(req, 10*time.Second)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("malformed OffsetForLeaderEpoch response")
		}
		r := resp.Topics[0].Partitions[0]
		if r.ErrorCode != 0 {
			return kerr.ErrorForCode(r.ErrorCode)
		}
		if r.LeaderEpoch < 0 || r.EndOffset < 0 {
			if err := p.truncateTo(p.hw.Load()); err != nil {
				return err
			}
			break
		}
		target := r.EndOffset
		if r.LeaderEpoch != latest {
			_, mine := p.log.EndOffsetForEpoch(r.LeaderEpoch)
			if mine >= 0 {
				target = min(target, mine)
			} else {
				target = min(target, p.hw.Load())
			}
		}
		if err := p.truncateTo(target); err != nil {
			return err
		}
		if r.LeaderEpoch == latest {
			break // the leader knows our latest epoch and where it ends
		}
	}
	p.needTruncate.Store(false)
	p.logger.Info().Int64("log_end", p.log.EndOffset()).Int32("leader", f.leader).Msg("follower log matches the leader's; fetching")
	return nil
}

// fetch sends one Fetch for the ready partitions and applies the answer.
func (f *fetcher) fetch(parts []*partition) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.b.cfg.NodeID
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.b.cfg.NodeID, f.b.brokerEpoch.Load()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 16<<20
	req.SessionID, req.SessionEpoch = 0, -1
	topicAt := map[string]int{}
	for _, p := range parts {
		st := p.state.Load()
		i, ok := topicAt[p.topic]
		if !ok {
			nt := kmsg.NewFetchRequestTopic()
			nt.Topic, nt.TopicID = p.topic, p.topicID
			req.Topics = append(req.Topics, nt)
			i = len(req.Topics) - 1
			topicAt[p.topic] = i
		}
		t := &req.Topics[i]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset = p.index, p.log.EndOffset(), p.log.StartOffset()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, st.leaderEpoch
		rp.LastFetchedEpoch = -1
		t.Partitions = append(t.Partitions, rp)
	}
	kresp, err := f.request(req, 10*time.Second)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	find := func(rt *kmsg.FetchResponseTopic, idx int32) *partition {
		for _, p := range parts {
			if p.index == idx && (p.topic == rt.Topic || (rt.Topic == "" && p.topicID == rt.TopicID)) {
				return p
			}
		}
		return nil
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			p := find(rt, sp.Partition)
			if p == nil {
				continue
			}
			f.apply(p, sp)
		}
	}
	return nil
}

// apply appends one partition's fetched batches.
func (f *fetcher) apply(p *partition, sp *kmsg.FetchResponseTopicPartition) {
	switch sp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		if p.log.EndOffset() < sp.LogStartOffset {
			// Behind the leader's retention: start again at its start.
			p.logger.Warn().Int64("log_end", p.log.EndOffset()).Int64("leader_start", sp.LogStartOffset).
				Msg("follower is behind the leader's log start; starting over there")
			if err := p.log.TruncateFullyAndStartAt(sp.LogStartOffset); err != nil {
				p.logger.Error().Err(err).Msg("restarting the follower log")
			}
		} else {
			p.needTruncate.Store(true)
		}
		return
	case kerr.KafkaStorageError.Code:
		p.leaderDamaged()
		return
	default:
		// Not (or no longer) the leader, stale epochs: the next image
		// moves the partition; nothing to write.
		return
	}
	if len(sp.RecordBatches) > 0 {
		if st := p.state.Load(); st == nil || st.leader || st.leaderID != f.leader {
			return // the partition moved while the fetch was in flight
		}
		if _, err := p.log.AppendReplica(sp.RecordBatches); err != nil {
			p.logger.Error().Err(err).Msg("appending fetched batches; finding the divergence point again")
			p.needTruncate.Store(true)
			return
		}
		if p.syncOnAck() {
			if err := p.log.Flush(); err != nil {
				p.logger.Error().Err(err).Msg("flushing fetched batches")
				return
			}
		}
	}
	p.followerHW(sp.HighWatermark)
}

// interBrokerListener names the listener this broker fetches through: the
// leader's advertised endpoint of that name (inter.broker.listener.name,
// else this broker's first client listener).
func (b *Broker) interBrokerListener() string {
	if b.cfg.InterBrokerListenerName != "" {
		return b.cfg.InterBrokerListenerName
	}
	if len(b.advertised) == 0 {
		return ""
	}
	return b.advertised[0].Name
}
