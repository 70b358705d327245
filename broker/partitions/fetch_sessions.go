package partitions

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/partitions/fetchsession"
)

// sessionError is the answer to a fetch whose session fields the cache
// refused (Kafka's SessionErrorContext): the code, no session, no topics.
func sessionError(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	return resp
}

// withSession wraps a fetch's respond to trim the response to its
// session's changes (fetchsession.Fetch.Trim), and, before the fetch
// runs, authorizes again the partitions an incremental fetch's session
// added to req: the node's rule only saw those the client sent, and an
// ACL removed since a partition joined the session must stop its reads.
// Those denied are answered with the rule's error, after the trim.
func withSession(h Host, cc *api.Conn, req *kmsg.FetchRequest, sess *fetchsession.Fetch, respond func(kmsg.Response)) func(kmsg.Response) {
	if sess == nil {
		return respond
	}
	var fix func(kmsg.Response)
	if z := h.FetchAuthz(cc); z != nil && sess.Incremental() {
		_, fix = checkFetch(h, z, req)
	}
	return func(r kmsg.Response) {
		if pf, ok := r.(*PooledFetch); ok {
			if code := sess.Trim(pf.FetchResponse); code != 0 {
				// Another fetch used the session meanwhile: this one's
				// partitions are not what the cache recorded as sent.
				pf.Release()
				pf.Topics, pf.ErrorCode, pf.SessionID = nil, code, 0
			}
		}
		if fix != nil && r != nil {
			fix(r)
		}
		respond(r)
	}
}
