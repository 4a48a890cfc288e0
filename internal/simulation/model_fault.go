package simulation

import "github.com/narad-io/storage/partition"

// partFault is what injected faults left on one partition, for the model.
//
// Invariant: poisoned is the log a failed fdatasync poisoned while it may
// still be the partition's open log; it owes a log_poisoned refusal to
// every produce for as long as it is (docs/durability.md, "The promise":
// writes are refused until the log is reopened). The first produce that
// finds another log open clears it.
type partFault struct {
	poisoned *partition.Log
}
