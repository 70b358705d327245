package console

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestConsoleAllowedHostsParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ", nil},
		{"Console.Example.COM", []string{"console.example.com"}},
		{"console.example.com.:8443, ops:09092", []string{"console.example.com:8443", "ops:9092"}},
		{"[::1], [0:0::1]:80, 10.0.0.5, [::ffff:10.0.0.6]", []string{"[::1]", "[::1]:80", "10.0.0.5", "10.0.0.6"}},
		{"*", []string{"*"}},
	} {
		got, err := ParseAllowedHosts(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q %v, want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"http://console.example", "host:0", "host:65536", "host:+80", "host:", ":8092", "host:port",
		"[::1", "::1", "a b", "host/path", "[evil.example]", "user@host"} {
		if got, err := ParseAllowedHosts(bad); err == nil {
			t.Errorf("%q: accepted as %q", bad, got)
		}
	}
}

func TestConsoleHostsAllow(t *testing.T) {
	for _, c := range []struct {
		name                     string
		configured, bound, allow string
		yes, no                  []string
		unchecked                bool
	}{
		{name: "loopback", configured: "127.0.0.1:8092", bound: "127.0.0.1:8092",
			yes: []string{"127.0.0.1:8092", "localhost:8092", "LocalHost.:8092", "[::1]:8092", "[0:0:0:0:0:0:0:1]:8092", "[::ffff:127.0.0.1]:8092"},
			no:  []string{"evil.example:8092", "evil.example", "localhost", "localhost:8093", "127.0.0.1:80", "127.0.0.2:8092", "", ":8092", "[::1]", "localhost:+8092"}},
		{name: "configured by name", configured: "localhost:0", bound: "127.0.0.1:41234",
			yes: []string{"localhost:41234", "127.0.0.1:41234"},
			no:  []string{"localhost:0", "evil.example:41234"}},
		{name: "a host's address", configured: "console.internal:8092", bound: "10.1.2.3:8092",
			yes: []string{"console.internal:8092", "10.1.2.3:8092"},
			no:  []string{"localhost:8092", "127.0.0.1:8092", "console.internal", "evil.example:8092"}},
		{name: "port 80 needs none", configured: "10.1.2.3:80", bound: "10.1.2.3:80",
			yes: []string{"10.1.2.3", "10.1.2.3:80"},
			no:  []string{"10.1.2.3:8080"}},
		{name: "allowed hosts", configured: "127.0.0.1:8092", bound: "127.0.0.1:8092", allow: "console.example.com, ops.example:9999, [fd00::1]",
			yes: []string{"localhost:8092", "console.example.com", "console.example.com:443", "CONSOLE.example.com:8092", "ops.example:9999", "[fd00::1]:1"},
			no:  []string{"ops.example:8092", "ops.example", "evil.example:8092", "sub.console.example.com"}},
		{name: "wildcard, nothing configured", configured: ":8092", bound: "[::]:8092", unchecked: true,
			yes: []string{"evil.example:8092", "anything"}},
		{name: "wildcard with allowed hosts", configured: "0.0.0.0:8092", bound: "0.0.0.0:8092", allow: "console.example.com",
			yes: []string{"console.example.com", "localhost:8092", "[::1]:8092"},
			no:  []string{"evil.example:8092", "10.1.2.3:8092"}},
		{name: "star", configured: "127.0.0.1:8092", bound: "127.0.0.1:8092", allow: "*",
			yes: []string{"evil.example:8092"}},
	} {
		allowed, err := ParseAllowedHosts(c.allow)
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHosts(c.configured, c.bound, allowed)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if h.Unchecked() != c.unchecked {
			t.Errorf("%s: Unchecked %v, want %v", c.name, h.Unchecked(), c.unchecked)
		}
		for _, host := range c.yes {
			if !h.Allows(host) {
				t.Errorf("%s: Host %q refused", c.name, host)
			}
		}
		for _, host := range c.no {
			if h.Allows(host) {
				t.Errorf("%s: Host %q allowed", c.name, host)
			}
		}
	}
}

