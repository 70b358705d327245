package compattests

// What a kcat or Kafka-tools user types first works with the fjord CLI:
// -b and --bootstrap-server, produce to a topic the broker auto-creates,
// -X client properties for SASL and TLS listeners (beside kcat with the
// same flags), and the group lag the CLI and the console show for a
// partition the group never committed.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/net/html"
)

// On a fresh node with nothing configured but its address and data
// directory, `fjord produce` to a topic that does not exist succeeds, as
// `kcat -P` does (the broker auto-creates it), and `fjord consume` reads
// the record back. A node with auto.create.topics.enable=false keeps its
// word: produce fails and no topic appears.
func TestCLIProduceAutoCreatesTopic(t *testing.T) {
	b := startBroker(t, t.TempDir())
	out, errs, code := runCLI(t, b.Addr, "k:v\n", "produce", "-t", "new-topic", "-k", ":")
	if code != 0 {
		t.Fatalf("produce to a new topic: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if got := cliOK(t, b.Addr, "", "consume", "-t", "new-topic", "-e", "-f", `%k=%v@%p/%o\n`); got != "k=v@0/0\n" {
		t.Fatalf("consume: %q, want k=v@0/0", got)
	}
	md, err := newAdmin(t, b.Addr).Metadata(testCtx(t, 10*time.Second), "new-topic")
	if err != nil || md.Topics["new-topic"].Err != nil || len(md.Topics["new-topic"].Partitions) != 1 {
		t.Fatalf("the auto-created topic: %v %+v (want num.partitions=1)", err, md.Topics["new-topic"])
	}

	off := startBroker(t, t.TempDir(), "auto.create.topics.enable=false")
	_, errs, code = runCLI(t, off.Addr, "k:v\n", "produce", "-t", "new-topic", "-k", ":")
	if code != 1 || !strings.Contains(errs, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("produce with auto-creation off: exit %d, stderr %s; want 1 and UNKNOWN_TOPIC_OR_PARTITION", code, errs)
	}
	topics, err := newAdmin(t, off.Addr).ListTopics(testCtx(t, 10*time.Second))
	if err != nil || topics.Has("new-topic") {
		t.Fatalf("with auto-creation off the topic exists: %v %v", err, topics.Names())
	}
}

// -b (kcat) and --bootstrap-server (kafka-topics.sh) name the brokers as
// --bootstrap does, winning over $FJORD_BOOTSTRAP (here a dead port); an
// unknown -X property is a usage error naming it.
func TestCLIBootstrapSpellings(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "spelled", 2, nil)
	const dead = "127.0.0.1:1"
	for _, flag := range []string{"-b", "--bootstrap-server", "--bootstrap", "-bootstrap-server"} {
		out := cliOK(t, dead, "", "topic", "list", flag, b.Addr)
		if !strings.Contains(out, "spelled") {
			t.Errorf("topic list %s: %s", flag, out)
		}
	}
	// After the positional argument too, and for the other subcommands.
	if out := cliOK(t, dead, "", "topic", "describe", "spelled", "-b", b.Addr); !strings.Contains(out, "spelled") {
		t.Errorf("topic describe -b: %s", out)
	}
	cliOK(t, dead, "a:1\n", "produce", "-b", b.Addr, "-t", "spelled", "-k", ":")
	if out := cliOK(t, dead, "", "consume", "--bootstrap-server", b.Addr, "-t", "spelled", "-e"); out != "1\n" {
		t.Errorf("consume --bootstrap-server: %q", out)
	}
	if out := cliOK(t, dead, "", "cluster", "info", "-b", b.Addr); !strings.Contains(out, b.Addr[strings.LastIndex(b.Addr, ":")+1:]) {
		t.Errorf("cluster info -b: %s", out)
	}
	if out := cliOK(t, dead, "", "health", "-b", b.Addr); !strings.Contains(out, "serving") {
		t.Errorf("health -b: %s", out)
	}
	// The dead bootstrap really is dead: without a flag the command fails.
	cliCode(t, 1, dead, "topic", "list", "--timeout", "3s")
	if errs := cliCode(t, 2, b.Addr, "topic", "list", "-X", "fetch.wait.max.ms=5"); !strings.Contains(errs, `unknown client property "fetch.wait.max.ms"`) {
		t.Errorf("unknown -X property: %s", errs)
	}
}

