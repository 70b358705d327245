package main

// `fjord group`: kafka-consumer-groups.sh over kadm.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fjordlog/fjord/group/lag"
)

func groupCmd(args []string, out, errOut io.Writer) int {
	return subcommand("group", map[string]func([]string, io.Writer, io.Writer) int{
		"list": groupList, "describe": groupDescribe, "lag": groupLag,
		"reset-offsets": groupResetOffsets, "delete": groupDelete,
	}, args, out, errOut)
}

func groupList(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord group list", out, errOut)
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return c.fail(err)
	}
	type row struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Coordinator  int32  `json:"coordinator"`
	}
	rows := []row{}
	for _, g := range gs.Sorted() {
		rows = append(rows, row{g.Group, g.State, g.ProtocolType, g.Coordinator})
	}
	c.emit(rows, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "GROUP\tSTATE\tPROTOCOL TYPE\tCOORDINATOR")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", r.Group, r.State, r.ProtocolType, r.Coordinator)
		}
	})
	return exitOK
}

type memberRow struct {
	MemberID   string   `json:"member_id"`
	InstanceID string   `json:"instance_id,omitempty"`
	ClientID   string   `json:"client_id"`
	Host       string   `json:"host"`
	Assigned   []string `json:"assigned"` // topic:partition,partition
}

type groupDesc struct {
	Group       string      `json:"group"`
	Type        string      `json:"type"` // classic, or consumer (KIP-848)
	State       string      `json:"state"`
	Protocol    string      `json:"protocol"`
	Coordinator int32       `json:"coordinator"`
	Members     []memberRow `json:"members"`
}

func groupDescribe(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord group describe", out, errOut)
	if code, ok := c.parse(args, 1, -1); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	gs, err := describeGroups(ctx, adm, c.args)
	if err != nil {
		return c.fail(err)
	}
	var descs []groupDesc
	for _, name := range c.args {
		g := gs[name]
		if g.Err != nil {
			return c.fail(fmt.Errorf("group %s: %v", name, g.Err))
		}
		if !g.Exists {
			return c.fail(fmt.Errorf("group %s does not exist", name))
		}
		d := groupDesc{Group: name, Type: g.Type, State: g.State, Protocol: g.Protocol, Coordinator: g.Coordinator, Members: []memberRow{}}
		for _, m := range g.Members {
			r := memberRow{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.Host, Assigned: []string{}}
			for _, t := range slices.Sorted(maps.Keys(m.Assigned)) {
				r.Assigned = append(r.Assigned, t+":"+joinInt32(m.Assigned[t]))
			}
			d.Members = append(d.Members, r)
		}
		descs = append(descs, d)
	}
	c.emit(descs, func(w *tabwriter.Writer) {
		for _, d := range descs {
			fmt.Fprintf(w, "Group: %s\tType: %s\tState: %s\tProtocol: %s\tCoordinator: %d\tMembers: %d\n", d.Group, d.Type, d.State, d.Protocol, d.Coordinator, len(d.Members))
			w.Flush()
			if len(d.Members) > 0 {
				fmt.Fprintln(w, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNED")
			}
			for _, m := range d.Members {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, m.InstanceID, m.ClientID, m.Host, strings.Join(m.Assigned, " "))
			}
		}
	})
	return exitOK
}

type lagRow struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: no commit
	Start     int64  `json:"start"`     // the log start offset
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"` // -1: unknown (see error)
	Member    string `json:"member,omitempty"`
	Error     string `json:"error,omitempty"`
}

