package compattests

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTLSDynamicReconfiguration: as Kafka's dynamic SSL reconfiguration,
// IncrementalAlterConfigs of the broker's own resource with
// listener.name.<l>.ssl.* keys makes the listener serve the new keystore
// to new connections without a restart. A keystore that does not load is
// refused with INVALID_CONFIG and the certificate stays; the cluster-wide
// default resource cannot hold TLS settings; DescribeConfigs does not show
// a listener's password. Passwords set so are stored encrypted
// (password.encoder.secret) and decrypted by the broker: a JKS keystore
// whose store and key passwords are both dynamic is served.
func TestTLSDynamicReconfiguration(t *testing.T) {
	f := newTLSFixtures(t)
	p := func(name string) string { return filepath.Join(f.dir, name) }
	for name, cn := range map[string]string{"server.pem": "localhost", "rotated.pem": "rotated"} {
		chain, key := f.pemPair(t, pkix.Name{CommonName: cn})
		os.WriteFile(p(name), append(chain, key...), 0o600)
	}
	b, addrs := tlsBroker(t, []string{"SSL"},
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
		"listener.name.ssl.ssl.keystore.type=PEM", "listener.name.ssl.ssl.keystore.location="+p("server.pem"),
		"listener.name.ssl.ssl.key.password=",
		"ssl.truststore.location="+p("kafka.truststore.jks"), "ssl.truststore.password="+f.storePW,
		"password.encoder.secret=compat-tls-dynamic-secret",
	)
	served := func() string {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addrs["SSL"], &tls.Config{RootCAs: f.roots})
		if err != nil {
			return "dial: " + err.Error()
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "localhost" {
		t.Fatalf("at start the SSL listener serves %q", got)
	}
	ctx := testCtx(t, 60*time.Second)
	adm := kadm.NewClient(newClient(t, b.Addr))
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("metadata: %v %+v", err, md)
	}
	id := strconv.Itoa(int(md.Brokers[0].NodeID))
	alter := func(resource string, kv ...string) error {
		var cs []kadm.AlterConfig
		for i := 0; i+1 < len(kv); i += 2 {
			cs = append(cs, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[i], Value: &kv[i+1]})
		}
		var resps kadm.AlterConfigsResponses
		if resource == "" {
			resps, err = adm.AlterBrokerConfigsState(ctx, cs)
		} else {
			n, _ := strconv.Atoi(resource)
			resps, err = adm.AlterBrokerConfigs(ctx, cs, int32(n))
		}
		if err != nil {
			return err
		}
		for _, r := range resps {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}

	if err := alter(id, "listener.name.ssl.ssl.keystore.location", p("rotated.pem"), "listener.name.ssl.ssl.keystore.password", "not-used"); err != nil {
		t.Fatalf("altering the SSL listener's keystore: %v", err)
	}
	got := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = served(); got == "rotated" {
			break
		}
	}
	if got != "rotated" {
		t.Fatalf("after the dynamic change the SSL listener serves %q", got)
	}
	if err := tlsRoundTrip(t, addrs["SSL"], &tls.Config{RootCAs: f.roots}, "tls-dynamic"); err != nil {
		t.Errorf("after the dynamic change: %v", err)
	}

	if err := alter(id, "listener.name.ssl.ssl.keystore.location", p("missing.pem")); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("a keystore that does not exist: %v, want INVALID_CONFIG", err)
	}
	if got := served(); got != "rotated" {
		t.Errorf("after a refused change the SSL listener serves %q", got)
	}
	if err := alter("", "listener.name.ssl.ssl.keystore.location", p("server.pem")); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("TLS settings on the cluster-wide default: %v, want INVALID_CONFIG", err)
	}

	n, _ := strconv.Atoi(id)
	rcs, err := adm.DescribeBrokerConfigs(ctx, int32(n))
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	found := false
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "listener.name.ssl.ssl.keystore.password" {
				found = true
				if !c.Sensitive || c.Value != nil {
					t.Errorf("DescribeConfigs shows %s: sensitive %v, value %v", c.Key, c.Sensitive, c.MaybeValue())
				}
			}
		}
	}
	if !found {
		t.Errorf("DescribeConfigs does not list the dynamic listener.name.ssl.ssl.keystore.password")
	}

	// The JKS keystore (CN=localhost), its store and key passwords given
	// now: the broker checks them in clear, stores them encrypted, and
	// decrypts them to load the store.
	if err := alter(id, "listener.name.ssl.ssl.keystore.type", "JKS", "listener.name.ssl.ssl.keystore.location", p("kafka01.keystore.jks"),
		"listener.name.ssl.ssl.keystore.password", f.storePW, "listener.name.ssl.ssl.key.password", f.keyPW); err != nil {
		t.Fatalf("altering to the JKS keystore: %v", err)
	}
	got = ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = served(); got == "localhost" {
			break
		}
	}
	if got != "localhost" {
		t.Errorf("after the change to the JKS keystore the SSL listener serves %q", got)
	}
}

// TestPasswordConfigNeedsSecret: a broker without password.encoder.secret
// refuses to store a password config (INVALID_REQUEST, naming the secret)
// rather than keep it in clear in the metadata log; other keys of the
// request's other resources are altered.
func TestPasswordConfigNeedsSecret(t *testing.T) {
	b := startBroker(t, t.TempDir())
	ctx := testCtx(t, 60*time.Second)
	adm := kadm.NewClient(newClient(t, b.Addr))
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("metadata: %v %+v", err, md)
	}
	pw := "in-clear"
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "listener.name.ssl.ssl.keystore.password", Value: &pw}}, md.Brokers[0].NodeID)
	if err != nil || len(resps) != 1 {
		t.Fatalf("alter: %v %+v", err, resps)
	}
	if !errors.Is(resps[0].Err, kerr.InvalidRequest) || !strings.Contains(resps[0].ErrMessage, "password.encoder.secret") {
		t.Errorf("a password without a secret: %v %q, want INVALID_REQUEST naming password.encoder.secret", resps[0].Err, resps[0].ErrMessage)
	}
}
