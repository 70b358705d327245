package admin

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// DescribeUserScramCredentials: v0
//
// Behaviour (KIP-554):
//   - From this broker's metadata image: each user's SCRAM mechanisms and
//     iteration counts; never the salt or keys.
//   - Users null or empty: every user with a credential. A user named
//     twice: DUPLICATE_RESOURCE for it; a user without any credential:
//     RESOURCE_NOT_FOUND, as Kafka answers.
//
// Version notes:
//   - v0: flexible
func describeUserScramCredentialsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 50, Client: api.Versions(0, 0), Handle: bindTo(h, handleDescribeUserScramCredentials),
		Rule: api.Needs("DESCRIBE on CLUSTER", 1, api.ClusterTop(acl.OpDescribe)),
	}
}

func handleDescribeUserScramCredentials(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := h.Image()
	byUser := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var all []string
	for _, k := range img.ScramCredentials() {
		s, _ := img.ScramCredential(k.User, k.Mechanism)
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = int8(k.Mechanism), s.Iterations
		if byUser[k.User] == nil {
			all = append(all, k.User)
		}
		byUser[k.User] = append(byUser[k.User], ci)
	}
	users := all
	if len(req.Users) > 0 {
		users = nil
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	count := map[string]int{}
	for _, u := range users {
		count[u]++
	}
	done := map[string]bool{}
	for _, u := range users {
		if done[u] {
			continue
		}
		done[u] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		switch {
		case count[u] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + u
			r.ErrorMessage = &msg
		case byUser[u] == nil:
			r.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist: " + u
			r.ErrorMessage = &msg
		default:
			r.CredentialInfos = byUser[u]
		}
		resp.Results = append(resp.Results, r)
	}
	respond(resp)
}
