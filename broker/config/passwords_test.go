package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/quorum"
)

// testSecrets are password.encoder.* settings that derive keys quickly.
func testSecrets(secret, old string) pwenc.Settings {
	s := pwenc.DefaultSettings()
	s.Secret, s.OldSecret, s.Iterations = secret, old, pwenc.MinIterations
	return s
}

// encoder is an encoder of s.
func encoder(t *testing.T, s pwenc.Settings) *pwenc.Encoder {
	t.Helper()
	enc, err := NewPasswordEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func incrementalResource(name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBroker, name, ops
	return r
}

func incrementalOp(key string, op kmsg.IncrementalAlterConfigOp, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, op, &value
	return c
}

// TestPasswordSnapshotHoldsOnlyCiphertext: a password config that a broker
// forwards is stored encrypted, so neither the records the metadata log
// ships (Fetch) nor the image's snapshot (FetchSnapshot) hold the
// plaintext anywhere; a node that rebuilds the image from the snapshot
// decrypts it with the secret. Other configs are stored as given.
func TestPasswordSnapshotHoldsOnlyCiphertext(t *testing.T) {
	enc := encoder(t, testSecrets("cluster-secret", ""))
	static := Default()
	const ksPW, keyPW, trustPW = "ks-plaintext-8d1e77", "key-plaintext-3fa09c", "trust-plaintext-51be2d"
	rr := incrementalResource("1",
		incrementalOp("listener.name.ssl.ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, ksPW),
		incrementalOp("listener.name.ssl.ssl.key.password", kmsg.IncrementalAlterConfigOpSet, keyPW),
		incrementalOp("ssl.truststore.password", kmsg.IncrementalAlterConfigOpSet, trustPW),
		incrementalOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "3600000"))
	sealed, err := SealIncremental(enc, rr)
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
	for _, r := range controller.AlterConfigs(img, controller.IncrementalChanges(req), Policy(func() *Config { return &static })) {
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
	open, err := OpenPasswords(encoder(t, testSecrets("cluster-secret", "")), stored)
	if err != nil {
		t.Fatal(err)
	}
	if open["listener.name.ssl.ssl.keystore.password"] != ksPW || open["listener.name.ssl.ssl.key.password"] != keyPW ||
		open["ssl.truststore.password"] != trustPW || open["log.retention.ms"] != "3600000" {
		t.Errorf("decrypted: %v", open)
	}
	// The live config never holds a password, in clear or not.
	static.NodeID = 1
	if live := Live(&static, followed, zerolog.Nop()); live.SSL["ssl.truststore.password"] != "" || live.RetentionMs != 3600000 {
		t.Errorf("live config: ssl %v, retention %d", live.SSL, live.RetentionMs)
	}
}

// TestPasswordsNeedSecret: without password.encoder.secret a password
// config is refused with INVALID_REQUEST naming the secret; other keys
// and deletions pass. The controllers' policy refuses a password that
// was not encrypted (sent straight to a controller's listener).
func TestPasswordsNeedSecret(t *testing.T) {
	_, err := SealIncremental(nil, incrementalResource("1", incrementalOp("ssl.keystore.password", kmsg.IncrementalAlterConfigOpSet, "pw")))
	if code, msg := SealRefusal(err); code != kerr.InvalidRequest.Code || !strings.Contains(*msg, "password.encoder.secret") {
		t.Errorf("no secret: %d %v", code, msg)
	}
	legacy := kmsg.NewAlterConfigsRequestResource()
	legacy.ResourceType, legacy.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	legacy.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "listener.name.ssl.ssl.key.password", Value: kmsg.StringPtr("pw")}}
	if _, err := SealLegacy(nil, legacy); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("legacy, no secret: %v", err)
	}
	del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	del.Name, del.Op = "ssl.keystore.password", kmsg.IncrementalAlterConfigOpDelete
	for _, rr := range []kmsg.IncrementalAlterConfigsRequestResource{
		incrementalResource("1", incrementalOp("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "1000")),
		incrementalResource("1", del),
	} {
		if _, err := SealIncremental(nil, rr); err != nil {
			t.Errorf("%+v: %v", rr.Configs, err)
		}
	}

	// The secrets themselves are static and never shown either.
	for _, k := range []string{"password.encoder.secret", "password.encoder.old.secret"} {
		if ck, ok := LookupKey(k); !ok || ck.Dynamic || !Sensitive(catalogue.Broker, k) {
			t.Errorf("%s: in the table %v, dynamic %v, sensitive %v", k, ok, ck.Dynamic, Sensitive(catalogue.Broker, k))
		}
	}

	res := controller.BrokerResource(1)
	if err := checkConfig(res, "listener.name.ssl.ssl.keystore.password", "in-clear"); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("a password in clear reaching the controller: %v, want INVALID_REQUEST", err)
	}
	enc, _ := SealValue(encoder(t, testSecrets("x", "")), "ssl.keystore.password", kmsg.StringPtr("pw"))
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
	oldEnc := encoder(t, testSecrets("old-secret", ""))
	v, err := SealValue(oldEnc, "ssl.key.password", kmsg.StringPtr("k-pw"))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{"ssl.key.password": *v, "ssl.keystore.password": "legacy-clear", "log.retention.ms": "5"}
	if got, err := OpenPasswords(encoder(t, testSecrets("new-secret", "old-secret")), stored); err != nil ||
		got["ssl.key.password"] != "k-pw" || got["ssl.keystore.password"] != "legacy-clear" || got["log.retention.ms"] != "5" {
		t.Errorf("rotated: %v, %v", got, err)
	}
	if _, err := OpenPasswords(encoder(t, testSecrets("new-secret", "")), stored); !errors.Is(err, pwenc.ErrDecrypt) || !strings.Contains(err.Error(), "ssl.key.password") {
		t.Errorf("without the old secret: %v", err)
	}
	if _, err := OpenPasswords(nil, stored); err == nil || !strings.Contains(err.Error(), "password.encoder.secret") {
		t.Errorf("without any secret: %v", err)
	}
	stored["ssl.key.password"] = (*v)[:len(*v)-2] + "AA"
	if _, err := OpenPasswords(oldEnc, stored); err == nil {
		t.Error("an altered value decrypted")
	}
}
