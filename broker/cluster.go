package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker's life in the cluster:
//
//	register ──► heartbeat (fenced) ──► caught up: unfenced ──► serving
//	   ▲                                       │
//	   └──── STALE_BROKER_EPOCH / not registered (e.g. fenced by silence)
//
// Meanwhile publishLoop applies every new metadata image to the local
// replicas: it is the one writer of b.mu.topics.

// lifecycle registers this broker and heartbeats until the broker stops;
// ready closes the first time the controller reports it unfenced.
func (b *Broker) lifecycle() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-b.stop; cancel() }()
	var incarnation [16]byte
	rand.Read(incarnation[:])
	interval := time.Duration(b.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
	// Until unfenced, heartbeat faster: unfencing is what start-up waits on.
	fast := min(interval, 100*time.Millisecond)
	readyOnce := false
	defer b.finishShutdown()
	for ctx.Err() == nil && !b.shuttingDown.Load() {
		epoch, err := b.register(ctx, incarnation)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn().Err(err).Msg("broker registration failed; retrying")
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		b.brokerEpoch.Store(epoch)
		b.log.Info().Int64("broker_epoch", epoch).Msg("registered with the controller")
		for ctx.Err() == nil {
			shutdown := b.shuttingDown.Load()
			resp, err := b.heartbeat(ctx, epoch, shutdown)
			if err != nil {
				if ctx.Err() == nil {
					b.log.Warn().Err(err).Msg("heartbeat failed")
				}
				b.sleepHeartbeat(ctx, fast)
				continue
			}
			if resp.ErrorCode == kerr.StaleBrokerEpoch.Code || resp.ErrorCode == kerr.BrokerIDNotRegistered.Code {
				if shutdown {
					return // nothing left to fence
				}
				b.log.Warn().Int16("code", resp.ErrorCode).Msg("controller no longer knows this registration; registering again")
				break
			}
			if shutdown && resp.ErrorCode == 0 && resp.ShouldShutdown {
				// Stop once the local replicas have stepped down too.
				b.waitImage(ctx, func(img *controller.Image) bool {
					bs, ok := img.Broker(b.cfg.NodeID)
					return !ok || bs.Fenced || bs.Epoch != epoch
				})
				return
			}
			if resp.ErrorCode != 0 || shutdown {
				b.sleepHeartbeat(ctx, fast)
				continue
			}
			b.fenced.Store(resp.IsFenced)
			if !resp.IsFenced && !readyOnce {
				// Serve once the local replicas reflect the unfencing (and
				// the leaderships it brought back), not merely once the
				// controller has decided it.
				if !b.waitImage(ctx, func(img *controller.Image) bool {
					bs, ok := img.Broker(b.cfg.NodeID)
					return ok && !bs.Fenced && bs.Epoch == epoch
				}) {
					continue
				}
				readyOnce = true
				b.log.Info().Uint64("metadata_version", b.meta.Image().Version()).Msg("unfenced: serving clients")
				close(b.ready)
			}
			if resp.IsFenced {
				b.sleepHeartbeat(ctx, fast)
			} else {
				b.sleepHeartbeat(ctx, interval)
			}
		}
	}
}

// sleepHeartbeat waits d between heartbeats, less if a controlled
// shutdown begins meanwhile.
func (b *Broker) sleepHeartbeat(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-b.shutdownWake:
		if d > 100*time.Millisecond {
			sleepCtx(ctx, 20*time.Millisecond) // shutdown heartbeats: a short pause
		}
	}
}

// controlledShutdown is Kafka's controlled shutdown, run first by Close:
// a heartbeat asking to shut down makes the controller fence this broker
// and move its leaderships to other ISR members at once, so clients
// re-route now instead of after broker.session.timeout.ms, and the next
// start registers without waiting out the old session. Bounded by the
// session timeout and 5 s (docker stop allows 10 s before SIGKILL): a
// broker that cannot reach a controller (the last nodes of a cluster
// stopping together) stops anyway, as if it had crashed.
func (b *Broker) controlledShutdown() {
	if !b.cfg.HasRole("broker") || b.brokerEpoch.Load() <= 0 {
		return
	}
	start := time.Now()
	b.shuttingDown.Store(true)
	close(b.shutdownWake)
	limit := min(time.Duration(b.cfg.BrokerSessionTimeoutMs)*time.Millisecond, 5*time.Second)
	select {
	case <-b.shutdownDone:
		b.log.Info().Dur("took", time.Since(start)).Msg("controlled shutdown: fenced; leaderships moved to other replicas")
	case <-time.After(limit):
		b.log.Warn().Dur("waited", limit).Msg("controlled shutdown: the controller did not confirm; stopping anyway")
	}
}

