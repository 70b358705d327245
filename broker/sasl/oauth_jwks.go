package sasl

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"
)

// Bounds of the JWKS fetch. A JWKS is a few keys: a megabyte is far more
// than any provider serves, and a slow endpoint must not hold a refresh
// (nor the connections waiting on it) for long.
const (
	jwksMaxBytes    = 1 << 20
	jwksTimeout     = 10 * time.Second
	jwksMaxKeys     = 256
	jwksKidWait     = 5 * time.Second  // how long an exchange waits for a refresh its unknown kid asked for
	jwksKidInterval = 10 * time.Second // at most one unknown-kid refresh this often
)

// keySet is one fetched JWKS: its signature keys, public halves only.
// Read-only once published.
type keySet struct {
	keys []jose.JSONWebKey
}

// parseJWKS reads a JWKS document (RFC 7517). A key this broker cannot
// verify with (a symmetric key, an encryption key, an unknown key type)
// is skipped rather than failing the set, as providers list keys of
// every kind; a set with no usable key is an error.
func parseJWKS(data []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("JWKS is not a JSON object with keys: %w", err)
	}
	if len(doc.Keys) > jwksMaxKeys {
		return nil, fmt.Errorf("JWKS lists %d keys (at most %d are read)", len(doc.Keys), jwksMaxKeys)
	}
	ks := &keySet{}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if _, sym := k.Key.([]byte); sym || !k.Valid() {
			continue // HMAC keys never verify a token here
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		if k.Key == nil {
			continue
		}
		ks.keys = append(ks.keys, k)
	}
	if len(ks.keys) == 0 {
		return nil, errors.New("JWKS has no usable signature key (RSA, EC or OKP public keys)")
	}
	return ks, nil
}

// find returns the keys that may have signed a token with kid and alg:
// by kid when the token names one, else every key; the key's type must be
// alg's, and a key that states its alg must state this one. (A token
// without a kid costs at most one verification per such key.)
func (ks *keySet) find(kid string, alg string) []jose.JSONWebKey {
	if ks == nil {
		return nil
	}
	var out []jose.JSONWebKey
	for _, k := range ks.keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		if keyType(k.Key) != algKeyType(alg) {
			continue
		}
		out = append(out, k)
	}
	return out
}

func keyType(key any) string {
	switch key.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "EC"
	case ed25519.PublicKey:
		return "OKP"
	}
	return ""
}

func algKeyType(alg string) string {
	switch {
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		return "RSA"
	case strings.HasPrefix(alg, "ES"):
		return "EC"
	case alg == string(jose.EdDSA):
		return "OKP"
	}
	return "none"
}

func (ks *keySet) kids() string {
	ids := make([]string, 0, len(ks.keys))
	for _, k := range ks.keys {
		ids = append(ids, k.KeyID)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// jwks is a JWKS endpoint (sasl.oauthbearer.jwks.endpoint.url) and the
// key set last fetched from it. run refreshes it in the background every
// refresh interval, and sooner when a token names a key it lacks
// (rotation), at most once per kidInterval.
//
// Invariants: cur is replaced whole, never changed in place (exchanges
// read it without a lock); next, lastKick and the log state are guarded
// by mu and held only briefly; only run fetches.
type jwks struct {
	src        *url.URL
	refresh    time.Duration // sasl.oauthbearer.jwks.endpoint.refresh.ms
	backoff    time.Duration // sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
	backoffMax time.Duration // ..retry.backoff.max.ms: bounds one refresh's retries too
	kidEvery   time.Duration
	kidWait    time.Duration
	client     *http.Client
	log        zerolog.Logger

	cur  atomic.Pointer[keySet]
	kick chan struct{} // capacity 1: a refresh is wanted now

	mu       sync.Mutex
	next     chan struct{} // closed when the next refresh to start has ended
	lastKick time.Time
	failing  bool   // the last refresh failed (log once per change)
	loaded   string // kids of the set last logged
}

func newJWKS(raw string, refresh, backoff, backoffMax time.Duration) (*jwks, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: %w", raw, err)
	}
	switch u.Scheme {
	case "https", "http":
		if u.Host == "" {
			return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: no host", raw)
		}
	case "file":
		if u.Path == "" {
			u.Path = u.Opaque
		}
		if u.Path == "" {
			return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: no file path", raw)
		}
	default:
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: want an https, http or file URL", raw)
	}
	return &jwks{
		src: u, refresh: refresh, backoff: backoff, backoffMax: max(backoffMax, backoff),
		kidEvery: jwksKidInterval, kidWait: jwksKidWait,
		client: &http.Client{Timeout: jwksTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			// An https JWKS must not be downgraded: the keys are the trust.
			if len(via) >= 5 || req.URL.Scheme != via[0].URL.Scheme {
				return fmt.Errorf("redirect to %s refused", req.URL.Redacted())
			}
			return nil
		}},
		log:  zerolog.Nop(),
		kick: make(chan struct{}, 1),
		next: make(chan struct{}),
	}, nil
}

