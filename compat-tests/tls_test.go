package compattests

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tlsBroker starts a broker with a PLAINTEXT listener (the harness's
// probe) and the given TLS listeners (name -> port), each configured by
// overrides.
func tlsBroker(t *testing.T, tlsListeners []string, overrides ...string) (*Broker, map[string]string) {
	t.Helper()
	ports := freePorts(t, 1+len(tlsListeners))
	ls := []string{"PLAINTEXT://127.0.0.1:" + ports[0]}
	addrs := map[string]string{}
	for i, n := range tlsListeners {
		addrs[n] = "127.0.0.1:" + ports[i+1]
		ls = append(ls, n+"://"+addrs[n])
	}
	b := newClusterNode(t, 1, append([]string{"listeners=" + strings.Join(ls, ","), "fjord.ssl.reload.check.interval.ms=100"}, overrides...))
	b.DataDir = t.TempDir()
	if err := b.launch(ports[0]); err != nil {
		t.Fatal(err)
	}
	return b, addrs
}

// tlsRoundTrip produces and consumes one record through addr with cfg.
func tlsRoundTrip(t *testing.T, addr string, cfg *tls.Config, topic string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RequestRetries(1),
		kgo.RetryTimeout(5*time.Second), kgo.DialTimeout(3*time.Second), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("over tls")}).FirstErr(); err != nil {
		return err
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return err
	}
	if fs.NumRecords() == 0 || string(fs.Records()[0].Value) != "over tls" {
		return fmt.Errorf("consumed %d records", fs.NumRecords())
	}
	return nil
}

