package controller

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func user(n string) QuotaEntityPart   { return QuotaEntityPart{Type: QuotaUser, Name: &n} }
func client(n string) QuotaEntityPart { return QuotaEntityPart{Type: QuotaClientID, Name: &n} }
func defaultOf(t string) QuotaEntityPart {
	return QuotaEntityPart{Type: t}
}

func TestQuotaEntityOf(t *testing.T) {
	ip := "10.0.0.1"
	bad := map[string][]QuotaEntityPart{
		"empty":        nil,
		"unknown type": {{Type: "group", Name: ptr("g")}},
		"twice":        {user("a"), defaultOf(QuotaUser)},
		"ip combined":  {{Type: QuotaIP, Name: &ip}, client("c")},
		"ip name":      {{Type: QuotaIP, Name: ptr("not-an-ip")}},
	}
	for name, ps := range bad {
		if _, err := QuotaEntityOf(ps); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	e, err := QuotaEntityOf([]QuotaEntityPart{client("c"), defaultOf(QuotaUser)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (QuotaEntity{User: DefaultName(), ClientID: Named("c")}); e != want {
		t.Fatalf("got %+v, want %+v", e, want)
	}
	// Parts is canonical (user first) and converts back to the same entity.
	ps := e.Parts()
	if len(ps) != 2 || ps[0].Type != QuotaUser || ps[0].Name != nil || *ps[1].Name != "c" {
		t.Fatalf("parts %s", partsString(ps))
	}
	if back, err := QuotaEntityOf(ps); err != nil || back != e {
		t.Fatalf("round trip %v %v", back, err)
	}
}

func TestClientQuotaApplyCopyOnWrite(t *testing.T) {
	e := []QuotaEntityPart{client("a")}
	img := new(Image)
	img1 := mustApply(t, img, 1, ClientQuota{Entity: e, Key: QuotaProducerByteRate, Value: ptr(100.0)})
	img2 := mustApply(t, img1, 2, ClientQuota{Entity: e, Key: QuotaConsumerByteRate, Value: ptr(200.0)})
	img3 := mustApply(t, img2, 3, ClientQuota{Entity: e, Key: QuotaProducerByteRate})
	img4 := mustApply(t, img3, 4, ClientQuota{Entity: e, Key: QuotaConsumerByteRate})
	key := QuotaEntity{ClientID: Named("a")}
	for i, c := range []struct {
		img  *Image
		want map[string]float64
	}{
		{img, nil},
		{img1, map[string]float64{QuotaProducerByteRate: 100}},
		{img2, map[string]float64{QuotaProducerByteRate: 100, QuotaConsumerByteRate: 200}},
		{img3, map[string]float64{QuotaConsumerByteRate: 200}},
		{img4, nil},
	} {
		if got := c.img.ClientQuotas(key); !maps.Equal(got, c.want) {
			t.Errorf("image %d: %v, want %v", i, got, c.want)
		}
	}
	if img4.HasClientQuotas() || len(img4.QuotaEntities()) != 0 {
		t.Errorf("removing the last key leaves %v", img4.QuotaEntities())
	}
	// A record Apply cannot read as an entity does not apply.
	if _, err := img.Apply(1, NewRecord(ClientQuota{Key: QuotaProducerByteRate, Value: ptr(1.0)})); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("empty entity: %v", err)
	}
	if _, err := img.Apply(1, NewRecord(ClientQuota{Entity: e})); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("empty key: %v", err)
	}
}

func mustApply(t *testing.T, img *Image, index uint64, b Body) *Image {
	t.Helper()
	next, err := img.Apply(index, NewRecord(b))
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func TestAlterClientQuotasDecision(t *testing.T) {
	ip := "192.168.1.7"
	res := AlterClientQuotas(new(Image), []QuotaAlteration{
		0: {Entity: []QuotaEntityPart{user("u"), client("c")}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1024}, {Key: QuotaRequestPercentage, Value: 12.5}}},
		1: {Entity: []QuotaEntityPart{client("c")}, Ops: []QuotaOp{{Key: "nope", Value: 1}}},
		2: {Entity: []QuotaEntityPart{client("c")}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 0}}},
		3: {Entity: []QuotaEntityPart{client("c")}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1.5}}},
		4: {Entity: []QuotaEntityPart{client("c")}, Ops: []QuotaOp{{Key: QuotaConnectionCreationRate, Value: 5}}},
		5: {Entity: []QuotaEntityPart{{Type: QuotaIP, Name: &ip}}, Ops: []QuotaOp{{Key: QuotaConnectionCreationRate, Value: 5}}},
		6: {Entity: []QuotaEntityPart{{Type: QuotaIP}}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 5}}},
		7: {Entity: []QuotaEntityPart{defaultOf(QuotaClientID)}, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Remove: true}}},
		8: {Entity: []QuotaEntityPart{client("c")}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1}, {Key: QuotaProducerByteRate, Remove: true}}},
		9: {Entity: []QuotaEntityPart{user("u")}, Ops: []QuotaOp{{Key: "SCRAM-SHA-256", Value: 1}}},
	})
	wantOK := map[int]int{0: 2, 5: 1, 7: 1} // entry -> records
	for i, r := range res {
		if n, ok := wantOK[i]; ok {
			if r.ErrorCode != 0 || len(r.Records) != n {
				t.Errorf("entry %d: code %d, %d records, want 0 and %d", i, r.ErrorCode, len(r.Records), n)
			}
			continue
		}
		if r.ErrorCode != kerr.InvalidRequest.Code || len(r.Records) != 0 || r.Message == "" {
			t.Errorf("entry %d: code %d msg %q records %d, want INVALID_REQUEST and none", i, r.ErrorCode, r.Message, len(r.Records))
		}
	}
	if !strings.Contains(res[1].Message, "nope") {
		t.Errorf("message %q does not name the key", res[1].Message)
	}
	// The records apply, in canonical entity order.
	img := new(Image)
	var err error
	for i, r := range append(res[0].Records, res[5].Records...) {
		if img, err = img.Apply(uint64(i+1), r); err != nil {
			t.Fatal(err)
		}
	}
	got := img.ClientQuotas(QuotaEntity{User: Named("u"), ClientID: Named("c")})
	if want := map[string]float64{QuotaProducerByteRate: 1024, QuotaRequestPercentage: 12.5}; !maps.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	if len(img.QuotaEntities()) != 2 {
		t.Errorf("entities %v", img.QuotaEntities())
	}
}
