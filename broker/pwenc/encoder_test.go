package pwenc

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// fast are valid settings with the fewest iterations, to keep tests quick.
func fast(secret, old string) Settings {
	s := DefaultSettings()
	s.Secret, s.OldSecret, s.Iterations = secret, old, MinIterations
	return s
}

func mustNew(t testing.TB, s Settings) *Encoder {
	t.Helper()
	e, err := New(s, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRoundTrip: a value encoded under the secret decodes to itself, for
// every key factory and key length; the plaintext is nowhere in the
// encoded text; two encodings of one value differ (salt and nonce are
// random per value).
func TestRoundTrip(t *testing.T) {
	values := []string{"", "changeit", "pässwörd ✓", strings.Repeat("-----BEGIN PRIVATE KEY-----\n", 200)}
	for _, kf := range []string{KeyFactorySHA512, KeyFactorySHA256, KeyFactorySHA1, ""} {
		for _, bits := range []int32{128, 192, 256} {
			s := fast("s3cret", "")
			s.KeyFactory, s.KeyLength = kf, bits
			e := mustNew(t, s)
			for _, v := range values {
				enc, err := e.Encode("ssl.keystore.password", v)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(enc, Prefix) || !IsEncoded(enc) {
					t.Errorf("%s/%d: %q is not in the encoded form", kf, bits, enc)
				}
				if v != "" && strings.Contains(enc, v) {
					t.Errorf("%s/%d: the plaintext is in %q", kf, bits, enc)
				}
				got, err := e.Decode("ssl.keystore.password", enc)
				if err != nil || got != v {
					t.Errorf("%s/%d: decode = %q, %v; want %q", kf, bits, got, err, v)
				}
				again, _ := e.Encode("ssl.keystore.password", v)
				if again == enc {
					t.Errorf("%s/%d: two encodings of %q are equal", kf, bits, v)
				}
			}
		}
	}
}

// TestGolden: a value written by this format's first version still
// decodes, so a change of the format cannot go unnoticed. The random
// bytes are fixed; the encoding is then deterministic. (The value was
// checked once with an independent implementation: Python's
// hashlib.pbkdf2_hmac and cryptography's AESGCM decrypt it.)
func TestGolden(t *testing.T) {
	s := fast("golden-secret", "")
	e, err := New(s, bytes.NewReader(bytes.Repeat([]byte{7}, saltLen+nonceLen)))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := e.Encode("listener.name.ssl.ssl.key.password", "hunter2")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "fjord:pw:AQEAAAQAEAcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHN2vK+LPf7BiTM8ECLrldqZu49Q+5ffE"
	if enc != golden {
		t.Errorf("encoding with fixed randomness:\n got %s\nwant %s", enc, golden)
	}
	if got, err := mustNew(t, s).Decode("listener.name.ssl.ssl.key.password", golden); err != nil || got != "hunter2" {
		t.Errorf("golden value decodes to %q, %v", got, err)
	}
}

// TestTamper: changing any byte of an encoded value, or decoding it for
// another key, is an error and never another plaintext.
func TestTamper(t *testing.T) {
	e := mustNew(t, fast("s3cret", ""))
	enc, err := e.Encode("ssl.truststore.password", "truststore-pw")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(enc, Prefix))
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80} {
			b := bytes.Clone(raw)
			b[i] ^= flip
			got, err := e.Decode("ssl.truststore.password", Prefix+base64.RawStdEncoding.EncodeToString(b))
			if err == nil {
				t.Fatalf("byte %d ^ %#x: decoded to %q", i, flip, got)
			}
			if !errors.Is(err, ErrDecrypt) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Errorf("byte %d ^ %#x: %v, want ErrDecrypt, ErrCorrupt or ErrVersion", i, flip, err)
			}
		}
	}
	for _, cut := range []int{0, 1, headerLen, len(raw) - 1} {
		if _, err := e.Decode("ssl.truststore.password", Prefix+base64.RawStdEncoding.EncodeToString(raw[:cut])); err == nil {
			t.Errorf("cut to %d bytes: decoded", cut)
		}
	}
	if _, err := e.Decode("ssl.keystore.password", enc); !errors.Is(err, ErrDecrypt) {
		t.Errorf("decoded for another key: %v, want ErrDecrypt", err)
	}
	for _, bad := range []string{"truststore-pw", Prefix, Prefix + "!!!", Prefix + enc[len(Prefix):] + "=", strings.ToUpper(enc)} {
		if _, err := e.Decode("ssl.truststore.password", bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
		if IsEncoded(bad) {
			t.Errorf("IsEncoded(%q)", bad)
		}
	}
	if _, err := e.Decode("k", "plain"); !errors.Is(err, ErrNotEncoded) {
		t.Errorf("a value without the prefix: %v, want ErrNotEncoded", err)
	}
}

