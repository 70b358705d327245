package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/controller"
)

// superUsersBroker is a broker with the authorizer on, User:admin a super
// user, User:tuner holding ALTER_CONFIGS on the cluster, super.users
// stored for the cluster default, and an audit queue the test reads.
func superUsersBroker(t *testing.T) *Broker {
	t.Helper()
	b := &Broker{}
	b.cfg.AuthorizerClass = config.StandardAuthorizerClass
	b.cfg.SuperUsers = "User:admin"
	img := &controller.Image{}
	admin := "User:admin"
	for _, r := range []controller.Record{
		controller.NewRecord(controller.ACLChange{ACL: controller.ACL{ResourceType: int8(acl.ResourceCluster), Name: acl.ClusterName,
			PatternType: int8(acl.PatternLiteral), Principal: "User:tuner", Host: "*", Operation: int8(acl.OpAlterConfigs), Permission: int8(acl.PermAllow)}}),
		controller.NewRecord(controller.SetConfig{Resource: controller.ConfigResource{Type: controller.ResourceBroker}, Key: "super.users", Value: &admin}),
	} {
		next, err := img.Apply(img.Version()+1, r)
		if err != nil {
			t.Fatal(err)
		}
		img = next
	}
	withImage(b, img)
	b.audit = api.NewAudit(nil, 64, 0, nil, zerolog.Nop(), nil)
	return b
}

// auditDenials drains b's audit queue and counts the denial lines.
func auditDenials(b *Broker) int {
	n := 0
	for line := b.audit.Queued(); line != nil; line = b.audit.Queued() {
		if strings.Contains(string(line), `"outcome":"denied"`) {
			n++
		}
	}
	return n
}

func incrementalResource(name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBroker, name, ops
	return r
}

func incrementalOp(key string, op kmsg.IncrementalAlterConfigOp, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, op, &value
	return c
}

