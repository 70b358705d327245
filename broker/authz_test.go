package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// TestRegistry: every served key is registered whole (api.validate), on
// the listeners its table says, and every key the controller role answers
// on the CONTROLLER listener can be answered NOT_CONTROLLER.
func TestRegistry(t *testing.T) {
	reg := newRegistry(nil) // validates every entry
	tables := []api.Table{reg.ClientTable(), reg.ControllerTable(true)}
	for _, k := range reg.Keys() {
		a := reg.Get(k)
		if a.Rule.Blast < 0 || a.Rule.Blast > 5 || (a.CtlRule != nil && (a.CtlRule.Check == nil || a.CtlRule.Need == "")) {
			t.Errorf("api key %d: rule %+v incomplete", k, a.Rule)
		}
		for _, tbl := range tables {
			lo, hi, ok := tbl.Supported(k)
			r := tbl.Range(a)
			if ok != r.Served || lo != r.Min || hi != r.Max {
				t.Errorf("api key %d: table %+v says %d-%d %v", k, tbl, lo, hi, ok)
			}
			if ok && (lo > hi || hi > fjordmsg.AnyRequestForKey(k).MaxVersion()) {
				t.Errorf("api key %d: range %d-%d beyond kmsg's %d", k, lo, hi, fjordmsg.AnyRequestForKey(k).MaxVersion())
			}
		}
		if !a.Controller.Served || a.CtlLocal {
			continue
		}
		switch k {
		case 1, 59, 60: // answered by every voter, never NOT_CONTROLLER
			continue
		}
		if a.ErrorResponse == nil {
			t.Errorf("api key %d (%s): answered by the controller role with no error response", k, fjordmsg.AnyNameForKey(k))
		}
	}
	for k := int16(0); k < 200; k++ {
		if reg.Get(k) != nil {
			continue
		}
		for _, tbl := range tables {
			if _, _, ok := tbl.Supported(k); ok {
				t.Errorf("api key %d is not registered but %+v serves it", k, tbl)
			}
		}
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a"}, {Topic: "b"}}
	sts := reg.ErrorResponse(ct, kerr.NotController.Code).(*kmsg.CreateTopicsResponse).Topics
	if len(sts) != 2 {
		t.Fatalf("CreateTopics error response has %d topics, want 2", len(sts))
	}
	for _, st := range sts {
		if st.ErrorCode != kerr.NotController.Code {
			t.Errorf("topic %s: code %d", st.Topic, st.ErrorCode)
		}
	}
}

// TestAuthzRulesDecode checks each rule against an empty request of its
// key at every version it is served: a rule must not panic on what a
// client may send, and with every ACL missing (and allow-if-no-ACL off) a
// CLUSTER_ACTION rule denies.
func TestAuthzRulesDecode(t *testing.T) {
	b := withImage(&Broker{}, &controller.Image{})
	b.cfg.AuthorizerClass = config.StandardAuthorizerClass
	for _, listener := range []int{0, api.CtlListener} {
		cc := &api.Conn{Principal: "User:ANONYMOUS", ClientHost: "/127.0.0.1", Listener: listener}
		reg := newRegistry(b)
		for _, k := range reg.Keys() {
			a := reg.Get(k)
			r := a.Client
			if listener == api.CtlListener {
				r = a.Controller
			}
			if !r.Served {
				continue
			}
			for v := r.Min; v <= r.Max; v++ {
				req := fjordmsg.AnyRequestForKey(k)
				req.SetVersion(v)
				deny, fix := b.authorize(cc, a, req)
				if fix != nil {
					resp := req.ResponseKind()
					resp.SetVersion(v)
					fix(resp)
				}
				if a.Rule.Need == "CLUSTER_ACTION on CLUSTER" && deny == nil {
					t.Errorf("api key %d v%d on listener %d: allowed an anonymous caller", k, v, listener)
				}
			}
		}
	}
}

// TestControllerDoor: with an authorizer, a node that needs its
// CONTROLLER listener to tell nodes from strangers refuses to start when
// it cannot, and starts (with a warning) only when User:ANONYMOUS was
// privileged explicitly.
func TestControllerDoor(t *testing.T) {
	three := "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"
	for _, tc := range []struct {
		name             string
		voters, protoMap string
		roles, super     string
		allowEveryone    bool
		authorizer       bool
		ok               bool
	}{
		{name: "no authorizer", voters: three, roles: "broker,controller", ok: true},
		{name: "quorum of one, combined", voters: "1@127.0.0.1:9101", roles: "broker,controller", authorizer: true, ok: true},
		{name: "three voters, PLAINTEXT", voters: three, roles: "broker,controller", authorizer: true, ok: false},
		{name: "broker-only node, PLAINTEXT", voters: "1@127.0.0.1:9101", roles: "broker", authorizer: true, ok: false},
		{name: "three voters, SASL", voters: three, roles: "broker,controller", protoMap: "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT", authorizer: true, ok: true},
		{name: "ANONYMOUS a super user", voters: three, roles: "broker,controller", super: "User:admin;User:ANONYMOUS", authorizer: true, ok: true},
		{name: "allow everyone", voters: three, roles: "broker,controller", allowEveryone: true, authorizer: true, ok: true},
		{name: "SSL without client auth", voters: three, roles: "broker,controller", protoMap: "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT", authorizer: true, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Broker{log: zerolog.Nop()}
			b.cfg.NodeID, b.cfg.ProcessRoles, b.cfg.ControllerQuorumVoters = 1, tc.roles, tc.voters
			b.cfg.ControllerListenerNames, b.cfg.ListenerSecurityProtocolMap = "CONTROLLER", tc.protoMap
			b.cfg.SuperUsers, b.cfg.AllowEveryoneIfNoACL = tc.super, tc.allowEveryone
			if tc.authorizer {
				b.cfg.AuthorizerClass = config.StandardAuthorizerClass
			}
			err := checkControllerDoor(&b.cfg, nil, b.log)
			if (err == nil) != tc.ok {
				t.Fatalf("checkControllerDoor: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "controller listener CONTROLLER") {
				t.Errorf("the refusal does not name the listener: %v", err)
			}
		})
	}
}

// fakeMeta is a metadata log with a fixed image.
type fakeMeta struct{ img *controller.Image }

func (f fakeMeta) Image() *controller.Image { return f.img }
func (f fakeMeta) WaitFor(ctx context.Context, _ func(*controller.Image) bool) error {
	<-ctx.Done()
	return ctx.Err()
}
func (fakeMeta) Leader() int32 { return 1 }
func (fakeMeta) Close() error  { return nil }

// TestControllerOnlyNodeAuthorizes: a controller-only node applies no
// broker images, yet its CONTROLLER listener enforces the ACLs of the
// metadata log: a broker principal granted CLUSTER_ACTION by an ACL
// registers, a stranger does not.
func TestControllerOnlyNodeAuthorizes(t *testing.T) {
	img, err := (&controller.Image{}).Apply(1, controller.NewRecord(controller.ACLChange{ACL: controller.ACL{
		ResourceType: int8(acl.ResourceCluster), Name: acl.ClusterName, PatternType: 3, Principal: "User:broker", Host: "*",
		Operation: int8(acl.OpClusterAction), Permission: 3}}))
	if err != nil {
		t.Fatal(err)
	}
	b := withImage(&Broker{log: zerolog.Nop(), meta: fakeMeta{img}}, nil)
	b.cfg.ProcessRoles, b.cfg.AuthorizerClass = "controller", config.StandardAuthorizerClass
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	for principal, allowed := range map[string]bool{"User:broker": true, "User:ANONYMOUS": false} {
		cc := &api.Conn{Principal: principal, ClientHost: "127.0.0.1", Listener: api.CtlListener}
		deny, _ := b.authorize(cc, newRegistry(b).Get(62), reg)
		if (deny == nil) != allowed {
			t.Errorf("%s registering on a controller-only node: denied %v, want allowed %v", principal, deny != nil, allowed)
		}
	}
}
