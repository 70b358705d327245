package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
)

// Followers replicate by fetching from the leader, as Kafka's replica
// fetcher threads do: one fetcher per leader broker, carrying every
// partition this broker follows there in one Fetch request (ReplicaID = this
// broker). A partition that has just become a follower at a new leader
// epoch first finds where its log diverges from the leader's with
// OffsetForLeaderEpoch and truncates exactly there (KIP-101, KIP-279); then
// each response is appended verbatim (storage.AppendReplica) and made
// durable. What the leader counts for its high watermark is the durable
// end each fetch reports (pipeline.go): with a leader that counts it, the
// next fetch goes as soon as the append is done and the fsync runs beside
// it (flusher); with one that does not, the fsync ends first and the
// fetch offset is the durable end, Kafka's rule.
// Each fetcher keeps a KIP-227 fetch session with its leader (session.go):
// an idle follower's fetch names no partition, and a partition is sent
// again only when its fetch offset, durable end, log start, max bytes or
// leader epoch moved.

// FetchHost is what the fetchers need of their broker.
type FetchHost interface {
	// Go runs fn on a goroutine the broker tracks; false once it stops.
	Go(fn func()) bool
	// NodeID is this broker's id; BrokerEpoch its current registration.
	NodeID() int32
	BrokerEpoch() int64
	// LeaderAddr is where to fetch from broker id (its inter-broker
	// listener), as the broker's metadata knows it.
	LeaderAddr(id int32) (string, error)
	// Repaired counts a damaged log truncated for fetching again.
	Repaired(p *Partition)
	Logger() *zerolog.Logger
}

// ClientOpter is what a FetchHost implements when connections to leaders
// need more than an address: SASL on the inter-broker listener.
type ClientOpter interface {
	ClientOpts() []kgo.Opt
}

// FollowerThrottle is what a FetchHost implements to throttle this
// follower's replication (follower.replication.throttled.rate): a
// partition over the quota is left out of the next fetch.
type FollowerThrottle interface {
	// FollowerThrottle says whether p is throttled here (rate > 0) and
	// whether its quota is spent now (withhold).
	FollowerThrottle(p *Partition) (rate int64, withhold bool)
	// FollowerFetchedBytes counts n bytes fetched for a throttled
	// partition at rate.
	FollowerFetchedBytes(rate int64, n int)
}

// Fetchers owns the fetchers; the broker updates it with every image.
type Fetchers struct {
	host FetchHost
	ctx  context.Context
	mu   sync.Mutex
	// byLeader is the running fetcher of each leader broker.
	byLeader map[int32]*fetcher
}

// NewFetchers returns fetchers that stop when ctx ends.
func NewFetchers(ctx context.Context, host FetchHost) *Fetchers {
	return &Fetchers{host: host, ctx: ctx, byLeader: map[int32]*fetcher{}}
}

// Update sets the partitions followed at each leader: it starts and stops
// fetchers as needed.
func (fs *Fetchers) Update(want map[int32][]*Partition) {
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
			f = newFetcher(fs, leader)
			fs.byLeader[leader] = f
		}
		f.set(parts)
	}
}

// CloseAll stops every fetcher and waits for it.
func (fs *Fetchers) CloseAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for leader, f := range fs.byLeader {
		f.close()
		delete(fs.byLeader, leader)
	}
}

// fetcher replicates the partitions this broker follows at one leader.
type fetcher struct {
	host   FetchHost
	leader int32
	mu     struct {
		sync.Mutex
		parts []*Partition
	}
	wake   chan struct{} // cap 1: the partition set changed
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by run.
	cl   *kgo.Client
	addr string
	// pipelined: the leader's last answer was marked (it counts the
	// durable ends fetches report), so the next fetch may go before the
	// fsync of what this one appended ends. Cleared by a fetch error, and
	// by a connection made since that answer (dialsAt != dials).
	pipelined bool
	dialsAt   int64
	dials     atomic.Int64 // connections the client has made (dialHook)
	flush     flusher
	// restarts are the partitions to restart from the tiered copy before
	// their next fetch (tierfollow.go); restarting counts the attempts
	// running beside the loop, restartsWG waits for them when it ends.
	restarts   map[*Partition]*tierRestart
	restarting atomic.Int32
	restartsWG sync.WaitGroup
	// sess is the KIP-227 fetch session with the leader (session.go).
	sess followerSession
}

// dialHook counts a fetcher's connections: one made after a marked answer
// may reach another process (a leader restarted, maybe as an older
// binary), which must mark an answer itself before fetches pipeline again.
type dialHook struct{ n *atomic.Int64 }

