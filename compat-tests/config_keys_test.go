package compattests

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// The unknown-key rule, both ways, through the real binary: Confluent-only
// and JVM settings start the node with one line listing what is ignored
// and a warning per key Fjord does not act on yet; a typo stops start-up
// naming the key it meant.
func TestConfigKeysCatalogue(t *testing.T) {
	t.Run("Confluent keys start with warnings", func(t *testing.T) {
		addr := "127.0.0.1:" + freePort(t)
		cmd := exec.Command(fjordBin, "--override", "listeners=PLAINTEXT://"+addr, "--override", "log.dirs="+t.TempDir())
		cmd.Env = append(os.Environ(),
			"KAFKA_JMX_HOSTNAME=localhost",
			"KAFKA_JMX_PORT=9101",
			"KAFKA_CONFLUENT_SUPPORT_METRICS_ENABLE=false",
			"KAFKA_CONFLUENT_LICENSE_TOPIC_REPLICATION_FACTOR=1",
			"KAFKA_CONFLUENT_BALANCER_TOPIC_REPLICATION_FACTOR=1",
			"KAFKA_METRIC_REPORTERS=io.confluent.metrics.reporter.ConfluentMetricsReporter",
			"KAFKA_LOG_CLEANER_ENABLE=true",
			"KAFKA_SOCKET_SEND_BUFFER_BYTES=102400",
			"KAFKA_NUM_NETWORK_THREADS=3",
			"KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR=1",
			"KAFKA_REMOTE_LOG_MANAGER_COPY_MAX_BYTES_PER_SECOND=1048576",
			"FJORD_LOG_LEVEL=info",
		)
		var logs syncBuffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		deadline := time.Now().Add(30 * time.Second)
		for probe(addr) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the node never served:\n%s", logs.String())
			}
			time.Sleep(25 * time.Millisecond)
		}
		out := logs.String()
		var ignoredLines []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "no meaning for Fjord") {
				ignoredLines = append(ignoredLines, line)
			}
		}
		if len(ignoredLines) != 1 {
			t.Fatalf("want one line listing the ignored keys, got %d:\n%s", len(ignoredLines), out)
		}
		for _, k := range []string{"KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT", "confluent.support.metrics.enable",
			"confluent.license.topic.replication.factor", "confluent.balancer.topic.replication.factor",
			"metric.reporters", "socket.send.buffer.bytes", "num.network.threads", "KAFKA_ZOOKEEPER_CONNECT"} {
			if !strings.Contains(ignoredLines[0], k) {
				t.Errorf("the ignored line lacks %s: %s", k, ignoredLines[0])
			}
		}
		if !strings.Contains(out, `"key":"remote.log.manager.copy.max.bytes.per.second","from":"env KAFKA_REMOTE_LOG_MANAGER_COPY_MAX_BYTES_PER_SECOND","why":"a tiered-storage setting Fjord does not act on`) {
			t.Errorf("no warning for remote.log.manager.copy.max.bytes.per.second:\n%s", out)
		}
		// Share groups are served: their keys are read, not warned about.
		if strings.Contains(out, `"key":"share.coordinator.state.topic.min.isr"`) {
			t.Errorf("a warning for share.coordinator.state.topic.min.isr, which Fjord reads:\n%s", out)
		}
	})
	t.Run("a typo stops start-up and names the key", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			env  string
			want string
		}{
			{[]string{"--override", "log.retention.hour=1"}, "", `unknown configuration key "log.retention.hour" (did you mean "log.retention.hours"?`},
			{nil, "KAFKA_NUM_NETWORK_THREAD=3", `did you mean "num.network.threads"?`},
			{nil, "KAFKA_AUTHORIZER_CLASS_NAME=com.example.OpaAuthorizer", "is not available"},
			{nil, "KAFKA_LISTENERS=SASL_PLAINTEXT://127.0.0.1:0", "SASL mechanism GSSAPI is not supported"},
		} {
			cmd := exec.Command(fjordBin, append(c.args, "--override", "log.dirs="+t.TempDir())...)
			cmd.Env = os.Environ()
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Errorf("%v %s: exit %v, want status 2", c.args, c.env, err)
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("%v %s: still running: it should have refused to start", c.args, c.env)
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("%v %s: output %q lacks %q", c.args, c.env, out.String(), c.want)
			}
		}
	})
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
