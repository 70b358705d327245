package broker

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
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

// /debug/pprof is served on the metrics listener only when
// fjord.metrics.pprof.enable asks for it.
func TestMetricsPprofOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		logs := &logSink{}
		testBrokerLogging(t, t.TempDir(), func(c *Config) {
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
