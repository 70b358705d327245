package txncoord

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/txn"
)

// ListTransactions: v0-2
//
// Behaviour: the transactions this node coordinates, filtered by state and
// producer id (KIP-664), by duration (v1, KIP-994) and by an id pattern
// (v2, KIP-1152: a Java regular expression; Go's syntax covers the common
// ones, and an invalid pattern is INVALID_REQUEST). While a partition
// loads: COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers.
func listTransactionsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 66, Client: api.Versions(0, 2), Handle: bind(h, handleListTransactions),
		Rule: api.Needs("DESCRIBE on TRANSACTIONAL_ID (others are not listed)", 0, checkListTransactions),
	}
}

func handleListTransactions(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, DurationMs: -1}
	if req.Version >= 1 {
		f.DurationMs = req.DurationFilterMillis
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			respond(resp)
			return
		}
		f.Match = re.MatchString
	}
	code, states, unknown := h.Txns().List(f)
	resp.ErrorCode, resp.TransactionStates, resp.UnknownStateFilters = code, states, unknown
	respond(resp)
}

func checkListTransactions(z *api.Authz, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListTransactionsResponse)
		resp.TransactionStates = api.Visible(z, acl.ResourceTransactionalID, resp.TransactionStates,
			func(s kmsg.ListTransactionsResponseTransactionState) string { return s.TransactionalID })
	}
}
