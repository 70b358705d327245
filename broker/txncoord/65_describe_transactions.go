package txncoord

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// DescribeTransactions: v0
//
// Behaviour: each id's state, producer id and epoch, timeout, start time
// and partitions, from its coordinator; NOT_COORDINATOR for ids another
// node coordinates, TRANSACTIONAL_ID_NOT_FOUND for unknown ids (KIP-664).
func describeTransactionsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 65, Client: api.Versions(0, 0), Handle: bind(h, handleDescribeTransactions),
		Rule: api.Needs("DESCRIBE on TRANSACTIONAL_ID", 0, checkDescribeTransactions),
	}
}

func handleDescribeTransactions(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	c := h.Txns()
	for _, id := range req.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, c.Describe(id))
	}
	respond(resp)
}

func checkDescribeTransactions(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	var denied []string
	req.TransactionalIDs, denied = api.Sift(req.TransactionalIDs, func(id string) (string, bool) {
		return id, z.Ok(acl.OpDescribe, acl.ResourceTransactionalID, id)
	})
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		for i := range resp.TransactionStates {
			s := &resp.TransactionStates[i]
			s.Topics = api.Visible(z, acl.ResourceTopic, s.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) string { return t.Topic })
		}
		for _, id := range denied {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = id, api.TxnDenied, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
	}
}
