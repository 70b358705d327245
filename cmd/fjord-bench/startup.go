package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The startup step measures start-up as a user sees it: the time from the
// exec of the broker binary to the first acknowledged produce, with a
// franz-go client at its defaults (acks=all, idempotent). franz-go does
// not ask for topic auto-creation by default and kfake does not
// auto-create, so the user's first steps on a fresh broker are
// CreateTopics, then a produce: that is what the fresh-directory figure
// times. After a restart the topic is there, and the figure times the
// produce alone.
//
// The client is created once the broker's port accepts a connection: the
// bench dials every startupDialEvery from the exec on (for kfake, which
// picks its own port, once the child prints its address), so the figure
// carries at most that much polling delay, not franz-go's dial back-off.

// startupDialEvery is the polling interval for the broker's port.
const startupDialEvery = time.Millisecond

// startupLaunches is how many launches each fresh-directory figure takes
// per round, and how many restarts the 1,000-partition figure takes.
const startupLaunches = 3

// startupPartitions is the partition count of the data directory the
// restart figure starts on, and startupRecords the records of
// latencyRecordSize written to each before the clean stop.
const (
	startupPartitions = 1000
	startupRecords    = 10
)

// startupTopic is the topic of the fresh-directory launches (6 partitions
// by default, -partitions) and of the 1,000-partition directory.
const startupTopic = "fjord-bench-startup"

// startupTimes is one launch: from exec to the port accepting, and to the
// first produce acknowledged.
type startupTimes struct {
	listen, firstAck time.Duration
}

// waitListening dials addr every startupDialEvery until it accepts, the
// process ends (done closes) or ctx ends.
func waitListening(ctx context.Context, addr string, done <-chan struct{}) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return errors.New("the broker exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("port %s never accepted: %v", addr, err)
		case <-time.After(startupDialEvery):
		}
	}
}

// firstAck creates topic with partitions partitions (if partitions > 0)
// and produces one record to it with a default franz-go client, returning
// once the record is acknowledged.
func firstAck(ctx context.Context, addr, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("fjord-bench-startup"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	if partitions > 0 {
		r, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return fmt.Errorf("create topic: %w", err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("first"), Value: []byte("first record")}).FirstErr(); err != nil {
		return fmt.Errorf("first produce: %w", err)
	}
	return nil
}

// fjordStartup launches fjord on dir and addr and times it to the first
// ack; it returns the running process, which the caller stops.
func fjordStartup(ctx context.Context, cfg *config, dir, addr string, createPartitions int) (*fjordProc, startupTimes, error) {
	var t startupTimes
	ctx, cancel := context.WithTimeout(ctx, startupWait)
	defer cancel()
	t0 := time.Now()
	p, err := launchFjord(cfg.fjordBin, dir, addr)
	if err != nil {
		return nil, t, err
	}
	if err := waitListening(ctx, addr, p.done); err != nil {
		return p, t, fmt.Errorf("%w; fjord log: %s", err, p.logTail())
	}
	t.listen = time.Since(t0)
	if err := firstAck(ctx, addr, startupTopic, createPartitions); err != nil {
		return p, t, fmt.Errorf("%w; fjord log: %s", err, p.logTail())
	}
	t.firstAck = time.Since(t0)
	return p, t, nil
}

// fjordFresh launches fjord on a fresh directory, times it, and removes
// it.
func fjordFresh(ctx context.Context, cfg *config) (startupTimes, error) {
	ports, err := freePorts(1)
	if err != nil {
		return startupTimes{}, err
	}
	dir, err := os.MkdirTemp("", "fjord-bench-")
	if err != nil {
		return startupTimes{}, err
	}
	p, t, err := fjordStartup(ctx, cfg, dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), cfg.partitions)
	if p != nil {
		p.stop()
	} else {
		os.RemoveAll(dir)
	}
	return t, err
}

