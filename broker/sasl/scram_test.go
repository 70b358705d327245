package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/protocol"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// secretFor salts a password as a client would and derives what a server
// keeps (the controller's ScramKeys, inlined: this package does not
// import the controller).
func secretFor(t *testing.T, mechanism, pass string, iters int) ScramSecret {
	h := scramHash(mechanism)
	salt := []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(h, pass, salt, iters, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(h, salted)
	mac.Write([]byte("Client Key"))
	hh := h()
	hh.Write(mac.Sum(nil))
	sm := hmac.New(h, salted)
	sm.Write([]byte("Server Key"))
	return ScramSecret{Salt: salt, StoredKey: hh.Sum(nil), ServerKey: sm.Sum(nil), Iterations: int32(iters)}
}

// TestScramWithFranz runs whole exchanges against franz-go's SCRAM client,
// which also checks the server signature.
func TestScramWithFranz(t *testing.T) {
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		sec := secretFor(t, mech, "pa,ss=word", 4096)
		lookup := func(m, user string) (ScramSecret, bool) { return sec, m == mech && user == "al=ice" }
		srv, err := NewServer(Settings{EnabledMechanisms: mech}, "L", lookup, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			user, pass string
			ok         bool
		}{{"al=ice", "pa,ss=word", true}, {"al=ice", "wrong", false}, {"bob", "pa,ss=word", false}} {
			a := scram.Auth{User: c.user, Pass: c.pass}
			m := a.AsSha256Mechanism()
			if mech == "SCRAM-SHA-512" {
				m = a.AsSha512Mechanism()
			}
			sess, msg, err := m.Authenticate(context.Background(), "host")
			if err != nil {
				t.Fatal(err)
			}
			x, err := srv.Start(mech, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var principal string
			ok := func() bool {
				for range 3 {
					reply, done, p, _, err := x.Step(msg)
					if err != nil {
						return false
					}
					cdone, next, cerr := sess.Challenge(reply)
					if cerr != nil {
						t.Errorf("%s %s: client refused the server: %v", mech, c.user, cerr)
						return false
					}
					if done {
						principal = p
						return cdone
					}
					msg = next
				}
				return false
			}()
			if ok != c.ok || ok && principal != "User:"+c.user {
				t.Errorf("%s %s/%s: ok %v principal %q", mech, c.user, c.pass, ok, principal)
			}
		}
	}
}

func TestParseClientMessages(t *testing.T) {
	cf, err := ParseClientFirst([]byte("n,a=u,n=u,r=abc,tokenauth=true"))
	if err != nil || cf.GS2Header != "n,a=u," || cf.User != "u" || cf.Nonce != "abc" || !cf.TokenAuth || cf.Bare != "n=u,r=abc,tokenauth=true" {
		t.Errorf("%+v %v", cf, err)
	}
	for _, bad := range []string{"", "p=tls-unique,,n=u,r=a", "n,,n=,r=a", "n,,r=a,n=u", "n,,n=u=2X,r=a", "n,,n=u,r=", "x,,n=u,r=a", "n,b,n=u,r=a"} {
		if _, err := ParseClientFirst([]byte(bad)); err == nil {
			t.Errorf("ParseClientFirst(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "c=biws,r=a", "c=biws,r=a,p=", "c=!!,r=a,p=AAAA", "r=a,c=biws,p=AAAA", "c=biws,r=,p=AAAA", "c=biws,r=a\x01b,p=AAAA", "c=biws,r=a b,p=AAAA"} {
		if _, err := ParseClientFinal([]byte(bad)); err == nil {
			t.Errorf("ParseClientFinal(%q) accepted", bad)
		}
	}
}

// rdkClientFinal is a client-final message whose r= is nonce, with the
// proof a client knowing pass computes over bare, srvFirst and the message
// itself; authMsg is that AuthMessage.
func rdkClientFinal(t *testing.T, mechanism, pass, bare, srvFirst, nonce string) (msg []byte, authMsg string) {
	t.Helper()
	var salt []byte
	var iters int
	for _, a := range strings.Split(srvFirst, ",") {
		switch k, v, _ := strings.Cut(a, "="); k {
		case "s":
			var err error
			if salt, err = base64.StdEncoding.DecodeString(v); err != nil {
				t.Fatalf("server-first %q: salt: %v", srvFirst, err)
			}
		case "i":
			iters, _ = strconv.Atoi(v)
		}
	}
	h := scramHash(mechanism)
	salted, err := pbkdf2.Key(h, pass, salt, iters, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(h, salted)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	hh := h()
	hh.Write(clientKey)
	withoutProof := "c=biws,r=" + nonce
	authMsg = bare + "," + srvFirst + "," + withoutProof
	mac = hmac.New(h, hh.Sum(nil))
	mac.Write([]byte(authMsg))
	proof := mac.Sum(nil)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), authMsg
}

// TestScramLibrdkafkaNonce: librdkafka before 2.6.1 (kcat 1.7.1 on
// librdkafka 2.0.2) answers server-first with r=<client nonce><server-first
// nonce>. Kafka 3.8.1-3.9 accepts a nonce that ends with the server-first
// one, and so does Fjord; a nonce lacking any of the server-first nonce,
// or with it anywhere but at the end, is refused for the nonce even with a
// proof computed over it, and so is a client-final replayed from another
// exchange.
func TestScramLibrdkafkaNonce(t *testing.T) {
	const cnonce = "Cl-{ie~nt.Nonce/0123456789abcdef" // librdkafka's: 32 of 0x2d-0x7e
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		sec := secretFor(t, mech, "secret", 4096)
		lookup := func(m, user string) (ScramSecret, bool) { return sec, m == mech && user == "carol" }
		srv, err := NewServer(Settings{EnabledMechanisms: mech}, "L", lookup, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		const bare = "n=carol,r=" + cnonce
		// start begins an exchange with librdkafka's client-first and
		// returns it with server-first and the server-first nonce.
		start := func(t *testing.T) (protocol.SASLExchange, string, string) {
			t.Helper()
			x, err := srv.Start(mech, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			reply, done, _, _, err := x.Step([]byte("n,," + bare))
			if err != nil || done {
				t.Fatalf("client-first: done %v, %v", done, err)
			}
			srvFirst := string(reply)
			nonce, _, _ := strings.Cut(strings.TrimPrefix(srvFirst, "r="), ",")
			if !strings.HasPrefix(nonce, cnonce) || len(nonce) <= len(cnonce) {
				t.Fatalf("server-first %q does not extend the client nonce", srvFirst)
			}
			return x, srvFirst, nonce
		}

		t.Run(mech+"/librdkafka", func(t *testing.T) {
			x, srvFirst, nonce := start(t)
			msg, authMsg := rdkClientFinal(t, mech, "secret", bare, srvFirst, cnonce+nonce)
			reply, done, principal, _, err := x.Step(msg)
			if err != nil || !done || principal != "User:carol" {
				t.Fatalf("librdkafka's client-final %q: done %v principal %q: %v", msg, done, principal, err)
			}
			// librdkafka checks the server signature, over the
			// client-final as sent.
			mac := hmac.New(scramHash(mech), sec.ServerKey)
			mac.Write([]byte(authMsg))
			if want := "v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)); string(reply) != want {
				t.Errorf("server-final %q, want %q", reply, want)
			}
		})
		t.Run(mech+"/librdkafka wrong password", func(t *testing.T) {
			x, srvFirst, nonce := start(t)
			msg, _ := rdkClientFinal(t, mech, "wrong", bare, srvFirst, cnonce+nonce)
			if _, _, _, _, err := x.Step(msg); !errors.Is(err, errScramCredentials) {
				t.Errorf("wrong password: %v, want %v", err, errScramCredentials)
			}
		})
		t.Run(mech+"/replayed", func(t *testing.T) {
			// A client-final that passed in one exchange, sent again in
			// the next with the same client-first.
			x, srvFirst, nonce := start(t)
			msg, _ := rdkClientFinal(t, mech, "secret", bare, srvFirst, cnonce+nonce)
			if _, done, _, _, err := x.Step(msg); err != nil || !done {
				t.Fatalf("first exchange: done %v, %v", done, err)
			}
			y, _, _ := start(t)
			if _, _, _, _, err := y.Step(msg); err == nil || err.Error() != "invalid SCRAM nonce" {
				t.Errorf("replayed client-final: %v, want invalid SCRAM nonce", err)
			}
		})
		for _, c := range []struct {
			what  string
			nonce func(nonce string) string
		}{
			{"the client nonce only", func(string) string { return cnonce }},
			{"the client nonce twice", func(string) string { return cnonce + cnonce }},
			{"the last server byte missing", func(n string) string { return cnonce + n[:len(n)-1] }},
			{"the first server byte missing", func(n string) string { return n[:len(cnonce)] + n[len(cnonce)+1:] }},
			{"a server byte changed", func(n string) string {
				if n[len(n)-1] == 'A' {
					return cnonce + n[:len(n)-1] + "B"
				}
				return cnonce + n[:len(n)-1] + "A"
			}},
			{"something after it", func(n string) string { return cnonce + n + "x" }},
			{"the server part only", func(n string) string { return n[len(cnonce):] }},
		} {
			t.Run(mech+"/"+c.what, func(t *testing.T) {
				x, srvFirst, nonce := start(t)
				msg, _ := rdkClientFinal(t, mech, "secret", bare, srvFirst, c.nonce(nonce))
				if _, _, _, _, err := x.Step(msg); err == nil || err.Error() != "invalid SCRAM nonce" {
					t.Errorf("client-final %q: %v, want invalid SCRAM nonce", msg, err)
				}
			})
		}
		t.Run(mech+"/unprintable prefix", func(t *testing.T) {
			x, srvFirst, nonce := start(t)
			msg, _ := rdkClientFinal(t, mech, "secret", bare, srvFirst, "\x01"+nonce)
			if _, _, _, _, err := x.Step(msg); err == nil {
				t.Errorf("client-final %q accepted", msg)
			}
		})
	}
}
