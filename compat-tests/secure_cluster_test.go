package compattests

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSecureCluster: three nodes whose client listener, the inter-broker
// one too, is SASL_SSL (brokers authenticate with PLAIN,
// sasl.mechanism.inter.broker.protocol) and whose CONTROLLER listener is
// SSL with ssl.client.auth=required: raft between the voters and the
// brokers' registrations, heartbeats and forwarded admin requests all run
// over mutual TLS with the one keystore and truststore. A topic at RF 3
// takes acks=all produces, every replica holds them (read from each node
// with the debugging consumer's replica id), and a restarted node rejoins
// the ISR and catches up. The CONTROLLER listener refuses a client
// without a certificate. Probes that connect and close without a byte
// (the harness's readiness check, the active controller's listener watch)
// leave no info line.
func TestSecureCluster(t *testing.T) {
	f := newTLSFixtures(t)
	c := startCluster(t, 3, append(f.jksOverrides(),
		"listener.security.protocol.map=PLAINTEXT:SASL_SSL,CONTROLLER:SSL",
		"ssl.client.auth=none",
		"listener.name.controller.ssl.client.auth=required",
		"sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		`listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`,
		"compat.probe.sasl.plain=alice:alice-secret",
		"compat.probe.tls.ca="+filepath.Join(f.caDir, "ca.pem"),
	)...)
	ctx := testCtx(t, 90*time.Second)
	adm := c.Admin(1)
	const topic = "secure-rf3"
	two := "2"
	if resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &two}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	produce := func(from, n int) {
		t.Helper()
		// Every node a seed: the follower killed below may be any of them.
		cl := newClient(t, c.Addr(2), kgo.SeedBrokers(c.Addrs()...), kgo.DialTLSConfig(&tls.Config{RootCAs: f.roots}), plainOpt("alice", "alice-secret"),
			kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		defer cl.Close()
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("r-", i))).FirstErr(); err != nil {
				t.Fatalf("acks=all produce %d: %v", i, err)
			}
		}
	}
	// Every replica holds want records: each node's own copy, read with
	// the debugging consumer's replica id (served by followers too).
	held := func(ids []int, want int) {
		t.Helper()
		for _, id := range ids {
			c.Await(t, 30*time.Second, fmt.Sprintf("node %d holds %d records", id, want), func() (bool, string) {
				n, err := debugFetchCount(ctx, c.Client(id), topic)
				return err == nil && n == want, fmt.Sprintf("%d records, err %v", n, err)
			})
		}
	}
	produce(0, 30)
	held([]int{1, 2, 3}, 30)

	// A follower restarts: produces go on without it (min.insync 2), it
	// rejoins the ISR and catches up over SASL_SSL, its controller
	// connections over mutual TLS.
	md, err := c.Metadata(1, topic)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	leader := int(md.Topics[topic].Partitions[0].Leader)
	follower := 1
	for follower == leader {
		follower++
	}
	c.Kill(follower)
	produce(30, 20)
	c.Restart(follower)
	c.Await(t, 30*time.Second, fmt.Sprintf("node %d back in the ISR", follower), func() (bool, string) {
		md, err := c.Metadata(leader, topic)
		if err != nil {
			return false, err.Error()
		}
		isr := md.Topics[topic].Partitions[0].ISR
		return slices.Contains(isr, int32(follower)), fmt.Sprintf("ISR %v", isr)
	})
	produce(50, 10)
	held([]int{1, 2, 3}, 60)

	// The CONTROLLER listener: a client certificate signed by the CA is
	// served, none is refused at the handshake.
	withCert := &tls.Config{RootCAs: f.roots, Certificates: []tls.Certificate{f.clientCert(t, pkix.Name{CommonName: "ops"})}}
	if err := ctlDescribe(ctx, c.CtlAddr(1), withCert); err != nil {
		t.Errorf("CONTROLLER listener with a client certificate: %v", err)
	}
	if err := ctlDescribe(ctx, c.CtlAddr(1), &tls.Config{RootCAs: f.roots}); err == nil {
		t.Errorf("CONTROLLER listener served a client without a certificate (ssl.client.auth=required)")
	}

	for _, id := range c.IDs() {
		for _, addr := range []string{c.Addr(id), c.CtlAddr(id)} {
			silentProbeQuiet(t, c.Node(id), addr)
		}
	}
	// Every handshake failure over the whole run (the harness's readiness
	// probes, the active controller's listener watch, both across the
	// restart) that ended the way a silent connection ends stayed at
	// debug. A peer that sent bytes which are not TLS is a misconfigured
	// client and rightly logged: a stranger (a leaked client of an
	// earlier test retrying a port this cluster reuses) may do that.
	for _, id := range c.IDs() {
		for _, line := range strings.Split(c.Node(id).readLog(), "\n") {
			if strings.Contains(line, "TLS handshake failed") && !strings.Contains(line, `"level":"debug"`) &&
				(strings.Contains(line, "EOF") || strings.Contains(line, "timeout") || strings.Contains(line, "reset by peer")) {
				t.Errorf("node %d logged a handshake failure of a silent connection: %s", id, line)
			}
		}
	}
}

