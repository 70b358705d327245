package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0
//
// Behaviour: each id's state, producer id and epoch, timeout, start time
// and partitions, from its coordinator; NOT_COORDINATOR for ids another
// node coordinates, TRANSACTIONAL_ID_NOT_FOUND for unknown ids (KIP-664).
func init() { regKey(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, b.txns.Describe(id))
	}
	respond(resp)
}
