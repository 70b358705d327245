package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"testing"

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
	for _, bad := range []string{"", "c=biws,r=a", "c=biws,r=a,p=", "c=!!,r=a,p=AAAA", "r=a,c=biws,p=AAAA"} {
		if _, err := ParseClientFinal([]byte(bad)); err == nil {
			t.Errorf("ParseClientFinal(%q) accepted", bad)
		}
	}
}