// silentProbeQuiet knocks on a TLS listener twice: a connection that
// closes without a byte (what a port probe or the active controller's
// listener watch does), then one that speaks plaintext Kafka to it. The
// second is a misconfigured client, worth an info line, and its line
// shows the node has handled connections up to it; the first must have
// left no line above debug.
func silentProbeQuiet(t *testing.T, node *Broker, addr string) {
	t.Helper()
	dial := func() net.Conn {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		return conn
	}
	silent := dial()
	silentAddr := silent.LocalAddr().String()
	silent.Close()
	loud := dial()
	defer loud.Close()
	loudAddr := loud.LocalAddr().String()
	// An ApiVersions v0 request frame, as a client without TLS sends it.
	frame := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0}
	if _, err := loud.Write(frame); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	remote := func(a string) string { return `"remote":"` + a + `"` }
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(node.readLog(), remote(loudAddr)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no line about a plaintext client on a TLS listener (from %s) within 10s", addr, loudAddr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The silent connection was accepted first; its handler runs on its
	// own goroutine, so give it a moment beyond the loud one's line.
	time.Sleep(200 * time.Millisecond)
	for _, line := range strings.Split(node.readLog(), "\n") {
		if strings.Contains(line, remote(loudAddr)) && strings.Contains(line, `"level":"debug"`) {
			t.Errorf("%s: a plaintext client on a TLS listener logged only at debug: %s", addr, line)
		}
		if strings.Contains(line, remote(silentAddr)) && !strings.Contains(line, `"level":"debug"`) {
			t.Errorf("%s: a connection closed without a byte was logged: %s", addr, line)
		}
	}
}

// debugFetchCount reads partition 0 of topic from the node cl is pinned
// to as Kafka's debugging consumer (replica id -2: served by a follower
// too, up to its own high watermark) and counts the records.
func debugFetchCount(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(kadm.WithAuthorizedOps(ctx), topic)
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = -2, -2, -1
	req.MaxWaitMillis, req.MaxBytes = 100, 8<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = 8<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("fetch: response shape %+v", resp)
	}
	sp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		return 0, err
	}
	n, raw := 0, sp.RecordBatches
	for len(raw) >= 12 {
		size := int(binary.BigEndian.Uint32(raw[8:12])) + 12
		if size > len(raw) {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw[:size]); err != nil {
			return 0, err
		}
		n += int(rb.NumRecords)
		raw = raw[size:]
	}
	return n, nil
}

// ctlDescribe asks a CONTROLLER listener over TLS to describe the
// controllers (DescribeCluster, endpoint type 2), which it answers only
// after authentication.
func ctlDescribe(ctx context.Context, addr string, tc *tls.Config, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(tc), kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return err
	}
	if resp := kresp.(*kmsg.DescribeClusterResponse); len(resp.Brokers) == 0 {
		return fmt.Errorf("DescribeCluster of the controllers: no voter")
	}
	return nil
}

// TestSASLControllerListener: two voters (combined nodes) and a
// broker-only node, whose CONTROLLER listener is SASL_SSL with PLAIN
// (sasl.mechanism.controller.protocol): raft between the voters
// authenticates after its preamble, brokers authenticate their
// registrations and heartbeats, and the broker-only node follows the
// metadata log over it, so the quorum forms, elects, registers every
// broker and replicates a topic at RF 3. A client with a wrong
// password is refused on the CONTROLLER listener, one with the
// controller's credentials is served.
func TestSASLControllerListener(t *testing.T) {
	f := newTLSFixtures(t)
	c := startClusterRoles(t, []string{roleCombined, roleCombined, roleBroker}, append(f.jksOverrides(),
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
		"sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.controller.protocol=PLAIN",
		`listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="ctl-secret" user_controller="ctl-secret";`,
	)...)
	ctx := testCtx(t, 60*time.Second)
	const topic = "sasl-ctl-rf3"
	three := "3"
	if resp, err := c.Admin(1).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &three}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s (forwarded to the controller over SASL_SSL): %v %v", topic, err, resp.Err)
	}
	cl := newClient(t, c.Addr(3), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("r-", i))).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	tc := &tls.Config{RootCAs: f.roots}
	if err := ctlDescribe(ctx, c.CtlAddr(1), tc, plainOpt("controller", "ctl-secret")); err != nil {
		t.Errorf("CONTROLLER listener with the controller's credentials: %v", err)
	}
	err := ctlDescribe(ctx, c.CtlAddr(1), tc, plainOpt("controller", "wrong"))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("CONTROLLER listener with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := ctlDescribe(ctx, c.CtlAddr(1), tc); err == nil {
		t.Errorf("CONTROLLER listener served a client that did not authenticate")
	}

	// A raft connection (Fjord's raft preamble) that sends a raft frame
	// instead of authenticating is closed before raft reads it.
	conn, err := tls.Dial("tcp", c.CtlAddr(2), tc)
	if err != nil {
		t.Fatalf("TLS dial of the CONTROLLER listener: %v", err)
	}
	defer conn.Close()
	conn.Write([]byte{0xFF, 'F', 'J', 'R', 'A', 'F', 'T', 1, 0, 0, 0, 2, 8, 1})
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Errorf("an unauthenticated raft connection stayed open (read %d, %v)", n, err)
	}
	c.WaitFor(t, 10*time.Second, func() bool {
		return strings.Contains(c.Node(2).readLog(), "closing raft connection: SASL authentication failed")
	})
}