func (h dialHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, _ error) {
	h.n.Add(1)
}

func newFetcher(fs *Fetchers, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(fs.ctx)
	f := &fetcher{host: fs.host, leader: leader, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	f.flush.host = fs.host
	if !fs.host.Go(f.run) {
		close(f.done) // the broker is stopping
	}
	return f
}

func (f *fetcher) set(parts []*Partition) {
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

func (f *fetcher) partitions() []*Partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.parts
}

// run fetches until closed.
func (f *fetcher) run() {
	defer close(f.done)
	defer f.restartsWG.Wait() // attempts end with f.ctx
	defer func() {
		if f.cl != nil {
			f.cl.Close()
		}
	}()
	for f.ctx.Err() == nil {
		now := nowMs()
		var ready []*Partition
		// waiting: a partition of ours that does not fetch now but may
		// later without a new partition set: its open ends, a repair
		// that set a failed copy aside opens it again after a backoff,
		// its core takes up the leader the image named, its damage is
		// cut. Those changes wake nothing here, and a quiet cluster may
		// send no new set for minutes, so the loop looks again shortly.
		waiting := false
		for _, p := range f.partitions() {
			v, lg := p.view.Load(), p.Log()
			if v.Leader != f.leader || lg == nil {
				waiting = waiting || v.Phase < Deleting
				continue
			}
			if v.Phase == Damaged && !v.InISR {
				f.repairDamaged(p, lg, v)
				v = p.view.Load()
			}
			if !v.Fetches(f.leader) {
				waiting = waiting || v.Phase < Deleting
				continue
			}
			if now < p.pausedUntil.Load() || f.restartPending(p, now) {
				waiting = true
				continue
			}
			ready = append(ready, p)
		}
		if len(ready) == 0 {
			// Nothing to fetch now: wait for a new partition set, or look
			// again shortly if some partition may become fetchable.
			var again <-chan time.Time
			t := time.NewTimer(200 * time.Millisecond)
			if waiting {
				again = t.C
			}
			select {
			case <-f.wake:
			case <-again:
			case <-f.ctx.Done():
			}
			t.Stop()
			continue
		}
		if err := f.connect(); err != nil {
			f.host.Logger().Debug().Err(err).Int32("leader", f.leader).Msg("replica fetcher: no route to the leader")
			lifecycle.Sleep(f.ctx, 200*time.Millisecond)
			continue
		}
		fetchable := ready[:0]
		for _, p := range ready {
			if p.view.Load().Phase == Reconciling {
				if err := f.reconcile(p); err != nil {
					p.Logger.Debug().Err(err).Msg("finding the divergence point; retrying")
					continue
				}
				// Its log may have been cut below the high watermark the
				// session last heard: a full fetch tells it again.
				f.sess.restart()
			}
			fetchable = append(fetchable, p)
		}
		if len(fetchable) == 0 {
			lifecycle.Sleep(f.ctx, 200*time.Millisecond)
			continue
		}
		if err := f.fetch(fetchable); err != nil && f.ctx.Err() == nil {
			f.host.Logger().Debug().Err(err).Int32("leader", f.leader).Msg("replica fetch failed")
			lifecycle.Sleep(f.ctx, 100*time.Millisecond)
		}
	}
}

// connect makes sure the client points at the leader's current address.
func (f *fetcher) connect() error {
	addr, err := f.host.LeaderAddr(f.leader)
	if err != nil {
		return err
	}
	if f.cl != nil && f.addr == addr {
		return nil
	}
	if f.cl != nil {
		f.cl.Close()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second),
		kgo.ClientID(fmt.Sprintf("fjord-replica-%d", f.host.NodeID())), kgo.WithHooks(dialHook{&f.dials})}
	if co, ok := f.host.(ClientOpter); ok {
		opts = append(opts, co.ClientOpts()...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	f.cl, f.addr, f.pipelined = cl, addr, false
	if f.sess.id != 0 {
		f.sess.restart() // a new address may be another process: start over
	}
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

// reconcile finds where p's log diverges from the leader's and cuts it
// there (KIP-279): ask the leader for the end of our latest epoch; if the
// leader's answer is an older epoch, our log is cut at the smaller of its
// end for that epoch and ours, and we ask again with our new latest epoch,
// until the leader answers with the epoch we asked for. It tells the core
// which leader epoch it reconciled against, so an answer that a newer
// leadership overtook does not count.
func (f *fetcher) reconcile(p *Partition) error {
	v, lg := p.view.Load(), p.Log()
	if lg == nil || !v.Fetches(f.leader) {
		return nil
	}
	for range 32 {
		latest := lg.LatestEpoch()
		if latest < 0 {
			// No epochs (an empty log, or one written before epochs): the
			// high watermark is the last offset known to be committed.
			if err := p.truncateTo(lg, f.leader, v.LeaderEpoch, p.HW(), false); err != nil {
				return err
			}
			break
		}
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = f.host.NodeID()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = p.Topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.Index, v.LeaderEpoch, latest
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
			if err := p.truncateTo(lg, f.leader, v.LeaderEpoch, p.HW(), false); err != nil {
				return err
			}
			break
		}
		target := r.EndOffset
		if r.LeaderEpoch != latest {
			_, mine := lg.EndOffsetForEpoch(r.LeaderEpoch)
			if mine >= 0 {
				target = min(target, mine)
			} else {
				target = min(target, p.HW())
			}
		}
		if err := p.truncateTo(lg, f.leader, v.LeaderEpoch, target, false); err != nil {
			return err
		}
		if r.LeaderEpoch == latest {
			break // the leader knows our latest epoch and where it ends
		}
	}
	p.Step(Reconciled{LeaderEpoch: v.LeaderEpoch})
	if p.view.Load().Phase == Following {
		p.Logger.Info().Int64("log_end", lg.EndOffset()).Int32("leader", f.leader).Int32("leader_epoch", v.LeaderEpoch).
			Msg("follower log matches the leader's; fetching")
	}
	return nil
}

// fetched is one partition of a Fetch: what it was asked at.
type fetched struct {
	p     *Partition
	lg    *storage.Log
	epoch int32
	rate  int64 // > 0: throttled at this rate (FollowerThrottle)
}

// fetch sends one Fetch for the ready partitions and applies the answer.
func (f *fetcher) fetch(parts []*Partition) error {
	pipelined := f.pipelined && f.dials.Load() == f.dialsAt
	if pipelined {
		if f.flush.queued() {
			// A round of appends already waits behind the running fsync:
			// no more unfsynced data here until it ends, so a stuck disk
			// stops this follower's fetching (and the ISR drops it).
			f.flush.round(f.ctx)
		}
	} else {
		// This leader may count fetch offsets as durable: they must be.
		f.flushUndurable(parts)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.host.NodeID()
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.host.NodeID(), f.host.BrokerEpoch()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 16<<20
	if pipelined && f.flush.busy() {
		// A durable end is about to move: it must not wait, parked on
		// the leader, for the next append to be reported.
		req.MaxWaitMillis = 0
	}
	topicAt := map[string]int{}
	// Sized up front, as the leader sizes its response: a fetch names
	// every partition followed there, and growing these one append at a
	// time was a third of a follower's allocations.
	asked := make([]fetched, 0, len(parts))
	perTopic := map[string]int{}
	for _, p := range parts {
		perTopic[p.Topic]++
	}
	th, _ := f.host.(FollowerThrottle)
	withheld := false
	for _, p := range parts {
		// The view and log are read once: a partition deleted or moved
		// meanwhile is skipped here, or refused at append.
		v, lg := p.view.Load(), p.Log()
		if lg == nil || !v.Fetches(f.leader) {
			continue
		}
		var rate int64
		if th != nil {
			var withhold bool
			if rate, withhold = th.FollowerThrottle(p); withhold {
				withheld = true
				continue
			}
		}
		i, ok := topicAt[p.Topic]
		if !ok {
			nt := kmsg.NewFetchRequestTopic()
			nt.Topic, nt.TopicID = p.Topic, p.TopicID
			nt.Partitions = make([]kmsg.FetchRequestTopicPartition, 0, perTopic[p.Topic])
			req.Topics = append(req.Topics, nt)
			i = len(req.Topics) - 1
			topicAt[p.Topic] = i
		}
		t := &req.Topics[i]
		rp := kmsg.NewFetchRequestTopicPartition()
		durable := durableEnd(p, lg) // before the end: never above it
		rp.Partition, rp.FetchOffset, rp.LogStartOffset = p.Index, lg.EndOffset(), lg.StartOffset()
		PutDurableEnd(&rp, durable)
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, v.LeaderEpoch
		rp.LastFetchedEpoch = -1
		t.Partitions = append(t.Partitions, rp)
		asked = append(asked, fetched{p, lg, v.LeaderEpoch, rate})
	}
	if len(asked) == 0 {
		if withheld {
			lifecycle.Sleep(f.ctx, 100*time.Millisecond) // every partition waits for the quota
		}
		return nil
	}
	// Named every partition fetched; now only the session's changes.
	round := f.sess.prepare(req)
	kresp, err := f.request(req, 10*time.Second)
	if err != nil {
		f.pipelined = false
		f.sess.failed(0)
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		f.pipelined = false
		f.sess.failed(resp.ErrorCode)
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	f.sess.answered(round, resp)
	// The leader that answered counts the durable ends the next fetch
	// reports (or not): that decides whether this answer's appends are
	// fsynced before the next fetch or beside it.
	f.pipelined, f.dialsAt = countsDurableEnds(resp), f.dials.Load()
	find := func(rt *kmsg.FetchResponseTopic, idx int32) *fetched {
		for i := range asked {
			a := &asked[i]
			if a.p.Index == idx && (a.p.Topic == rt.Topic || (rt.Topic == "" && a.p.TopicID == rt.TopicID)) {
				return a
			}
		}
		return nil
	}
	// Append every partition's batches, then fsync those that need it
	// together (a response's wait is its slowest fsync, not their sum),
	// then take each one's high watermark and log start.
	type applied struct {
		a  *fetched
		sp *kmsg.FetchResponseTopicPartition
	}
	done := make([]applied, 0, len(asked))
	var toFlush []*Partition
	gotData := false
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			if a := find(rt, sp.Partition); a != nil {
				if a.rate > 0 {
					th.FollowerFetchedBytes(a.rate, len(sp.RecordBatches))
				}
				if ok, flush := f.apply(a, sp); ok {
					done = append(done, applied{a, sp})
					gotData = gotData || len(sp.RecordBatches) > 0
					if flush {
						toFlush = append(toFlush, a.p)
					}
				} else if sp.ErrorCode == 0 {
					f.sess.restart() // not taken: hear its state again in full
				}
			}
		}
	}
	if f.pipelined {
		// The fsync runs beside the next fetch, which reports the durable
		// end reached by then. The leader's high watermark counts this
		// replica's reported durable end, never more, so it may be taken
		// before the fsync ends.
		f.flush.add(toFlush)
		for _, d := range done {
			f.followLeader(d.a, d.sp)
		}
		if !gotData {
			// Nothing new to fetch: the next fetch is for reporting the
			// durable end, once the running fsync has moved it.
			f.flush.round(f.ctx)
		}
		return nil
	}
	failed := map[*Partition]bool{}
	for i, err := range FlushAll(toFlush) {
		if err != nil {
			failed[toFlush[i]] = true
			f.sess.restart() // its high watermark is not taken: hear it again
		}
	}
	for _, d := range done {
		if !failed[d.a.p] {
			f.followLeader(d.a, d.sp)
		}
	}
	return nil
}

// durableEnd is the end p's fetch reports as durable: the fsynced end,
// or on a relaxed topic (SyncOnAck false, acknowledged once appended) the
// log end.
func durableEnd(p *Partition, lg *storage.Log) int64 {
	if p.SyncOnAck() {
		return lg.DurableOffset()
	}
	return lg.EndOffset()
}

// flushUndurable fsyncs the partitions whose log end is not durable
// (appended by a pipelined fetch, its fsync still running, when the leader
// stopped marking its answers): a leader that does not count durable ends
// takes the fetch offset for one.
func (f *fetcher) flushUndurable(parts []*Partition) {
	var ps []*Partition
	for _, p := range parts {
		if lg := p.Log(); lg != nil && p.SyncOnAck() && lg.DurableOffset() < lg.EndOffset() {
			ps = append(ps, p)
		}
	}
	FlushAll(ps)
}

// flusher fsyncs what a pipelining fetcher appended, beside its next
// fetches: one round (a FlushAll of the partitions appended since the
// last round began) at a time; partitions appended meanwhile queue for
// the next round. Rounds run to the end whatever becomes of the fetcher
// or the partitions' roles: a follower that leads next counts its
// appended tail toward the high watermark only once a round made it
// durable.
//
// Invariants: running is true from the add that starts a round until a
// round ends with nothing queued; every partition added is in queue (once:
// a group flush locks each log) until a round that begins after the add
// takes it; ended is closed, and replaced, when a round ends.
type flusher struct {
	host FetchHost
	mu   sync.Mutex
	// running: a round runs or is about to.
	running bool
	queue   []*Partition
	inQueue map[*Partition]bool
	ended   chan struct{}
}

// add queues ps for the next round and starts one unless one runs.
func (fl *flusher) add(ps []*Partition) {
	if len(ps) == 0 {
		return
	}
	fl.mu.Lock()
	if fl.inQueue == nil {
		fl.inQueue, fl.ended = map[*Partition]bool{}, make(chan struct{})
	}
	for _, p := range ps {
		if !fl.inQueue[p] {
			fl.inQueue[p] = true
			fl.queue = append(fl.queue, p)
		}
	}
	start := !fl.running
	fl.running = true
	fl.mu.Unlock()
	if start && !fl.host.Go(fl.rounds) {
		fl.rounds() // the broker is stopping: flush here
	}
}

// rounds flushes what is queued, round after round, until nothing is.
func (fl *flusher) rounds() {
	fl.mu.Lock()
	for len(fl.queue) > 0 {
		ps := fl.queue
		fl.queue = nil
		clear(fl.inQueue)
		fl.mu.Unlock()
		FlushAll(ps) // a failure is logged, and reported as no progress
		fl.mu.Lock()
		close(fl.ended)
		fl.ended = make(chan struct{})
	}
	fl.running = false
	fl.mu.Unlock()
}

// busy reports whether a round runs (a durable end is about to move).
func (fl *flusher) busy() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.running
}

// queued reports whether partitions wait for the round after the running one.
func (fl *flusher) queued() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.running && len(fl.queue) > 0
}