// -X security.protocol=SASL_PLAINTEXT with SCRAM, as kcat takes it: fjord
// produce and consume against a SASL node's SCRAM listener, kcat reading
// what fjord wrote with the same -X flags; a wrong password and no
// credentials fail; fjord health takes -X too; a --command-config file
// with a Java client's sasl.jaas.config works.
func TestCLISASLClientProperties(t *testing.T) {
	b, addr := scramBroker(t, t.TempDir())
	ctx := testCtx(t, 60*time.Second)
	admin := scramMech("admin", "admin-secret", true)
	var err error
	for ctx.Err() == nil { // the SCRAM bootstrap runs once the node serves
		if err = pingWith(t, addr, admin); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bootstrapped admin: %v", err)
	}
	adm := kadm.NewClient(newClient(t, addr, kgo.SASL(admin)))
	if r, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}}); err != nil || r["alice"].Err != nil {
		t.Fatalf("AlterUserSCRAMs: %v %+v", err, r)
	}
	x := func(user, pass string) []string {
		return []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}
	}
	alice := x("alice", "alice-secret")

	// The topic does not exist: produce over SASL auto-creates it too.
	cliOK(t, b.Addr, "k1:v1\nk2:v2\n", append([]string{"produce", "-b", addr, "-t", "sasl-cli", "-k", ":"}, alice...)...)
	if out := cliOK(t, b.Addr, "", append([]string{"consume", "-b", addr, "-t", "sasl-cli", "-e", "-f", `%k=%v\n`}, alice...)...); out != "k1=v1\nk2=v2\n" {
		t.Fatalf("consume over SCRAM: %q", out)
	}
	if out := cliOK(t, b.Addr, "", append([]string{"topic", "list", "-b", addr}, alice...)...); !strings.Contains(out, "sasl-cli") {
		t.Errorf("topic list over SCRAM: %s", out)
	}
	// Wrong password: SASL_AUTHENTICATION_FAILED, exit 1. No -X at all:
	// the SASL listener answers nothing but the handshake.
	_, errs, code := runCLI(t, b.Addr, "", append([]string{"topic", "list", "-b", addr, "--timeout", "10s"}, x("alice", "wrong")...)...)
	if code != 1 || !strings.Contains(errs, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("wrong password: exit %d, stderr %s", code, errs)
	}
	if _, errs, code := runCLI(t, b.Addr, "", "topic", "list", "-b", addr, "--timeout", "5s"); code != 1 {
		t.Errorf("no credentials: exit %d, stderr %s", code, errs)
	}

	// fjord health takes them too, in place of the node's own identity.
	if out := cliOK(t, b.Addr, "", append([]string{"health", "-b", addr}, alice...)...); !strings.Contains(out, "serving") {
		t.Errorf("health -X: %s", out)
	}
	if _, _, code := runCLI(t, b.Addr, "", "health", "-b", addr, "--timeout", "3s"); code != 1 {
		t.Errorf("health on the SASL listener without -X: exit %d, want 1", code)
	}

	// A Kafka tool's client properties file: SCRAM-SHA-512 as the admin,
	// through sasl.jaas.config.
	file := filepath.Join(t.TempDir(), "client.properties")
	os.WriteFile(file, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"admin\" password=\"admin-secret\";\n"), 0o600)
	if out := cliOK(t, b.Addr, "", "topic", "list", "--bootstrap-server", addr, "--command-config", file); !strings.Contains(out, "sasl-cli") {
		t.Errorf("topic list --command-config: %s", out)
	}

	// kcat with the very same -X flags reads what fjord produced.
	if _, err := exec.LookPath("kcat"); err != nil && os.Getenv("FJORD_REQUIRE_KCAT") == "" {
		t.Log("kcat not found: skipping the comparison with kcat")
		return
	}
	kcat := kcatPath(t)
	got := runKcat(t, kcat, "", append([]string{"-C", "-b", addr, "-t", "sasl-cli", "-o", "beginning", "-e", "-q", "-f", `%k=%s\n`}, alice...)...)
	if got != "k1=v1\nk2=v2\n" {
		t.Errorf("kcat with the same -X flags: %q", got)
	}
}

