package txncoord

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/txn"
)

// AddOffsetsToTxn: v0-4
//
// Behaviour: adds the group's __consumer_offsets partition to the
// transaction, so that the TxnOffsetCommit that follows (to the group's
// coordinator) commits or aborts with it. Served by the transactional
// id's coordinator, once its record is committed.
//
// Version notes: v3: flexible; v4: TRANSACTION_ABORTABLE (KIP-890)
func addOffsetsToTxnEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 25, Client: api.Versions(0, 4), Handle: bind(h, handleAddOffsetsToTxn),
		Rule: api.Needs("WRITE on TRANSACTIONAL_ID and READ on GROUP", 3, api.All(
			api.TxnTop(func(r kmsg.Request) string { return r.(*kmsg.AddOffsetsToTxnRequest).TransactionalID }),
			api.GroupTop(acl.OpRead, func(r kmsg.Request) string { return r.(*kmsg.AddOffsetsToTxnRequest).Group }))),
	}
}

func handleAddOffsetsToTxn(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if code := requestCode(h, req.TransactionalID); code != 0 {
		resp.ErrorCode = code
		respond(resp)
		return
	}
	h.EnsureOffsetsTopic() // the partition must exist for its marker
	h.Txns().AddOffsets(txn.AddOffsetsRequest{TxnID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Group: req.Group, OffsetsPartition: h.Offsets().PartitionFor(req.Group), Version: req.Version}, func(a txn.Answer) {
		resp.ErrorCode = a.Code
		respond(resp)
	})
}