// round waits until the running round ends (at once when none runs), or
// ctx does.
func (fl *flusher) round(ctx context.Context) {
	fl.mu.Lock()
	if !fl.running {
		fl.mu.Unlock()
		return
	}
	ch := fl.ended
	fl.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// apply appends one partition's fetched batches. It reports whether the
// partition goes on to followLeader and whether it needs an fsync first.
func (f *fetcher) apply(a *fetched, sp *kmsg.FetchResponseTopicPartition) (ok, flush bool) {
	p, lg := a.p, a.lg
	switch sp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		if lg.EndOffset() < sp.LogStartOffset {
			// Behind the leader's retention: start again at its start.
			p.Logger.Warn().Int64("log_end", lg.EndOffset()).Int64("leader_start", sp.LogStartOffset).
				Msg("follower is behind the leader's log start; starting over there")
			if err := lg.TruncateFullyAndStartAt(sp.LogStartOffset); err != nil {
				p.Logger.Error().Err(err).Msg("restarting the follower log")
				return
			}
			p.Step(Truncated{Start: lg.StartOffset(), End: lg.EndOffset()})
		} else {
			p.Step(Diverged{LeaderEpoch: a.epoch})
		}
		return false, false
	case kerr.OffsetMovedToTieredStorage.Code:
		f.movedToTiered(p) // restarts from the copy before its next fetch
		return false, false
	case kerr.KafkaStorageError.Code:
		p.Step(LeaderDamaged{})
		return false, false
	default:
		// Not (or no longer) the leader, stale epochs: the next image
		// moves the partition; nothing to write.
		return false, false
	}
	if len(sp.RecordBatches) > 0 {
		ok, err := p.appendAsFollower(f.leader, a.epoch, sp.RecordBatches)
		if err != nil {
			if !errors.Is(err, storage.ErrClosed) {
				p.Logger.Error().Err(err).Msg("appending fetched batches; finding the divergence point again")
				p.Step(Diverged{LeaderEpoch: a.epoch})
			}
			return false, false
		}
		if !ok {
			return false, false // the partition moved while the fetch was in flight
		}
		return true, p.SyncOnAck()
	}
	return true, false
}

// followLeader takes the leader's high watermark and log start from a
// fetched partition, once what it appended is durable.
func (f *fetcher) followLeader(a *fetched, sp *kmsg.FetchResponseTopicPartition) {
	p, lg := a.p, a.lg
	p.leaderHW.Store(sp.HighWatermark)
	p.Step(LeaderHW{HW: sp.HighWatermark})
	if sp.LogStartOffset > lg.StartOffset() {
		p.followLeaderStart(lg, f.leader, a.epoch, sp.LogStartOffset)
	}
}

// repairDamaged truncates a damaged follower's log to the damage once the
// core asks (it is out of the ISR), so the fetcher copies the rest again.
func (f *fetcher) repairDamaged(p *Partition, lg *storage.Log, v *View) {
	to := p.repairTo.Load()
	if to < 0 {
		return
	}
	if err := p.truncateTo(lg, v.Leader, v.LeaderEpoch, to, true); err != nil {
		p.Logger.Error().Err(err).Int64("damaged_from", to).Msg("truncating a damaged log; retrying")
		return
	}
	p.repairTo.CompareAndSwap(to, -1)
	f.host.Repaired(p)
}
