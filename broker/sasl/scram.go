package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// ScramSecret is what the server keeps of a SCRAM credential (RFC 5802):
// never the password.
type ScramSecret struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// ScramLookup finds a user's credential for a mechanism ("SCRAM-SHA-256"
// or "SCRAM-SHA-512"), as of now: the broker answers from its metadata
// image, so a credential altered a moment ago applies to the next
// exchange.
type ScramLookup func(mechanism, user string) (ScramSecret, bool)

func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case "SCRAM-SHA-256":
		return sha256.New
	case "SCRAM-SHA-512":
		return sha512.New
	}
	return nil
}

// ClientFirst is a parsed SCRAM client-first-message.
type ClientFirst struct {
	GS2Header string // as sent, "n,," or "y,," with an optional a=authzid
	Authzid   string
	User      string // unescaped
	Nonce     string
	Bare      string // client-first-message-bare, for the AuthMessage
	TokenAuth bool   // the tokenauth=true extension (delegation tokens)
}

// ParseClientFirst parses gs2-header client-first-message-bare. Channel
// binding ("p=") is refused: Kafka does not support it.
func ParseClientFirst(msg []byte) (ClientFirst, error) {
	var cf ClientFirst
	s := string(msg)
	cb, rest, ok := strings.Cut(s, ",")
	if !ok {
		return cf, errors.New("invalid SCRAM client-first message: no GS2 header")
	}
	switch {
	case cb == "n" || cb == "y":
	case strings.HasPrefix(cb, "p="):
		return cf, errors.New("SCRAM channel binding is not supported")
	default:
		return cf, fmt.Errorf("invalid SCRAM GS2 header flag %q", trunc(cb))
	}
	az, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, errors.New("invalid SCRAM client-first message: GS2 header not ended")
	}
	if az != "" {
		v, ok := strings.CutPrefix(az, "a=")
		if !ok {
			return cf, errors.New("invalid SCRAM authorization id")
		}
		var err error
		if cf.Authzid, err = unescapeSaslName(v); err != nil {
			return cf, err
		}
	}
	cf.GS2Header = s[:len(cb)+1+len(az)+1]
	cf.Bare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, errors.New("invalid SCRAM client-first message: want n=<user>,r=<nonce>")
	}
	var err error
	if cf.User, err = unescapeSaslName(attrs[0][2:]); err != nil {
		return cf, err
	}
	if cf.User == "" {
		return cf, errors.New("invalid SCRAM client-first message: empty user name")
	}
	cf.Nonce = attrs[1][2:]
	if !printableNonce(cf.Nonce) {
		return cf, errors.New("invalid SCRAM client nonce")
	}
	for _, ext := range attrs[2:] {
		k, v, ok := strings.Cut(ext, "=")
		if !ok || k == "" {
			return cf, errors.New("invalid SCRAM extension")
		}
		if k == "tokenauth" {
			cf.TokenAuth = strings.EqualFold(v, "true")
		}
	}
	return cf, nil
}

// ClientFinal is a parsed SCRAM client-final-message.
type ClientFinal struct {
	ChannelBinding []byte // c=, decoded
	Nonce          string
	Proof          []byte
	WithoutProof   string // client-final-message-without-proof
}

// ParseClientFinal parses c=...,r=...[,ext...],p=....
func ParseClientFinal(msg []byte) (ClientFinal, error) {
	var cf ClientFinal
	s := string(msg)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return cf, errors.New("invalid SCRAM client-final message: no proof")
	}
	cf.WithoutProof = s[:i]
	var err error
	if cf.Proof, err = base64.StdEncoding.DecodeString(s[i+3:]); err != nil || len(cf.Proof) == 0 {
		return cf, errors.New("invalid SCRAM client proof")
	}
	attrs := strings.Split(cf.WithoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, errors.New("invalid SCRAM client-final message: want c=<binding>,r=<nonce>")
	}
	if cf.ChannelBinding, err = base64.StdEncoding.DecodeString(attrs[0][2:]); err != nil {
		return cf, errors.New("invalid SCRAM channel binding")
	}
	cf.Nonce = attrs[1][2:]
	if !printableNonce(cf.Nonce) {
		// Kafka's grammar too: scramExchange accepts a nonce that only
		// ends with its own, so what comes before it must still be a
		// nonce's characters.
		return cf, errors.New("invalid SCRAM client-final nonce")
	}
	return cf, nil
}

func unescapeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("invalid SCRAM user name escape")
		}
		i += 2
	}
	return b.String(), nil
}

func printableNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func trunc(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// errScramCredentials is what a client hears for an unknown user or a
// wrong proof alike.
var errScramCredentials = errors.New("Invalid user credentials")

// scramExchange is the server side of one SCRAM authentication: the
// client-first message, then the client-final one.
//
// The client-final nonce must end with the whole nonce this exchange sent
// in server-first (the client's nonce and 24 fresh random bytes), not
// equal it as RFC 5802 says: Kafka's ScramSaslServer checks endsWith
// since 3.8.1 (the CVE-2024-56128 fix), because librdkafka before 2.6.1
// sends r=<client nonce><server-first nonce>, its own nonce twice (kcat
// 1.7.1 and confluent-kafka-python 1.7 on Debian bookworm's librdkafka
// 2.0.2). Kafka's later trunk (4.x) compares for equality again; Fjord
// keeps the 3.8.1-3.9 rule, which those clients need. Replay protection
// is unchanged:
//   - the fresh server part must be there in full, so a client-final
//     recorded from another exchange, or one built before this
//     server-first was seen, fails the check;
//   - the proof is an HMAC over the AuthMessage, which holds this
//     server-first and the client-final as sent, the extra prefix
//     included, so nobody without the client key can add, change or
//     strip a prefix and keep a valid proof.
//
// Only the prefix is free, and ParseClientFinal holds it to the nonce
// characters (printable, no comma), as Kafka's grammar does.
type scramExchange struct {
	mechanism string
	lookup    ScramLookup
	lifetime  time.Duration
	step      int
	first     ClientFirst
	secret    ScramSecret
	nonce     string // the combined client+server nonce
	srvFirst  string
}

func (x *scramExchange) Step(msg []byte) ([]byte, bool, string, time.Duration, error) {
	switch x.step {
	case 0:
		x.step = 1
		cf, err := ParseClientFirst(msg)
		if err != nil {
			return nil, false, "", 0, err
		}
		if cf.TokenAuth {
			return nil, false, "", 0, errors.New("delegation tokens are not supported")
		}
		if cf.Authzid != "" && cf.Authzid != cf.User {
			return nil, false, "", 0, errors.New("Authentication failed: Client requested an authorization id that is different from username")
		}
		sec, ok := x.lookup(x.mechanism, cf.User)
		if !ok {
			return nil, false, "", 0, errScramCredentials
		}
		var r [24]byte
		rand.Read(r[:])
		x.first, x.secret = cf, sec
		x.nonce = cf.Nonce + base64.RawURLEncoding.EncodeToString(r[:])
		x.srvFirst = "r=" + x.nonce + ",s=" + base64.StdEncoding.EncodeToString(sec.Salt) + ",i=" + strconv.Itoa(int(sec.Iterations))
		return []byte(x.srvFirst), false, "", 0, nil
	case 1:
		x.step = 2
		fin, err := ParseClientFinal(msg)
		if err != nil {
			return nil, false, "", 0, err
		}
		if string(fin.ChannelBinding) != x.first.GS2Header {
			return nil, false, "", 0, errors.New("invalid SCRAM channel binding: not the GS2 header sent")
		}
		if !strings.HasSuffix(fin.Nonce, x.nonce) {
			return nil, false, "", 0, errors.New("invalid SCRAM nonce")
		}
		h := scramHash(x.mechanism)
		authMsg := x.first.Bare + "," + x.srvFirst + "," + fin.WithoutProof
		mac := hmac.New(h, x.secret.StoredKey)
		mac.Write([]byte(authMsg))
		sig := mac.Sum(nil)
		if len(fin.Proof) != len(sig) {
			return nil, false, "", 0, errScramCredentials
		}
		clientKey := make([]byte, len(sig))
		for i := range sig {
			clientKey[i] = fin.Proof[i] ^ sig[i]
		}
		hh := h()
		hh.Write(clientKey)
		if subtle.ConstantTimeCompare(hh.Sum(nil), x.secret.StoredKey) != 1 {
			return nil, false, "", 0, errScramCredentials
		}
		mac = hmac.New(h, x.secret.ServerKey)
		mac.Write([]byte(authMsg))
		return []byte("v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))), true, "User:" + x.first.User, x.lifetime, nil
	}
	return nil, false, "", 0, errors.New("SCRAM exchange already finished")
}
