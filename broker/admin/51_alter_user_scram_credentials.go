package admin

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/controller"
)

// AlterUserScramCredentials: v0
//
// Behaviour (KIP-554):
//   - Forwarded to the active controller, which derives StoredKey and
//     ServerKey from the salted password the client computed and commits
//     them, with the salt and iteration count, to the metadata log
//     (ScramCredential records; neither the password nor the salted
//     password is stored). Every broker authenticates with them as its
//     image changes. The answer comes once this broker's image shows them.
//   - Per user, all or nothing, with Kafka's errors: a mechanism other than
//     SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM;
//     fewer than 4096 or more than 16384 iterations, an empty name, salt or
//     salted password UNACCEPTABLE_CREDENTIAL; deleting a credential that
//     does not exist RESOURCE_NOT_FOUND; one user and mechanism altered
//     twice DUPLICATE_RESOURCE.
//
// Version notes:
//   - v0: flexible
func alterUserScramCredentialsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 51, Client: api.Versions(0, 0), Handle: bindTo(h, handleAlterUserScramCredentials),
		Controller: api.Versions(0, 0),
		Rule:       api.Needs("ALTER on CLUSTER", 5, checkAlterUserScramCredentials),
		Mutates:    true, AuditDetails: auditScramCredentials,
		ErrorResponse: errorAlterUserSCRAMCredentials,
	}
}

func handleAlterUserScramCredentials(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	api.Forward(h, cc, req, api.Forwarding[*kmsg.AlterUserSCRAMCredentialsResponse]{WaitMax: api.UntimedWait}, respond)
}

func checkAlterUserScramCredentials(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if z.Cluster(acl.OpAlter) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, api.ClusterDenied
		resp.Results = append(resp.Results, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp, nil
}

func errorAlterUserSCRAMCredentials(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	r := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	for _, d := range req.Deletions {
		if !slices.Contains(users, d.Name) {
			users = append(users, d.Name)
		}
	}
	for _, u := range req.Upsertions {
		if !slices.Contains(users, u.Name) {
			users = append(users, u.Name)
		}
	}
	for _, u := range users {
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User, rr.ErrorCode = u, code
		r.Results = append(r.Results, rr)
	}
	return r
}

// auditScramCredentials names each change: user, mechanism, upsert or
// delete (never a salt or a salted password).
func auditScramCredentials(kreq kmsg.Request) []string {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	var out []string
	for _, d := range req.Deletions {
		out = append(out, fmt.Sprintf("delete %s %s", d.Name, controller.ScramMechanism(d.Mechanism).Name()))
	}
	for _, u := range req.Upsertions {
		out = append(out, fmt.Sprintf("upsert %s %s (%d iterations)", u.Name, controller.ScramMechanism(u.Mechanism).Name(), u.Iterations))
	}
	return out
}