// TestSuperUsersChangeNeedsSuperUser: ALTER_CONFIGS on the cluster lets a
// principal tune broker configs but not change super.users, by any
// IncrementalAlterConfigs operation or by a legacy AlterConfigs that
// names it or (replacing the whole set) leaves a stored value out; the
// refusal is CLUSTER_AUTHORIZATION_FAILED for that resource alone, with
// a message, and audited. A super user may.
func TestSuperUsersChangeNeedsSuperUser(t *testing.T) {
	incremental, legacy := int16(44), int16(33)
	type result struct {
		code int16
		msg  bool // the super.users message
	}
	run := func(t *testing.T, b *Broker, principal string, key int16, req kmsg.Request) []result {
		t.Helper()
		cc := &api.Conn{Principal: principal, ClientHost: "/10.0.0.1"}
		n := 0
		switch r := req.(type) {
		case *kmsg.IncrementalAlterConfigsRequest:
			n = len(r.Resources)
		case *kmsg.AlterConfigsRequest:
			n = len(r.Resources)
		}
		deny, fix := b.authorize(cc, newRegistry(b).Get(key), req)
		resp := deny
		if resp == nil {
			// The handler would answer the resources left in req; stand in
			// for it with success for each, then apply the fix.
			resp = req.ResponseKind()
			switch r := req.(type) {
			case *kmsg.IncrementalAlterConfigsRequest:
				for _, rr := range r.Resources {
					sr := kmsg.NewIncrementalAlterConfigsResponseResource()
					sr.ResourceName = rr.ResourceName
					resp.(*kmsg.IncrementalAlterConfigsResponse).Resources = append(resp.(*kmsg.IncrementalAlterConfigsResponse).Resources, sr)
				}
			case *kmsg.AlterConfigsRequest:
				for _, rr := range r.Resources {
					sr := kmsg.NewAlterConfigsResponseResource()
					sr.ResourceName = rr.ResourceName
					resp.(*kmsg.AlterConfigsResponse).Resources = append(resp.(*kmsg.AlterConfigsResponse).Resources, sr)
				}
			}
			if fix != nil {
				fix(resp)
			}
		}
		byName := map[string]result{}
		switch r := resp.(type) {
		case *kmsg.IncrementalAlterConfigsResponse:
			for _, sr := range r.Resources {
				byName[sr.ResourceName] = result{sr.ErrorCode, sr.ErrorMessage != nil && *sr.ErrorMessage == config.SuperUsersDenied}
			}
		case *kmsg.AlterConfigsResponse:
			for _, sr := range r.Resources {
				byName[sr.ResourceName] = result{sr.ErrorCode, sr.ErrorMessage != nil && *sr.ErrorMessage == config.SuperUsersDenied}
			}
		}
		if len(byName) != n {
			t.Fatalf("%d resources answered, want %d: %+v", len(byName), n, byName)
		}
		out := make([]result, 0, n)
		for _, name := range []string{"", "1", "2"} {
			if r, ok := byName[name]; ok {
				out = append(out, r)
			}
		}
		return out
	}
	denied := result{kerr.ClusterAuthorizationFailed.Code, true}
	ok := result{}

	for _, c := range []struct {
		name      string
		principal string
		resources []kmsg.IncrementalAlterConfigsRequestResource
		want      []result
		denials   int
	}{
		{"tuner sets super.users", "User:tuner", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("super.users", kmsg.IncrementalAlterConfigOpSet, "User:tuner")),
		}, []result{denied}, 1},
		{"tuner deletes super.users of a broker", "User:tuner", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("1", incrementalOp("super.users", kmsg.IncrementalAlterConfigOpDelete, "")),
		}, []result{denied}, 1},
		{"tuner appends, among other keys", "User:tuner", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("num.partitions", kmsg.IncrementalAlterConfigOpSet, "3"),
				incrementalOp("super.users", kmsg.IncrementalAlterConfigOpAppend, "User:tuner")),
		}, []result{denied}, 1},
		{"tuner subtracts", "User:tuner", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("super.users", kmsg.IncrementalAlterConfigOpSubtract, "User:admin")),
		}, []result{denied}, 1},
		{"only the resource naming super.users is refused", "User:tuner", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("num.partitions", kmsg.IncrementalAlterConfigOpSet, "3")),
			incrementalResource("1", incrementalOp("super.users", kmsg.IncrementalAlterConfigOpSet, "User:tuner")),
		}, []result{ok, denied}, 1},
		{"tuner tunes", "User:tuner", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("num.partitions", kmsg.IncrementalAlterConfigOpSet, "3")),
		}, []result{ok}, 0},
		{"a super user sets super.users", "User:admin", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("super.users", kmsg.IncrementalAlterConfigOpSet, "User:admin;User:ops")),
		}, []result{ok}, 0},
		{"without ALTER_CONFIGS: the ordinary denial", "User:nobody", []kmsg.IncrementalAlterConfigsRequestResource{
			incrementalResource("", incrementalOp("super.users", kmsg.IncrementalAlterConfigOpSet, "User:nobody")),
		}, []result{{kerr.ClusterAuthorizationFailed.Code, false}}, 1},
	} {
		t.Run("incremental/"+c.name, func(t *testing.T) {
			b := superUsersBroker(t)
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.Resources = c.resources
			if got := run(t, b, c.principal, incremental, req); !slices.Equal(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if n := auditDenials(b); n != c.denials {
				t.Errorf("%d denials audited, want %d", n, c.denials)
			}
		})
	}

	legacyResource := func(name string, kv ...string) kmsg.AlterConfigsRequestResource {
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		for i := 0; i+1 < len(kv); i += 2 {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
			r.Configs = append(r.Configs, c)
		}
		return r
	}
	for _, c := range []struct {
		name      string
		principal string
		resources []kmsg.AlterConfigsRequestResource
		want      []result
	}{
		// The cluster default stores super.users=User:admin.
		{"leaving the stored value out deletes it", "User:tuner", []kmsg.AlterConfigsRequestResource{
			legacyResource("", "num.partitions", "3"),
		}, []result{denied}},
		{"giving the stored value again changes nothing", "User:tuner", []kmsg.AlterConfigsRequestResource{
			legacyResource("", "num.partitions", "3", "super.users", "User:admin"),
		}, []result{ok}},
		{"a new value", "User:tuner", []kmsg.AlterConfigsRequestResource{
			legacyResource("", "super.users", "User:admin;User:tuner"),
		}, []result{denied}},
		{"a broker with none stored", "User:tuner", []kmsg.AlterConfigsRequestResource{
			legacyResource("1", "num.partitions", "3"),
			legacyResource("2", "super.users", "User:tuner"),
		}, []result{ok, denied}},
		{"a super user", "User:admin", []kmsg.AlterConfigsRequestResource{
			legacyResource("", "num.partitions", "3"),
		}, []result{ok}},
	} {
		t.Run("legacy/"+c.name, func(t *testing.T) {
			b := superUsersBroker(t)
			req := kmsg.NewPtrAlterConfigsRequest()
			req.Resources = c.resources
			if got := run(t, b, c.principal, legacy, req); !slices.Equal(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
