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
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/controller/quorum"
)

// testSecrets are password.encoder.* settings that derive keys quickly.
func testSecrets(secret, old string) pwenc.Settings {
	s := pwenc.DefaultSettings()
	s.Secret, s.OldSecret, s.Iterations = secret, old, pwenc.MinIterations
	return s
}

// secretBroker is a broker value (not started) with an encoder of s.
func secretBroker(t *testing.T, s pwenc.Settings) *Broker {
	t.Helper()
	b := &Broker{cfg: DefaultConfig(), log: zerolog.Nop()}
	b.cfg.PasswordEncoder = s
	var err error
	if b.passwords, err = newPasswordEncoder(s); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPasswordSnapshotHoldsOnlyCiphertext: a password config that a broker
// forwards is stored encrypted, so neither the records the metadata log
// ships (Fetch) nor the image's snapshot (FetchSnapshot) hold the
// plaintext anywhere; a node that rebuilds the image from the snapshot
// decrypts it with the secret. Other configs are stored as given.
func TestPasswordSnapshotHoldsOnlyCiphertext(t *testing.T) {
	b := secretBroker(t, testSecrets("cluster-secret", ""))
	const ksPW, keyPW, trustPW = "ks-plaintext-8d1e77", "key-plaintext-3fa09c", "trust-plaintext-51be2d"
	rr := incrementalResource("1",
		incrementalOp("listener.name.ssl.ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, ksPW),
		incrementalOp("listener.name.ssl.ssl.key.password", kmsg.IncrementalAlterConfigOpSet, keyPW),
		incrementalOp("ssl.truststore.password", kmsg.IncrementalAlterConfigOpSet, trustPW),
		incrementalOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "3600000"))
	sealed, err := b.sealIncremental(rr)
	if err != nil {
		t.Fatal(err)
	}
	if *rr.Configs[0].Value != ksPW {
		t.Fatal("sealing changed the request's own value")
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, sealed)

	img := &controller.Image{}
	var logged [][]byte // what the metadata log holds and ships
	for _, r := range controller.AlterConfigs(img, controller.IncrementalChanges(req), b.configPolicy()) {
		if r.ErrorCode != 0 {
			t.Fatalf("decision: %d %s", r.ErrorCode, r.Message)
		}
		for _, rec := range r.Records {
			logged = append(logged, controller.Encode(rec))
			if img, err = img.Apply(img.Version()+1, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, err := quorum.EncodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{ksPW, keyPW, trustPW} {
		if bytes.Contains(snap, []byte(pw)) {
			t.Errorf("the snapshot holds %q", pw)
		}
		for i, l := range logged {
			if bytes.Contains(l, []byte(pw)) {
				t.Errorf("log record %d holds %q", i, pw)
			}
		}
	}
	if !bytes.Contains(snap, []byte("3600000")) {
		t.Error("the snapshot lacks log.retention.ms (the test would prove nothing)")
	}

	// A follower rebuilds the image from the snapshot and decrypts.
	followed, err := quorum.DecodeImage(snap, img.Version())
	if err != nil {
		t.Fatal(err)
	}
	stored := followed.BrokerConfigs()["1"]
	for _, k := range []string{"listener.name.ssl.ssl.keystore.password", "listener.name.ssl.ssl.key.password", "ssl.truststore.password"} {
		if !pwenc.IsEncoded(stored[k]) {
			t.Errorf("%s is stored as %q", k, stored[k])
		}
	}
	open, err := secretBroker(t, testSecrets("cluster-secret", "")).openPasswords(stored)
	if err != nil {
		t.Fatal(err)
	}
	if open["listener.name.ssl.ssl.keystore.password"] != ksPW || open["listener.name.ssl.ssl.key.password"] != keyPW ||
		open["ssl.truststore.password"] != trustPW || open["log.retention.ms"] != "3600000" {
		t.Errorf("decrypted: %v", open)
	}
	// The live config never holds a password, in clear or not.
	b.cfg.NodeID = 1
	if live := b.liveConfig(followed); live.SSL["ssl.truststore.password"] != "" || live.RetentionMs != 3600000 {
		t.Errorf("live config: ssl %v, retention %d", live.SSL, live.RetentionMs)
	}
}

// TestPasswordsNeedSecret: without password.encoder.secret a password
// config is refused with INVALID_REQUEST naming the secret; other keys
// and deletions pass. The controllers' policy refuses a password that
// was not encrypted (sent straight to a controller's listener).
func TestPasswordsNeedSecret(t *testing.T) {
	b := &Broker{cfg: DefaultConfig(), log: zerolog.Nop()}
	_, err := b.sealIncremental(incrementalResource("1", incrementalOp("ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, "pw")))
	if code, msg := sealRefusal(err); code != kerr.InvalidRequest.Code || !strings.Contains(*msg, "password.encoder.secret") {
		t.Errorf("no secret: %d %v", code, msg)
	}
	legacy := kmsg.NewAlterConfigsRequestResource()
	legacy.ResourceType, legacy.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	legacy.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "listener.name.ssl.ssl.key.password", Value: kmsg.StringPtr("pw")}}
	if _, err := b.sealLegacy(legacy); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("legacy, no secret: %v", err)
	}
	del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	del.Name, del.Op = "ssl.keystore.password", kmsg.IncrementalAlterConfigOpDelete
	for _, rr := range []kmsg.IncrementalAlterConfigsRequestResource{
		incrementalResource("1", incrementalOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "1000")),
		incrementalResource("1", del),
	} {
		if _, err := b.sealIncremental(rr); err != nil {
			t.Errorf("%+v: %v", rr.Configs, err)
		}
	}

	// The secrets themselves are static and never shown either.
	for _, k := range []string{"password.encoder.secret", "password.encoder.old.secret"} {
		if ck, ok := LookupConfigKey(k); !ok || ck.Dynamic || !sensitiveConfig(catalogue.Broker, k) {
			t.Errorf("%s: in the table %v, dynamic %v, sensitive %v", k, ok, ck.Dynamic, sensitiveConfig(catalogue.Broker, k))
		}
	}

	res := controller.BrokerResource(1)
	if err := checkConfig(res, "listener.name.ssl.ssl.keystore.password", "in-clear"); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("a password in clear reaching the controller: %v, want INVALID_REQUEST", err)
	}
	enc, _ := secretBroker(t, testSecrets("x", "")).sealValue("ssl.keystore.password", kmsg.StringPtr("pw"))
	if err := checkConfig(res, "ssl.keystore.password", *enc); err != nil {
		t.Errorf("an encrypted password: %v", err)
	}
	if err := checkConfig(controller.ClusterResource(), "ssl.keystore.password", *enc); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("an encrypted password on the cluster default: %v, want INVALID_CONFIG (per broker only)", err)
	}
}

// TestPasswordRotation: with password.encoder.old.secret, values written
// under the old secret decrypt; without it, or altered, they are an error
// naming the key, never a wrong password; values stored in clear by an
// earlier Fjord are read as they are.
func TestPasswordRotation(t *testing.T) {
	oldB := secretBroker(t, testSecrets("old-secret", ""))
	v, err := oldB.sealValue("ssl.key.password", kmsg.StringPtr("k-pw"))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{"ssl.key.password": *v, "ssl.keystore.password": "legacy-clear", "log.retention.ms": "5"}
	if got, err := secretBroker(t, testSecrets("new-secret", "old-secret")).openPasswords(stored); err != nil ||
		got["ssl.key.password"] != "k-pw" || got["ssl.keystore.password"] != "legacy-clear" || got["log.retention.ms"] != "5" {
		t.Errorf("rotated: %v, %v", got, err)
	}
	if _, err := secretBroker(t, testSecrets("new-secret", "")).openPasswords(stored); !errors.Is(err, pwenc.ErrDecrypt) || !strings.Contains(err.Error(), "ssl.key.password") {
		t.Errorf("without the old secret: %v", err)
	}
	if _, err := (&Broker{}).openPasswords(stored); err == nil || !strings.Contains(err.Error(), "password.encoder.secret") {
		t.Errorf("without any secret: %v", err)
	}
	stored["ssl.key.password"] = (*v)[:len(*v)-2] + "AA"
	if _, err := oldB.openPasswords(stored); err == nil {
		t.Error("an altered value decrypted")
	}
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
	b := testBroker(t, dir, func(c *Config) {
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
