package broker

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/console"
)

// logSink keeps a broker's log lines for a test to read.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// boundAddr waits (bounded) for the log line naming where what is served.
func boundAddr(t *testing.T, logs *logSink, what string) string {
	t.Helper()
	re := regexp.MustCompile(`"addr":"([^"]+)"[^\n]*"message":"serving ` + regexp.QuoteMeta(what) + `"`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line serving %s:\n%s", what, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// httpGet sends GET http://addr+path with the Host header host ("" for
// addr's own).
func httpGet(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The console of a real broker on a loopback port answers the names of
// its address and the configured ones; a rebound name is refused with 421
// before any record is read, and logged once.
func TestConsoleHostCheck(t *testing.T) {
	logs := &logSink{}
	b := testBrokerLogging(t, t.TempDir(), func(c *config.Config) {
		c.ConsoleAddr = "127.0.0.1:0"
		c.ConsoleAllowedHosts = "console.example.com"
	}, logs)
	rc := dial(t, b)
	if ec := rc.createTopic("secrets", 1, nil); ec != 0 {
		t.Fatalf("create: %d", ec)
	}
	if ec, _ := rc.produce("secrets", 0, makeBatch(batchSpec{values: []string{"hunter2"}})); ec != 0 {
		t.Fatalf("produce: %d", ec)
	}
	addr := boundAddr(t, logs, "the web console")
	_, port, _ := net.SplitHostPort(addr)
	const path = "/partition?topic=secrets&p=0"
	for _, host := range []string{"", "localhost:" + port, "[::1]:" + port, "console.example.com"} {
		if code, body := httpGet(t, addr, host, path); code != http.StatusOK || !strings.Contains(body, "hunter2") {
			t.Errorf("Host %q: status %d, want 200 with the record:\n%s", host, code, body)
		}
	}
	for range 2 {
		for _, host := range []string{"evil.example:8092", "evil.example:" + port} {
			code, body := httpGet(t, addr, host, path)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "hunter2") {
				t.Errorf("Host %q: status %d, want 421 without the record:\n%s", host, code, body)
			}
		}
	}
	out := logs.String()
	if n := strings.Count(out, `"host":"evil.example:8092"`); n != 1 {
		t.Errorf("evil.example:8092 refused twice, logged %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "answers any Host") {
		t.Errorf("a loopback console warned that it answers any Host:\n%s", out)
	}
}

// Bound to every address with no allowed hosts, the console answers any
// Host and says so at start-up, naming the key that fixes it; with allowed
// hosts it checks them.
func TestConsoleWildcardBind(t *testing.T) {
	logs := &logSink{}
	testBrokerLogging(t, t.TempDir(), func(c *config.Config) { c.ConsoleAddr = "0.0.0.0:0" }, logs)
	_, port, _ := net.SplitHostPort(boundAddr(t, logs, "the web console"))
	addr := net.JoinHostPort("127.0.0.1", port)
	if code, body := httpGet(t, addr, "evil.example:8092", "/"); code != http.StatusOK {
		t.Errorf("unchecked wildcard console: status %d:\n%s", code, body)
	}
	if out := logs.String(); !regexp.MustCompile(`"level":"warn".*answers any Host.*` + regexp.QuoteMeta(console.AllowedHostsKey)).MatchString(out) {
		t.Errorf("no start-up warning naming %s:\n%s", console.AllowedHostsKey, out)
	}

	logs = &logSink{}
	testBrokerLogging(t, t.TempDir(), func(c *config.Config) {
		c.ConsoleAddr = "0.0.0.0:0"
		c.ConsoleAllowedHosts = "console.example.com:" + port
	}, logs)
	_, port, _ = net.SplitHostPort(boundAddr(t, logs, "the web console"))
	addr = net.JoinHostPort("127.0.0.1", port)
	if code, _ := httpGet(t, addr, "evil.example:"+port, "/"); code != http.StatusMisdirectedRequest {
		t.Errorf("wildcard console with allowed hosts, Host evil.example: status %d, want 421", code)
	}
	if code, _ := httpGet(t, addr, "localhost:"+port, "/"); code != http.StatusOK {
		t.Errorf("wildcard console with allowed hosts, Host localhost: status %d, want 200", code)
	}
	if strings.Contains(logs.String(), "answers any Host") {
		t.Errorf("a checked wildcard console warned:\n%s", logs.String())
	}
}

// /debug/pprof is served on the metrics listener only when
// fjord.metrics.pprof.enable asks for it.
func TestMetricsPprofOptIn(t *testing.T) {
	if k, ok := config.LookupKey("fjord.metrics.pprof.enable"); !ok || k.Def != "false" {
		t.Fatalf("fjord.metrics.pprof.enable: %+v %v, want default false", k, ok)
	}
	for _, on := range []bool{false, true} {
		logs := &logSink{}
		testBrokerLogging(t, t.TempDir(), func(c *config.Config) {
			c.MetricsAddr = "127.0.0.1:0"
			c.MetricsPprof = on
		}, logs)
		what := "/metrics"
		if on {
			what = "/metrics and /debug/pprof"
		}
		addr := boundAddr(t, logs, what)
		if code, _ := httpGet(t, addr, "", "/metrics"); code != http.StatusOK {
			t.Errorf("pprof %v: /metrics status %d", on, code)
		}
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		paths := []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"}
		if !on { // served, these would run for a second or more
			paths = append(paths, "/debug/pprof/profile", "/debug/pprof/trace")
		}
		for _, path := range paths {
			if code, _ := httpGet(t, addr, "", path); code != want {
				t.Errorf("pprof %v: %s status %d, want %d", on, path, code, want)
			}
		}
	}
}

// The key parses host lists, refuses what is not one, and Validate checks
// a Config built without it.
func TestConsoleAllowedHostsKey(t *testing.T) {
	k, ok := config.LookupKey(console.AllowedHostsKey)
	if !ok {
		t.Fatalf("no key %s", console.AllowedHostsKey)
	}
	c := config.Default()
	if err := k.Set(&c, "Console.Example.com, ops:9999"); err != nil || c.ConsoleAllowedHosts != "console.example.com,ops:9999" {
		t.Errorf("set: %q %v", c.ConsoleAllowedHosts, err)
	}
	if err := k.Set(&c, "http://x"); err == nil {
		t.Error("http://x accepted")
	}
	c.ConsoleAllowedHosts = "a b"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), console.AllowedHostsKey) {
		t.Errorf("Validate: %v, want an error naming %s", err, console.AllowedHostsKey)
	}
}
