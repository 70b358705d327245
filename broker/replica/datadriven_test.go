package replica

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// TestDataDriven runs testdata/*.txt. Each command steps one core and
// prints the Ready it returned, then the core's state after "> ".
// go test ./broker/replica -run TestDataDriven -rewrite regenerates the
// expected output; review the diff.
//
//	new id=1 [async] [lag=ms] [open-timeout=ms] [alter-timeout=ms] [open-attempts=n]
//	start t=ms
//	opened t=ms start=n end=n [durable=n] | open-failed t=ms
//	assign t=ms leader=n epoch=n pepoch=n replicas=(..) isr=(..) [live=(..)]
//	unassign [deleted]
//	append end=n | flush durable=n | leader-hw hw=n
//	fetched t=ms id=n offset=n [durable=n] [start=n] [epoch=n]  (no durable:
//	    a fetch without the DurableEndTag, whose offset counts as durable;
//	    epoch: the leader epoch it was checked against, the core's if none)
//	truncated start=n end=n [repaired] | reconciled epoch=n | diverged epoch=n
//	damage t=ms offset=n | leader-damaged t=ms
//	log-failed t=ms [full] | stalled t=ms for=ms   (new: [stall=ms])
//	answer t=ms code=n   (answers the proposal in flight)
//	deleted | tick t=ms | check
//	reconfigure [async]  (the flush policy changed at run time)
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Core
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && c == nil {
				d.Fatalf(t, "new first")
			}
			now := int64(argInt(t, d, "t", 0))
			var rd Ready
			switch d.Cmd {
			case "new":
				cfg := Config{ID: int32(argInt(t, d, "id", 1)), SyncOnAck: !d.HasArg("async"),
					LagMs: int64(argInt(t, d, "lag", 1000)), OpenTimeoutMs: int64(argInt(t, d, "open-timeout", 5000)),
					AlterTimeoutMs: int64(argInt(t, d, "alter-timeout", 10000)), FlushStallMs: int64(argInt(t, d, "stall", 0)),
					Open: lifecycle.Backoff{Initial: time.Second, Max: 8 * time.Second}, OpenAttempts: argInt(t, d, "open-attempts", 4),
					Alter: lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}, AlterAttempts: 5}
				c = New(cfg)
				return state(c)
			case "start":
				rd = c.Start(now)
			case "opened":
				end := int64(argInt(t, d, "end", 0))
				rd = c.Step(now, OpenDone{Start: int64(argInt(t, d, "start", 0)), End: end, Durable: int64(argInt(t, d, "durable", int(end)))})
			case "open-failed":
				rd = c.Step(now, OpenDone{Err: errors.New("too many open files")})
			case "assign":
				a := Assignment{Leader: int32(argInt(t, d, "leader", -1)), LeaderEpoch: int32(argInt(t, d, "epoch", 0)),
					PartitionEpoch: int32(argInt(t, d, "pepoch", 0)), Replicas: argIDs(t, d, "replicas"), ISR: argIDs(t, d, "isr")}
				a.Live = a.Replicas
				if d.HasArg("live") {
					a.Live = argIDs(t, d, "live")
				}
				rd = c.Step(now, Assign{a})
			case "unassign":
				rd = c.Step(now, Unassign{TopicDeleted: d.HasArg("deleted")})
			case "append":
				rd = c.Step(now, Appended{End: int64(argInt(t, d, "end", 0))})
			case "flush":
				rd = c.Step(now, Flushed{Durable: int64(argInt(t, d, "durable", 0))})
			case "reconfigure":
				rd = c.Step(now, Reconfigured{SyncOnAck: !d.HasArg("async")})
			case "fetched":
				off := argInt(t, d, "offset", 0)
				rd = c.Step(now, FollowerFetched{ID: int32(argInt(t, d, "id", 0)), LeaderEpoch: int32(argInt(t, d, "epoch", int(c.asg.LeaderEpoch))), Offset: int64(off),
					Durable: int64(argInt(t, d, "durable", off)), LogStart: int64(argInt(t, d, "start", -1))})
			case "start-moved":
				rd = c.Step(now, StartMoved{Start: int64(argInt(t, d, "start", 0))})
			case "low-watermark":
				lw, ok := c.LowWatermark()
				return fmt.Sprintf("low-watermark=%d leads=%v", lw, ok)
			case "leader-hw":
				rd = c.Step(now, LeaderHW{HW: int64(argInt(t, d, "hw", 0))})
			case "truncated":
				rd = c.Step(now, Truncated{Start: int64(argInt(t, d, "start", 0)), End: int64(argInt(t, d, "end", 0)), Repaired: d.HasArg("repaired")})
			case "reconciled":
				rd = c.Step(now, Reconciled{LeaderEpoch: int32(argInt(t, d, "epoch", 0))})
			case "diverged":
				rd = c.Step(now, Diverged{LeaderEpoch: int32(argInt(t, d, "epoch", 0))})
			case "damage":
				rd = c.Step(now, DamageFound{Offset: int64(argInt(t, d, "offset", 0))})
			case "leader-damaged":
				rd = c.Step(now, LeaderDamaged{})
			case "log-failed":
				why := "segment 0: fdatasync: input/output error"
				if d.HasArg("full") {
					why = "segment 0: fdatasync: no space left on device"
				}
				rd = c.Step(now, LogFailed{Why: why, SetAside: !d.HasArg("full")})
			case "stalled":
				rd = c.Step(now, FlushStalled{ForMs: int64(argInt(t, d, "for", 0))})
			case "answer":
				if c.proposal == nil {
					d.Fatalf(t, "no proposal in flight")
				}
				rd = c.Step(now, AlterAnswered{Proposal: *c.proposal, Code: int16(argInt(t, d, "code", 0))})
			case "deleted":
				rd = c.Step(now, LogDeleted{})
			case "tick":
				rd = c.Tick(now)
			case "check":
				v := c.View()
				var b strings.Builder
				for _, op := range []struct {
					name string
					op   Op
				}{{"produce", Produce}, {"consume", ConsumerRead}, {"replica", ReplicaRead}, {"local", LocalRead}} {
					fmt.Fprintf(&b, "%s=%s ", op.name, codeName(v.Check(op.op)))
				}
				fmt.Fprintf(&b, "fetch-from-leader=%v", v.Fetches(v.Leader))
				return b.String()
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return ready(rd) + state(c)
		})
	})
}