// -X security.protocol=SSL against a real TLS listener that requires a
// client certificate: the CA and the client's PEM certificate and key, as
// kcat takes them (and kcat, with the same flags, reads the record back);
// without the certificate the broker refuses the connection.
func TestCLISSLClientProperties(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cli-test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(2 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	writePEM := func(name string, blocks ...*pem.Block) {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		if err := os.WriteFile(p(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(cn string, serial int64, usage x509.ExtKeyUsage) (*pem.Block, *pem.Block) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"localhost"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(2 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalPKCS8PrivateKey(k)
		return &pem.Block{Type: "CERTIFICATE", Bytes: der}, &pem.Block{Type: "PRIVATE KEY", Bytes: kd}
	}
	caPEM := &pem.Block{Type: "CERTIFICATE", Bytes: caDER}
	writePEM("ca.pem", caPEM)
	sc, sk := issue("localhost", 2, x509.ExtKeyUsageServerAuth)
	writePEM("server.pem", sc, caPEM, sk)
	cc, ck := issue("cli-client", 3, x509.ExtKeyUsageClientAuth)
	writePEM("client.pem", cc)
	writePEM("client.key", ck)

	b, addrs := tlsBroker(t, []string{"SSL"},
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+p("server.pem"), "ssl.key.password=",
		"ssl.truststore.type=PEM", "ssl.truststore.location="+p("ca.pem"), "ssl.client.auth=required")
	addr := addrs["SSL"]
	ssl := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + p("ca.pem"),
		"-X", "ssl.certificate.location=" + p("client.pem"), "-X", "ssl.key.location=" + p("client.key")}
	cliOK(t, b.Addr, "k:over tls\n", append([]string{"produce", "-b", addr, "-t", "tls-cli", "-k", ":"}, ssl...)...)
	if out := cliOK(t, b.Addr, "", append([]string{"consume", "-b", addr, "-t", "tls-cli", "-e", "-f", `%k=%v\n`}, ssl...)...); out != "k=over tls\n" {
		t.Fatalf("consume over TLS: %q", out)
	}
	if _, errs, code := runCLI(t, b.Addr, "", append([]string{"topic", "list", "-b", addr, "--timeout", "5s"}, ssl[:4]...)...); code != 1 {
		t.Errorf("no client certificate: exit %d, want 1; stderr %s", code, errs)
	}
	if _, err := exec.LookPath("kcat"); err != nil && os.Getenv("FJORD_REQUIRE_KCAT") == "" {
		t.Log("kcat not found: skipping the comparison with kcat")
		return
	}
	if got := runKcat(t, kcatPath(t), "", append([]string{"-C", "-b", addr, "-t", "tls-cli", "-o", "beginning", "-e", "-q", "-f", `%k=%s\n`}, ssl...)...); got != "k=over tls\n" {
		t.Errorf("kcat with the same -X flags: %q", got)
	}
}

// The console's group page lists every partition the group's lag covers —
// of the topic it committed to (one partition committed, one never, one
// never and with its log start moved by DeleteRecords) and of the topic its
// live member subscribes to without committing — with the same committed
// offset, end and lag as `fjord group lag`.
func TestConsoleGroupListsUncommittedPartitions(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	b := startBroker(t, t.TempDir(), "fjord.console.listener=127.0.0.1:0", "group.initial.rebalance.delay.ms=0")
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if m := consoleLine.FindStringSubmatch(b.readLog()); m != nil {
			base = "http://" + m[1]
		} else if time.Now().After(deadline) {
			t.Fatal("the node never logged its console address")
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "lag-committed", 3, nil)
	createTopic(t, adm, "lag-subscribed", 2, nil)
	prod := newClient(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(topic string, p int32, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce("lag-committed", 0, 10)
	produce("lag-committed", 1, 6)
	produce("lag-committed", 2, 5)
	produce("lag-subscribed", 0, 4)
	produce("lag-subscribed", 1, 3)
	// Partition 2's log starts at 2 now: its lag is 3, not 5.
	if r, err := adm.DeleteRecords(ctx, kadm.Offsets{"lag-committed": {2: {Topic: "lag-committed", Partition: 2, At: 2}}}); err != nil || r.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, r.Error())
	}
	const group = "lag-group"
	if r, err := adm.CommitOffsets(ctx, group, kadm.Offsets{"lag-committed": {0: {Topic: "lag-committed", Partition: 0, At: 7, LeaderEpoch: -1}}}); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	// A member subscribed to the other topic, committing nothing.
	member := newClient(t, b.Addr, kgo.ClientID("lag-member"), kgo.ConsumerGroup(group), kgo.ConsumeTopics("lag-subscribed"),
		kgo.DisableAutoCommit(), kgo.HeartbeatInterval(200*time.Millisecond))
	for {
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil && gs[group].State == "Stable" && len(gs[group].Members) == 1 {
			break
		}
		member.PollRecords(ctx, 1) // joins the group
		if ctx.Err() != nil {
			t.Fatalf("the group never became Stable: %v %+v", err, gs)
		}
	}

	type want struct {
		committed, end, lag int64
		member              bool
	}
	wants := map[string]want{
		"lag-committed-0":  {7, 10, 3, false},
		"lag-committed-1":  {-1, 6, 6, false},
		"lag-committed-2":  {-1, 5, 3, false},
		"lag-subscribed-0": {-1, 4, 4, true},
		"lag-subscribed-1": {-1, 3, 3, true},
	}
	// The CLI.
	var cli []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Committed int64  `json:"committed"`
		Start     int64  `json:"start"`
		End       int64  `json:"end"`
		Lag       int64  `json:"lag"`
		Member    string `json:"member"`
		Error     string `json:"error"`
	}
	cliJSON(t, b.Addr, &cli, "group", "lag", group)
	seen := map[string]bool{}
	for _, r := range cli {
		name := r.Topic + "-" + strconv.Itoa(int(r.Partition))
		w, ok := wants[name]
		seen[name] = true
		if !ok || r.Committed != w.committed || r.End != w.end || r.Lag != w.lag || (r.Member != "") != w.member || r.Error != "" {
			t.Errorf("fjord group lag: %s %+v, want %+v", name, r, w)
		}
	}
	if len(seen) != len(wants) {
		t.Errorf("fjord group lag listed %d partitions, want %d: %+v", len(seen), len(wants), cli)
	}
	table := cliOK(t, b.Addr, "", "group", "lag", group)
	if !slices.ContainsFunc(strings.Split(table, "\n"), func(l string) bool {
		return slices.Equal(strings.Fields(l), []string{group, "lag-committed", "2", "-", "2", "5", "3"})
	}) {
		t.Errorf("fjord group lag table: no row for lag-committed 2 with committed -, start 2, end 5, lag 3:\n%s", table)
	}

	// The console.
	doc, err := html.Parse(strings.NewReader(get(t, base+"/group?id="+url.QueryEscape(group))))
	if err != nil {
		t.Fatal(err)
	}
	rs := rows(t, doc, "offsets")
	if len(rs) != len(wants) {
		t.Errorf("console: %d partition rows, want %d: %q", len(rs), len(wants), rs)
	}
	for name, w := range wants {
		r := row(t, doc, "offsets", name)
		committed := "—"
		if w.committed >= 0 {
			committed = strconv.FormatInt(w.committed, 10)
		}
		if r[1] != committed || r[2] != strconv.FormatInt(w.end, 10) || r[3] != strconv.FormatInt(w.lag, 10) || (r[4] != "unassigned") != w.member {
			t.Errorf("console: %s row %q, want committed %s, high watermark %d, lag %d, assigned %v", name, r, committed, w.end, w.lag, w.member)
		}
	}
	// The groups list sums them all: 3+6+3+4+3.
	doc, err = html.Parse(strings.NewReader(get(t, base+"/groups")))
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, doc, "groups", group); r[5] != "19" {
		t.Errorf("console groups list: %q, want a lag of 19", r)
	}
}
