package compattests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestSASLApacheExample runs the environment of apache/kafka's
// docker/examples/docker-compose-files/single-node/sasl_plaintext (the
// broker service, with its fixtures/sasl/broker_jaas.conf given through
// KAFKA_OPTS) on the fjord binary itself, without Docker: only the host
// names (broker, localhost) become 127.0.0.1, the ports free ones and the
// log directory a temporary one. A client with the example's credentials
// (alice) produces and consumes on both SASL listeners; the broker's own
// inter-broker identity (admin, PLAIN) is what the JAAS file gives.
func TestSASLApacheExample(t *testing.T) {
	ex := startApacheSASLExample(t)
	hostAddr, internalAddr, logs := ex.host, ex.internal, ex.logs
	alice := plainOpt("alice", "alice-secret")
	ctx := testCtx(t, 60*time.Second)
	for _, addr := range []string{hostAddr, internalAddr} {
		topic := "example-" + strings.ReplaceAll(addr, ":", "-")
		adm := kadm.NewClient(newClient(t, addr, alice))
		createTopic(t, adm, topic, 1, nil)
		cl := newClient(t, addr, alice, kgo.DefaultProduceTopic(topic))
		for i := range 10 {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Fatalf("%s: produce as alice: %v", addr, err)
			}
		}
		if recs := consumeAll(t, addr, topic, 10, 20*time.Second, alice); len(recs) != 10 {
			t.Errorf("%s: consumed %d of 10", addr, len(recs))
		}
	}
	if err := pingWith(t, hostAddr, plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()); err == nil {
		t.Error("a wrong password was accepted")
	}
	if !strings.Contains(logs.String(), `"mechanism":"PLAIN","user":"admin"`) {
		t.Errorf("the broker does not say it authenticates to other brokers as admin with PLAIN")
	}
}

// apacheSASLExample is the broker of apache/kafka's single-node
// sasl_plaintext example, running: its listeners' addresses and its
// output.
type apacheSASLExample struct {
	host, internal, ctl string // SASL_PLAINTEXT_HOST, SASL_PLAINTEXT, CONTROLLER
	logs                *syncBuffer
}

// startApacheSASLExample starts the fjord binary with the example's
// environment (plus extraEnv) and waits until alice is served on the
// SASL_PLAINTEXT_HOST listener.
func startApacheSASLExample(t *testing.T, extraEnv ...string) apacheSASLExample {
	t.Helper()
	dir := t.TempDir()
	// The JAAS file's layout and credentials as in the example's fixture.
	jaas := filepath.Join(dir, "broker_jaas.conf")
	if err := os.WriteFile(jaas, []byte(`// fixtures/sasl/broker_jaas.conf of apache/kafka's docker examples
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";
};
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	ctl, host, internal := ports[0], ports[1], ports[2]
	env := append(os.Environ(),
		"KAFKA_NODE_ID=1",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_PLAINTEXT_HOST:SASL_PLAINTEXT",
		"KAFKA_ADVERTISED_LISTENERS=SASL_PLAINTEXT_HOST://127.0.0.1:"+host+",SASL_PLAINTEXT://127.0.0.1:"+internal,
		"KAFKA_PROCESS_ROLES=broker,controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS=1@127.0.0.1:"+ctl,
		"KAFKA_LISTENERS=CONTROLLER://127.0.0.1:"+ctl+",SASL_PLAINTEXT_HOST://127.0.0.1:"+host+",SASL_PLAINTEXT://127.0.0.1:"+internal,
		"KAFKA_INTER_BROKER_LISTENER_NAME=SASL_PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
		"CLUSTER_ID=4L6g3nShT-eMCtK--X86sw",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR=1",
		"KAFKA_LOG_DIRS="+filepath.Join(dir, "kraft-combined-logs"),
		"KAFKA_SASL_ENABLED_MECHANISMS=PLAIN",
		"KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL=PLAIN",
		"KAFKA_OPTS=-Djava.security.auth.login.config="+jaas,
	)
	env = append(env, extraEnv...)
	logs := &syncBuffer{}
	cmd := exec.Command(fjordBin)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("fjord output:\n%s", tail(logs.String()))
		}
	})

	alice := plainOpt("alice", "alice-secret")
	hostAddr, internalAddr := net.JoinHostPort("127.0.0.1", host), net.JoinHostPort("127.0.0.1", internal)
	ctx := testCtx(t, 60*time.Second)
	var err error
	for ctx.Err() == nil {
		select {
		case werr := <-exited:
			t.Fatalf("fjord exited during start-up: %v", werr)
		default:
		}
		cl, cerr := kgo.NewClient(kgo.SeedBrokers(hostAddr), alice, kgo.RequestRetries(0))
		if cerr != nil {
			t.Fatal(cerr)
		}
		c2, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = kadm.NewClient(cl).BrokerMetadata(c2)
		cancel()
		cl.Close()
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the example's SASL_PLAINTEXT_HOST listener never served alice: %v", err)
	}
	return apacheSASLExample{host: hostAddr, internal: internalAddr, ctl: net.JoinHostPort("127.0.0.1", ctl), logs: logs}
}