// tlsPing sends one request through addr with cfg, with no retry.
func tlsPing(addr string, cfg *tls.Config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RequestRetries(0), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestTLSListeners: one broker with four TLS listeners, one per store
// format and client-auth mode (JKS required, PKCS12 requested, PEM files
// none, PEM inline required with a mapping rule); franz-go and kcat over
// each; a certificate of another CA refused; the principal of a client
// certificate as the broker sees it; a reloaded certificate served to new
// connections without a restart.
func TestTLSListeners(t *testing.T) {
	t.Setenv("FJORD_LOG_LEVEL", "debug")
	f := newTLSFixtures(t)
	p := func(name string) string { return filepath.Join(f.dir, name) }
	serverChain, serverKey := f.pemPair(t, pkix.Name{CommonName: "localhost", Organization: []string{"Fjord"}})
	os.WriteFile(p("server.pem"), append(serverChain, serverKey...), 0o600)
	inlineChain, inlineKey := f.pemPair(t, pkix.Name{CommonName: "inline"})
	b, addrs := tlsBroker(t, []string{"SSL", "P12", "PEMFILE", "INLINE"},
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,P12:SSL,PEMFILE:SSL,INLINE:SSL,CONTROLLER:PLAINTEXT",
		// Broker-wide: the JKS stores, as apache/kafka's example has them.
		"ssl.keystore.location="+p("kafka01.keystore.jks"), "ssl.keystore.password="+f.storePW, "ssl.key.password="+f.keyPW,
		"ssl.truststore.location="+p("kafka.truststore.jks"), "ssl.truststore.password="+f.storePW, "ssl.client.auth=required",
		// Per listener, as Kafka reads listener.name.<lower-case name>.ssl.*.
		"listener.name.p12.ssl.keystore.type=PKCS12", "listener.name.p12.ssl.keystore.location="+p("kafka.keystore.p12"),
		"listener.name.p12.ssl.keystore.password="+f.storePW, "listener.name.p12.ssl.key.password="+f.storePW,
		"listener.name.p12.ssl.client.auth=requested",
		"listener.name.pemfile.ssl.keystore.type=PEM", "listener.name.pemfile.ssl.keystore.location="+p("server.pem"),
		"listener.name.pemfile.ssl.key.password=", "listener.name.pemfile.ssl.client.auth=none",
		"listener.name.inline.ssl.keystore.type=PEM", "listener.name.inline.ssl.keystore.location=", "listener.name.inline.ssl.keystore.key="+string(inlineKey),
		"listener.name.inline.ssl.keystore.certificate.chain="+string(inlineChain), "listener.name.inline.ssl.key.password=",
		"listener.name.inline.ssl.truststore.type=PEM", "listener.name.inline.ssl.truststore.location="+p("ca.pem"),
		"listener.name.inline.ssl.truststore.password=",
		`listener.name.inline.ssl.principal.mapping.rules=RULE:^CN=([a-z]+),OU=settlement,O=Fjord$/$1/U,DEFAULT`,
	)
	alice := f.clientCert(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"settlement"}, Organization: []string{"Fjord"}})
	withCert := &tls.Config{RootCAs: f.roots, Certificates: []tls.Certificate{alice}}
	noCert := &tls.Config{RootCAs: f.roots}
	// Sent whatever CAs the broker names (a Go client would otherwise
	// send no certificate, and pass as ANONYMOUS where one is requested).
	sc := strangerCert(t)
	stranger := &tls.Config{RootCAs: f.roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &sc, nil }}
	wrongCA := &tls.Config{} // the system roots: the test CA is not among them

	for _, tc := range []struct {
		listener, what string
		cfg            *tls.Config
		ok             bool
	}{
		{"SSL", "JKS, required, with a certificate", withCert, true},
		{"SSL", "JKS, required, without one", noCert, false},
		{"SSL", "JKS, required, another CA's certificate", stranger, false},
		{"SSL", "a client that does not trust the broker's CA", wrongCA, false},
		{"P12", "PKCS12, requested, with a certificate", withCert, true},
		{"P12", "PKCS12, requested, without one", noCert, true},
		{"P12", "PKCS12, requested, another CA's certificate", stranger, false},
		{"PEMFILE", "PEM file, none, without a certificate", noCert, true},
		{"INLINE", "PEM inline, required, with a certificate", withCert, true},
	} {
		if tc.ok {
			if err := tlsRoundTrip(t, addrs[tc.listener], tc.cfg, "tls-"+strings.ToLower(tc.listener)); err != nil {
				t.Errorf("%s (%s): %v", tc.listener, tc.what, err)
			}
			continue
		}
		if err := tlsPing(addrs[tc.listener], tc.cfg); err == nil {
			t.Errorf("%s (%s): the connection was served", tc.listener, tc.what)
		}
	}
	// The principal: the whole RFC 2253 DN by DEFAULT, the mapped user on
	// the listener with a rule, ANONYMOUS without a certificate.
	for _, want := range []string{`"principal":"User:CN=alice,OU=settlement,O=Fjord"`, `"principal":"User:ALICE"`, `"principal":"User:ANONYMOUS","tls":"TLS 1.3"`} {
		if !b.logContains(want) {
			t.Errorf("broker log has no %s", want)
		}
	}

	t.Run("health", func(t *testing.T) {
		// The image's healthcheck, on a node whose first client listener is
		// SSL with client certificates required.
		args := []string{"health", "--timeout", "10s"}
		for _, o := range []string{"listeners=SSL://" + addrs["SSL"], "log.dirs=" + t.TempDir(),
			"ssl.keystore.location=" + p("kafka01.keystore.jks"), "ssl.keystore.password=" + f.storePW, "ssl.key.password=" + f.keyPW,
			"ssl.truststore.location=" + p("kafka.truststore.jks"), "ssl.truststore.password=" + f.storePW, "ssl.client.auth=required"} {
			args = append(args, "--override", o)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, fjordBin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "serving") {
			t.Fatalf("fjord health over SSL: %v\n%s", err, out)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := kcatPath(t)
		chain, key := f.pemPair(t, pkix.Name{CommonName: "kcat"})
		os.WriteFile(p("kcat.pem"), chain, 0o600)
		os.WriteFile(p("kcat.key"), key, 0o600)
		args := []string{"-b", addrs["SSL"], "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + p("ca.pem"),
			"-X", "ssl.certificate.location=" + p("kcat.pem"), "-X", "ssl.key.location=" + p("kcat.key")}
		runKcat(t, kcat, "k1:v1\n", append(args, "-P", "-t", "tls-kcat", "-K", ":")...)
		out := runKcat(t, kcat, "", append(args, "-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-c", "1", "-f", "%k=%s\n")...)
		if strings.TrimSpace(out) != "k1=v1" {
			t.Fatalf("kcat consumed %q", out)
		}
		if !b.logContains(`"principal":"User:CN=kcat"`) {
			t.Error("no kcat principal in the broker log")
		}
	})

	t.Run("reload", func(t *testing.T) {
		served := func() string {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addrs["PEMFILE"], &tls.Config{RootCAs: f.roots})
			if err != nil {
				return "dial: " + err.Error()
			}
			defer c.Close()
			return c.ConnectionState().PeerCertificates[0].Subject.CommonName
		}
		if got := served(); got != "localhost" {
			t.Fatalf("before the reload the PEMFILE listener serves %q", got)
		}
		chain, key := f.pemPair(t, pkix.Name{CommonName: "renewed"})
		os.WriteFile(p("server.pem.tmp"), append(chain, key...), 0o600)
		os.Rename(p("server.pem.tmp"), p("server.pem"))
		got := ""
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = served(); got == "renewed" {
				break
			}
		}
		if got != "renewed" {
			t.Fatalf("after replacing the files the PEMFILE listener serves %q", got)
		}
		if !b.logContains("TLS stores reloaded") {
			t.Error("no reload line in the log")
		}
		if err := tlsRoundTrip(t, addrs["PEMFILE"], noCert, "tls-reloaded"); err != nil {
			t.Errorf("after the reload: %v", err)
		}
	})
}

