package txncoord

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
)

// noHost is an APIHost none of whose methods may be called: the embedded
// nil interface panics on any call.
type noHost struct{ APIHost }

// TestEntries: the room registers its keys without calling its host (the
// broker's registry is built before the broker, and statically in tests),
// and each entry meets the registry's invariants.
func TestEntries(t *testing.T) {
	es := Entries(noHost{})
	r, err := api.NewRegistry(es...)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{22, 24, 25, 26, 27, 28, 61, 65, 66}
	got := r.Keys()
	if len(got) != len(want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("keys %v, want %v", got, want)
		}
	}
}

// TestRefusedBeforeHost: requests refused on their own content are
// answered without reaching the host.
func TestRefusedBeforeHost(t *testing.T) {
	r, err := api.NewRegistry(Entries(noHost{})...)
	if err != nil {
		t.Fatal(err)
	}
	cc := &api.Conn{Ctx: context.Background()}
	serve := func(req kmsg.Request) kmsg.Response {
		var resp kmsg.Response
		r.Get(req.Key()).Handle(cc, req, func(r kmsg.Response) { resp = r })
		return resp
	}

	empty := ""
	ipr := kmsg.NewPtrInitProducerIDRequest()
	ipr.TransactionalID = &empty
	if resp := serve(ipr).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.InvalidRequest.Code || resp.ProducerID != -1 {
		t.Errorf("InitProducerID with an empty id: %+v", resp)
	}
	end := kmsg.NewPtrEndTxnRequest()
	if resp := serve(end).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("EndTxn with an empty id: %+v", resp)
	}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version = 2
	bad := "("
	lt.TransactionalIDPattern = &bad
	if resp := serve(lt).(*kmsg.ListTransactionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("ListTransactions with an invalid pattern: %+v", resp)
	}
}
