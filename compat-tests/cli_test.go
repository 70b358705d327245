package compattests

// The fjord client subcommands (topic, group, produce, consume, cluster,
// verify) run as the real binary against real nodes; what they did is
// checked through an independent client (kadm, franz-go), and --json output
// is parsed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/cmd/fjord/history"
)

// runCLI runs `fjord args...` with FJORD_BOOTSTRAP=bootstrap and stdin,
// returning stdout, stderr and the exit code.
func runCLI(t testing.TB, bootstrap, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, fjordBin, args...)
	cmd.Env = append(os.Environ(), "FJORD_BOOTSTRAP="+bootstrap)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("fjord %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// cliOK runs the command and wants exit 0.
func cliOK(t testing.TB, bootstrap, stdin string, args ...string) string {
	t.Helper()
	out, errs, code := runCLI(t, bootstrap, stdin, args...)
	if code != 0 {
		t.Fatalf("fjord %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// cliCode runs the command and wants exit want.
func cliCode(t testing.TB, want int, bootstrap string, args ...string) string {
	t.Helper()
	out, errs, code := runCLI(t, bootstrap, "", args...)
	if code != want {
		t.Fatalf("fjord %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errs)
	}
	return errs
}

func cliJSON(t testing.TB, bootstrap string, v any, args ...string) {
	t.Helper()
	out := cliOK(t, bootstrap, "", append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("fjord %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func topicConfig(t testing.TB, adm *kadm.Client, topic, key string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == key && c.Value != nil {
				return *c.Value, c.Source
			}
		}
	}
	return "", 0
}

func TestCLITopicGroupProduceConsume(t *testing.T) {
	b := startBroker(t, t.TempDir())
	addr := b.Addr
	adm := newAdmin(t, addr)
	const topic = "cli-orders"

	// topic create, through --bootstrap (the environment's is wrong).
	cliOK(t, "127.0.0.1:1", "", "topic", "create", topic, "--bootstrap", addr, "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=123456")
	md, err := adm.Metadata(testCtx(t, 10*time.Second), topic)
	if err != nil || len(md.Topics[topic].Partitions) != 3 {
		t.Fatalf("after create: %v %+v", err, md.Topics[topic])
	}
	if v, _ := topicConfig(t, adm, topic, "retention.ms"); v != "123456" {
		t.Fatalf("retention.ms = %q", v)
	}
	if errs := cliCode(t, 1, addr, "topic", "create", topic); !strings.Contains(errs, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create twice: %s", errs)
	}
	var list []struct {
		Topic             string `json:"topic"`
		Partitions        int    `json:"partitions"`
		ReplicationFactor int    `json:"replication_factor"`
	}
	cliJSON(t, addr, &list, "topic", "list")
	if i := slices.IndexFunc(list, func(r struct {
		Topic             string `json:"topic"`
		Partitions        int    `json:"partitions"`
		ReplicationFactor int    `json:"replication_factor"`
	}) bool {
		return r.Topic == topic
	}); i < 0 || list[i].Partitions != 3 || list[i].ReplicationFactor != 1 {
		t.Fatalf("topic list: %+v", list)
	}
	if out := cliOK(t, addr, "", "topic", "list"); !strings.Contains(out, "TOPIC") || !strings.Contains(out, topic) {
		t.Fatalf("topic list table: %s", out)
	}

	// produce 30 keyed lines; consume them back in a format.
	var in strings.Builder
	want := map[string]bool{}
	for i := range 30 {
		fmt.Fprintf(&in, "k%d:v%d\n", i%5, i)
		want[fmt.Sprintf("k%d=v%d", i%5, i)] = true
	}
	cliOK(t, addr, in.String(), "produce", "-t", topic, "-k", ":")
	total := int64(0)
	for _, e := range endOffsets(t, adm, topic) {
		total += e
	}
	if total != 30 {
		t.Fatalf("end offsets after produce: %d records, want 30", total)
	}
	out := cliOK(t, addr, "", "consume", "-t", topic, "-e", "-f", `%k=%v@%p/%o\n`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	got := map[string]bool{}
	perKey := map[string]int32{}
	for _, l := range lines {
		kv, pos, _ := strings.Cut(l, "@")
		got[kv] = true
		var p, o int32
		fmt.Sscanf(pos, "%d/%d", &p, &o)
		k, _, _ := strings.Cut(kv, "=")
		if q, ok := perKey[k]; ok && q != p {
			t.Fatalf("key %s in partitions %d and %d", k, q, p)
		}
		perKey[k] = p
	}
	if len(lines) != 30 || len(got) != 30 || !maps.Equal(got, want) {
		t.Fatalf("consume -e: %d lines: %s", len(lines), out)
	}
	out = cliOK(t, addr, "", "consume", "-t", topic, "-c", "5", "--json")
	var n int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Topic  string  `json:"topic"`
			Offset int64   `json:"offset"`
			Key    *string `json:"key"`
			Value  *string `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Topic != topic || r.Key == nil || r.Value == nil {
			t.Fatalf("consume --json line %q: %v", l, err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("consume -c 5: %d records", n)
	}
	if out := cliOK(t, addr, "", "consume", "-t", topic, "-o", "end", "-e"); out != "" {
		t.Fatalf("consume -o end -e printed %q", out)
	}
	if out := cliOK(t, addr, "", "consume", "-t", topic, "-p", "0", "-o", "-1", "-e", "-f", `%p\n`); strings.TrimSpace(out) != "0" {
		t.Fatalf("consume -p 0 -o -1 -e: %q", out)
	}

	// describe and alter-config.
	var desc []struct {
		Topic      string `json:"topic"`
		Partitions []struct {
			Partition int32   `json:"partition"`
			Leader    int32   `json:"leader"`
			Replicas  []int32 `json:"replicas"`
			ISR       []int32 `json:"isr"`
			End       int64   `json:"end_offset"`
		} `json:"partitions"`
		Configs map[string]string `json:"configs"`
	}
	cliJSON(t, addr, &desc, "topic", "describe", topic)
	sum := int64(0)
	for _, p := range desc[0].Partitions {
		if p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
			t.Fatalf("describe partition %+v", p)
		}
		sum += p.End
	}
	if len(desc) != 1 || len(desc[0].Partitions) != 3 || sum != 30 || desc[0].Configs["retention.ms"] != "123456" {
		t.Fatalf("describe: %+v", desc)
	}
	cliOK(t, addr, "", "topic", "alter-config", topic, "--set", "retention.ms=999000", "--set", "cleanup.policy=compact")
	if v, _ := topicConfig(t, adm, topic, "retention.ms"); v != "999000" {
		t.Fatalf("after --set retention.ms = %q", v)
	}
	if v, _ := topicConfig(t, adm, topic, "cleanup.policy"); v != "compact" {
		t.Fatalf("after --set cleanup.policy = %q", v)
	}
	cliOK(t, addr, "", "topic", "alter-config", topic, "--delete", "retention.ms")
	if _, src := topicConfig(t, adm, topic, "retention.ms"); src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatal("retention.ms still set on the topic after --delete")
	}
	cliCode(t, 2, addr, "topic", "alter-config", topic) // nothing to alter
	cliCode(t, 1, addr, "topic", "alter-config", topic, "--set", "no.such.key=1")

	// A real consumer group: consume everything and commit, stay a member.
	const group = "cli-group"
	member := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	seen := 0
	for seen < 30 {
		fs := member.PollFetches(testCtx(t, 20*time.Second))
		if err := fs.Err0(); err != nil {
			t.Fatalf("member poll: %v", err)
		}
		seen += fs.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var gdesc []struct {
		State   string `json:"state"`
		Members []struct {
			Assigned []string `json:"assigned"`
		} `json:"members"`
	}
	cliJSON(t, addr, &gdesc, "group", "describe", group)
	if len(gdesc) != 1 || len(gdesc[0].Members) != 1 || gdesc[0].State != "Stable" || len(gdesc[0].Members[0].Assigned) != 1 {
		t.Fatalf("group describe: %+v", gdesc)
	}
	// Kafka refuses to reset the offsets of a group with members.
	if errs := cliCode(t, 1, addr, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"); !strings.Contains(errs, "active members") {
		t.Fatalf("reset with a member: %s", errs)
	}
	member.Close()

	// A KIP-848 consumer group is described through ConsumerGroupDescribe,
	// and a reset is refused while it has members, as for a classic one.
	const group848 = "cli-group-848"
	m848 := newClient(t, addr, kgo.ConsumerGroup(group848), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kip848())
	for seen := 0; seen < 30; {
		fs := m848.PollFetches(testCtx(t, 20*time.Second))
		if err := fs.Err0(); err != nil {
			t.Fatalf("848 member poll: %v", err)
		}
		seen += fs.NumRecords()
	}
	var g848 []struct {
		Type, State, Protocol string
		Members               []struct {
			Assigned []string `json:"assigned"`
		} `json:"members"`
	}
	cliJSON(t, addr, &g848, "group", "describe", group848)
	if len(g848) != 1 || g848[0].Type != "consumer" || g848[0].State != "Stable" || g848[0].Protocol != "uniform" ||
		len(g848[0].Members) != 1 || len(g848[0].Members[0].Assigned) != 1 {
		t.Fatalf("group describe of a KIP-848 group: %+v", g848)
	}
	if errs := cliCode(t, 1, addr, "group", "reset-offsets", group848, "--topic", topic, "--to-earliest", "--execute"); !strings.Contains(errs, "active members") {
		t.Fatalf("reset of a KIP-848 group with a member: %s", errs)
	}
	m848.Close()

	// 10 more records: the group lags by 10.
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	for i := range 10 {
		if err := prod.ProduceSync(testCtx(t, 10*time.Second), &kgo.Record{Key: fmt.Appendf(nil, "k%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	type lagRow struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Committed int64  `json:"committed"`
		End       int64  `json:"end"`
		Lag       int64  `json:"lag"`
	}
	lagTotal := func() (int64, []lagRow) {
		var rows []lagRow
		cliJSON(t, addr, &rows, "group", "lag", group)
		s := int64(0)
		for _, r := range rows {
			s += r.Lag
		}
		return s, rows
	}
	if l, rows := lagTotal(); l != 10 || len(rows) != 3 {
		t.Fatalf("lag after 10 more: %d %+v", l, rows)
	}
	committed := func() map[int32]int64 {
		os, err := adm.FetchOffsets(testCtx(t, 10*time.Second), group)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		os.Each(func(o kadm.OffsetResponse) { m[o.Partition] = o.At })
		return m
	}
	before := committed()
	// Dry run by default: the plan, nothing committed.
	var plan struct {
		Executed   bool `json:"executed"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Current   int64 `json:"current"`
			New       int64 `json:"new"`
		} `json:"partitions"`
	}
	cliJSON(t, addr, &plan, "group", "reset-offsets", group, "--topic", topic, "--to-earliest")
	if plan.Executed || len(plan.Partitions) != 3 || slices.ContainsFunc(plan.Partitions, func(p struct {
		Partition int32 `json:"partition"`
		Current   int64 `json:"current"`
		New       int64 `json:"new"`
	}) bool {
		return p.New != 0 || p.Current != before[p.Partition]
	}) {
		t.Fatalf("dry run plan: %+v (committed %v)", plan, before)
	}
	if now := committed(); !maps.Equal(now, before) {
		t.Fatalf("dry run committed: %v -> %v", before, now)
	}
	cliOK(t, addr, "", "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
	if l, _ := lagTotal(); l != 40 {
		t.Fatalf("lag after --to-earliest: %d, want 40", l)
	}
	cliOK(t, addr, "", "group", "reset-offsets", group, "--topic", topic, "--shift-by", "2", "--execute")
	ends := endOffsets(t, adm, topic)
	for p, c := range committed() {
		if c != min(2, ends[p]) {
			t.Fatalf("--shift-by 2 from 0: partition %d at %d (end %d)", p, c, ends[p])
		}
	}
	cliOK(t, addr, "", "group", "reset-offsets", group, "--topic", topic, "--to-datetime", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--execute")
	if l, _ := lagTotal(); l != 0 {
		t.Fatalf("lag after --to-datetime in the future: %d, want 0", l)
	}
	cliOK(t, addr, "", "group", "reset-offsets", group, "--topic", topic, "--to-offset", "1", "--execute")
	for p, c := range committed() {
		if c != 1 {
			t.Fatalf("--to-offset 1: partition %d at %d", p, c)
		}
	}
	// A group that does not exist yet can be given offsets before its first
	// consumer starts; describing it says it does not exist.
	cliOK(t, addr, "", "group", "reset-offsets", "new-"+group, "--topic", topic, "--to-offset", "1", "--execute")
	if errs := cliCode(t, 1, addr, "group", "describe", "never-"+group); !strings.Contains(errs, "does not exist") {
		t.Fatalf("describe of a group that never existed: %q", errs)
	}
	cliCode(t, 2, addr, "group", "reset-offsets", group, "--topic", topic)                                 // no mode
	cliCode(t, 2, addr, "group", "reset-offsets", group, "--topic", topic, "--to-latest", "--to-earliest") // two

	var groups []struct {
		Group string `json:"group"`
	}
	cliJSON(t, addr, &groups, "group", "list")
	if !slices.ContainsFunc(groups, func(g struct {
		Group string `json:"group"`
	}) bool {
		return g.Group == group
	}) {
		t.Fatalf("group list: %+v", groups)
	}
	cliOK(t, addr, "", "group", "delete", group)
	if errs := cliCode(t, 1, addr, "group", "describe", group); !strings.Contains(errs, "does not exist") {
		t.Fatalf("describe a deleted group: %s", errs)
	}
	cliCode(t, 1, addr, "group", "lag", group)
	lg, err := adm.ListGroups(testCtx(t, 10*time.Second))
	if err != nil || slices.Contains(lg.Groups(), group) {
		t.Fatalf("after group delete: %v %v", err, lg.Groups())
	}

	// cluster info.
	var ci struct {
		ClusterID  string `json:"cluster_id"`
		Controller int32  `json:"controller"`
		Brokers    []struct {
			ID int32 `json:"id"`
		} `json:"brokers"`
		Features []struct {
			Name string `json:"name"`
		} `json:"features"`
	}
	cliJSON(t, addr, &ci, "cluster", "info")
	if ci.ClusterID == "" || len(ci.Brokers) != 1 || ci.Brokers[0].ID != 1 || ci.Controller != 1 ||
		!slices.ContainsFunc(ci.Features, func(f struct {
			Name string `json:"name"`
		}) bool {
			return f.Name == "metadata.version"
		}) {
		t.Fatalf("cluster info: %+v", ci)
	}

	// topic delete; exit codes of failures and usage errors.
	cliOK(t, addr, "", "topic", "delete", topic)
	if tds, err := adm.ListTopics(testCtx(t, 10*time.Second)); err != nil || tds.Has(topic) {
		t.Fatalf("after topic delete: %v %v", err, tds.Names())
	}
	cliCode(t, 1, addr, "topic", "delete", topic)
	cliCode(t, 1, addr, "topic", "describe", topic)
	cliCode(t, 1, addr, "consume", "-t", topic, "-e")
	// verify wants a topic of its own.
	cliOK(t, addr, "", "topic", "create", "cli-taken")
	if errs := cliCode(t, 1, addr, "verify", "--topic", "cli-taken", "--duration", "1s"); !strings.Contains(errs, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("verify on an existing topic: %s", errs)
	}
	cliCode(t, 1, "127.0.0.1:1", "topic", "list", "--timeout", "2s")
	cliCode(t, 2, addr, "topic", "frobnicate")
	cliCode(t, 2, addr, "topic", "create")
	cliCode(t, 2, addr, "topic", "list", "--no-such-flag")
	cliCode(t, 2, addr, "consume")
}

// fjord verify on three nodes, with the leader of partition 0 killed in
// the middle: nothing acknowledged is lost. The history it wrote, checked
// again here, passes; tampered (a record dropped, one read twice, two
// swapped), the checker catches each.
func TestCLIVerifyKillNode(t *testing.T) {
	c := startCluster(t, 3)
	const topic = "cli-verify"
	histPath := filepath.Join(t.TempDir(), "history.json")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, fjordBin, "verify", "--bootstrap", strings.Join(c.Addrs(), ","), "--topic", topic,
		"--partitions", "6", "--replication-factor", "3", "--duration", "10s", "--rate", "300", "--json", "--history", histPath)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill the leader of partition 0 a third of the way in.
	victim := -1
	c.Await(t, 15*time.Second, "verify's topic", func() (bool, string) {
		md, err := c.Metadata(1, topic)
		if err != nil {
			return false, err.Error()
		}
		p, ok := md.Topics[topic].Partitions[0]
		if !ok || p.Leader < 0 {
			return false, "no leader for partition 0"
		}
		victim = int(p.Leader)
		return true, ""
	})
	time.Sleep(time.Until(start.Add(4 * time.Second)))
	c.Kill(victim)
	t.Logf("killed node %d (leader of %s[0]) at %v", victim, topic, time.Since(start).Truncate(time.Millisecond))
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		OK        bool     `json:"ok"`
		Attempted int      `json:"attempted"`
		Acked     int      `json:"acked"`
		Lost      int      `json:"lost"`
		Dup       int      `json:"duplicated"`
		Reordered int      `json:"reordered"`
		Problems  []string `json:"problems"`
		Landed    int      `json:"indefinite_landed"`
		NotLanded int      `json:"indefinite_not_landed"`
		Consumed  int      `json:"group_consumed"`
		Resumed   int      `json:"group_resumed"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s\nstderr: %s", err, out.String(), errb.String())
	}
	t.Logf("verify took %v: exit %d, attempted %d, acked %d, outcome unknown %d landed / %d not, group processed %d, resumed %d",
		time.Since(start).Truncate(time.Millisecond), code, rep.Attempted, rep.Acked, rep.Landed, rep.NotLanded, rep.Consumed, rep.Resumed)
	if code != 0 || !rep.OK || rep.Lost != 0 || rep.Acked < 1000 {
		t.Fatalf("verify: exit %d\n%s\nstderr: %s", code, out.String(), errb.String())
	}

	// The recorded history, checked again, then tampered.
	data, err := os.ReadFile(histPath)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Attempts []history.Attempt `json:"attempts"`
		Reads    []history.Record  `json:"reads"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	if r := history.Check(h.Attempts, h.Reads); !r.OK() || r.Acked != rep.Acked {
		t.Fatalf("recorded history: %s\n%s", r.Figures(), r.Details())
	}
	// Two reads of one key (so of one partition), both acknowledged, with
	// no read of that key between them.
	i, j := -1, -1
	for a := 0; a < len(h.Reads) && j < 0; a++ {
		if h.Attempts[seqOf(t, h.Reads[a])].Outcome != history.Acked {
			continue
		}
		for b := a + 1; b < len(h.Reads); b++ {
			if h.Reads[b].Key == h.Reads[a].Key {
				if h.Attempts[seqOf(t, h.Reads[b])].Outcome == history.Acked {
					i, j = a, b
				}
				break
			}
		}
	}
	if j < 0 {
		t.Fatal("no two acknowledged reads of one key")
	}
	lost := slices.Delete(slices.Clone(h.Reads), i, i+1)
	if r := history.Check(h.Attempts, lost); r.Lost != 1 || r.OK() {
		t.Fatalf("a read dropped: %s", r.Figures())
	}
	dup := slices.Insert(slices.Clone(h.Reads), i+1, h.Reads[i])
	if r := history.Check(h.Attempts, dup); r.Dup != 1 || r.OK() {
		t.Fatalf("a read twice: %s", r.Figures())
	}
	swapped := slices.Clone(h.Reads)
	swapped[i], swapped[j] = swapped[j], swapped[i]
	if r := history.Check(h.Attempts, swapped); r.Reordered == 0 || r.OK() {
		t.Fatalf("two reads swapped: %s", r.Figures())
	}
}

func seqOf(t testing.TB, r history.Record) int {
	var n int
	if _, err := fmt.Sscan(r.Value, &n); err != nil {
		t.Fatalf("value %q: %v", r.Value, err)
	}
	return n
}
