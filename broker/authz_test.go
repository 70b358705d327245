package broker

import (
	"testing"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzRulesCoverEveryAPI: the one table says what every served API
// needs, and says nothing of APIs not served.
func TestAuthzRulesCoverEveryAPI(t *testing.T) {
	for k := range apis {
		r, ok := authzRules[k]
		if !ok {
			t.Errorf("api key %d (%s) is served but authzRules has no entry", k, apiLabel(k))
			continue
		}
		if r.need == "" || r.blast < 0 || r.blast > 5 {
			t.Errorf("api key %d: entry %+v incomplete", k, r)
		}
	}
	for k := range authzRules {
		if _, ok := apis[k]; !ok {
			t.Errorf("authzRules has api key %d, which is not served", k)
		}
	}
}

// TestAuthzRulesDecode checks each rule against an empty request of its
// key: a rule must not panic on what a client may send, and with every
// ACL missing (and allow-if-no-ACL off) a rule with a resource denies.
func TestAuthzRulesDecode(t *testing.T) {
	b := &Broker{}
	b.cfg.AuthorizerClass = StandardAuthorizerClass
	b.mu.image = &controller.Image{}
	cc := &connCtx{principal: "User:ANONYMOUS", clientHost: "/127.0.0.1"}
	z := &authz{b: b, cc: cc, az: acl.New(acl.Config{}, nil)}
	for k, r := range authzRules {
		if r.check == nil {
			continue
		}
		e, ok := apis[k]
		if !ok {
			continue
		}
		for v := e.min; v <= e.max; v++ {
			req := kmsg.RequestForKey(k)
			req.SetVersion(v)
			z.api = k
			deny, fix := r.check(z, req)
			if fix != nil {
				resp := req.ResponseKind()
				resp.SetVersion(v)
				fix(resp)
			}
			_ = deny
		}
	}
}