// fetch reads the key set once.
func (j *jwks) fetch(ctx context.Context) (*keySet, error) {
	var body io.ReadCloser
	if j.src.Scheme == "file" {
		f, err := os.Open(j.src.Path)
		if err != nil {
			return nil, err
		}
		body = f
	} else {
		ctx, cancel := context.WithTimeout(ctx, jwksTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.src.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := j.client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("HTTP status %s", resp.Status)
		}
		body = resp.Body
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, jwksMaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > jwksMaxBytes {
		return nil, fmt.Errorf("JWKS larger than %d bytes", jwksMaxBytes)
	}
	return parseJWKS(data)
}

// load fetches once and publishes the set; the start-up check of a file
// URL, and the tests.
func (j *jwks) load(ctx context.Context) error {
	ks, err := j.fetch(ctx)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", j.src.Redacted(), err)
	}
	j.cur.Store(ks)
	return nil
}

// round is one refresh: a fetch, retried after backoff doubling from
// retry.backoff.ms for as long as the waits add up to no more than
// retry.backoff.max.ms. It reports whether the set was refreshed.
func (j *jwks) round(ctx context.Context) bool {
	backoff := lifecycle.Backoff{Initial: j.backoff, Max: j.backoffMax}
	waited := time.Duration(0)
	for fails := 1; ; fails++ {
		ks, err := j.fetch(ctx)
		if err == nil {
			j.cur.Store(ks)
			j.noteState(ks, nil)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := backoff.Delay(fails)
		if waited+wait > j.backoffMax {
			j.noteState(nil, err)
			return false
		}
		if !lifecycle.Sleep(ctx, wait) {
			return false
		}
		waited += wait
	}
}

// noteState logs a change: the first failure after a success (or at
// start), the recovery, and a new set of key ids.
func (j *jwks) noteState(ks *keySet, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		if !j.failing {
			j.failing = true
			ev := j.log.Warn().Err(err).Str("jwks", j.src.Redacted())
			if j.cur.Load() != nil {
				ev.Msg("JWKS refresh failed; tokens are checked against the keys fetched before")
			} else {
				ev.Msg("JWKS could not be fetched; OAUTHBEARER tokens are refused until it is")
			}
		}
		return
	}
	if kids := ks.kids(); j.failing || kids != j.loaded {
		j.failing, j.loaded = false, kids
		j.log.Info().Str("jwks", j.src.Redacted()).Int("keys", len(ks.keys)).Str("kids", kids).Msg("JWKS loaded")
	}
}

// run refreshes the set until ctx ends: at once, then every refresh
// interval (every retry.backoff.max.ms while no set was ever fetched), or
// when kicked.
func (j *jwks) run(ctx context.Context) {
	for {
		j.mu.Lock()
		done := j.next
		j.next = make(chan struct{})
		j.mu.Unlock()
		j.round(ctx)
		close(done)
		every := j.refresh
		if j.cur.Load() == nil {
			every = min(every, j.backoffMax)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-j.kick:
			t.Stop()
		}
	}
}

// refreshNow asks run for a refresh, unless one was asked for less than
// kidEvery ago (a stream of made-up kids must not become a stream of
// fetches), and waits for it at most kidWait. It reports whether a
// refresh ended.
func (j *jwks) refreshNow() bool {
	j.mu.Lock()
	if now := time.Now(); now.Sub(j.lastKick) < j.kidEvery {
		j.mu.Unlock()
		return false
	} else {
		j.lastKick = now
	}
	done := j.next
	j.mu.Unlock()
	select {
	case j.kick <- struct{}{}:
	default:
	}
	t := time.NewTimer(j.kidWait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
