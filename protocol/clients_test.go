package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestClientRecord(t *testing.T) {
	c := newClient("PLAINTEXT", "127.0.0.1:5555")
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "franz-go", strings.Repeat("é", 200)
	c.NoteRequest(&Request{Key: 18, Version: 3, ClientID: "svc", Principal: "User:alice", Body: av})
	c.NoteRequest(&Request{Key: 3, Version: 12, ClientID: "svc", Principal: "User:alice"})
	c.NoteRequest(&Request{Key: 0, Version: 9, ClientID: "svc", Principal: "User:alice"})
	c.NoteRequest(&Request{Key: 3, Version: 9, ClientID: "svc", Principal: "User:alice"})
	// An ApiVersions below v3 carries no software fields: they stay.
	c.NoteRequest(&Request{Key: 18, Version: 2, ClientID: "svc", Principal: "User:alice", Body: kmsg.NewPtrApiVersionsRequest()})
	for i := range MaxClientErrors + 3 {
		c.NoteError(0, 9, int16(i+1), strings.Repeat("t", 1000))
	}
	c.NoteError(0, 9, 0, "not an error")

	in := c.Info()
	if in.SoftwareName != "franz-go" || in.ClientID != "svc" || in.Principal != "User:alice" || in.Requests != 5 {
		t.Fatalf("info %+v", in)
	}
	if len(in.SoftwareVersion) > maxClientString || !utf8.ValidString(in.SoftwareVersion) {
		t.Fatalf("software version not clipped on a rune boundary: %d bytes, valid %v", len(in.SoftwareVersion), utf8.ValidString(in.SoftwareVersion))
	}
	want := []APIVersion{{0, 9}, {3, 9}, {18, 2}}
	if len(in.Versions) != len(want) {
		t.Fatalf("versions %v, want %v", in.Versions, want)
	}
	for i := range want {
		if in.Versions[i] != want[i] {
			t.Fatalf("versions %v, want %v", in.Versions, want)
		}
	}
	if len(in.Errors) != MaxClientErrors {
		t.Fatalf("%d errors kept, want %d", len(in.Errors), MaxClientErrors)
	}
	if in.Errors[0].Code != 4 || in.Errors[MaxClientErrors-1].Code != MaxClientErrors+3 {
		t.Fatalf("errors kept are not the newest: first %d last %d", in.Errors[0].Code, in.Errors[MaxClientErrors-1].Code)
	}
	if len(in.Errors[0].Where) > maxErrorWhere {
		t.Fatalf("where not clipped: %d bytes", len(in.Errors[0].Where))
	}
	var nilClient *Client
	nilClient.NoteRequest(&Request{}) // a request without a connection record
	nilClient.NoteError(0, 0, 1, "")
}
