package compattests

// `fjord consume -G`, the real binary against a real node: runs resume from
// the group's commits without printing a record twice, and two concurrent
// members split the partitions between them.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceN writes n keyed records to topic and waits for their acks.
func produceN(t testing.TB, addr, topic string, from, n int) {
	t.Helper()
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := prod.ProduceSync(testCtx(t, 20*time.Second), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// positions parses `-f '%p/%o\n'` output.
func positions(t testing.TB, out string) []string {
	t.Helper()
	var ps []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var p, o int
		if _, err := fmt.Sscanf(l, "%d/%d", &p, &o); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		ps = append(ps, l)
	}
	return ps
}

func committedSum(t testing.TB, adm *kadm.Client, group string) int64 {
	t.Helper()
	os, err := adm.FetchOffsets(testCtx(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	s := int64(0)
	os.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			s += o.At
		}
	})
	return s
}

func TestCLIConsumeGroupResumes(t *testing.T) {
	b := startBroker(t, t.TempDir(), "group.initial.rebalance.delay.ms=0")
	addr := b.Addr
	adm := newAdmin(t, addr)
	const topic, group = "cli-g-resume", "cli-g-resume"
	cliOK(t, addr, "", "topic", "create", topic, "--partitions", "3", "--replication-factor", "1")
	produceN(t, addr, topic, 0, 30)

	// The first run prints 10 and commits exactly those.
	first := positions(t, cliOK(t, addr, "", "consume", "-G", group, "-t", topic, "-c", "10", "-f", `%p/%o\n`))
	if len(first) != 10 {
		t.Fatalf("-c 10 printed %d: %v", len(first), first)
	}
	if s := committedSum(t, adm, group); s != 10 {
		t.Fatalf("after printing 10 the group's commits add up to %d", s)
	}
	// The second resumes: the other 20, then the end (-e).
	second := positions(t, cliOK(t, addr, "", "consume", "-G", group, "-t", topic, "-e", "-f", `%p/%o\n`))
	all := append(slices.Clone(first), second...)
	slices.Sort(all)
	if len(second) != 20 || len(slices.Compact(all)) != 30 {
		t.Fatalf("second run printed %d (%v) after %v", len(second), second, first)
	}
	if s := committedSum(t, adm, group); s != 30 {
		t.Fatalf("after the end the commits add up to %d", s)
	}
	// Nothing left: -e exits at once, printing nothing.
	if out := cliOK(t, addr, "", "consume", "-G", group, "-t", topic, "-e"); out != "" {
		t.Fatalf("third run printed %q", out)
	}
	// Two more, as JSON.
	produceN(t, addr, topic, 30, 2)
	out := cliOK(t, addr, "", "consume", "-G", group, "-t", topic, "-e", "--json")
	var keys []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Topic string  `json:"topic"`
			Key   *string `json:"key"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Topic != topic || r.Key == nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		keys = append(keys, *r.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"k30", "k31"}) {
		t.Fatalf("--json after two more: %v", keys)
	}
	// A new group with -o end starts at the end.
	if out := cliOK(t, addr, "", "consume", "-G", group+"-new", "-t", topic, "-o", "end", "-e"); out != "" {
		t.Fatalf("-o end -e printed %q", out)
	}
	cliCode(t, 2, addr, "consume", "-G", group, "-t", topic, "-p", "0")
	cliCode(t, 2, addr, "consume", "-G", group, "-t", topic, "-o", "middle")
	cliCode(t, 1, addr, "consume", "-G", group, "-t", "no-such-topic", "-e")
}

// member is one `fjord consume -G` process whose lines are collected.
type member struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startMember(t testing.TB, addr string, args ...string) *member {
	t.Helper()
	m := &member{cmd: exec.Command(fjordBin, args...), done: make(chan struct{})}
	m.cmd.Env = append(os.Environ(), "FJORD_BOOTSTRAP="+addr)
	m.cmd.Stderr = os.Stderr
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.cmd.Process.Kill(); <-m.done })
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m.mu.Lock()
			m.lines = append(m.lines, sc.Text())
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *member) got() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

// stop sends SIGTERM and wants a clean exit.
func (m *member) stop(t testing.TB) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	<-m.done
	if err := m.cmd.Wait(); err != nil {
		t.Fatalf("consume -G after SIGTERM: %v", err)
	}
}

func TestCLIConsumeGroupSplits(t *testing.T) {
	b := startBroker(t, t.TempDir(), "group.initial.rebalance.delay.ms=0")
	addr := b.Addr
	adm := newAdmin(t, addr)
	const topic, group = "cli-g-split", "cli-g-split"
	cliOK(t, addr, "", "topic", "create", topic, "--partitions", "4", "--replication-factor", "1")
	args := []string{"consume", "-G", group, "-t", topic, "-f", `%p/%o\n`}
	a, bm := startMember(t, addr, args...), startMember(t, addr, args...)

	// Both members hold partitions before anything is produced.
	deadline := time.Now().Add(60 * time.Second)
	for {
		gs, err := adm.DescribeGroups(testCtx(t, 10*time.Second), group)
		state := fmt.Sprint(err)
		if err == nil {
			g := gs[group]
			held := 0
			for _, m := range g.Members {
				if c, ok := m.Assigned.AsConsumer(); ok && len(c.Topics) > 0 && len(c.Topics[0].Partitions) > 0 {
					held++
				}
			}
			if g.State == "Stable" && held == 2 {
				break
			}
			state = fmt.Sprintf("state %s, %d members, %d holding partitions", g.State, len(g.Members), held)
		}
		if time.Now().After(deadline) {
			t.Fatalf("two members never both held partitions: %s", state)
		}
		time.Sleep(200 * time.Millisecond)
	}

	produceN(t, addr, topic, 0, 80)
	for deadline = time.Now().Add(60 * time.Second); len(a.got())+len(bm.got()) < 80; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("printed %d + %d of 80", len(a.got()), len(bm.got()))
		}
	}
	a.stop(t)
	bm.stop(t)
	ga, gb := positions(t, strings.Join(a.got(), "\n")), positions(t, strings.Join(bm.got(), "\n"))
	partsOf := func(ls []string) []string {
		var ps []string
		for _, l := range ls {
			p, _, _ := strings.Cut(l, "/")
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return slices.Compact(ps)
	}
	pa, pb := partsOf(ga), partsOf(gb)
	all := append(slices.Clone(ga), gb...)
	slices.Sort(all)
	if len(ga) == 0 || len(gb) == 0 || len(all) != 80 || len(slices.Compact(all)) != 80 {
		t.Fatalf("members printed %d and %d records (%d distinct of 80)", len(ga), len(gb), len(slices.Compact(all)))
	}
	for _, p := range pa {
		if slices.Contains(pb, p) {
			t.Fatalf("partition %s printed by both members (%v, %v)", p, pa, pb)
		}
	}
	t.Logf("member A printed partitions %v (%d records), member B %v (%d)", pa, len(ga), pb, len(gb))
	if s := committedSum(t, adm, group); s != 80 {
		t.Fatalf("after both stopped the commits add up to %d, want 80", s)
	}
}
