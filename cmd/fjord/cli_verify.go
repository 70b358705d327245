package main

// `fjord verify`: a workload a user runs against their own cluster, Fjord
// or Kafka, to check what it promises an acks=all idempotent producer. It
// produces keyed records (key k<seq%keys>, value seq) for --duration while
// a consumer group member processes them, records every outcome, then
// reads everything back and judges the history with the fault tests' own
// checker (package history): acknowledged records lost, duplicated,
// reordered, misplaced, and the group's commits against what it processed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordlog/fjord/cmd/fjord/history"
)

// verifyRun is one run's mutable state; mu guards every field below it,
// written by the produce callbacks and the member's poll loop, read by
// the progress line.
type verifyRun struct {
	mu       sync.Mutex
	attempts []history.Attempt // attempts[i].Seq == i
	acked    int
	failed   int
	consumed []history.Record
}

func verifyCmd(args []string, out, errOut io.Writer, tty bool) int {
	c := newCLI("fjord verify", out, errOut)
	topic := c.fs.String("topic", "", "topic to create and write (default fjord-verify-<time>); it must not exist")
	partitions := c.fs.Int("partitions", 6, "partitions of the topic")
	rf := c.fs.Int("replication-factor", -1, "replication factor (-1: the broker's default)")
	duration := c.fs.Duration("duration", 30*time.Second, "how long to produce")
	rate := c.fs.Int("rate", 500, "records per second to attempt")
	keys := c.fs.Int("keys", 64, "distinct keys")
	group := c.fs.String("group", "", "consumer group (default fjord-verify-<time>)")
	settle := c.fs.Duration("settle", 60*time.Second, "after producing: how long to wait for outcomes, and again to read everything back")
	keep := c.fs.Bool("keep", false, "keep the topic and group afterwards")
	histPath := c.fs.String("history", "", "write the history (every attempt and its outcome, every record read back) to this JSON file")
	*c.timeout = 0 // the run's bounds are --duration and --settle
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if *duration <= 0 || *rate <= 0 || *keys <= 0 || *partitions <= 0 {
		return c.usageErr("--duration, --rate, --keys and --partitions must be positive")
	}
	stamp := time.Now().UTC().Format("20060102-150405.000")
	if *topic == "" {
		*topic = "fjord-verify-" + stamp
	}
	if *group == "" {
		*group = "fjord-verify-" + stamp
	}
	adm, done, err := c.admin()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), *settle)
	resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*rf), nil, *topic)
	cancel()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return c.fail(fmt.Errorf("create topic %s (verify needs a new topic): %w %s", *topic, err, resp.ErrMessage))
	}
	if !*keep {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			adm.DeleteGroups(ctx, *group)
			adm.DeleteTopics(ctx, *topic)
		}()
	}

	run := &verifyRun{}
	// No delivery timeout: franz-go then never fails a batch that may
	// have been written, so every acknowledgement stands for a write (see
	// faultDeliveryTimeout in compat-tests for the reuse of sequence
	// numbers a delivery timeout allows).
	prod, err := c.client(
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		return c.fail(err)
	}
	defer prod.Close()
	member, err := c.client(
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		return c.fail(err)
	}
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() {
		defer close(mdone)
		for {
			fs := member.PollRecords(mctx, 1000)
			if mctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			recs := fs.Records()
			run.mu.Lock()
			for _, r := range recs {
				run.consumed = append(run.consumed, history.RecordOf(r))
			}
			run.mu.Unlock()
			member.MarkCommitRecords(recs...)
		}
	}()

	start := time.Now()
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if !tty {
			return
		}
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopProgress:
				fmt.Fprint(out, "\r\033[K")
				return
			case <-tk.C:
			}
			el := time.Since(start)
			frac := min(1, float64(el)/float64(*duration))
			bar := make([]byte, 30)
			for i := range bar {
				bar[i] = ' '
				if float64(i) < frac*30 {
					bar[i] = '='
				}
			}
			run.mu.Lock()
			fmt.Fprintf(out, "\r\033[K[%s] %3.0f%% %s  sent %d  acked %d  failed %d  consumed %d",
				bar, frac*100, el.Truncate(time.Second), len(run.attempts), run.acked, run.failed, len(run.consumed))
			run.mu.Unlock()
		}
	}()

	const tick = 10 * time.Millisecond
	perTick := max(1, *rate/int(time.Second/tick))
	tk := time.NewTicker(tick)
	for time.Since(start) < *duration {
		<-tk.C
		for range perTick {
			run.mu.Lock()
			seq := int64(len(run.attempts))
			a := history.Attempt{Seq: seq, Key: "k" + strconv.Itoa(int(seq%int64(*keys))), Sent: time.Now(), Partition: -1, Offset: -1}
			run.attempts = append(run.attempts, a)
			run.mu.Unlock()
			// Produce blocks while the client buffers its maximum (an
			// outage): the rate drops, nothing is failed for it.
			prod.Produce(context.Background(), &kgo.Record{Key: []byte(a.Key), Value: []byte(strconv.FormatInt(seq, 10))}, func(r *kgo.Record, err error) {
				run.mu.Lock()
				defer run.mu.Unlock()
				h := &run.attempts[seq]
				h.Done, h.Outcome = time.Now(), history.ClassifyProduceErr(err)
				if err != nil {
					h.Err = err.Error()
					run.failed++
				} else {
					h.Partition, h.Offset = r.Partition, r.Offset
					run.acked++
				}
			})
		}
	}
	tk.Stop()
	fctx, fcancel := context.WithTimeout(context.Background(), *settle)
	flushErr := prod.Flush(fctx)
	fcancel()
	prod.Close() // records still without an outcome stay pending: indefinite

	run.mu.Lock()
	attempts := slices.Clone(run.attempts)
	run.mu.Unlock()

	// The end of every partition, once the cluster answers for all.
	ends, err := verifyEnds(adm, *topic, *settle)
	if err != nil {
		close(stopProgress)
		<-progressDone
		mcancel()
		<-mdone
		member.Close()
		return c.fail(fmt.Errorf("cannot verify: %w", err))
	}
	// Let the member catch up to the ends, then commit and leave.
	deadline := time.Now().Add(*settle)
	for time.Now().Before(deadline) {
		run.mu.Lock()
		next := map[int32]int64{}
		for _, r := range run.consumed {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		}
		run.mu.Unlock()
		caught := true
		for p, e := range ends {
			caught = caught && next[p] >= e
		}
		if caught {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stopProgress)
	<-progressDone
	mcancel()
	<-mdone
	cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Second)
	commitErr := member.CommitMarkedOffsets(cctx)
	ccancel()
	member.Close()
	run.mu.Lock()
	consumed := slices.Clone(run.consumed)
	run.mu.Unlock()

	committed := map[int32]int64{}
	octx, ocancel := context.WithTimeout(context.Background(), 15*time.Second)
	offs, err := adm.FetchOffsets(octx, *group)
	ocancel()
	if err != nil {
		return c.fail(fmt.Errorf("cannot verify: committed offsets of %s: %w", *group, err))
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == *topic && o.Err == nil && o.At >= 0 {
			committed[o.Partition] = o.At
		}
	})

	// A new member of the group resumes from its commits; a fresh
	// consumer reads every partition from the start.
	resumer, err := c.client(kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return c.fail(err)
	}
	resumeEnds := map[int32]int64{}
	for p, e := range ends {
		if committed[p] < e {
			resumeEnds[p] = e
		}
	}
	resumed, rerr := verifyRead(resumer, resumeEnds, *settle)
	resumer.Close()
	from := map[int32]kgo.Offset{}
	for p := range ends {
		from[p] = kgo.NewOffset().At(0)
	}
	reader, err := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: from}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return c.fail(err)
	}
	final, ferr := verifyRead(reader, ends, *settle)
	reader.Close()
	if ferr != nil {
		return c.fail(fmt.Errorf("cannot verify: reading the topic back: %w", ferr))
	}
	if rerr != nil {
		return c.fail(fmt.Errorf("cannot verify: resuming the group: %w", rerr))
	}

	if *histPath != "" {
		if err := writeHistory(*histPath, attempts, final); err != nil {
			return c.fail(err)
		}
	}
	rep := history.Check(attempts, final)
	grp := history.CheckGroup(attempts, final, consumed, committed, resumed, ends)
	ok := rep.OK() && grp.OK() && rep.Acked > 0
	var notes []string
	if flushErr != nil {
		notes = append(notes, fmt.Sprintf("outcomes still pending after --settle %v: %v", *settle, flushErr))
	}
	if commitErr != nil {
		notes = append(notes, fmt.Sprintf("the member's last commit failed: %v", commitErr))
	}
	if rep.Acked == 0 {
		notes = append(notes, "nothing was acknowledged: nothing verified")
	}
	problems := append(slices.Clone(rep.Problems), grp.Problems...)
	if *c.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{
			"ok": ok, "topic": *topic, "group": *group, "duration_s": duration.Seconds(),
			"attempted": rep.Attempted, "acked": rep.Acked, "failed_definite": rep.Definite,
			"indefinite_landed": rep.IndefLanded, "indefinite_not_landed": rep.IndefNotLanded,
			"read": rep.Read, "lost": rep.Lost, "duplicated": rep.Dup, "reordered": rep.Reordered,
			"unexpected": rep.Unexpected, "misplaced": rep.Misplaced,
			"group_consumed": grp.Consumed, "group_resumed": grp.Resumed, "group_phantom": grp.Phantom,
			"group_commit_ahead": grp.CommitAhead, "group_skipped": grp.Skipped, "group_gap": grp.Gap,
			"problems": problems, "notes": notes,
		})
	} else {
		verdict := "PASS"
		if !ok {
			verdict = "FAIL"
		}
		fmt.Fprintf(out, "fjord verify: %s, topic %s, group %s, %v\n", verdict, *topic, *group, duration.String())
		for _, row := range []struct {
			name string
			n    int
		}{
			{"attempted", rep.Attempted}, {"acknowledged", rep.Acked}, {"failed (not written)", rep.Definite},
			{"failed, outcome unknown: written", rep.IndefLanded}, {"failed, outcome unknown: not written", rep.IndefNotLanded},
			{"read back", rep.Read}, {"LOST (acknowledged, not read)", rep.Lost}, {"duplicated", rep.Dup},
			{"reordered", rep.Reordered}, {"unexpected", rep.Unexpected}, {"misplaced", rep.Misplaced},
			{"group: processed", grp.Consumed}, {"group: resumed", grp.Resumed}, {"group: phantom reads", grp.Phantom},
			{"group: committed ahead", grp.CommitAhead}, {"group: skipped on resume", grp.Skipped}, {"group: never processed", grp.Gap},
		} {
			fmt.Fprintf(out, "  %-38s %8d\n", row.name, row.n)
		}
		for _, p := range problems {
			fmt.Fprintln(out, "  "+p)
		}
		for _, n := range notes {
			fmt.Fprintln(out, "  note: "+n)
		}
	}
	if !ok {
		return exitFail
	}
	return exitOK
}

// verifyEnds lists the topic's end offsets, retrying (every 500 ms, up to
// bound) while a partition has no leader.
func verifyEnds(adm *kadm.Client, topic string, bound time.Duration) (map[int32]int64, error) {
	deadline := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = l.Error()
		}
		if err == nil {
			ends := map[int32]int64{}
			l.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
			return ends, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// verifyRead polls cl until each partition p has returned its record at
// ends[p]-1, or bound passes.
func verifyRead(cl *kgo.Client, ends map[int32]int64, bound time.Duration) ([]history.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var out []history.Record
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("after %v: read up to %v, want %v", bound, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, history.RecordOf(r))
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
	}
	return out, nil
}

// verifyHistory is the --history file: what the checker judged.
type verifyHistory struct {
	Attempts []history.Attempt `json:"attempts"`
	Reads    []history.Record  `json:"reads"` // the topic read back, in the order read
}

func writeHistory(path string, attempts []history.Attempt, reads []history.Record) error {
	data, err := json.Marshal(verifyHistory{attempts, reads})
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