// finishShutdown tells a waiting controlledShutdown that lifecycle is done.
func (b *Broker) finishShutdown() {
	if b.shuttingDown.Load() {
		close(b.shutdownDone)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (b *Broker) register(ctx context.Context, incarnation [16]byte) (int64, error) {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = b.cfg.NodeID
	req.ClusterID = b.clusterID
	req.IncarnationID = incarnation
	for _, a := range b.advertised {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = a.Name, a.Host, uint16(a.Port)
		req.Listeners = append(req.Listeners, l)
	}
	if b.cfg.BrokerRack != "" {
		r := b.cfg.BrokerRack
		req.Rack = &r
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kresp, err := b.ctl.call(rctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.BrokerRegistrationResponse)
	if resp.ErrorCode != 0 {
		return 0, fmt.Errorf("broker registration: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.BrokerEpoch, nil
}

func (b *Broker) heartbeat(ctx context.Context, epoch int64, wantShutDown bool) (*kmsg.BrokerHeartbeatResponse, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = b.cfg.NodeID, epoch
	req.WantShutdown = wantShutDown
	req.CurrentMetadataOffset = int64(b.appliedVersion.Load())
	rctx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.BrokerSessionTimeoutMs)*time.Millisecond)
	defer cancel()
	kresp, err := b.ctl.call(rctx, req)
	if err != nil {
		return nil, err
	}
	return kresp.(*kmsg.BrokerHeartbeatResponse), nil
}

// publishLoop applies each new image to the local replicas until stop.
func (b *Broker) publishLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-b.stop; cancel() }()
	var last uint64
	for {
		// Wake at least every second to adopt replicas whose slow open has
		// finished since (openNew kicks).
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		b.meta.WaitFor(wctx, func(img *controller.Image) bool { return img.Version() > last })
		wcancel()
		if ctx.Err() != nil {
			return
		}
		kicked := false
		select {
		case <-b.kick:
			kicked = true
		default:
		}
		img := b.meta.Image()
		if img.Version() == last && !kicked {
			continue
		}
		b.applyImage(img)
		last = img.Version()
		b.appliedVersion.Store(last)
	}
}

// applyImage makes the local replicas match img: open the partitions this
// broker now holds, delete the ones it no longer does (topic deleted, or
// deleted and re-created under the same name), and set each partition's
// leadership. REQUIRES: called only from publishLoop (or before Start).
func (b *Broker) applyImage(img *controller.Image) {
	b.mu.RLock()
	cur := b.mu.topics
	b.mu.RUnlock()
	next := make(map[string]*topic, len(cur))
	var gone []*topic
	me := b.cfg.NodeID
	opened := b.openNew(img, cur)
	follow := map[int32][]*partition{}
	for _, it := range img.Topics() {
		old := cur[it.Name]
		if old != nil && old.meta.ID != it.ID {
			gone = append(gone, old)
			old = nil
		}
		var parts []*partition
		for i, ip := range it.Partitions {
			var p *partition
			if old != nil && i < len(old.parts) {
				p = old.parts[i]
			}
			replica := slices.Contains(ip.Replicas, me)
			switch {
			case replica && p == nil:
				p = opened[replicaKey{it.ID, int32(i)}]
			case !replica && p != nil:
				b.dropPartition(p)
				p = nil
			}
			if p != nil && p.setState(ip) && !p.leads() {
				p.needTruncate.Store(true)
			}
			if p != nil && !p.leads() && ip.Leader >= 0 {
				follow[ip.Leader] = append(follow[ip.Leader], p)
			}
			parts = append(parts, p)
		}
		if old != nil && len(old.parts) > len(it.Partitions) {
			for _, p := range old.parts[len(it.Partitions):] {
				if p != nil {
					b.dropPartition(p)
				}
			}
		}
		next[it.Name] = &topic{name: it.Name, meta: &topicMeta{ID: it.ID, Configs: it.Configs, Internal: it.Name == offsetsTopic}, parts: parts}
	}
	for name, t := range cur {
		if _, ok := next[name]; !ok {
			gone = append(gone, t)
		}
	}
	byID := make(map[[16]byte]*topic, len(next))
	for _, t := range next {
		byID[t.meta.ID] = t
	}
	b.mu.Lock()
	b.mu.topics, b.mu.byID, b.mu.image = next, byID, img
	close(b.mu.changed)
	b.mu.changed = make(chan struct{})
	b.mu.Unlock()
	for _, t := range gone {
		for _, p := range t.parts {
			if p != nil {
				b.dropPartition(p)
			}
		}
		b.log.Info().Str("topic", t.name).Msg("deleted topic's local replicas")
	}
	b.fetch.update(follow)
	b.offsets.follow(next[offsetsTopic])
}

type replicaKey struct {
	topic     [16]byte
	partition int32
}

// openTask is one replica being opened. It may outlive the image that
// asked for it: a replica whose open overruns the deadline is left to
// finish in the background and adopted by a later applyImage.
type openTask struct {
	t        *controller.Topic
	index    int32
	done     chan struct{}
	p        *partition // set before done closes
	err      error
	reported bool // the overrun was logged and the leadership resigned
}

// openSlots bounds the replicas opened at once.
const openSlots = 16

// openNew opens, in parallel (creating 1,000 partitions is 1,000 directory
// creations and log opens), the replicas img places here that cur lacks.
// It waits at most fjord.partition.open.timeout.ms: a replica still
// opening then (log recovery hangs, a disk stalls) stays offline here, and
// if img makes this broker its leader, the broker resigns the leadership
// so the controller moves it to another in-sync replica — the forced exit
// from becoming leader. The metadata pipeline never waits on it again.
func (b *Broker) openNew(img *controller.Image, cur map[string]*topic) map[replicaKey]*partition {
	need := map[replicaKey]*openTask{}
	for _, it := range img.Topics() {
		old := cur[it.Name]
		for i, ip := range it.Partitions {
			if !slices.Contains(ip.Replicas, b.cfg.NodeID) {
				continue
			}
			if old != nil && old.meta.ID == it.ID && i < len(old.parts) && old.parts[i] != nil {
				continue
			}
			need[replicaKey{it.ID, int32(i)}] = &openTask{t: it, index: int32(i)}
		}
	}
	b.openMu.Lock()
	for k, task := range b.opening {
		if _, ok := need[k]; !ok && isDone(task) {
			// No longer wanted (topic deleted meanwhile): close it.
			delete(b.opening, k)
			if task.p != nil {
				task.p.log.Close()
			}
		}
	}
	for k, fresh := range need {
		if task := b.opening[k]; task != nil {
			need[k] = task
			continue
		}
		fresh.done = make(chan struct{})
		b.opening[k] = fresh
		go func() {
			b.openSem <- struct{}{}
			fresh.p, fresh.err = b.openPartition(fresh.t, fresh.index)
			<-b.openSem
			close(fresh.done)
			select {
			case b.kick <- struct{}{}:
			default:
			}
		}()
	}
	b.openMu.Unlock()

	out := make(map[replicaKey]*partition, len(need))
	deadline := time.NewTimer(time.Duration(b.cfg.PartitionOpenTimeoutMs) * time.Millisecond)
	defer deadline.Stop()
	expired := false
	for k, task := range need {
		if !expired {
			select {
			case <-task.done:
			case <-deadline.C:
				expired = true
			}
		}
		if !isDone(task) {
			if !task.reported {
				task.reported = true
				b.log.Error().Str("topic", task.t.Name).Int32("partition", task.index).
					Int64("timeout_ms", b.cfg.PartitionOpenTimeoutMs).
					Msg("replica did not open in time; it stays offline here until it does")
				b.resignIfLeader(img, task.t.ID, task.index, "its replica cannot open")
			}
			continue
		}
		b.openMu.Lock()
		delete(b.opening, k)
		b.openMu.Unlock()
		if task.err != nil {
			b.log.Error().Err(task.err).Str("topic", task.t.Name).Int32("partition", task.index).Msg("opening replica; it stays offline here")
			b.resignIfLeader(img, task.t.ID, task.index, "its replica cannot open")
			continue
		}
		out[k] = task.p
	}
	return out
}

func isDone(t *openTask) bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// resignIfLeader asks the controller, in the background, to move the
// leadership of a partition this broker leads in img but cannot serve.
func (b *Broker) resignIfLeader(img *controller.Image, topicID [16]byte, index int32, why string) {
	ip, ok := img.Partition(topicID, index)
	if !ok || ip.Leader != b.cfg.NodeID {
		return
	}
	isr := slices.DeleteFunc(slices.Clone(ip.ISR), func(id int32) bool { return id == b.cfg.NodeID })
	b.alterPartition(img, topicID, index, ip.LeaderEpoch, ip.PartitionEpoch, isr, 30*time.Second, func(code int16, err error) {
		if err != nil {
			b.log.Error().Err(err).Int32("partition", index).Msg("resigning leadership")
			return
		}
		b.log.Warn().Int32("partition", index).Int16("code", code).Str("reason", why).Msg("resigned the leadership of a replica")
	})
}

// openPartition opens (creating if needed) this broker's replica of
// partition p of t. A directory whose partition.metadata names another
// topic id belongs to an earlier topic of the same name, since deleted: it
// is removed first. An unreadable partition.metadata (a crash while writing
// it; it is not fsynced) is rewritten, never taken as a reason to delete.
func (b *Broker) openPartition(t *controller.Topic, p int32) (*partition, error) {
	if h := b.openHook.Load(); h != nil {
		(*h)(t.Name, p)
	}
	dir := b.partitionDir(t.Name, p)
	pmPath := filepath.Join(dir, "partition.metadata")
	want := encodeUUID(t.ID)
	data, err := os.ReadFile(pmPath)
	id, parsed := parseTopicID(data)
	if err == nil && parsed && id != want {
		b.log.Warn().Str("dir", dir).Str("found_topic_id", id).Str("topic_id", want).
			Msg("replica directory belongs to a deleted topic of the same name; removing it")
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		parsed = false
	}
	if err != nil || !parsed {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// Written without fsync: the metadata log, not this file, is the
		// record of which topic owns the directory.
		pm := fmt.Sprintf("version: 0\ntopic_id: %s\n", want)
		if err := os.WriteFile(pmPath+".tmp", []byte(pm), 0o644); err != nil {
			return nil, fmt.Errorf("%s-%d: %w", t.Name, p, err)
		}
		if err := os.Rename(pmPath+".tmp", pmPath); err != nil {
			return nil, fmt.Errorf("%s-%d: %w", t.Name, p, err)
		}
	}
	s := settingsFor(&b.cfg, t.Configs)
	plog := b.log.With().Str("topic", t.Name).Int32("partition", p).Logger()
	lg, err := storage.Open(dir, s.storage, plog)
	if err != nil {
		return nil, fmt.Errorf("%s-%d: %w", t.Name, p, err)
	}
	part := newPartition(b.cfg.NodeID, t.Name, p, t.ID, lg, s, plog)
	part.flushTime = b.metrics.flushTime
	return part, nil
}

// parseTopicID reads the topic_id line of a partition.metadata file.
func parseTopicID(data []byte) (string, bool) {
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "topic_id: "); ok && len(v) == 22 {
			return v, true
		}
	}
	return "", false
}

