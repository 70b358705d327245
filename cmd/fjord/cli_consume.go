package main

// `fjord consume`: kcat-like, a line per record, from chosen partitions and
// offsets, or (-G) as a member of a consumer group that commits what it
// printed and resumes from its commits on the next run.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeCmd prints records, a line per record by default ("%v\n"), or per
// a kcat -f format: %t topic, %p partition, %o offset, %k key, %v value,
// %T timestamp (ms), %h headers, %K/%S key and value sizes, \n \t \\.
// SIGINT or SIGTERM stops it cleanly (exit 0; with -G, after committing).
func consumeCmd(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord consume", out, errOut)
	topic := c.fs.String("t", "", "topic")
	part := c.fs.Int("p", -1, "partition (-1: all)")
	offset := c.fs.String("o", "beginning", "where to start: beginning, end, an offset N, or -N (N before the end); with -G, only where the group has no commit")
	count := c.fs.Int("c", 0, "stop after this many records (0: no limit)")
	exitAtEnd := c.fs.Bool("e", false, "exit once every partition's end (at start-up) is reached; with -G, every partition assigned to this member")
	format := c.fs.String("f", "", "output format (kcat's -f); default: the value and a newline")
	group := c.fs.String("G", "", "consume as a member of this consumer group: partitions are shared with its other members, and what was printed is committed")
	*c.timeout = 0
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if *topic == "" {
		return c.usageErr("-t topic is required")
	}
	if *group != "" && *part >= 0 {
		return c.usageErr("-p and -G exclude each other: the group assigns the partitions")
	}
	reset, err := parseStart(*offset)
	if err != nil {
		return c.usageErr("%v", err)
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx := sigCtx
	if *c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *c.timeout)
		defer cancel()
	}
	adm, done, err := c.admin()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	first, ends, err := startOffsets(ctx, adm, *topic, int32(*part), *offset)
	if err != nil {
		return c.fail(err)
	}
	sink := newRecordSink(out, *format, *c.json, *count)
	defer sink.w.Flush()
	if *group != "" {
		return c.consumeGroup(ctx, sigCtx, *group, *topic, reset, first, ends, *exitAtEnd, sink)
	}

	from := map[int32]kgo.Offset{}
	remaining := map[int32]int64{} // with -e: the end offset still to reach
	for p, o := range first {
		from[p] = kgo.NewOffset().At(o)
		if o < ends[p] {
			remaining[p] = ends[p]
		}
	}
	if *exitAtEnd && len(remaining) == 0 {
		return exitOK
	}
	cl, err := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: from}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if sigCtx.Err() != nil {
			return exitOK
		}
		if err := ctx.Err(); err != nil {
			return c.fail(err)
		}
		if err := fetchErr(fs); err != nil {
			return c.fail(err)
		}
		for _, r := range fs.Records() {
			full := sink.write(r)
			if e, ok := remaining[r.Partition]; ok && r.Offset+1 >= e {
				delete(remaining, r.Partition)
			}
			if full {
				return exitOK
			}
		}
		sink.w.Flush()
		if *exitAtEnd && len(remaining) == 0 {
			return exitOK
		}
	}
}

// parseStart checks -o and returns it as the offset a group member starts
// from where its group has no commit.
func parseStart(o string) (kgo.Offset, error) {
	switch o {
	case "beginning":
		return kgo.NewOffset().AtStart(), nil
	case "end":
		return kgo.NewOffset().AtEnd(), nil
	}
	n, err := strconv.ParseInt(o, 10, 64)
	if err != nil {
		return kgo.Offset{}, fmt.Errorf("-o %q: want beginning, end, N or -N", o)
	}
	if n < 0 {
		return kgo.NewOffset().AtEnd().Relative(n), nil
	}
	return kgo.NewOffset().At(n), nil
}

// startOffsets lists the topic's partitions (only part, unless it is -1)
// with where -o starts each of them and its end offset now.
func startOffsets(ctx context.Context, adm *kadm.Client, topic string, part int32, offset string) (first, ends map[int32]int64, err error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	first, ends = map[int32]int64{}, map[int32]int64{}
	starts.Each(func(s kadm.ListedOffset) {
		if part >= 0 && s.Partition != part {
			return
		}
		e, _ := listed.Lookup(s.Topic, s.Partition)
		f := s.Offset
		switch offset {
		case "beginning":
		case "end":
			f = e.Offset
		default:
			n, _ := strconv.ParseInt(offset, 10, 64) // checked by parseStart
			if n < 0 {
				n = e.Offset + n
			}
			f = max(s.Offset, min(n, e.Offset))
		}
		first[s.Partition], ends[s.Partition] = f, e.Offset
	})
	if len(first) == 0 {
		return nil, nil, fmt.Errorf("topic %s has no partition %d", topic, part)
	}
	return first, ends, nil
}

func fetchErr(fs kgo.Fetches) error {
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if ferr == nil {
			ferr = fmt.Errorf("%s[%d]: %w", t, p, err)
		}
	})
	return ferr
}

// recordSink writes records in the chosen format and counts them against -c.
type recordSink struct {
	w      *bufio.Writer
	enc    *json.Encoder // with --json
	format string
	limit  int // 0: none
	seen   int
}

