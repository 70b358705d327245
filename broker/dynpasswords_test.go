package broker

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/controller/active"
)

// testSecrets are password.encoder.* settings that derive keys quickly.
func testSecrets(secret, old string) pwenc.Settings {
	s := pwenc.DefaultSettings()
	s.Secret, s.OldSecret, s.Iterations = secret, old, pwenc.MinIterations
	return s
}

// selfSigned makes a certificate for localhost with common name cn.
func selfSigned(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

// writeKeystore writes a JKS keystore holding a certificate for cn, the
// store and the key under their own passwords.
func writeKeystore(t *testing.T, path, cn, storePW, keyPW string) {
	t.Helper()
	cert, key := selfSigned(t, cn)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	ks := keystore.New()
	if err := ks.SetPrivateKeyEntry("kafka", keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der,
		CertificateChain: []keystore.Certificate{{Type: "X509", Content: cert.Raw}}}, []byte(keyPW)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(storePW)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDynamicKeystorePasswordEncrypted, end to end on a running node: a
// new keystore whose passwords are set dynamically is checked here with
// the passwords in clear, stored encrypted, served (so the node decrypted
// them), and its passwords are in neither FetchSnapshot nor the metadata
// log's Fetch on the CONTROLLER listener, nor in DescribeConfigs. Sent
// straight to the CONTROLLER listener in clear, the change is refused;
// a node without password.encoder.secret refuses it too.
func TestDynamicKeystorePasswordEncrypted(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.jks"), filepath.Join(dir, "second.jks")
	writeKeystore(t, first, "first", "first-store-pw", "first-key-pw")
	const storePW, keyPW = "second-store-pw-e41c09", "second-key-pw-7b2d55"
	writeKeystore(t, second, "second", storePW, keyPW)
	b := testBroker(t, dir, func(c *config.Config) {
		c.Listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
		c.ListenerSecurityProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"
		c.SetListenerSSL("listener.name.ssl.ssl.keystore.location", first)
		c.SetListenerSSL("listener.name.ssl.ssl.keystore.password", "first-store-pw")
		c.SetListenerSSL("listener.name.ssl.ssl.key.password", "first-key-pw")
		c.PasswordEncoder = testSecrets("node-secret", "")
	})
	served := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", b.Addrs()[1], &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("dial the SSL listener: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("at start the SSL listener serves %q", got)
	}

	before := b.image().Version() // the log is fetched from the next entry
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Resources = append(alter.Resources, incrementalResource("1",
		incrementalOp("listener.name.ssl.ssl.keystore.location", kmsg.IncrementalAlterConfigOpSet, second),
		incrementalOp("listener.name.ssl.ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, storePW),
		incrementalOp("listener.name.ssl.ssl.key.password", kmsg.IncrementalAlterConfigOpSet, keyPW)))
	if r := dial(t, b).do(alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("alter: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	// The answer waits for this node's image, applied after its TLS.
	if got := served(); got != "second" {
		t.Errorf("after the change the SSL listener serves %q", got)
	}
	stored := b.image().BrokerConfigs()["1"]
	if !pwenc.IsEncoded(stored["listener.name.ssl.ssl.keystore.password"]) || !pwenc.IsEncoded(stored["listener.name.ssl.ssl.key.password"]) {
		t.Errorf("stored: %v", stored)
	}

	// What the CONTROLLER listener ships to followers.
	ctl := &rawClient{t: t}
	c, err := net.Dial("tcp", b.ControllerAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctl.c, ctl.br = c, bufio.NewReader(c)
	fs := kmsg.NewPtrFetchSnapshotRequest()
	fst := kmsg.NewFetchSnapshotRequestTopic()
	fst.Topic = active.MetadataTopic
	fst.Partitions = append(fst.Partitions, kmsg.NewFetchSnapshotRequestTopicPartition())
	fs.Topics = append(fs.Topics, fst)
	snap := ctl.do(fs).(*kmsg.FetchSnapshotResponse).Topics[0].Partitions[0]
	f := kmsg.NewPtrFetchRequest()
	f.Version = 12
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = active.MetadataTopic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = int64(before)+1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	logp := ctl.do(f).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if snap.ErrorCode != 0 || len(snap.Bytes) == 0 || logp.ErrorCode != 0 || len(logp.RecordBatches) == 0 {
		t.Fatalf("snapshot: code %d, %d bytes; log: code %d, %d bytes", snap.ErrorCode, len(snap.Bytes), logp.ErrorCode, len(logp.RecordBatches))
	}
	if !bytes.Contains(snap.Bytes, []byte(second)) || !bytes.Contains(logp.RecordBatches, []byte(second)) {
		t.Error("the snapshot or the log lacks the keystore's path (the test would prove nothing)")
	}
	for _, pw := range []string{storePW, keyPW} {
		if bytes.Contains(snap.Bytes, []byte(pw)) {
			t.Errorf("FetchSnapshot carries %q", pw)
		}
		if bytes.Contains(logp.RecordBatches, []byte(pw)) {
			t.Errorf("the metadata log's Fetch carries %q", pw)
		}
	}

	// DescribeConfigs: null and sensitive.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	dc.Resources = append(dc.Resources, dr)
	seen := 0
	for _, cf := range dial(t, b).do(dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		if cf.Name == "listener.name.ssl.ssl.keystore.password" || cf.Name == "listener.name.ssl.ssl.key.password" {
			seen++
			if cf.Value != nil || !cf.IsSensitive {
				t.Errorf("DescribeConfigs %s: value %v, sensitive %v", cf.Name, cf.Value, cf.IsSensitive)
			}
		}
	}
	if seen != 2 {
		t.Errorf("DescribeConfigs listed %d of the 2 passwords", seen)
	}

	// Straight to the CONTROLLER listener, in clear: refused, nothing stored.
	direct := kmsg.NewPtrIncrementalAlterConfigsRequest()
	direct.Resources = append(direct.Resources, incrementalResource("1",
		incrementalOp("listener.name.ssl.ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, "clear-on-the-controller")))
	if r := ctl.do(direct).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("in clear on the CONTROLLER listener: %d %v, want INVALID_REQUEST", r.ErrorCode, r.ErrorMessage)
	}
	if v := b.image().BrokerConfigs()["1"]["listener.name.ssl.ssl.keystore.password"]; strings.Contains(v, "clear-on-the-controller") {
		t.Errorf("stored %q", v)
	}
}

// TestPasswordRefusedWithoutSecret, on a running node without
// password.encoder.secret: IncrementalAlterConfigs and AlterConfigs of a
// password are refused with INVALID_REQUEST naming the secret; another
// resource of the same request is altered.
func TestPasswordRefusedWithoutSecret(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Resources = append(inc.Resources,
		incrementalResource("1", incrementalOp("ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, "pw")),
		incrementalResource("", incrementalOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "7200000")))
	rs := rc.do(inc).(*kmsg.IncrementalAlterConfigsResponse).Resources
	if len(rs) != 2 || rs[0].ErrorCode != kerr.InvalidRequest.Code || rs[0].ErrorMessage == nil ||
		!strings.Contains(*rs[0].ErrorMessage, "password.encoder.secret") || rs[1].ErrorCode != 0 {
		t.Fatalf("incremental: %+v", rs)
	}
	legacy := kmsg.NewPtrAlterConfigsRequest()
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	lr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "ssl.key.password", Value: kmsg.StringPtr("pw")}}
	legacy.Resources = append(legacy.Resources, lr)
	if r := rc.do(legacy).(*kmsg.AlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil ||
		!strings.Contains(*r.ErrorMessage, "password.encoder.secret") {
		t.Errorf("legacy: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if v, ok := b.image().BrokerConfigs()["1"]["ssl.keystore.password"]; ok {
		t.Errorf("stored %q", v)
	}
	if b.image().BrokerConfigs()[""]["log.retention.ms"] != "7200000" {
		t.Error("the other resource was not altered")
	}
}