// TestTLSStartupRefusals: a store that cannot be read, or a setting Go
// cannot honour, stops start-up with a message naming it.
func TestTLSStartupRefusals(t *testing.T) {
	f := newTLSFixtures(t)
	ks := filepath.Join(f.dir, "kafka01.keystore.jks")
	base := []string{"listeners=SSL://127.0.0.1:" + freePort(t), "log.dirs=" + t.TempDir()}
	for _, tc := range []struct {
		what string
		ov   []string
		want string
	}{
		{"bad password", []string{"ssl.keystore.location=" + ks, "ssl.keystore.password=wrong"}, "wrong password"},
		{"bad key password", []string{"ssl.keystore.location=" + ks, "ssl.keystore.password=" + f.storePW, "ssl.key.password=wrong"}, "wrong ssl.key.password"},
		{"missing file", []string{"ssl.keystore.location=" + ks + ".missing"}, "no such file or directory"},
		{"unknown cipher", []string{"ssl.keystore.location=" + ks, "ssl.keystore.password=" + f.storePW, "ssl.key.password=" + f.keyPW,
			"ssl.enabled.protocols=TLSv1.2", "ssl.cipher.suites=TLS_RSA_WITH_FOO"}, "TLS_RSA_WITH_FOO is not a cipher suite Go's TLS serves"},
	} {
		var args []string
		for _, o := range append(append([]string{}, base...), tc.ov...) {
			args = append(args, "--override", o)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, fjordBin, args...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %v, output:\n%s\nwant an exit naming %q", tc.what, err, out, tc.want)
		}
	}
}

// TestTLSInterBroker: a 3-node cluster whose inter-broker listener is SSL
// (client auth required, so a plaintext or unauthenticated fetcher could
// not replicate) keeps an RF=3 topic's ISR full, and records produced with
// acks=all are read back.
func TestTLSInterBroker(t *testing.T) {
	t.Setenv("FJORD_LOG_LEVEL", "debug")
	f := newTLSFixtures(t)
	p := func(name string) string { return filepath.Join(f.dir, name) }
	ports := freePorts(t, 9)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%s", i+1, ports[6+i]))
	}
	nodes := make([]*Broker, 3)
	for i := range 3 {
		nodes[i] = newClusterNode(t, i+1, []string{
			fmt.Sprintf("node.id=%d", i+1), "process.roles=broker,controller",
			"controller.quorum.voters=" + strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%s,INTERNAL://127.0.0.1:%s,CONTROLLER://127.0.0.1:%s", ports[i], ports[3+i], ports[6+i]),
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name=INTERNAL",
			"listener.name.internal.ssl.keystore.location=" + p("kafka01.keystore.jks"),
			"listener.name.internal.ssl.keystore.password=" + f.storePW, "listener.name.internal.ssl.key.password=" + f.keyPW,
			"listener.name.internal.ssl.truststore.location=" + p("kafka.truststore.jks"),
			"listener.name.internal.ssl.truststore.password=" + f.storePW,
			"listener.name.internal.ssl.client.auth=required",
			fmt.Sprintf("broker.session.timeout.ms=%d", clusterSessionTimeout.Milliseconds()),
			fmt.Sprintf("broker.heartbeat.interval.ms=%d", clusterHeartbeatPeriod.Milliseconds()),
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = nodes[i].launch(ports[i]) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	addr := "127.0.0.1:" + ports[0]
	adm := newAdmin(t, addr)
	ctx := testCtx(t, 30*time.Second)
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, "tls-rf3"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20))
	for i := range 30 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tls-rf3", Partition: int32(i % 3), Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce with acks=all and min.insync.replicas=3: %v", err)
		}
	}
	var md kadm.Metadata
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if md, err = adm.Metadata(ctx, "tls-rf3"); err != nil {
			t.Fatal(err)
		}
		full := true
		for _, pd := range md.Topics["tls-rf3"].Partitions {
			full = full && len(pd.ISR) == 3
		}
		if full || time.Now().After(deadline) {
			break
		}
	}
	for _, pd := range md.Topics["tls-rf3"].Partitions {
		if len(pd.ISR) != 3 {
			t.Errorf("partition %d ISR %v, want all three", pd.Partition, pd.ISR)
		}
	}
	if got := consumeAll(t, addr, "tls-rf3", 30, 20*time.Second); len(got) != 30 {
		t.Fatalf("consumed %d of 30", len(got))
	}
	for i, n := range nodes {
		// Peers connected to INTERNAL over TLS with the keystore's certificate.
		if !n.logContains(`"principal":"User:CN=localhost,OU=brokers,O=Fjord"`) {
			t.Errorf("node %d: no peer authenticated on INTERNAL with its certificate", i+1)
		}
	}
}
