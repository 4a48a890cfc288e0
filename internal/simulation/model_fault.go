package simulation

import (
	"time"

	"github.com/narad-io/storage/partition"
)

// partFault is what injected faults left on one partition, for the model.
//
// Invariant: poisoned is the log a failed fdatasync poisoned while it may
// still be the partition's open log; it owes a log_poisoned refusal to
// every produce for as long as it is (docs/durability.md, "The promise":
// writes are refused until the log is reopened). The first produce that
// finds another log open clears it. wroteAt is when the last produce that
// failed under an injected fault (a failed write, a failed fdatasync) may
// have written to a segment: the one offset wroteAtOffset, the high
// watermark then, lands in (docs/design.md, "Retention": a segment's age
// is its last write, and a failed commit's write is one).
type partFault struct {
	poisoned      *partition.Log
	wroteAt       time.Time
	wroteAtOffset int64
}

// failedWrite notes a produce that failed under a write or fdatasync
// fault: what it wrote reached the segment holding the high watermark.
func (p *partModel) failedWrite() {
	p.flt.wroteAt, p.flt.wroteAtOffset = time.Now(), p.committed
}

// lastWrite is when segment [base, end) of p may last have been written:
// its last record's commit, or a failed produce's write into it (to the
// segment ending at the high watermark then, or the one starting there).
func (p *partModel) lastWrite(base, end int64) time.Time {
	last := p.commitAt[end-1]
	if w := p.flt.wroteAtOffset; base <= w && w <= end && p.flt.wroteAt.After(last) {
		last = p.flt.wroteAt
	}
	return last
}
