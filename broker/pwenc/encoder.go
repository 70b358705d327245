package pwenc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Prefix starts every encoded value. A value without it was stored in
// clear (by a Fjord that did not encrypt) or is not a password.
const Prefix = "fjord:pw:"

// Bounds of password.encoder.iterations. The minimum is Kafka's; the
// maximum bounds the work one stored value can ask of a node that
// decodes it (about a second of PBKDF2-SHA512).
const (
	MinIterations = 1024
	MaxIterations = 1 << 20
)

// Kafka's names of the settings' values (JCA algorithm names).
const (
	KeyFactorySHA512 = "PBKDF2WithHmacSHA512"
	KeyFactorySHA256 = "PBKDF2WithHmacSHA256"
	KeyFactorySHA1   = "PBKDF2WithHmacSHA1"
	// CipherGCM is the cipher Fjord uses; CipherCBC, Kafka's default, is
	// accepted as a setting and means the same here (see the package
	// comment for why).
	CipherGCM = "AES/GCM/NoPadding"
	CipherCBC = "AES/CBC/PKCS5Padding"
)

// Errors of Decode. Each is wrapped with context; test with errors.Is.
var (
	// ErrNotEncoded: the value lacks Prefix.
	ErrNotEncoded = errors.New("pwenc: not an encrypted value")
	// ErrCorrupt: the value has Prefix but not the encoded form.
	ErrCorrupt = errors.New("pwenc: malformed encrypted value")
	// ErrVersion: the value was written in a format this build does not know.
	ErrVersion = errors.New("pwenc: unknown format version")
	// ErrDecrypt: neither secret opens the value. It was written under
	// another password.encoder.secret, for another key, or altered.
	ErrDecrypt = errors.New("pwenc: cannot decrypt: written under another password.encoder.secret (set password.encoder.old.secret to it), or altered")
	// ErrNoSecret: New was given no secret.
	ErrNoSecret = errors.New("pwenc: password.encoder.secret is not set")
)

// Layout of the decoded bytes (the package comment draws it).
const (
	version    = 1
	saltLen    = 32
	nonceLen   = 12
	tagLen     = 16
	headerLen  = 1 + 1 + 4 + 1 + saltLen + nonceLen // 51
	offKDF     = 1
	offIter    = 2
	offKeyLen  = 6
	offSalt    = 7
	offNonce   = offSalt + saltLen
	minEncoded = headerLen + tagLen
)

// kdf is a key factory's id in the encoded form.
type kdf uint8

const (
	kdfSHA512 kdf = 1
	kdfSHA256 kdf = 2
	kdfSHA1   kdf = 3
)

func (k kdf) derive(secret string, salt []byte, iter, keyLen int) ([]byte, error) {
	switch k {
	case kdfSHA512:
		return pbkdf2.Key(sha512.New, secret, salt, iter, keyLen)
	case kdfSHA256:
		return pbkdf2.Key(sha256.New, secret, salt, iter, keyLen)
	case kdfSHA1:
		return pbkdf2.Key(sha1.New, secret, salt, iter, keyLen)
	}
	return nil, fmt.Errorf("%w: key factory %d", ErrCorrupt, k)
}

// Settings are the password.encoder.* keys.
type Settings struct {
	// Secret is password.encoder.secret: new values are encrypted under
	// it. "" means none: password configs cannot be set dynamically.
	Secret string
	// OldSecret is password.encoder.old.secret: values it encrypted are
	// still decrypted after the secret changes. Needs Secret.
	OldSecret string
	// KeyFactory is password.encoder.keyfactory.algorithm, a JCA name
	// (KeyFactorySHA512, ...); "" is KeyFactorySHA512, as in Kafka when
	// the JVM has it.
	KeyFactory string
	// Cipher is password.encoder.cipher.algorithm: CipherGCM, or CipherCBC
	// which Fjord serves with GCM too.
	Cipher string
	// KeyLength is password.encoder.key.length, in bits: 128, 192 or 256.
	KeyLength int32
	// Iterations is password.encoder.iterations, in
	// [MinIterations, MaxIterations].
	Iterations int32
}

// DefaultSettings are Kafka's defaults, with Fjord's cipher and no secret.
func DefaultSettings() Settings {
	return Settings{KeyFactory: KeyFactorySHA512, Cipher: CipherGCM, KeyLength: 128, Iterations: 4096}
}

// Validate reports the first setting that cannot work, naming its key.
func (s Settings) Validate() error {
	if _, err := parseKeyFactory(s.KeyFactory); err != nil {
		return err
	}
	if c := strings.TrimSpace(s.Cipher); c != "" && !strings.EqualFold(c, CipherGCM) && !strings.EqualFold(c, CipherCBC) {
		return fmt.Errorf("password.encoder.cipher.algorithm %q: Fjord encrypts with %s (%s, Kafka's default, is accepted and means the same)", s.Cipher, CipherGCM, CipherCBC)
	}
	switch s.KeyLength {
	case 128, 192, 256:
	default:
		return fmt.Errorf("password.encoder.key.length %d: must be 128, 192 or 256 (bits of an AES key)", s.KeyLength)
	}
	if s.Iterations < MinIterations || s.Iterations > MaxIterations {
		return fmt.Errorf("password.encoder.iterations %d: must be in [%d, %d]", s.Iterations, MinIterations, MaxIterations)
	}
	if s.OldSecret != "" && s.Secret == "" {
		return errors.New("password.encoder.old.secret is set without password.encoder.secret: set the new secret too")
	}
	return nil
}