func newRecordSink(out io.Writer, format string, asJSON bool, limit int) *recordSink {
	s := &recordSink{w: bufio.NewWriter(out), format: format, limit: limit}
	if asJSON {
		s.enc = json.NewEncoder(s.w)
	}
	return s
}

// write prints r and reports whether -c is reached.
func (s *recordSink) write(r *kgo.Record) bool {
	if s.enc != nil {
		s.enc.Encode(recordJSON(r))
	} else {
		s.w.WriteString(formatRecord(s.format, r))
	}
	s.seen++
	return s.limit > 0 && s.seen >= s.limit
}

// consumeGroup consumes topic as a member of group. Only printed records
// are marked, and marks are committed every few seconds, when the group
// takes partitions away (before another member may start on them: polls
// and rebalances exclude each other), and at exit; so a record is printed
// once across runs and members unless a commit fails, which exits 1.
func (c *cli) consumeGroup(ctx, sigCtx context.Context, group, topic string, reset kgo.Offset, first, ends map[int32]int64, exitAtEnd bool, sink *recordSink) int {
	g := &groupProgress{topic: topic, first: first, ends: ends, pos: map[int32]int64{}}
	var commitMu sync.Mutex
	var commitErr error
	commit := func(ctx context.Context, cl *kgo.Client) {
		err := cl.CommitMarkedOffsets(ctx)
		commitMu.Lock()
		defer commitMu.Unlock()
		if err != nil && commitErr == nil {
			commitErr = err
			fmt.Fprintf(c.err, "%s: committing group %s: %v\n", c.name, group, err)
		}
	}
	cl, err := c.client(
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(reset),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.assigned(m[topic]) }),
		kgo.AdjustFetchOffsetsFn(func(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			g.starting(offs[topic])
			return offs, nil
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			commit(ctx, cl)
			g.dropped(m[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.dropped(m[topic]) }),
	)
	if err != nil {
		return c.fail(err)
	}
	finish := func(code int) int {
		sink.w.Flush()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		commit(cctx, cl)
		cl.CloseAllowingRebalance() // leaves the group; the final revoke commits nothing new
		commitMu.Lock()
		defer commitMu.Unlock()
		if commitErr != nil && code == exitOK {
			return c.fail(fmt.Errorf("a commit failed: the next run may print some records again"))
		}
		return code
	}
	for {
		pollCtx, cancelPoll := context.WithCancel(ctx)
		if g.waitEnd(exitAtEnd, cancelPoll) {
			cancelPoll()
			return finish(exitOK)
		}
		fs := cl.PollFetches(pollCtx)
		g.waitEnd(false, nil)
		cancelPoll()
		if sigCtx.Err() != nil {
			return finish(exitOK)
		}
		if err := ctx.Err(); err != nil {
			return finish(c.fail(err))
		}
		if err := fetchErr(fs); err != nil && !errors.Is(err, context.Canceled) {
			return finish(c.fail(err))
		}
		for _, r := range fs.Records() {
			full := sink.write(r)
			cl.MarkCommitRecords(r)
			g.printed(r)
			if full {
				return finish(exitOK)
			}
		}
		sink.w.Flush()
		cl.AllowRebalance()
	}
}

// groupProgress follows, for -e, where this member is in each partition the
// group assigned it. The rebalance callbacks update it while a poll waits;
// wake interrupts that poll when the last owned partition reaches its end.
type groupProgress struct {
	topic string
	first map[int32]int64 // where -o starts a partition the group has no commit for
	ends  map[int32]int64 // end offsets at start-up

	mu     sync.Mutex
	joined bool            // an assignment arrived (possibly empty)
	pos    map[int32]int64 // owned partitions: the next offset to print, -1 until known
	wake   context.CancelFunc
}

func (g *groupProgress) assigned(parts []int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.joined = true
	for _, p := range parts {
		g.pos[p] = -1
	}
	g.poke()
}

// starting records where the member starts the partitions it was given:
// the group's commit, else the -o position.
func (g *groupProgress) starting(offs map[int32]kgo.Offset) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, o := range offs {
		at := o.EpochOffset().Offset
		if at < 0 {
			at = g.first[p]
		}
		g.pos[p] = at
	}
	g.poke()
}

func (g *groupProgress) dropped(parts []int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range parts {
		delete(g.pos, p)
	}
	g.poke()
}

func (g *groupProgress) printed(r *kgo.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.pos[r.Partition]; ok {
		g.pos[r.Partition] = r.Offset + 1
	}
}

// atEnd: joined, and every owned partition printed up to its start-up end.
// Called with mu held.
func (g *groupProgress) atEnd() bool {
	if !g.joined {
		return false
	}
	for p, at := range g.pos {
		if at < 0 || at < g.ends[p] {
			return false
		}
	}
	return true
}

// poke wakes the waiting poll if the member is at the end. Called with mu held.
func (g *groupProgress) poke() {
	if g.wake != nil && g.atEnd() {
		g.wake()
	}
}

// waitEnd sets the poll to wake (nil: none) and reports, when exitAtEnd,
// whether the member is already at the end.
func (g *groupProgress) waitEnd(exitAtEnd bool, wake context.CancelFunc) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wake = nil
	if !exitAtEnd {
		return false
	}
	if g.atEnd() {
		return true
	}
	g.wake = wake
	return false
}