// TestSecrets: another secret cannot decode; password.encoder.old.secret
// decodes the values the old secret wrote while new ones use the new
// secret; the parameters come from the value, not the settings.
func TestSecrets(t *testing.T) {
	old := mustNew(t, fast("old", ""))
	v, _ := old.Encode("ssl.key.password", "k")
	if _, err := mustNew(t, fast("new", "")).Decode("ssl.key.password", v); !errors.Is(err, ErrDecrypt) {
		t.Errorf("another secret: %v, want ErrDecrypt", err)
	}
	rotated := mustNew(t, fast("new", "old"))
	if got, err := rotated.Decode("ssl.key.password", v); err != nil || got != "k" {
		t.Errorf("with the old secret: %q, %v", got, err)
	}
	w, _ := rotated.Encode("ssl.key.password", "k2")
	if _, err := old.Decode("ssl.key.password", w); !errors.Is(err, ErrDecrypt) {
		t.Errorf("a new value decodes under the old secret: %v", err)
	}
	if got, err := mustNew(t, fast("new", "")).Decode("ssl.key.password", w); err != nil || got != "k2" {
		t.Errorf("a new value under the new secret: %q, %v", got, err)
	}

	s := fast("old", "")
	s.KeyFactory, s.KeyLength, s.Iterations = KeyFactorySHA1, 256, 2048
	if got, err := mustNew(t, s).Decode("ssl.key.password", v); err != nil || got != "k" {
		t.Errorf("after changing the parameters: %q, %v", got, err)
	}
}

func TestSettings(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if _, err := New(DefaultSettings(), rand.Reader); !errors.Is(err, ErrNoSecret) {
		t.Errorf("no secret: %v, want ErrNoSecret", err)
	}
	for _, tc := range []struct {
		edit func(*Settings)
		key  string
	}{
		{func(s *Settings) { s.KeyFactory = "PBEWithMD5AndDES" }, "password.encoder.keyfactory.algorithm"},
		{func(s *Settings) { s.Cipher = "DES/ECB/NoPadding" }, "password.encoder.cipher.algorithm"},
		{func(s *Settings) { s.KeyLength = 64 }, "password.encoder.key.length"},
		{func(s *Settings) { s.Iterations = 1000 }, "password.encoder.iterations"},
		{func(s *Settings) { s.Iterations = MaxIterations + 1 }, "password.encoder.iterations"},
		{func(s *Settings) { s.Secret, s.OldSecret = "", "x" }, "password.encoder.old.secret"},
	} {
		s := fast("x", "")
		tc.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%+v: %v, want an error naming %s", s, err, tc.key)
		}
	}
	for _, ok := range []func(*Settings){
		func(s *Settings) { s.Cipher = CipherCBC },
		func(s *Settings) { s.Cipher = "aes/gcm/nopadding" },
		func(s *Settings) { s.KeyFactory = "pbkdf2withhmacsha256" },
		func(s *Settings) { s.KeyFactory, s.Cipher = "", "" },
	} {
		s := fast("x", "")
		ok(&s)
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// A random reader that fails makes Encode fail, not write a weak value.
func TestEncodeRandomFails(t *testing.T) {
	e, err := New(fast("x", ""), bytes.NewReader(make([]byte, 10)))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.Encode("k", "v"); err == nil {
		t.Errorf("encoded %q from a short random reader", v)
	}
}

// FuzzDecode: any stored text, as read from the metadata log, either
// decodes or is an error; never a panic, and never a value that is not
// the one encoded.
func FuzzDecode(f *testing.F) {
	e := mustNew(f, fast("fuzz", ""))
	for _, v := range []string{"", "pw", "a longer password with spaces"} {
		enc, err := e.Encode("ssl.keystore.password", v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add(Prefix)
	f.Add(Prefix + "AQ")
	f.Add("plain")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := e.Decode("ssl.keystore.password", s)
		if err != nil {
			return
		}
		if !IsEncoded(s) {
			t.Fatalf("%q decoded to %q but is not in the encoded form", s, got)
		}
		// Whatever decodes must be what an encoding of got decodes to.
		again, err := e.Encode("ssl.keystore.password", got)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := e.Decode("ssl.keystore.password", again); err != nil || back != got {
			t.Fatalf("re-encoding %q: %q, %v", got, back, err)
		}
	})
}