func parseKeyFactory(name string) (kdf, error) {
	switch n := strings.TrimSpace(name); {
	case n == "" || strings.EqualFold(n, KeyFactorySHA512):
		return kdfSHA512, nil
	case strings.EqualFold(n, KeyFactorySHA256):
		return kdfSHA256, nil
	case strings.EqualFold(n, KeyFactorySHA1):
		return kdfSHA1, nil
	}
	return 0, fmt.Errorf("password.encoder.keyfactory.algorithm %q: must be %s, %s or %s", name, KeyFactorySHA512, KeyFactorySHA256, KeyFactorySHA1)
}

// Encoder encrypts and decrypts config values. Safe for concurrent use
// when its random reader is (crypto/rand's is).
type Encoder struct {
	secret, old string // old may be ""
	kdf         kdf
	keyLen      int // bytes
	iterations  int
	random      io.Reader
}

// New makes the encoder of s, which must name a secret (else ErrNoSecret);
// random supplies salts and nonces.
func New(s Settings, random io.Reader) (*Encoder, error) {
	if s.Secret == "" {
		return nil, ErrNoSecret
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	k, _ := parseKeyFactory(s.KeyFactory)
	return &Encoder{secret: s.Secret, old: s.OldSecret, kdf: k, keyLen: int(s.KeyLength) / 8, iterations: int(s.Iterations), random: random}, nil
}

// Encode encrypts value, the value of the config name, under the secret.
func (e *Encoder) Encode(name, value string) (string, error) {
	b := make([]byte, headerLen, headerLen+len(value)+tagLen)
	b[0] = version
	b[offKDF] = byte(e.kdf)
	binary.BigEndian.PutUint32(b[offIter:], uint32(e.iterations))
	b[offKeyLen] = byte(e.keyLen)
	if _, err := io.ReadFull(e.random, b[offSalt:headerLen]); err != nil {
		return "", fmt.Errorf("pwenc: salt and nonce: %w", err)
	}
	gcm, err := e.kdf.aead(e.secret, b[offSalt:offNonce], e.iterations, e.keyLen)
	if err != nil {
		return "", err
	}
	b = gcm.Seal(b, b[offNonce:headerLen], []byte(value), additional(b[:headerLen], name))
	return Prefix + base64.RawStdEncoding.EncodeToString(b), nil
}

// Decode decrypts value, stored for the config name: with the secret,
// else with the old secret. Errors wrap ErrNotEncoded, ErrCorrupt,
// ErrVersion or ErrDecrypt.
func (e *Encoder) Decode(name, value string) (string, error) {
	h, err := parse(value)
	if err != nil {
		return "", err
	}
	secrets := []string{e.secret}
	if e.old != "" {
		secrets = append(secrets, e.old)
	}
	for _, s := range secrets {
		gcm, err := h.kdf.aead(s, h.salt, h.iterations, h.keyLen)
		if err != nil {
			return "", err
		}
		if plain, err := gcm.Open(nil, h.nonce, h.sealed, additional(h.header, name)); err == nil {
			return string(plain), nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, ErrDecrypt)
}

// IsEncoded reports whether value has the encoded form. It needs no
// secret: the controllers check with it that only ciphertext is stored.
func IsEncoded(value string) bool {
	_, err := parse(value)
	return err == nil
}

// encoded is a parsed value; its slices alias the decoded bytes.
type encoded struct {
	header     []byte // the first headerLen bytes, authenticated
	kdf        kdf
	iterations int
	keyLen     int
	salt       []byte
	nonce      []byte
	sealed     []byte // ciphertext and tag
}

// parse checks the encoded form without decrypting.
func parse(value string) (encoded, error) {
	rest, ok := strings.CutPrefix(value, Prefix)
	if !ok {
		return encoded{}, ErrNotEncoded
	}
	b, err := base64.RawStdEncoding.Strict().DecodeString(rest)
	if err != nil {
		return encoded{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(b) < 1 {
		return encoded{}, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if b[0] != version {
		return encoded{}, fmt.Errorf("%w: %d", ErrVersion, b[0])
	}
	if len(b) < minEncoded {
		return encoded{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrCorrupt, len(b), minEncoded)
	}
	h := encoded{header: b[:headerLen], kdf: kdf(b[offKDF]), keyLen: int(b[offKeyLen]),
		salt: b[offSalt:offNonce], nonce: b[offNonce:headerLen], sealed: b[headerLen:]}
	if h.kdf < kdfSHA512 || h.kdf > kdfSHA1 {
		return encoded{}, fmt.Errorf("%w: key factory %d", ErrCorrupt, h.kdf)
	}
	iter := binary.BigEndian.Uint32(b[offIter:])
	if iter < MinIterations || iter > MaxIterations {
		return encoded{}, fmt.Errorf("%w: %d iterations", ErrCorrupt, iter)
	}
	h.iterations = int(iter)
	switch h.keyLen {
	case 16, 24, 32:
	default:
		return encoded{}, fmt.Errorf("%w: key length %d", ErrCorrupt, h.keyLen)
	}
	return h, nil
}

// aead is AES-GCM under the key derived from secret.
func (k kdf) aead(secret string, salt []byte, iter, keyLen int) (cipher.AEAD, error) {
	key, err := k.derive(secret, salt, iter, keyLen)
	if err != nil {
		return nil, fmt.Errorf("pwenc: deriving the key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("pwenc: %w", err)
	}
	return cipher.NewGCM(block)
}

// additional is the GCM additional data: the header, then the config's
// name (the header has a fixed length, so the two cannot run together).
func additional(header []byte, name string) []byte {
	return append(append(make([]byte, 0, len(header)+len(name)), header...), name...)
}
