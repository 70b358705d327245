package controller

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SCRAM credentials (KIP-554): the ScramCredential record, the image's
// part, and the active controller's AlterUserScramCredentials decision.
// The log holds what RFC 5802 lets a server keep: salt, iteration count,
// StoredKey and ServerKey. Neither the password nor the salted password
// is ever written.

// ScramMechanism is Kafka's numbering of the SCRAM mechanisms (as the
// AlterUserScramCredentials request gives them).
type ScramMechanism int8

const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// ScramMechanismNamed maps a SASL mechanism name to its number, 0 if none.
func ScramMechanismNamed(name string) ScramMechanism {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256
	case "SCRAM-SHA-512":
		return ScramSHA512
	}
	return 0
}

// Name is the SASL mechanism name, "" for an unknown number.
func (m ScramMechanism) Name() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// Hash is the mechanism's hash function; nil for an unknown one.
func (m ScramMechanism) Hash() func() hash.Hash {
	switch m {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// Kafka's bounds on the iteration count (ScramMechanism.minIterations,
// maxIterations).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramCredential sets (Remove false) or removes one user's credential
// for one mechanism.
type ScramCredential struct {
	User       string
	Mechanism  ScramMechanism
	Remove     bool
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

func (ScramCredential) Type() RecordType { return TypeScramCredential }

// String leaves the keys out of logs.
func (c ScramCredential) String() string {
	if c.Remove {
		return fmt.Sprintf("{User:%q Mechanism:%s Remove}", c.User, c.Mechanism.Name())
	}
	return fmt.Sprintf("{User:%q Mechanism:%s Iterations:%d}", c.User, c.Mechanism.Name(), c.Iterations)
}

// ScramKey names one credential in the image.
type ScramKey struct {
	User      string
	Mechanism ScramMechanism
}

// ScramSecret is a stored credential. Read-only.
type ScramSecret struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// ScramCredential returns a user's credential for a mechanism.
func (img *Image) ScramCredential(user string, m ScramMechanism) (ScramSecret, bool) {
	s, ok := img.scram[ScramKey{user, m}]
	return s, ok
}

// ScramCredentials returns every credential's key, by user then mechanism.
func (img *Image) ScramCredentials() []ScramKey {
	ks := slices.Collect(maps.Keys(img.scram))
	slices.SortFunc(ks, func(a, b ScramKey) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return ks
}

func (img *Image) setScramCredential(c ScramCredential) error {
	if c.User == "" || c.Mechanism.Hash() == nil {
		return fmt.Errorf("%w: SCRAM credential %s: no user or unknown mechanism", ErrNotApplicable, c)
	}
	k := ScramKey{c.User, c.Mechanism}
	img.scram = maps.Clone(img.scram)
	if c.Remove {
		delete(img.scram, k)
		if len(img.scram) == 0 {
			img.scram = nil
		}
		return nil
	}
	if len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0 || c.Iterations < 1 {
		return fmt.Errorf("%w: SCRAM credential %s: incomplete", ErrNotApplicable, c)
	}
	if img.scram == nil {
		img.scram = map[ScramKey]ScramSecret{}
	}
	img.scram[k] = ScramSecret{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	return nil
}

// ScramKeys derives RFC 5802's StoredKey and ServerKey from a salted
// password.
func ScramKeys(m ScramMechanism, salted []byte) (storedKey, serverKey []byte) {
	h := m.Hash()
	mac := hmac.New(h, salted)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	hh := h()
	hh.Write(clientKey)
	storedKey = hh.Sum(nil)
	mac = hmac.New(h, salted)
	mac.Write([]byte("Server Key"))
	return storedKey, mac.Sum(nil)
}

// ScramDeletion and ScramUpsertion are the two lists of an
// AlterUserScramCredentials request.
type ScramDeletion struct {
	User      string
	Mechanism int8
}

type ScramUpsertion struct {
	User           string
	Mechanism      int8
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramResult is the outcome for one user.
type ScramResult struct {
	User      string
	ErrorCode int16
	Message   string
}

// AlterUserScramCredentials decides a request as Kafka's controller does:
// per user, all of the user's alterations or none. A user altered twice
// for one mechanism is DUPLICATE_RESOURCE; an empty name, too few or too
// many iterations, or an empty salt or salted password
// UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM;
// deleting a credential that does not exist RESOURCE_NOT_FOUND. Results
// come one per user, in the order users first appear.
func AlterUserScramCredentials(img *Image, dels []ScramDeletion, ups []ScramUpsertion) ([]Record, []ScramResult) {
	var order []string
	fail := map[string]ScramResult{}
	seen := map[ScramKey]bool{}
	recs := map[string][]Record{}
	note := func(user string) {
		if !slices.Contains(order, user) {
			order = append(order, user)
		}
	}
	failf := func(user string, code int16, msg string) {
		if _, ok := fail[user]; !ok {
			fail[user] = ScramResult{User: user, ErrorCode: code, Message: msg}
		}
	}
	check := func(user string, mech int8) (ScramMechanism, bool) {
		note(user)
		m := ScramMechanism(mech)
		switch {
		case user == "":
			failf(user, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case m.Hash() == nil:
			failf(user, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case seen[ScramKey{user, m}]:
			failf(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		default:
			seen[ScramKey{user, m}] = true
			return m, true
		}
		return 0, false
	}
	for _, d := range dels {
		m, ok := check(d.User, d.Mechanism)
		if !ok {
			continue
		}
		if _, exists := img.ScramCredential(d.User, m); !exists {
			failf(d.User, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			continue
		}
		recs[d.User] = append(recs[d.User], NewRecord(ScramCredential{User: d.User, Mechanism: m, Remove: true}))
	}
	for _, u := range ups {
		m, ok := check(u.User, u.Mechanism)
		if !ok {
			continue
		}
		switch {
		case u.Iterations < ScramMinIterations:
			failf(u.User, kerr.UnacceptableCredential.Code, "Too few iterations")
			continue
		case u.Iterations > ScramMaxIterations:
			failf(u.User, kerr.UnacceptableCredential.Code, "Too many iterations")
			continue
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			failf(u.User, kerr.UnacceptableCredential.Code, "Salt and salted password must not be empty")
			continue
		}
		stored, server := ScramKeys(m, u.SaltedPassword)
		recs[u.User] = append(recs[u.User], NewRecord(ScramCredential{User: u.User, Mechanism: m,
			Salt: slices.Clone(u.Salt), StoredKey: stored, ServerKey: server, Iterations: u.Iterations}))
	}
	var out []Record
	results := make([]ScramResult, 0, len(order))
	for _, user := range order {
		if r, ok := fail[user]; ok {
			results = append(results, r)
			continue
		}
		out = append(out, recs[user]...)
		results = append(results, ScramResult{User: user})
	}
	return out, results
}

// DecideAlterUserScramCredentials decides an AlterUserScramCredentials
// (KIP-554) in one round: per user (AlterUserScramCredentials), the
// accepted users' credentials in one batch.
func DecideAlterUserScramCredentials(req *kmsg.AlterUserSCRAMCredentialsRequest) Decision {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var (
		recs    []Record
		results []ScramResult
	)
	return oneRound(func(img *Image) []Record {
		var dels []ScramDeletion
		for _, d := range req.Deletions {
			dels = append(dels, ScramDeletion{User: d.Name, Mechanism: d.Mechanism})
		}
		var ups []ScramUpsertion
		for _, u := range req.Upsertions {
			ups = append(ups, ScramUpsertion{User: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
		}
		recs, results = AlterUserScramCredentials(img, dels, ups)
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		for _, r := range results {
			rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			rr.User = r.User
			if r.ErrorCode != 0 {
				rr.ErrorCode, rr.ErrorMessage = r.ErrorCode, kmsg.StringPtr(r.Message)
			} else {
				rr.ErrorCode = code
			}
			resp.Results = append(resp.Results, rr)
		}
		if len(recs) == 0 || code != 0 {
			return resp, nil
		}
		return resp, []Note{info("SCRAM credentials altered", "changes", len(recs))}
	})
}