// groupLag lists, per group, every partition of the topics its members
// subscribe to or are assigned and of those it committed to, with the
// lag package's rule (the console's group page uses the same): a
// partition with no commit lags by every record its log holds.
func groupLag(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord group lag", out, errOut)
	if code, ok := c.parse(args, 1, -1); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	described, err := describeGroups(ctx, adm, c.args)
	if err != nil {
		return c.fail(err)
	}
	type input struct {
		members []lag.Member
		commits map[lag.TP]lag.Commit
	}
	inputs := map[string]input{}
	var topics []string
	for _, name := range c.args {
		g := described[name]
		if g.Err != nil {
			return c.fail(fmt.Errorf("group %s: %w", name, g.Err))
		}
		if !g.Exists {
			return c.fail(fmt.Errorf("group %s does not exist", name))
		}
		committed, err := adm.FetchOffsets(ctx, name)
		if err != nil {
			return c.fail(fmt.Errorf("group %s: committed offsets: %w", name, err))
		}
		in := input{commits: map[lag.TP]lag.Commit{}}
		committed.Each(func(o kadm.OffsetResponse) {
			in.commits[lag.TP{Topic: o.Topic, Partition: o.Partition}] = lag.Commit{Offset: o.At, Err: o.Err}
		})
		for _, m := range g.Members {
			in.members = append(in.members, m.Member)
		}
		inputs[name] = in
		topics = append(topics, lag.Topics(in.members, in.commits)...)
	}
	offsets, err := listOffsets(ctx, adm, topics)
	if err != nil {
		return c.fail(err)
	}
	rows := []lagRow{}
	for _, name := range c.args {
		in := inputs[name]
		for _, r := range lag.Compute(in.members, in.commits, offsets) {
			rows = append(rows, lagRow{Group: name, Topic: r.Topic, Partition: r.Partition, Committed: r.Committed,
				Start: r.Start, End: r.End, Lag: r.Lag, Member: r.Member, Error: errString(r.Err)})
		}
	}
	dash := func(v int64, known bool) string {
		if !known || v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	c.emit(rows, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCOMMITTED\tSTART\tEND\tLAG\tMEMBER\tERROR")
		for _, r := range rows {
			known := r.Error == ""
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Group, r.Topic, r.Partition, dash(r.Committed, true),
				dash(r.Start, known), dash(r.End, known), dash(r.Lag, known), r.Member, r.Error)
		}
	})
	return exitOK
}

// listOffsets lists the log start and end offsets of every partition of
// topics. A partition a broker could not answer for is left out, and the
// lag package reports it as unlisted; an authorization failure, or a
// listing that failed altogether, is the command's failure.
func listOffsets(ctx context.Context, adm *kadm.Client, topics []string) (map[lag.TP]lag.Offsets, error) {
	out := map[lag.TP]lag.Offsets{}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if len(topics) == 0 {
		return out, nil
	}
	list := func(what string, fn func(context.Context, ...string) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		listed, err := fn(ctx, topics...)
		var se *kadm.ShardErrors
		if err != nil && !(errors.As(err, &se) && !se.AllFailed) {
			return nil, fmt.Errorf("%s offsets: %w", what, err)
		}
		return listed, nil
	}
	starts, err := list("start", adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	ends, err := list("end", adm.ListEndOffsets)
	if err != nil {
		return nil, err
	}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Partition < 0 { // kadm's entry for a topic that does not exist
			return
		}
		o := lag.Offsets{End: e.Offset, Err: e.Err}
		if s, ok := starts.Lookup(e.Topic, e.Partition); !ok {
			o.Err = cmp.Or(o.Err, lag.ErrUnlisted)
		} else {
			o.Start, o.Err = s.Offset, cmp.Or(o.Err, s.Err)
		}
		out[lag.TP{Topic: e.Topic, Partition: e.Partition}] = o
	})
	return out, nil
}

