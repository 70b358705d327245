package compattests

// The history checker of the fault tests lives in the main module
// (github.com/fjordlog/fjord/cmd/fjord/history), shared with `fjord
// verify`; its unit tests on synthetic histories are there. These aliases
// keep the fault tests' names.

import "github.com/fjordlog/fjord/cmd/fjord/history"

type (
	faultOutcome     = history.Outcome
	faultAttempt     = history.Attempt
	faultRecord      = history.Record
	faultReport      = history.Report
	faultGroupReport = history.GroupReport
)

const (
	faultPending     = history.Pending
	faultAcked       = history.Acked
	faultDefinite    = history.Definite
	faultIndefinite  = history.Indefinite
	faultMaxProblems = history.MaxProblems
)

var (
	faultRecordOf      = history.RecordOf
	classifyProduceErr = history.ClassifyProduceErr
	checkFaultHistory  = history.Check
	checkFaultGroup    = history.CheckGroup
)