func argInt(t *testing.T, d *datadriven.TestData, key string, def int) int {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) != 1 {
				d.Fatalf(t, "%s: one value", key)
			}
			n, err := strconv.Atoi(a.Vals[0])
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			return n
		}
	}
	return def
}

func argIDs(t *testing.T, d *datadriven.TestData, key string) []int32 {
	var out []int32
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		for _, v := range a.Vals {
			if v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			out = append(out, int32(n))
		}
	}
	return out
}

// ready prints the non-empty parts of rd, one per line.
func ready(rd Ready) string {
	var b strings.Builder
	for _, n := range rd.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if rd.HWMoved {
		fmt.Fprintf(&b, "hw -> %d\n", rd.HW)
	}
	if rd.StartEpoch >= 0 {
		fmt.Fprintf(&b, "start epoch %d at %d\n", rd.StartEpoch, rd.StartOffset)
	}
	if rd.Open {
		b.WriteString("open log\n")
	}
	if rd.Repair != nil {
		fmt.Fprintf(&b, "repair log set-aside=%v\n", rd.Repair.SetAside)
	}
	if p := rd.Propose; p != nil {
		kind := "isr"
		if p.Resign {
			kind = "resign"
		}
		fmt.Fprintf(&b, "propose %s=%v epoch=%d pepoch=%d\n", kind, p.ISR, p.LeaderEpoch, p.PartitionEpoch)
	}
	if rd.TruncateTo >= 0 {
		fmt.Fprintf(&b, "truncate to %d\n", rd.TruncateTo)
	}
	if rd.Delete {
		b.WriteString("delete log\n")
	}
	var wake []string
	if rd.WakeHW {
		wake = append(wake, "hw")
	}
	if rd.WakeAppend {
		wake = append(wake, "append")
	}
	if rd.WakeLow {
		wake = append(wake, "low")
	}
	if len(wake) > 0 {
		fmt.Fprintf(&b, "wake %s\n", strings.Join(wake, ","))
	}
	return b.String()
}

// state prints the core after a step.
func state(c *Core) string {
	var b strings.Builder
	fmt.Fprintf(&b, "> %s leader=%d epoch=%d isr=%v hw=%d log=[%d,%d) durable=%d", c.phase, c.asg.Leader, c.asg.LeaderEpoch,
		c.asg.ISR, c.hw, c.logStart, c.logEnd, c.durable)
	if c.damagedFrom != NoDamage {
		fmt.Fprintf(&b, " damaged=%d", c.damagedFrom)
	}
	if c.failedWhy != "" {
		b.WriteString(" failed")
	}
	if c.repairing {
		fmt.Fprintf(&b, " repairing(%d in a row, next>=%d)", c.repairsInRow, c.repairNext)
	}
	if c.proposal != nil {
		fmt.Fprintf(&b, " inflight=%v", c.proposal.ISR)
	}
	if len(c.followers) > 0 {
		ids := make([]int32, 0, len(c.followers))
		for id := range c.followers {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		b.WriteString(" followers=")
		for i, id := range ids {
			if i > 0 {
				b.WriteString(",")
			}
			f := c.followers[id]
			fmt.Fprintf(&b, "%d@%d", id, f.leo)
			if f.durable != f.leo {
				fmt.Fprintf(&b, "/durable=%d", f.durable)
			}
		}
	}
	return b.String()
}

func codeName(code int16) string {
	switch code {
	case 0:
		return "ok"
	case 3:
		return "UNKNOWN_TOPIC_OR_PARTITION"
	case 6:
		return "NOT_LEADER_OR_FOLLOWER"
	case 56:
		return "KAFKA_STORAGE_ERROR"
	}
	return strconv.Itoa(int(code))
}
