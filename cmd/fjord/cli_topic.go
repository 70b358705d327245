package main

// `fjord topic`: kafka-topics.sh and kafka-configs.sh (topics) over kadm.

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

func topicCmd(args []string, out, errOut io.Writer) int {
	return subcommand("topic", map[string]func([]string, io.Writer, io.Writer) int{
		"create": topicCreate, "list": topicList, "describe": topicDescribe,
		"delete": topicDelete, "alter-config": topicAlterConfig,
	}, args, out, errOut)
}

func topicCreate(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord topic create", out, errOut)
	parts := c.fs.Int("partitions", -1, "partitions (-1: the broker's num.partitions)")
	rf := c.fs.Int("replication-factor", -1, "replicas per partition (-1: the broker's default.replication.factor)")
	var cfg kvFlag
	c.fs.Var(&cfg, "config", "topic configuration key=value; repeatable")
	if code, ok := c.parse(args, 1, 1); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	resp, err := adm.CreateTopic(ctx, int32(*parts), int16(*rf), cfg.m, c.args[0])
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		if resp.ErrMessage != "" {
			err = fmt.Errorf("%w: %s", err, resp.ErrMessage)
		}
		return c.fail(fmt.Errorf("create %s: %w", c.args[0], err))
	}
	c.emit(map[string]any{"topic": resp.Topic, "partitions": resp.NumPartitions, "replication_factor": resp.ReplicationFactor},
		func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "created topic %s: %d partitions, replication factor %d\n", resp.Topic, resp.NumPartitions, resp.ReplicationFactor)
		})
	return exitOK
}

type topicRow struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal,omitempty"`
}

func topicList(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord topic list", out, errOut)
	internal := c.fs.Bool("internal", false, "include internal topics (__consumer_offsets, ...)")
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	var tds kadm.TopicDetails
	if *internal {
		tds, err = adm.ListTopicsWithInternal(ctx)
	} else {
		tds, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return c.fail(err)
	}
	rows := []topicRow{}
	for _, td := range tds.Sorted() {
		if td.Err != nil {
			return c.fail(fmt.Errorf("topic %s: %w", td.Topic, td.Err))
		}
		rows = append(rows, topicRow{td.Topic, len(td.Partitions), td.Partitions.NumReplicas(), td.IsInternal})
	}
	c.emit(rows, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TOPIC\tPARTITIONS\tREPLICATION")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%d\t%d\n", r.Topic, r.Partitions, r.ReplicationFactor)
		}
	})
	return exitOK
}

type partitionRow struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline_replicas,omitempty"`
	Start       int64   `json:"start_offset"`
	End         int64   `json:"end_offset"`
	// LocalStart is the leader's local log start (ListOffsets -4):
	// above Start when older records are only in the remote store.
	LocalStart int64 `json:"local_start_offset"`
	// LocalBytes is the leader's log size (DescribeLogDirs), RemoteBytes
	// its copy in the remote store (Fjord's tag in DescribeLogDirs); -1
	// when not known.
	LocalBytes  int64  `json:"local_bytes"`
	RemoteBytes int64  `json:"remote_bytes"`
	Error       string `json:"error,omitempty"`
}

type topicDesc struct {
	Topic      string            `json:"topic"`
	ID         string            `json:"id"`
	Partitions []partitionRow    `json:"partitions"`
	Configs    map[string]string `json:"configs"` // set on the topic, not defaults
}

