package txncoord

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/txn"
)

// EndTxn: v0-5
//
// Behaviour: commits or aborts the transaction. The coordinator answers
// once PrepareCommit / PrepareAbort is committed to __transaction_state
// (the decision is then final: a successor coordinator finishes it), then
// writes the markers to every partition of the transaction
// (WriteTxnMarkers to their leaders) and records CompleteCommit /
// CompleteAbort.
//
// Version notes: v3: flexible; v4: TRANSACTION_ABORTABLE; v5: transactions
// v2 (KIP-890 part 2): the epoch is bumped at every end and the response
// carries the producer id and epoch to use next.
func endTxnEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 26, Client: api.Versions(0, 5), Handle: bind(h, handleEndTxn),
		Rule: api.Needs("WRITE on TRANSACTIONAL_ID", 3, api.TxnTop(func(r kmsg.Request) string { return r.(*kmsg.EndTxnRequest).TransactionalID })),
	}
}

func handleEndTxn(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if code := requestCode(h, req.TransactionalID); code != 0 {
		resp.ErrorCode = code
		respond(resp)
		return
	}
	h.Txns().EndTxn(txn.EndRequest{TxnID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Commit: req.Commit, Version: req.Version}, func(a txn.Answer) {
		resp.ErrorCode = a.Code
		if req.Version >= 5 {
			resp.ProducerID, resp.ProducerEpoch = a.ProducerID, a.ProducerEpoch
		}
		respond(resp)
	})
}