// kfakeFresh starts a kfake child and times it to the first ack.
func kfakeFresh(ctx context.Context, cfg *config) (startupTimes, error) {
	var t startupTimes
	ctx, cancel := context.WithTimeout(ctx, startupWait)
	defer cancel()
	t0 := time.Now()
	p, err := startKfake(ctx) // returns once the child printed its address: it listens
	if err != nil {
		return t, err
	}
	defer p.stop()
	t.listen = time.Since(t0)
	if err := firstAck(ctx, p.addr, startupTopic, cfg.partitions); err != nil {
		return t, err
	}
	t.firstAck = time.Since(t0)
	return t, nil
}

// fjordRestart fills a fresh directory with startupPartitions partitions
// of startupRecords records each, stops the node cleanly, and times
// startupLaunches restarts (each also stopped cleanly) to the first ack on
// the existing topic.
func fjordRestart(ctx context.Context, cfg *config) ([]startupTimes, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	dir, err := os.MkdirTemp("", "fjord-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p, err := startFjordIn(ctx, cfg.fjordBin, dir, addr, startupWait)
	if err != nil {
		return nil, err
	}
	if err := fillPartitions(ctx, addr); err != nil {
		p.halt(syscall.SIGKILL, time.Second)
		return nil, err
	}
	p.halt(syscall.SIGTERM, time.Minute)
	var out []startupTimes
	for range startupLaunches {
		p, t, err := fjordStartup(ctx, cfg, dir, addr, 0)
		if p != nil {
			p.halt(syscall.SIGTERM, time.Minute)
		}
		if err != nil {
			return out, err
		}
		out = append(out, t)
	}
	return out, nil
}

// fillPartitions creates startupTopic with startupPartitions partitions
// and writes startupRecords records of latencyRecordSize to each.
func fillPartitions(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("fjord-bench-startup"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(startupPartitions*startupRecords+1))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(time.Minute.Milliseconds()))
	r, err := adm.CreateTopic(ctx, startupPartitions, 1, nil, startupTopic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create %d partitions: %w", startupPartitions, err)
	}
	value := make([]byte, latencyRecordSize)
	recs := make([]*kgo.Record, 0, startupPartitions*startupRecords)
	for range startupRecords {
		for i := range startupPartitions {
			recs = append(recs, &kgo.Record{Topic: startupTopic, Partition: int32(i), Value: value})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("fill %d partitions: %w", startupPartitions, err)
	}
	return nil
}

// allStartup is the startup step of -all: fresh-directory launches of
// fjord and kfake (the order alternating by round), then fjord restarts
// on a directory of 1,000 partitions.
func allStartup(ctx context.Context, cfg *config, round int, figs *figureSet, fail func(string, ...any)) {
	put := func(target string, t startupTimes) {
		figs.put(target, "startup_listen_ms", ms(t.listen))
		figs.put(target, "startup_fresh_ms", ms(t.firstAck))
		logf("[startup] %s fresh: port accepts %.1f ms, first ack %.1f ms after exec", target, ms(t.listen), ms(t.firstAck))
	}
	order := []string{"fjord", "kfake"}
	if round%2 == 1 {
		order = []string{"kfake", "fjord"}
	}
	for range startupLaunches {
		for _, target := range order {
			if ctx.Err() != nil {
				return
			}
			var t startupTimes
			var err error
			if target == "kfake" {
				t, err = kfakeFresh(ctx, cfg)
			} else {
				t, err = fjordFresh(ctx, cfg)
			}
			if err != nil {
				fail("[startup] %s fresh: %v", target, err)
				continue
			}
			put(target, t)
		}
	}
	ts, err := fjordRestart(ctx, cfg)
	for _, t := range ts {
		figs.fjord("startup_1000_ms", ms(t.firstAck))
		logf("[startup] fjord on %d partitions: port accepts %.1f ms, first ack %.1f ms after exec", startupPartitions, ms(t.listen), ms(t.firstAck))
	}
	if err != nil {
		fail("[startup] fjord restart on %d partitions: %v", startupPartitions, err)
	}
}