// Each distinct host is logged at most once a minute, and no more than
// maxRefusedHosts are remembered however many a visitor invents.
func TestConsoleRefusalLog(t *testing.T) {
	var l refusalLog
	t0 := time.Unix(1000, 0)
	if log, _, _ := l.note("a", t0); !log {
		t.Fatal("a first refusal is not logged")
	}
	for i := range 3 {
		if log, _, _ := l.note("a", t0.Add(time.Duration(i)*time.Second)); log {
			t.Fatalf("repeat %d within the minute logged", i)
		}
	}
	if log, _, _ := l.note("b", t0.Add(time.Second)); !log {
		t.Fatal("another host's first refusal is not logged")
	}
	if log, repeats, _ := l.note("a", t0.Add(time.Minute)); !log || repeats != 3 {
		t.Fatalf("a minute on: logged %v with %d repeats, want true with 3", log, repeats)
	}

	now := t0.Add(time.Hour)
	logged := 0
	for i := range 3 * maxRefusedHosts {
		if log, _, _ := l.note(fmt.Sprintf("h%d", i), now); log {
			logged++
		}
		if len(l.last) > maxRefusedHosts {
			t.Fatalf("remembers %d hosts, more than %d", len(l.last), maxRefusedHosts)
		}
	}
	if logged != maxRefusedHosts {
		t.Fatalf("logged %d invented hosts within one minute, want %d", logged, maxRefusedHosts)
	}
	// A minute on, the full map makes room and the line counts the
	// refusals it did not log.
	log, _, overflow := l.note("late", now.Add(time.Minute))
	if !log || overflow != 2*maxRefusedHosts {
		t.Fatalf("after the minute: logged %v with %d unlogged, want true with %d", log, overflow, 2*maxRefusedHosts)
	}
	if len(l.last) > maxRefusedHosts {
		t.Fatalf("remembers %d hosts", len(l.last))
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// getHost sends GET url over real HTTP with the Host header set to host.
func getHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s as %s: %v", url, host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The console behind its Host check, over real HTTP on a loopback port: a
// browser that reached it through a rebound name (evil.example) is
// refused before any page, records included, is built; the names of the
// bound address are served.
func TestConsoleHostFilterOverHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	hosts, err := NewHosts("127.0.0.1:0", ln.Addr().String(), []string{"console.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	src := &fakeSource{}
	f := NewHostFilter(New(src, zerolog.Nop()), hosts, zerolog.New(&logs))
	var now atomic.Int64 // unix seconds; the server's goroutines read it
	now.Store(1000)
	f.now = func() time.Time { return time.Unix(now.Load(), 0) }
	srv := httptest.NewUnstartedServer(f)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	url := srv.URL + "/partition?topic=orders&p=0"

	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "console.example.com"} {
		if code, body := getHost(t, url, host); code != http.StatusOK || !strings.Contains(body, "k1") {
			t.Errorf("Host %s: status %d, want 200 with the records", host, code)
		}
	}
	served := len(src.tails)
	for _, host := range []string{"evil.example:8092", "evil.example:" + port, "evil.example:8092", "localhost:1"} {
		code, body := getHost(t, url, host)
		if code != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: status %d, want 421", host, code)
		}
		if strings.Contains(body, "k1") || strings.Contains(body, "<html") || len(body) > 300 || !strings.Contains(body, AllowedHostsKey) {
			t.Errorf("Host %s: body %q, want a short text naming %s", host, body, AllowedHostsKey)
		}
	}
	if len(src.tails) != served {
		t.Errorf("refused requests reached the source: %d tails read, want %d", len(src.tails), served)
	}
	// evil.example:8092 twice within the minute: one line for it, one
	// for each other refused host.
	out := logs.String()
	if n := strings.Count(out, `"host":"evil.example:8092"`); n != 1 {
		t.Errorf("evil.example:8092 logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d refusal lines, want 3:\n%s", n, out)
	}
	now.Add(60)
	getHost(t, url, "evil.example:8092")
	if out := logs.String(); !strings.Contains(out, `"host":"evil.example:8092","remote":`) || strings.Count(out, `"repeats":1`) != 1 {
		t.Errorf("a minute later the host is not logged again with its repeat:\n%s", out)
	}
}