// groupResetOffsets moves a group's committed offsets on one or more
// topics, as kafka-consumer-groups.sh --reset-offsets does: it prints the
// plan, and commits it only with --execute. Like Kafka it refuses while the
// group has members (they would overwrite the new offsets with their next
// commit).
func groupResetOffsets(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord group reset-offsets", out, errOut)
	var topics listFlag
	c.fs.Var(&topics, "topic", "topic whose partitions to reset; repeatable")
	earliest := c.fs.Bool("to-earliest", false, "reset to each partition's start")
	latest := c.fs.Bool("to-latest", false, "reset to each partition's end")
	toOffset := c.fs.Int64("to-offset", -1, "reset to this offset (clamped to the partition's range)")
	toDatetime := c.fs.String("to-datetime", "", "reset to the first offset at or after this time (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	shiftBy := c.fs.Int64("shift-by", 0, "move the committed offset by N (clamped)")
	execute := c.fs.Bool("execute", false, "commit the new offsets (without it: only print the plan)")
	c.fs.Bool("dry-run", true, "print the plan only (the default)")
	if code, ok := c.parse(args, 1, 1); !ok {
		return code
	}
	group := c.args[0]
	modes := 0
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, m := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by"} {
		if set[m] {
			modes++
		}
	}
	if modes != 1 {
		return c.usageErr("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by")
	}
	if len(topics) == 0 {
		return c.usageErr("give --topic")
	}
	var at time.Time
	if *toDatetime != "" {
		var err error
		if at, err = time.Parse(time.RFC3339, *toDatetime); err != nil {
			return c.usageErr("--to-datetime: %v", err)
		}
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	gs, err := describeGroups(ctx, adm, []string{group})
	if err != nil {
		return c.fail(err)
	}
	// A group that does not exist yet has no members: its offsets may be
	// set before its first consumer starts, as Kafka's tool allows.
	g := gs[group]
	if g.Err != nil {
		return c.fail(fmt.Errorf("group %s: %w", group, g.Err))
	}
	if len(g.Members) > 0 {
		return c.fail(fmt.Errorf("group %s is %s with %d active members: stop them first (offsets can be reset only while the group is inactive)", group, g.State, len(g.Members)))
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return c.fail(fmt.Errorf("start offsets: %w", err))
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return c.fail(fmt.Errorf("end offsets: %w", err))
	}
	current, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return c.fail(fmt.Errorf("committed offsets: %w", err))
	}
	var byTime kadm.ListedOffsets
	if !at.IsZero() {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topics...); err == nil {
			err = byTime.Error()
		}
		if err != nil {
			return c.fail(fmt.Errorf("offsets at %s: %w", at, err))
		}
	}
	type row struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Current   int64  `json:"current"` // -1: no commit
		New       int64  `json:"new"`
	}
	var rows []row
	plan := kadm.Offsets{}
	var perr error
	starts.Each(func(s kadm.ListedOffset) {
		e, _ := ends.Lookup(s.Topic, s.Partition)
		cur := int64(-1)
		if o, ok := current.Lookup(s.Topic, s.Partition); ok && o.Err == nil {
			cur = o.At
		}
		var n int64
		switch {
		case *earliest:
			n = s.Offset
		case *latest:
			n = e.Offset
		case set["to-offset"]:
			n = *toOffset
		case set["to-datetime"]:
			n = e.Offset // no record at or after: the end, as Kafka does
			if o, ok := byTime.Lookup(s.Topic, s.Partition); ok && o.Offset >= 0 {
				n = o.Offset
			}
		case set["shift-by"]:
			if cur < 0 {
				perr = fmt.Errorf("%s[%d] has no committed offset to shift", s.Topic, s.Partition)
				return
			}
			n = cur + *shiftBy
		}
		n = max(s.Offset, min(n, e.Offset))
		rows = append(rows, row{s.Topic, s.Partition, cur, n})
		plan.Add(kadm.Offset{Topic: s.Topic, Partition: s.Partition, At: n, LeaderEpoch: -1})
	})
	if perr != nil {
		return c.fail(perr)
	}
	sortRows(rows, func(a, b row) bool { return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition })
	if *execute {
		resps, err := adm.CommitOffsets(ctx, group, plan)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return c.fail(fmt.Errorf("commit: %w", err))
		}
	}
	c.emit(map[string]any{"group": group, "executed": *execute, "partitions": rows}, func(w *tabwriter.Writer) {
		if !*execute {
			fmt.Fprintln(w, "Dry run: nothing committed (add --execute to commit these offsets).")
		}
		fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT\tNEW")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", group, r.Topic, r.Partition, r.Current, r.New)
		}
	})
	return exitOK
}

func groupDelete(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord group delete", out, errOut)
	if code, ok := c.parse(args, 1, -1); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	resps, err := adm.DeleteGroups(ctx, c.args...)
	if err != nil {
		return c.fail(err)
	}
	var errs []error
	for _, name := range c.args {
		if r := resps[name]; r.Err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", name, r.Err))
		}
	}
	if len(errs) > 0 {
		return c.fail(errors.Join(errs...))
	}
	c.emit(map[string]any{"deleted": c.args}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "deleted groups %s\n", strings.Join(c.args, ", "))
	})
	return exitOK
}
