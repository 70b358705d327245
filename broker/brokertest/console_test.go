package brokertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

// page fetches a console page's HTML.
func page(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %s %v: %s", addr, path, resp.Status, err, b)
	}
	return string(b)
}

var (
	underReplicated = regexp.MustCompile(`id="under-replicated">(\d+)<`)
	fencedRow       = regexp.MustCompile(`<td>3[^\n]*</td>\s*<td><span class="status bad">fenced</span>`)
)

// The consoles of a three-node cluster: every node shows the three
// brokers and voters; a stopped node shows as fenced with the partitions
// it leaves under-replicated; a group is listed by its coordinator alone.
func TestConsoleOfACluster(t *testing.T) {
	addrs := map[int32]string{}
	for id := int32(1); id <= 3; id++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[id] = addr
	}
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), Configure: func(id int32, cfg *config.Config) {
		cfg.ConsoleAddr = addrs[id]
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if code := createTopic(t, c.Addr(1), "cons", 3, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "cons", 3)

	for id, addr := range addrs {
		html := page(t, addr, "/")
		for _, want := range []string{"<td>1", "<td>2", "<td>3", fmt.Sprintf("%d <span class=\"tag\">this node</span>", id)} {
			if !strings.Contains(html, want) {
				t.Errorf("node %d's cluster page has no %q", id, want)
			}
		}
		if n := strings.Count(html, `<span class="status ok">live</span>`); n != 3 {
			t.Errorf("node %d's cluster page shows %d live brokers, want 3", id, n)
		}
		if n := strings.Count(html[strings.Index(html, `id="voters"`):], "<tr><td>"); n != 3 {
			t.Errorf("node %d's cluster page shows %d voters, want 3", id, n)
		}
	}

	// A group committed through the cluster: one node coordinates it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("cons-group"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var commitErr error
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"cons": {0: {Epoch: -1, Offset: 0}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				commitErr = err
				if err == nil {
					for _, tp := range resp.Topics {
						for _, p := range tp.Partitions {
							if p.ErrorCode != 0 {
								commitErr = kerr.ErrorForCode(p.ErrorCode)
							}
						}
					}
				}
			})
		if commitErr == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("commit: %v", commitErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	listing := 0
	for _, addr := range addrs {
		if strings.Contains(page(t, addr, "/groups"), `href="/group?id=cons-group"`) {
			listing++
		}
	}
	if listing != 1 {
		t.Errorf("%d nodes list the group, want its coordinator alone", listing)
	}

	// Node 3 stops: node 1 shows it fenced and its partitions short of a
	// replica.
	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	var html string
	for deadline := time.Now().Add(30 * time.Second); ; {
		html = page(t, addrs[1], "/")
		m := underReplicated.FindStringSubmatch(html)
		// __consumer_offsets' 50 partitions have three replicas too.
		if fencedRow.MatchString(html) && m != nil && m[1] == "53" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 never showed node 3 fenced and 53 partitions under-replicated:\n%s", html)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(html, `<a href="/topic?name=cons">cons</a>-`); n != 3 {
		t.Errorf("the under-replicated list names %d partitions of cons, want 3", n)
	}
	if n := strings.Count(page(t, addrs[1], "/topic?name=cons"), `<span class="status warn">under-replicated</span>`); n != 3 {
		t.Errorf("the topic page marks %d partitions under-replicated, want 3", n)
	}
}
