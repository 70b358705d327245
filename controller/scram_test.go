package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAlterUserScramCredentials(t *testing.T) {
	img := new(Image)
	up := func(user string, mech int8, iters int32) ScramUpsertion {
		return ScramUpsertion{User: user, Mechanism: mech, Iterations: iters, Salt: []byte("salt"), SaltedPassword: []byte("salted")}
	}
	recs, res := AlterUserScramCredentials(img, nil, []ScramUpsertion{up("alice", 1, 4096), up("alice", 2, 8192), up("bob", 1, 4095), up("carol", 3, 4096), up("", 1, 4096), up("dave", 1, 16385)})
	want := map[string]int16{"alice": 0, "bob": kerr.UnacceptableCredential.Code, "carol": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code, "dave": kerr.UnacceptableCredential.Code}
	if len(res) != len(want) {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.ErrorCode != want[r.User] {
			t.Errorf("%q: error %d, want %d (%s)", r.User, r.ErrorCode, want[r.User], r.Message)
		}
	}
	if len(recs) != 2 {
		t.Fatalf("records %v", recs)
	}
	for _, r := range recs {
		if err := img.apply(1, r); err != nil {
			t.Fatal(err)
		}
	}
	s, ok := img.ScramCredential("alice", ScramSHA512)
	if !ok || s.Iterations != 8192 || string(s.StoredKey) == "salted" {
		t.Fatalf("stored %+v %v", s, ok)
	}

	// Delete alice's SHA-256 and a missing one of bob; alice twice for one
	// mechanism.
	_, res = AlterUserScramCredentials(img, []ScramDeletion{{"alice", 1}, {"bob", 1}}, []ScramUpsertion{up("alice", 1, 4096)})
	want = map[string]int16{"alice": kerr.DuplicateResource.Code, "bob": kerr.ResourceNotFound.Code}
	for _, r := range res {
		if r.ErrorCode != want[r.User] {
			t.Errorf("%q: error %d, want %d (%s)", r.User, r.ErrorCode, want[r.User], r.Message)
		}
	}
	recs, res = AlterUserScramCredentials(img, []ScramDeletion{{"alice", 1}}, nil)
	if len(recs) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", recs, res)
	}
	img.apply(2, recs[0])
	if _, ok := img.ScramCredential("alice", ScramSHA256); ok {
		t.Error("deleted credential still there")
	}
	if _, ok := img.ScramCredential("alice", ScramSHA512); !ok {
		t.Error("the other mechanism's credential went too")
	}
}
