package config

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/controller"
)

// Secrets at rest: the password-type dynamic broker configs (Kafka's
// PASSWORD type: ssl.keystore.password, ssl.key.password,
// ssl.truststore.password, the inline PEM stores, sasl.jaas.config, and
// their listener.name.<l>. forms) are stored in the metadata log only as
// ciphertext (broker/pwenc), under password.encoder.secret:
//
//  1. The broker that receives an AlterConfigs or IncrementalAlterConfigs
//     encrypts each such value before it forwards the request
//     (SealIncremental, SealLegacy), so neither the controllers nor the
//     log see the plaintext. Without password.encoder.secret it refuses
//     the resource with INVALID_REQUEST, naming the key. (Kafka in KRaft
//     mode stores these values in clear; its ZooKeeper mode refused them
//     without a secret, which Fjord follows.)
//  2. The active controller's policy (checkConfig) accepts such a value
//     only in the encoded form: a change sent straight to a controller's
//     listener cannot store one in clear.
//  3. The broker that uses a value decrypts it when it applies the image
//     (OpenPasswords, from tlsconf.Listeners.Reconfigure and checkOwnSSL);
//     Live leaves passwords out of the live Config, which would otherwise
//     hold ciphertext.
//  4. DescribeConfigs never shows them (Sensitive); FetchSnapshot
//     and the metadata log's Fetch carry what is stored: ciphertext.
//
// A value stored in clear by an earlier Fjord is still read as it is; set
// it again to store it encrypted.

// NewPasswordEncoder is the node's encoder: nil when password.encoder.secret
// is not set.
func NewPasswordEncoder(s pwenc.Settings) (*pwenc.Encoder, error) {
	if s.Secret == "" {
		return nil, nil
	}
	return pwenc.New(s, rand.Reader)
}

// IsPasswordKey reports a broker key whose values are stored encrypted:
// one of Kafka's PASSWORD type, listener-prefixed or not.
func IsPasswordKey(key string) bool { return Sensitive(catalogue.Broker, key) }

// SealValue is the value to forward for key: v encrypted with enc (the
// node's encoder, nil without password.encoder.secret) when key is a
// password, else v itself.
func SealValue(enc *pwenc.Encoder, key string, v *string) (*string, error) {
	if v == nil || !IsPasswordKey(key) {
		return v, nil
	}
	if enc == nil {
		return nil, controller.ConfigError(kerr.InvalidRequest, "%s is a password, which Fjord stores only encrypted: set password.encoder.secret (the same on every node) on the broker that receives the change", key)
	}
	sealed, err := enc.Encode(key, *v)
	if err != nil {
		return nil, controller.ConfigError(kerr.UnknownServerError, "%s: %v", key, err)
	}
	return &sealed, nil
}

// SealIncremental is rr with its password values encrypted with enc (a
// copy: rr and its configs are left as they are, in clear).
func SealIncremental(enc *pwenc.Encoder, rr kmsg.IncrementalAlterConfigsRequestResource) (kmsg.IncrementalAlterConfigsRequestResource, error) {
	if rr.ResourceType != kmsg.ConfigResourceTypeBroker {
		return rr, nil
	}
	var err error
	rr.Configs, err = sealConfigs(enc, rr.Configs, func(c *kmsg.IncrementalAlterConfigsRequestResourceConfig) (string, **string) { return c.Name, &c.Value })
	return rr, err
}

// SealLegacy is SealIncremental for AlterConfigs.
func SealLegacy(enc *pwenc.Encoder, rr kmsg.AlterConfigsRequestResource) (kmsg.AlterConfigsRequestResource, error) {
	if rr.ResourceType != kmsg.ConfigResourceTypeBroker {
		return rr, nil
	}
	var err error
	rr.Configs, err = sealConfigs(enc, rr.Configs, func(c *kmsg.AlterConfigsRequestResourceConfig) (string, **string) { return c.Name, &c.Value })
	return rr, err
}

// sealConfigs is a copy of cs with the password values encrypted; at
// gives one config's name and where its value is. The two config
// requests' config types share this shape but no interface.
func sealConfigs[C any](enc *pwenc.Encoder, cs []C, at func(*C) (string, **string)) ([]C, error) {
	cs = slices.Clone(cs)
	for i := range cs {
		name, v := at(&cs[i])
		sealed, err := SealValue(enc, name, *v)
		if err != nil {
			return cs, err
		}
		*v = sealed
	}
	return cs, nil
}

// SealRefusal is the error code and message that answer a resource whose
// values could not be sealed.
func SealRefusal(err error) (int16, *string) {
	code := kerr.InvalidRequest.Code
	var ke *kerr.Error
	if errors.As(err, &ke) {
		code = ke.Code
	}
	return code, kmsg.StringPtr(err.Error())
}

// checkSealed is the controller's half (the ConfigPolicy): a password
// value must be stored encrypted, so a value in clear was not sent
// through a broker.
func checkSealed(key, value string) error {
	if !IsPasswordKey(key) || pwenc.IsEncoded(value) {
		return nil
	}
	return controller.ConfigError(kerr.InvalidRequest, "%s is a password, stored only encrypted with password.encoder.secret: send the change to a broker's listener, which encrypts it, not to a controller's", key)
}

// OpenPasswords is dyn (a resource's stored configs, read-only) with its
// password values decrypted with enc (the node's encoder, nil without
// password.encoder.secret), as a copy. A password stored in clear by an
// earlier Fjord is kept as it is. A value that does not decrypt is an
// error naming its key.
func OpenPasswords(enc *pwenc.Encoder, dyn map[string]string) (map[string]string, error) {
	out := maps.Clone(dyn)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(dyn)) {
		v := dyn[k]
		if !IsPasswordKey(k) {
			continue
		}
		if !strings.HasPrefix(v, pwenc.Prefix) {
			continue
		}
		if enc == nil {
			return nil, fmt.Errorf("%s is stored encrypted and this node has no password.encoder.secret to decrypt it", k)
		}
		plain, err := enc.Decode(k, v)
		if err != nil {
			return nil, err
		}
		out[k] = plain
	}
	return out, nil
}

// Sensitive reports a password key, as Kafka's PASSWORD type, whose
// value DescribeConfigs never shows: also a listener-prefixed one
// (listener.name.<l>.ssl.keystore.password), and the tiered-storage S3
// secret, a plugin key outside Kafka's catalogue (remoteSecretKeys).
func Sensitive(scope catalogue.Scope, name string) bool {
	if _, base, ok := tlsconf.ListenerKey(name); ok {
		name = base
	}
	if scope == catalogue.Broker && remoteSecretKeys[name] {
		return true
	}
	k, known := catalogue.Lookup(scope, name)
	return known && k.Type == "password"
}