func topicDescribe(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord topic describe", out, errOut)
	if code, ok := c.parse(args, 1, -1); !ok {
		return code
	}
	cl, err := c.client()
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := c.ctx()
	defer cancel()
	md, err := adm.Metadata(ctx, c.args...)
	if err != nil {
		return c.fail(err)
	}
	for _, name := range c.args {
		if td, ok := md.Topics[name]; !ok || td.Err != nil {
			return c.fail(fmt.Errorf("topic %s: %v", name, td.Err))
		}
	}
	starts, err := adm.ListStartOffsets(ctx, c.args...)
	if err != nil {
		return c.fail(err)
	}
	ends, err := adm.ListEndOffsets(ctx, c.args...)
	if err != nil {
		return c.fail(err)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, c.args...)
	if err != nil {
		return c.fail(err)
	}
	localStarts, err := listLocalStarts(ctx, cl, md, c.args)
	if err != nil {
		return c.fail(err)
	}
	sizes := leaderSizes(ctx, cl, md, c.args)
	var descs []topicDesc
	for _, name := range c.args {
		td := md.Topics[name]
		d := topicDesc{Topic: name, ID: td.ID.String(), Configs: map[string]string{}}
		for _, p := range td.Partitions.Sorted() {
			r := partitionRow{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR, Offline: p.OfflineReplicas, Start: -1, End: -1, Error: errString(p.Err)}
			if o, ok := starts.Lookup(name, p.Partition); ok && o.Err == nil {
				r.Start = o.Offset
			}
			if o, ok := ends.Lookup(name, p.Partition); ok && o.Err == nil {
				r.End = o.Offset
			}
			r.LocalStart = r.Start
			if o, ok := localStarts[topicPart{name, p.Partition}]; ok {
				r.LocalStart = o
			}
			r.LocalBytes, r.RemoteBytes = -1, -1
			if sz, ok := sizes[topicPart{name, p.Partition}]; ok {
				r.LocalBytes, r.RemoteBytes = sz[0], sz[1]
			}
			d.Partitions = append(d.Partitions, r)
		}
		for _, rc := range cfgs {
			if rc.Name != name {
				continue
			}
			for _, kv := range rc.Configs {
				if kv.Source.String() == "DYNAMIC_TOPIC_CONFIG" && kv.Value != nil {
					d.Configs[kv.Key] = *kv.Value
				}
			}
		}
		descs = append(descs, d)
	}
	c.emit(descs, func(w *tabwriter.Writer) {
		for _, d := range descs {
			fmt.Fprintf(w, "Topic: %s  ID: %s  Partitions: %d\n", d.Topic, d.ID, len(d.Partitions))
			for _, k := range sortedKeys(d.Configs) {
				fmt.Fprintf(w, "  config %s=%s\n", k, d.Configs[k])
			}
			fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tLOCAL-START\tEND\tLOCAL-BYTES\tREMOTE-BYTES\tERROR")
			for _, p := range d.Partitions {
				fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Partition, p.Leader, p.LeaderEpoch, joinInt32(p.Replicas), joinInt32(p.ISR),
					p.Start, p.LocalStart, p.End, orDash(p.LocalBytes), orDash(p.RemoteBytes), p.Error)
			}
		}
	})
	return exitOK
}

func topicDelete(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord topic delete", out, errOut)
	if code, ok := c.parse(args, 1, -1); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	resps, err := adm.DeleteTopics(ctx, c.args...)
	if err != nil {
		return c.fail(err)
	}
	type row struct {
		Topic string `json:"topic"`
		Error string `json:"error,omitempty"`
	}
	var rows []row
	code := exitOK
	for _, name := range c.args {
		r := resps[name]
		rows = append(rows, row{name, errString(r.Err)})
		if r.Err != nil {
			code = exitFail
		}
	}
	c.emit(rows, func(w *tabwriter.Writer) {
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(w, "delete %s: %s\n", r.Topic, r.Error)
			} else {
				fmt.Fprintf(w, "deleted topic %s\n", r.Topic)
			}
		}
	})
	return code
}

// topicAlterConfig changes a topic's configuration key by key
// (IncrementalAlterConfigs), as kafka-configs.sh --alter does: --set k=v,
// --delete k (back to the default).
func topicAlterConfig(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord topic alter-config", out, errOut)
	var set kvFlag
	var del listFlag
	c.fs.Var(&set, "set", "key=value to set; repeatable")
	c.fs.Var(&del, "delete", "key to reset to its default; repeatable")
	if code, ok := c.parse(args, 1, 1); !ok {
		return code
	}
	var alters []kadm.AlterConfig
	for _, k := range sortedKeys(set.m) {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set.m[k]})
	}
	for _, k := range del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return c.usageErr("nothing to alter: give --set k=v or --delete k")
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	resps, err := adm.AlterTopicConfigs(ctx, alters, c.args[0])
	if err != nil {
		return c.fail(err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return c.fail(fmt.Errorf("topic %s: %w %s", r.Name, r.Err, r.ErrMessage))
		}
	}
	c.emit(map[string]any{"topic": c.args[0], "altered": len(alters)}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "altered %d configuration keys of topic %s\n", len(alters), c.args[0])
	})
	return exitOK
}