// dropPartition closes a replica this broker no longer holds and deletes
// its files.
func (b *Broker) dropPartition(p *partition) {
	p.setOffline()
	p.wakeAll() // waiting fetches look again and find it gone
	if err := p.log.Delete(); err != nil && !os.IsNotExist(err) {
		b.log.Warn().Err(err).Str("topic", p.topic).Int32("partition", p.index).Msg("removing a dropped replica's files")
	}
}

// image returns the metadata image the local replicas were last matched to.
func (b *Broker) image() *controller.Image {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.image
}

// endpoint returns broker id's address on the named listener.
func endpoint(img *controller.Image, id int32, listener string) (controller.Endpoint, bool) {
	bs, ok := img.Broker(id)
	if !ok {
		return controller.Endpoint{}, false
	}
	for _, e := range bs.Endpoints {
		if e.Name == listener {
			return e, true
		}
	}
	return controller.Endpoint{}, false
}

// waitImage waits until the local replicas reflect an image satisfying
// pred, so a client that created a topic here sees it here at once.
func (b *Broker) waitImage(ctx context.Context, pred func(*controller.Image) bool) bool {
	for {
		b.mu.RLock()
		img, changed := b.mu.image, b.mu.changed
		b.mu.RUnlock()
		if img != nil && pred(img) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}
